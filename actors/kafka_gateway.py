"""What a Kafka listener answers: decoded wire requests in, kio responses out.

A listener is "a broker" to Kafka clients (DESIGN.md: listeners are coordinators). Two kinds
share this class and differ only in the callables they are given:

* a partition's listener routes every group request to its own ``PartitionRuntime``. It is the
  coordinator of the groups that hash to its partition; for any other group the Shard itself
  answers NOT_COORDINATOR and the client asks FindCoordinator again, exactly as with Kafka;
* the bootstrap listener routes each group to the partition that owns it, and its ListGroups
  covers every partition.

Requests naming several groups (DescribeGroups, ConsumerGroupDescribe, DeleteGroups,
OffsetFetch v8+) are split into
one core request per group, routed one by one (each partition answers for its own groups) and
merged in the order asked. What the core has no message for is built by ``groupcoord.wire``'s
builders from what the caller knows: the listeners' addresses, the topic catalog.

Fetch is answered empty (groupcoord holds no records) after the request's ``max_wait``, capped
at ``max_fetch_wait_ms``, so a subscribed consumer with nothing to read waits as it would on a
broker instead of spinning. Produce is refused per partition (``produce_response``); one with
acks=0 expects no answer, so it is refused by closing the connection (``ValueError``), as
Kafka does when such a request fails.

Authorization (with an ``Authorizer``; without one every principal may do everything) follows
Kafka's group ACLs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and OffsetFetch
need Read on the group, and so does KIP-848's ConsumerGroupHeartbeat; DescribeGroups,
ConsumerGroupDescribe and FindCoordinator need Describe; DeleteGroups and OffsetDelete need
Delete. A denied group is answered GROUP_AUTHORIZATION_FAILED (per group where
the answer is per group) and its partition never sees the request; ListGroups leaves out the
groups the principal may not Describe. Topic catalog changes (CreateTopics, DeleteTopics,
CreatePartitions) need a super user once ACLs are on (TOPIC_AUTHORIZATION_FAILED otherwise):
groupcoord has no topic ACLs. Metadata, DescribeCluster, ListOffsets, Produce and Fetch
describe the catalog only and are answered to any authenticated principal, and so is
DescribeConfigs of a topic or a broker; a group's configs need DescribeConfigs on the group
(which only All grants, ``wire.acl``), else GROUP_AUTHORIZATION_FAILED for that group.
DescribeAcls lists the ACL file's rules to super users only (``wire.acl_list``). AlterConfigs and
IncrementalAlterConfigs are refused (settings are read-only, ``wire.configs``), after the same
checks, a group's needing AlterConfigs on it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from groupcoord.coordinator import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    CoordinatorConfig,
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedConsumerGroup,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    Errors,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetFetchResponse,
)
from groupcoord.wire import (
    ApiKey,
    Node,
    WireRequest,
    describe_cluster_response,
    error_response,
    fast_response,
    fetch_response,
    find_coordinator_response,
    list_offsets_response,
    offset_fetch_from_core,
    offset_fetch_to_core,
    produce_expects_response,
    produce_response,
    request_to_core,
    response_from_core,
)
from groupcoord.wire.acl import (
    ALTER_CONFIGS,
    DELETE,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    READ,
    Authorizer,
    authorized_operations,
    catalog_authorized_operations,
)
from groupcoord.wire.acl_list import describe_acls_response
from groupcoord.wire.answer_cache import MetadataAnswers, api_versions_answer
from groupcoord.wire.configs import (
    GROUP,
    alter_answer,
    alter_configs_response,
    describe_configs,
    describe_configs_response,
    group_change,
    list_config_resources_response,
    refuse_duplicates,
    resources,
    too_many_resources,
)
from groupcoord.wire.consumer_groups import (
    consumer_describe_from_core,
    consumer_describe_to_core,
    consumer_heartbeat_from_core,
    consumer_heartbeat_to_core,
)
from groupcoord.wire.sasl import ANONYMOUS, illegal_state_response
from groupcoord.wire.topics import (
    TopicChange,
    TopicResult,
    too_many_changes,
    topic_changes,
    topics_response,
)
from groupcoord.wire.translate import millis, with_authorized_operations

from .catalog import CatalogError, check_topic_name

# The longest an empty Fetch is held (Kafka's fetch.max.wait.ms default is 500 ms).
DEFAULT_MAX_FETCH_WAIT_MS = 500

Route = Callable[[str, Any], Awaitable[Any]]
# (group id, core request, reply): calls reply(core response) once, maybe at once.
SubmitRoute = Callable[[str, Any, Callable[[Any], None]], None]
ChangeTopics = Callable[[list[TopicChange]], Awaitable[list[TopicResult]]]
ListAll = Callable[[ListGroupsRequest], Awaitable[ListGroupsResponse]]
Locate = Callable[[str], Awaitable[Node | None]]
# The operation each single-group request needs (Kafka's KafkaApis authorizes the same way).
_GROUP_OPERATION = {
    ApiKey.JOIN_GROUP: READ,
    ApiKey.SYNC_GROUP: READ,
    ApiKey.HEARTBEAT: READ,
    ApiKey.LEAVE_GROUP: READ,
    ApiKey.OFFSET_COMMIT: READ,
    ApiKey.OFFSET_DELETE: DELETE,
}
_DENIED = Errors.GROUP_AUTHORIZATION_FAILED


class KafkaGateway:
    """Answers one decoded request at a time (``respond``); holds no per-connection state.

    ``route(group_id, core_request)`` returns the core response of the partition owning the
    group; ``list_groups(request)`` one ListGroups answer covering every partition this
    listener speaks for (merged by the caller); ``coordinator_for(group_id)`` the listener of
    the group's partition (None while it is not serving); ``brokers()`` the listeners Metadata
    names; ``topics()`` the topic catalog ({topic: partition count}) and ``topic_ids()`` its
    topics' ids ({topic: uuid}), ``group_configs()`` its groups' own settings;
    ``change_topics(changes)`` asks the catalog's owner to apply CreateTopics/DeleteTopics/
    CreatePartitions and groups' settings changes (``wire.configs``). ``node`` is
    this listener, named as the leader of every topic partition in its Metadata answers when it
    is among the brokers (all listeners answer Fetch and ListOffsets alike). ``authorizer``
    decides group ACLs (None: everything is allowed). ``submit_route(group_id, core_request,
    reply)``, where the partition is in this process (a partition's own listener), takes a
    single-group request and calls ``reply(core response)`` once (``submit``).
    ``coordinator_config`` is the deployment's, which DescribeConfigs reports (``wire.configs``).
    ``catalog_version()``, when given, numbers the catalog ``topics()`` and ``topic_ids()`` give
    (one number, one catalog), so that a kept Metadata answer is checked by it rather than by
    comparing the catalogs (``wire.answer_cache``).
    """

    def __init__(
        self,
        *,
        node: Node,
        route: Route,
        list_groups: ListAll,
        coordinator_for: Locate,
        brokers: Callable[[], Sequence[Node]],
        topics: Callable[[], Mapping[str, int]],
        change_topics: ChangeTopics,
        cluster_id: str,
        topic_ids: Callable[[], Mapping[str, uuid.UUID]],
        group_configs: Callable[[], Mapping[str, Mapping[str, int]]],
        coordinator_config: CoordinatorConfig,
        max_fetch_wait_ms: int = DEFAULT_MAX_FETCH_WAIT_MS,
        authorizer: Authorizer | None = None,
        submit_route: SubmitRoute | None = None,
        catalog_version: Callable[[], int] | None = None,
    ) -> None:
        if max_fetch_wait_ms < 0:
            raise ValueError(f"max_fetch_wait_ms must be >= 0, got {max_fetch_wait_ms}")
        self.node = node
        self._route = route
        self._list_groups = list_groups
        self._coordinator_for = coordinator_for
        self._brokers = brokers
        self._topics = topics
        self._change_topics = change_topics
        self._topic_ids = topic_ids
        self._group_configs = group_configs
        self.cluster_id = cluster_id
        self.coordinator_config = coordinator_config
        self.max_fetch_wait_ms = max_fetch_wait_ms
        self.authorizer = authorizer
        self._submit_route = submit_route
        self._catalog_version = catalog_version
        self._metadata = MetadataAnswers()

    async def respond(
        self, request: WireRequest, client_host: str = "", principal: str = ANONYMOUS
    ) -> object:
        """kio's response to ``request`` from ``principal`` (authenticated by the listener) at
        address ``client_host`` (which DescribeGroups shows as Kafka does: "/127.0.0.1").
        ``ValueError`` when the request is well-formed on the wire but not acceptable to the
        core: the listener closes the connection, as a broker does with a request it cannot
        parse."""
        operation = _GROUP_OPERATION.get(request.api_key)  # type: ignore[call-overload]
        if operation is not None:
            # A single-group request, looked up before the match below walks its cases (~2 µs
            # a request).
            core_request = _group_request(request, client_host)
            if not self._allowed(principal, client_host, operation, core_request.group_id):
                return error_response(request, _DENIED)
            return _group_response(request, await self._route(core_request.group_id, core_request))

        def allowed(operation: str, group_id: str) -> bool:
            return self._allowed(principal, client_host, operation, group_id)

        def operations_of(group_id: str) -> int:
            return authorized_operations(lambda operation: allowed(operation, group_id))

        match request.api_key:
            case ApiKey.API_VERSIONS:
                return api_versions_answer(request)
            case ApiKey.SASL_HANDSHAKE | ApiKey.SASL_AUTHENTICATE:
                return illegal_state_response(
                    request, "no SASL exchange is in progress on this connection"
                )
            case ApiKey.METADATA:
                brokers = self._brokers()
                return self._metadata.answer(
                    request,
                    brokers=brokers,
                    leader_id=self._leader_id(brokers),
                    partitions=self._topics(),
                    cluster_id=self.cluster_id,
                    topic_ids=self._topic_ids(),
                    operations=catalog_authorized_operations(self.authorizer, principal),
                    catalog_version=(
                        None if self._catalog_version is None else self._catalog_version()
                    ),
                )
            case ApiKey.DESCRIBE_CLUSTER:
                brokers = self._brokers()
                return describe_cluster_response(
                    request,
                    brokers=brokers,
                    controller_id=self._leader_id(brokers),  # as Metadata names it
                    cluster_id=self.cluster_id,
                    cluster_operations=catalog_authorized_operations(self.authorizer, principal)[1],
                )
            case ApiKey.FIND_COORDINATOR:
                return await self._find_coordinator(request, allowed)
            case ApiKey.LIST_OFFSETS:
                return list_offsets_response(request, partitions=self._topics())
            case ApiKey.PRODUCE:
                if not produce_expects_response(request):
                    raise ValueError("Produce refused: groupcoord stores no records (acks=0)")
                return produce_response(request, partitions=self._topics())
            case ApiKey.FETCH:
                wait_ms = min(millis(request.body.max_wait), self.max_fetch_wait_ms)
                await asyncio.sleep(max(wait_ms, 0) / 1000)
                return fetch_response(request, partitions=self._topics())
            case ApiKey.OFFSET_FETCH:
                answers = [
                    await self._route(one.group_id, one)
                    if allowed(READ, one.group_id)
                    else OffsetFetchResponse(_DENIED, [])
                    for one in offset_fetch_to_core(request)
                ]
                return offset_fetch_from_core(request, answers)
            case ApiKey.LIST_GROUPS:
                listed = await self._list_groups(request_to_core(request))
                if self.authorizer is not None:
                    visible = [g for g in listed.groups if allowed(DESCRIBE, g.group_id)]
                    listed = ListGroupsResponse(listed.error, visible)
                return _group_response(request, listed)
            case ApiKey.DESCRIBE_GROUPS:
                described = response_from_core(request, await self._describe(request, allowed))
                return with_authorized_operations(request, described, operations_of)
            case ApiKey.DELETE_GROUPS:
                return response_from_core(request, await self._delete(request, allowed))
            case ApiKey.CONSUMER_GROUP_HEARTBEAT:
                topic_ids = self._topic_ids()
                heartbeat = consumer_heartbeat_to_core(
                    request, topic_ids, client_host=f"/{client_host}" if client_host else ""
                )
                if allowed(READ, heartbeat.group_id):
                    answer = await self._route(heartbeat.group_id, heartbeat)
                else:
                    answer = ConsumerGroupHeartbeatResponse(_DENIED)
                return consumer_heartbeat_from_core(request, answer, topic_ids)
            case ApiKey.CONSUMER_GROUP_DESCRIBE:
                described = consumer_describe_from_core(
                    request, await self._consumer_describe(request, allowed), self._topic_ids()
                )
                return with_authorized_operations(request, described, operations_of)
            case ApiKey.CREATE_TOPICS | ApiKey.DELETE_TOPICS | ApiKey.CREATE_PARTITIONS:
                changes = topic_changes(request)
                refused = too_many_changes(changes)
                if self.authorizer is not None and not self.authorizer.is_super_user(principal):
                    refused = TopicResult(
                        Errors.TOPIC_AUTHORIZATION_FAILED, "topic changes need a super user"
                    )
                if refused is not None:
                    return topics_response(request, [refused] * len(changes))
                return topics_response(request, await self._change_topics(changes))
            case ApiKey.DESCRIBE_ACLS:
                authorizer = self.authorizer
                return describe_acls_response(
                    request,
                    None if authorizer is None else authorizer.acls,
                    allowed=authorizer is None or authorizer.is_super_user(principal),
                )
            case ApiKey.DESCRIBE_CONFIGS | ApiKey.ALTER_CONFIGS | ApiKey.INCREMENTAL_ALTER_CONFIGS:
                return await self._configs(request, allowed)
            case ApiKey.LIST_CONFIG_RESOURCES:
                return list_config_resources_response(
                    request,
                    topics=self._topics(),
                    node_ids=self._node_ids(),
                    group_configs=self._group_configs(),
                    may_describe_group=lambda group_id: allowed(DESCRIBE_CONFIGS, group_id),
                )
        raise ValueError(f"api key {request.api_key} is not answered by this listener")

    def submit(
        self,
        request: WireRequest,
        client_host: str,
        principal: str,
        reply: Callable[[object], None],
    ) -> bool:
        """``respond`` for a single-group request (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
        OffsetCommit, OffsetDelete: every member's steady traffic) through ``submit_route``,
        with callbacks instead of a coroutine and a future: ``reply`` is called once with the
        kio response, maybe before this returns. Returns False, calling nothing, for any other
        request or without a ``submit_route``: ``respond`` answers those. ``ValueError`` as
        ``respond``."""
        operation = _GROUP_OPERATION.get(request.api_key)  # type: ignore[call-overload]
        if operation is None or self._submit_route is None:
            return False
        core_request = _group_request(request, client_host)
        if not self._allowed(principal, client_host, operation, core_request.group_id):
            reply(error_response(request, _DENIED))
        else:
            self._submit_route(
                core_request.group_id,
                core_request,
                lambda answer: reply(_group_response(request, answer)),
            )
        return True

    def _allowed(self, principal: str, client_host: str, operation: str, group_id: str) -> bool:
        return self.authorizer is None or self.authorizer.allowed(
            principal, client_host, operation, group_id
        )

    def _leader_id(self, brokers: Sequence[Node]) -> int:
        """This listener when Metadata names it, else the first broker it names: clients fetch
        from the leader, so it must be a broker they know (the bootstrap listener is not)."""
        if not brokers or any(b.node_id == self.node.node_id for b in brokers):
            return self.node.node_id
        return brokers[0].node_id

    async def _configs(self, request: WireRequest, allowed: Callable[[str, str], bool]) -> object:
        """DescribeConfigs, AlterConfigs and IncrementalAlterConfigs (``wire.configs``): a
        group's changes go to the catalog's owner, in one call for the request."""
        describing = request.api_key == ApiKey.DESCRIBE_CONFIGS
        respond = describe_configs_response if describing else alter_configs_response
        refused = too_many_resources(request)
        if refused is not None:
            return respond(request, [refused] * len(request.body.resources))
        node_ids = self._node_ids()
        topics, group_configs = self._topics(), self._group_configs()
        operation = DESCRIBE_CONFIGS if describing else ALTER_CONFIGS
        asked = resources(request)
        answers = [
            describe_configs(
                resource_type,
                name,
                config=self.coordinator_config,
                node_ids=node_ids,
                topics=topics,
                topic_name_error=_topic_name_error,
                may_access_group=lambda group_id: allowed(operation, group_id),
                group_configs=group_configs,
            )
            for resource_type, name in asked
        ]
        if describing:
            return respond(request, answers)
        answers = refuse_duplicates(asked, answers)
        to_change = [
            index
            for index, ((kind, name), checked) in enumerate(zip(asked, answers, strict=True))
            if kind == GROUP and name and checked.error == Errors.NONE
        ]
        changes = [group_change(request, i) for i in to_change]
        results = await self._change_topics(changes) if changes else []
        changed = dict(zip(to_change, results, strict=True))
        return respond(
            request,
            [
                alter_answer(kind, name, checked, changed.get(index))
                for index, ((kind, name), checked) in enumerate(zip(asked, answers, strict=True))
            ],
        )

    def _node_ids(self) -> frozenset[int]:
        """The broker ids whose configs this listener describes: those Metadata names."""
        ids = [self.node.node_id, *(broker.node_id for broker in self._brokers())]
        return frozenset(i for i in ids if i >= 0)  # not the bootstrap listener's -1

    async def _find_coordinator(
        self, request: WireRequest, allowed: Callable[[str, str], bool]
    ) -> object:
        body = request.body
        keys = list(body.coordinator_keys) if request.api_version >= 4 else [body.key]
        keys = list(dict.fromkeys(keys))
        denied = {key for key in keys if not allowed(DESCRIBE, key)}
        found = {key: await self._coordinator_for(key) for key in keys if key not in denied}
        return find_coordinator_response(request, found.get, denied)

    async def _describe(
        self, request: WireRequest, allowed: Callable[[str, str], bool]
    ) -> DescribeGroupsResponse:
        asked: DescribeGroupsRequest = request_to_core(request)
        groups = []
        for group_id in asked.group_ids:
            if not allowed(DESCRIBE, group_id):
                groups.append(DescribedGroup(_DENIED, group_id, "", "", "", [], -1, ""))
                continue
            answer = await self._route(group_id, DescribeGroupsRequest([group_id]))
            groups.extend(answer.groups)
        return DescribeGroupsResponse(groups)

    async def _consumer_describe(
        self, request: WireRequest, allowed: Callable[[str, str], bool]
    ) -> ConsumerGroupDescribeResponse:
        asked = consumer_describe_to_core(request)
        groups = []
        for group_id in asked.group_ids:
            if not allowed(DESCRIBE, group_id):
                groups.append(DescribedConsumerGroup(_DENIED, None, group_id, "", -1, -1, "", []))
                continue
            one = ConsumerGroupDescribeRequest([group_id], asked.include_authorized_operations)
            groups.extend((await self._route(group_id, one)).groups)
        return ConsumerGroupDescribeResponse(groups)

    async def _delete(
        self, request: WireRequest, allowed: Callable[[str, str], bool]
    ) -> DeleteGroupsResponse:
        asked: DeleteGroupsRequest = request_to_core(request)
        results = []
        for group_id in dict.fromkeys(asked.group_ids):
            if not allowed(DELETE, group_id):
                results.append(DeletableGroupResult(group_id, _DENIED))
                continue
            answer = await self._route(group_id, DeleteGroupsRequest([group_id]))
            results.extend(answer.results)
        return DeleteGroupsResponse(results)


def _topic_name_error(name: str) -> str | None:
    try:
        check_topic_name(name)
    except CatalogError as exc:
        return str(exc)
    return None


def _group_request(request: WireRequest, client_host: str) -> Any:
    """The core request of a single-group wire request. Kafka records a member's host as
    Java's InetAddress.toString(): "/" + address (only a JoinGroup carries it)."""
    if request.api_key != ApiKey.JOIN_GROUP:
        return request_to_core(request)
    return request_to_core(request, client_host=f"/{client_host}" if client_host else "")


def _group_response(request: WireRequest, answer: Any) -> object:
    # Heartbeat and OffsetCommit skip kio's objects.
    return fast_response(request, answer) or response_from_core(request, answer)
