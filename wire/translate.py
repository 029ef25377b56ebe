"""Pure translation between kio's group messages and the core's (groupcoord.coordinator).

``request_to_core`` turns a decoded ``WireRequest`` into the core request the Shard handles
(OffsetCommit, Heartbeat, JoinGroup and SyncGroup arrive as core requests already:
``fast_requests``; a JoinGroup gets its client id and host here);
``response_from_core`` turns the core's answer into kio's response at the request's version.
OffsetFetch has its own pair, because from v8 one request asks about many groups, which may live
on different partitions: ``offset_fetch_to_core`` gives one core request per group and
``offset_fetch_from_core`` assembles their answers. ``error_response`` answers any of them with
one error, for requests the listener cannot hand to the core.

Version rules applied here (and, for the requests ``fast_requests`` reads, there), each
Kafka's:
- JoinGroup v0 has no rebalance timeout: the session timeout stands in for it. Only v4+ clients
  understand MEMBER_ID_REQUIRED, so older ones join without a known member id (both read so by
  ``fast_requests``). Before v7 the
  response's protocol name is not nullable ("" instead of null) and has no protocol type. Before
  v9 a static leader that rejoins a stable group is not told it leads: no member list and
  another leader id, so it does not reassign (v9 says so with skip_assignment, KIP-814). Kafka
  names the leader's previous member id there; the core's answer does not carry it, so the
  leader field is empty, which clients read the same way (``leader != member_id``).
- LeaveGroup v0-2 names one member; its error is the response's error.
- OffsetFetch v1 has no top-level error: a group error is repeated on every requested partition
  with offset -1 (``OffsetFetchRequest.getErrorResponse``); a null topic list (all topics) is
  v2+, and Kafka closes the connection of a v1 request holding one.
- ListGroups v5 filters on group type ("classic" or "consumer", case-insensitive as Kafka's).
- DescribeGroups answers Kafka's "not provided" authorized operations; a listener asked for
  them (v3+) fills them in with ``with_authorized_operations``. From v6 (KIP-1043) a group that
  does not exist as a classic group, which the core describes as Dead with no error, is
  GROUP_ID_NOT_FOUND with a message, still in state Dead; older versions keep the Dead answer.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterable, Sequence
from functools import cache

import msgspec
from kio.schema.errors import ErrorCode
from kio.static.protocol import Payload

from groupcoord.coordinator import GroupState
from groupcoord.coordinator import messages as core
from groupcoord.coordinator.errors import Errors

from . import apis
from .apis import ApiKey
from .connection import WireRequest

_MS = datetime.timedelta(milliseconds=1)
_DEAD = GroupState.DEAD.value  # how the core describes a group that does not exist


def millis(delta: datetime.timedelta) -> int:
    """kio's timedelta fields as Kafka's integer milliseconds (exact: kio builds them from ms)."""
    return delta // _MS


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls: type, **values):
    """An instance of kio class ``cls`` from ``values``, leaving out the fields this version does
    not have, so one call site serves every version of a message."""
    names = _field_names(cls)
    if "throttle_time" in names:
        values.setdefault("throttle_time", apis.ZERO_MS)
    return cls(**{k: v for k, v in values.items() if k in names})


def _code(error: Errors) -> ErrorCode:
    return ErrorCode(int(error))


def _grouped(items: Iterable, topic_of) -> dict[str, list]:
    """Items by topic, topics in order of first appearance (Kafka answers topic by topic)."""
    out: dict[str, list] = {}
    for item in items:
        out.setdefault(topic_of(item), []).append(item)
    return out


# ---- requests ---------------------------------------------------------------------------------


def request_to_core(request: WireRequest, *, client_host: str = "") -> msgspec.Struct:
    """The core request for a decoded group request (not OffsetFetch: ``offset_fetch_to_core``).
    ``client_host`` is the peer's address, which JoinGroup records for DescribeGroups.
    ``ValueError`` for an api the core does not handle."""
    body, version = request.body, request.api_version
    match request.api_key:
        case ApiKey.HEARTBEAT | ApiKey.OFFSET_COMMIT | ApiKey.SYNC_GROUP:
            return body  # decoded as the core's request (fast_requests)
        case ApiKey.JOIN_GROUP:  # decoded as the core's request, less the header and the peer
            return msgspec.structs.replace(
                body, client_id=request.client_id or "", client_host=client_host
            )
        case ApiKey.LEAVE_GROUP:
            if version < 3:
                members = [core.MemberIdentity(body.member_id)]
            else:
                members = [
                    core.MemberIdentity(
                        m.member_id, m.group_instance_id, getattr(m, "reason", None)
                    )
                    for m in body.members
                ]
            return core.LeaveGroupRequest(group_id=body.group_id, members=members)
        case ApiKey.DESCRIBE_GROUPS:
            return core.DescribeGroupsRequest(group_ids=list(body.groups))
        case ApiKey.LIST_GROUPS:
            return core.ListGroupsRequest(states_filter=tuple(getattr(body, "states_filter", ())))
        case ApiKey.DELETE_GROUPS:
            return core.DeleteGroupsRequest(group_ids=list(body.groups_names))
        case ApiKey.OFFSET_DELETE:
            return core.OffsetDeleteRequest(
                group_id=body.group_id,
                partitions=[
                    core.TopicPartition(topic.name, p.partition_index)
                    for topic in body.topics
                    for p in topic.partitions
                ],
            )
    raise ValueError(f"api key {request.api_key} has no core request")


def offset_fetch_to_core(request: WireRequest) -> list[core.OffsetFetchRequest]:
    """One core OffsetFetch per group asked about, in the request's order (v8+ ask for many).
    ``ValueError`` for a v1 request with a null topic list, which Kafka cannot read (null
    means "all topics" from v2): the listener closes the connection, as Kafka does."""
    body = request.body
    if request.api_version < 2 and body.topics is None:
        raise ValueError("OffsetFetch v1 has no null topic list (all topics: v2+)")
    require_stable = getattr(body, "require_stable", False)
    groups = body.groups if request.api_version >= 8 else (body,)
    return [
        core.OffsetFetchRequest(
            group_id=group.group_id,
            partitions=None
            if group.topics is None
            else [
                core.TopicPartition(t.name, p) for t in group.topics for p in t.partition_indexes
            ],
            require_stable=require_stable,
            # v9+ (KIP-848): checked against a consumer group's member epochs by the core.
            member_id=getattr(group, "member_id", None),
            member_epoch=getattr(group, "member_epoch", -1),
        )
        for group in groups
    ]


# ---- responses --------------------------------------------------------------------------------


def response_from_core(request: WireRequest, response: msgspec.Struct) -> Payload:
    """kio's response, at the request's version, for the core's answer to ``request_to_core``."""
    cls = apis.response_class(request.api_key, request.api_version)
    version = request.api_version
    match request.api_key:
        case ApiKey.JOIN_GROUP:
            member_cls = apis.nested_class(cls, "JoinGroupResponseMember")
            hide_leadership = response.skip_assignment and version < 9
            members = (
                ()
                if hide_leadership
                else tuple(
                    build(
                        member_cls,
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        metadata=m.metadata,
                    )
                    for m in response.members
                )
            )
            return build(
                cls,
                error_code=_code(response.error),
                generation_id=response.generation_id,
                protocol_type=response.protocol_type,
                protocol_name=(
                    response.protocol_name if version >= 7 else response.protocol_name or ""
                ),
                leader="" if hide_leadership else response.leader,
                skip_assignment=response.skip_assignment,
                member_id=response.member_id,
                members=members,
            )
        case ApiKey.SYNC_GROUP:
            return build(
                cls,
                error_code=_code(response.error),
                protocol_type=response.protocol_type,
                protocol_name=response.protocol_name,
                assignment=response.assignment,
            )
        case ApiKey.HEARTBEAT:
            return build(cls, error_code=_code(response.error))
        case ApiKey.LEAVE_GROUP:
            return _leave_group(cls, version, response)
        case ApiKey.OFFSET_COMMIT:
            return build(cls, topics=_partition_errors(cls, "OffsetCommit", response.partitions))
        case ApiKey.DESCRIBE_GROUPS:
            return _describe_groups(cls, version, response)
        case ApiKey.LIST_GROUPS:
            types_filter = {t.lower() for t in getattr(request.body, "types_filter", ())}
            listed_cls = apis.nested_class(cls, "ListedGroup")
            groups = tuple(
                build(
                    listed_cls,
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.group_state,
                    group_type=g.group_type,
                )
                for g in response.groups
                if not types_filter or g.group_type in types_filter
            )
            return build(cls, error_code=_code(response.error), groups=groups)
        case ApiKey.DELETE_GROUPS:
            result_cls = apis.nested_class(cls, "DeletableGroupResult")
            return build(
                cls,
                results=tuple(
                    result_cls(group_id=r.group_id, error_code=_code(r.error))
                    for r in response.results
                ),
            )
        case ApiKey.OFFSET_DELETE:
            return build(
                cls,
                error_code=_code(response.error),
                topics=_partition_errors(cls, "OffsetDelete", response.partitions),
            )
    raise ValueError(f"api key {request.api_key} has no core response")


def _partition_errors(cls: type, api: str, partitions: Sequence) -> tuple:
    """The topics of an OffsetCommit or OffsetDelete response (``api``): each partition's error,
    grouped by topic in the order answered."""
    topic_cls = apis.nested_class(cls, f"{api}ResponseTopic")
    part_cls = apis.nested_class(cls, f"{api}ResponsePartition")
    return tuple(
        topic_cls(
            name=topic,
            partitions=tuple(
                part_cls(partition_index=p.partition, error_code=_code(p.error)) for p in parts
            ),
        )
        for topic, parts in _grouped(partitions, lambda p: p.topic).items()
    )


def error_response(request: WireRequest, error: Errors) -> Payload:
    """kio's response to a group request (OffsetFetch included) that the core never saw, with
    ``error`` wherever a client of that version reads it: for a listener whose partition is
    loading (COORDINATOR_LOAD_IN_PROGRESS), gone (NOT_COORDINATOR) or over a limit."""
    body = request.body
    match request.api_key:
        case ApiKey.OFFSET_FETCH:
            return offset_fetch_from_core(
                request,
                [core.OffsetFetchResponse(error, []) for _ in offset_fetch_to_core(request)],
            )
        case ApiKey.JOIN_GROUP:
            answer = core.JoinGroupResponse(error, -1, None, None, "", False, body.member_id, [])
        case ApiKey.SYNC_GROUP:
            answer = core.SyncGroupResponse(error, None, None, b"")
        case ApiKey.HEARTBEAT:
            answer = core.HeartbeatResponse(error)
        case ApiKey.LEAVE_GROUP:
            answer = core.LeaveGroupResponse(error, [])
        case ApiKey.OFFSET_COMMIT:  # the body is the core's request (fast_requests)
            answer = core.OffsetCommitResponse(
                [
                    core.OffsetCommitResponsePartition(p.topic, p.partition, error)
                    for p in body.offsets
                ]
            )
        case ApiKey.DESCRIBE_GROUPS:
            answer = core.DescribeGroupsResponse(
                [
                    core.DescribedGroup(error, group_id, "", "", "", [], -1, "")
                    for group_id in body.groups
                ]
            )
        case ApiKey.LIST_GROUPS:
            answer = core.ListGroupsResponse(error, [])
        case ApiKey.DELETE_GROUPS:
            answer = core.DeleteGroupsResponse(
                [core.DeletableGroupResult(group_id, error) for group_id in body.groups_names]
            )
        case ApiKey.OFFSET_DELETE:
            answer = core.OffsetDeleteResponse(error, [])
        case _:
            raise ValueError(f"api key {request.api_key} has no core response")
    return response_from_core(request, answer)


def _leave_group(cls: type, version: int, response: core.LeaveGroupResponse):
    if version < 3:
        # One member per request: Kafka reports its error as the response's.
        error = response.error
        if error == Errors.NONE and response.members:
            error = response.members[0].error
        return build(cls, error_code=_code(error))
    member_cls = apis.nested_class(cls, "MemberResponse")
    return build(
        cls,
        error_code=_code(response.error),
        members=tuple(
            member_cls(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                error_code=_code(m.error),
            )
            for m in response.members
        ),
    )


def _describe_groups(cls: type, version: int, response: core.DescribeGroupsResponse):
    group_cls = apis.nested_class(cls, "DescribedGroup")
    member_cls = apis.nested_class(cls, "DescribedGroupMember")
    return build(
        cls,
        groups=tuple(
            build(
                group_cls,
                **_describe_error(version, g),
                group_id=g.group_id,
                group_state=g.group_state,
                protocol_type=g.protocol_type,
                protocol_data=g.protocol_data,
                members=tuple(
                    build(
                        member_cls,
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.member_metadata,
                        member_assignment=m.member_assignment,
                    )
                    for m in g.members
                ),
            )
            for g in response.groups
        ),
    )


def _describe_error(version: int, group: core.DescribedGroup) -> dict:
    """A described group's error fields at ``version`` (module docstring: v6's not found)."""
    if version >= 6 and group.error == Errors.NONE and group.group_state == _DEAD:
        return {
            "error_code": _code(Errors.GROUP_ID_NOT_FOUND),
            "error_message": f"Group {group.group_id} not found.",
        }
    return {"error_code": _code(group.error)}


def with_authorized_operations(
    request: WireRequest, response: Payload, operations_of: Callable[[str], int]
) -> Payload:
    """``response`` (kio's DescribeGroups or ConsumerGroupDescribe) with each group that has no
    error carrying ``operations_of(group_id)`` as its authorized operations where ``request``
    asked for them (``include_authorized_operations``, DescribeGroups v3+), as Kafka does;
    else ``response`` as it is."""
    if not getattr(request.body, "include_authorized_operations", False):
        return response
    return dataclasses.replace(
        response,
        groups=tuple(
            dataclasses.replace(g, authorized_operations=operations_of(g.group_id))
            if g.error_code == ErrorCode.none
            else g
            for g in response.groups
        ),
    )


def offset_fetch_from_core(
    request: WireRequest, responses: Sequence[core.OffsetFetchResponse]
) -> Payload:
    """kio's OffsetFetch response for the answers to ``offset_fetch_to_core(request)``, one per
    group in the same order."""
    cls = apis.response_class(request.api_key, request.api_version)
    version = request.api_version
    groups = request.body.groups if version >= 8 else (request.body,)
    if len(responses) != len(groups):
        raise ValueError(f"{len(groups)} groups asked, {len(responses)} answers")
    suffix = "s" if version >= 8 else ""
    topic_cls = apis.nested_class(cls, "OffsetFetchResponseTopic" + suffix)
    part_cls = apis.nested_class(cls, "OffsetFetchResponsePartition" + suffix)

    def topics(group, response: core.OffsetFetchResponse) -> tuple:
        partitions = response.partitions
        if version < 2 and response.error != Errors.NONE:
            partitions = [
                core.OffsetFetchResponsePartition(t.name, p, -1, -1, "", response.error)
                for t in group.topics or ()
                for p in t.partition_indexes
            ]
        return tuple(
            topic_cls(
                name=topic,
                partitions=tuple(
                    build(
                        part_cls,
                        partition_index=p.partition,
                        committed_offset=p.committed_offset,
                        committed_leader_epoch=p.committed_leader_epoch,
                        metadata=p.metadata,
                        error_code=_code(p.error),
                    )
                    for p in parts
                ),
            )
            for topic, parts in _grouped(partitions, lambda p: p.topic).items()
        )

    if version < 8:
        return build(
            cls, topics=topics(groups[0], responses[0]), error_code=_code(responses[0].error)
        )
    group_cls = apis.nested_class(cls, "OffsetFetchResponseGroup")
    return build(
        cls,
        groups=tuple(
            group_cls(
                group_id=group.group_id,
                topics=topics(group, response),
                error_code=_code(response.error),
            )
            for group, response in zip(groups, responses, strict=True)
        ),
    )
