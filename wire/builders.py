"""Pure builders for the answers that have no core message: FindCoordinator, DescribeCluster,
ListOffsets, Fetch and Produce (Metadata's is ``fast_metadata``). Each takes what the caller
knows and returns kio's response at the request's version.

groupcoord holds no topic data, only a topic catalog ({topic: partition count}, and each topic's
id). So Metadata names one node as leader, sole replica and in-sync replica of every partition
(the listener's own, or the bootstrap's) with the catalog's topic id (Fetch stays at v12 and
below, by topic name);
ListOffsets answers from optional end offsets (0 by default: empty topics); Fetch answers every
known partition with no records. A Fetch whose offset is beyond the end is answered as caught up
(high watermark = its offset), not OFFSET_OUT_OF_RANGE, so a consumer that coordinates through
groupcoord never resets the offsets it committed. The listener should hold an empty Fetch answer
for the request's ``max_wait`` (``translate.millis(request.body.max_wait)``), as a broker does,
so consumers do not spin. Produce is refused partition by partition (``produce_response``): it is
served at all only because librdkafka fetches from a broker that advertises Produce v3+ and
Fetch v4+ (its message-format v2 feature) and otherwise retries ListOffsets in a loop.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.static.protocol import Payload

from . import apis
from .connection import WireRequest
from .translate import build

GROUP_KEY_TYPE = 0
# kio writes None as the zero ("unknown") uuid and reads the zero uuid back as None.
ZERO_TOPIC_ID = None
# Kafka's "authorized operations not provided" (no ACLs here).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
EARLIEST_LOCAL_TIMESTAMP = -4
PRODUCE_REFUSED = "groupcoord coordinates consumer groups and stores no records"


@dataclass(frozen=True, slots=True)
class Node:
    """A listener as clients see it: Kafka's broker id, host and port."""

    node_id: int
    host: str
    port: int


def find_coordinator_response(
    request: WireRequest,
    coordinator_for: Callable[[str], Node | None],
    denied: Collection[str] = (),
) -> Payload:
    """Answer FindCoordinator: ``coordinator_for(group_id)`` is the listener of the partition that
    owns the group, or None while it is not serving (COORDINATOR_NOT_AVAILABLE: clients retry).
    Keys of another type (transactions, share groups) get INVALID_REQUEST: groupcoord
    coordinates consumer groups only. Groups in ``denied`` (no Describe ACL) get
    GROUP_AUTHORIZATION_FAILED."""
    cls = apis.response_class(request.api_key, request.api_version)
    body = request.body
    key_type = getattr(body, "key_type", GROUP_KEY_TYPE)

    def answer(key: str) -> dict:
        if key_type != GROUP_KEY_TYPE:
            return dict(
                error_code=ErrorCode.invalid_request,
                node_id=-1,
                host="",
                port=-1,
                error_message=f"groupcoord coordinates groups only, not key type {key_type}",
            )
        if key in denied:
            return dict(
                error_code=ErrorCode.group_authorization_failed,
                node_id=-1,
                host="",
                port=-1,
                error_message="not authorized to describe the group",
            )
        node = coordinator_for(key)
        if node is None:
            return dict(
                error_code=ErrorCode.coordinator_not_available,
                node_id=-1,
                host="",
                port=-1,
                error_message="the group's partition is not serving",
            )
        return dict(
            error_code=ErrorCode.none,
            node_id=node.node_id,
            host=node.host,
            port=node.port,
            # Kafka 4.3's words for success: Errors.NONE's message in v1-3, "" from v4.
            error_message="NONE" if request.api_version < 4 else "",
        )

    if request.api_version < 4:
        return build(cls, **answer(body.key))
    coordinator_cls = apis.nested_class(cls, "Coordinator")
    return build(
        cls,
        coordinators=tuple(
            coordinator_cls(key=key, **answer(key)) for key in body.coordinator_keys
        ),
    )


def answered_operations(request: WireRequest, operations: tuple[int, int]) -> tuple[int, int]:
    """The (topic, cluster) authorized operations a Metadata answer to ``request`` carries: the
    caller's ``operations`` where the request asks for them (v8+; the cluster's up to v10),
    else Kafka's "not provided"."""
    body = request.body
    return (
        operations[0]
        if getattr(body, "include_topic_authorized_operations", False)
        else AUTHORIZED_OPERATIONS_OMITTED,
        operations[1]
        if getattr(body, "include_cluster_authorized_operations", False)
        else AUTHORIZED_OPERATIONS_OMITTED,
    )


# DescribeCluster's endpoint types (KIP-919): what a client asks to be told about.
BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2


def describe_cluster_response(
    request: WireRequest,
    *,
    brokers: Sequence[Node],
    controller_id: int,
    cluster_id: str,
    cluster_operations: int,
) -> Payload:
    """Answer DescribeCluster (Java's ``Admin.describeCluster``, kafka-python's
    ``describe_cluster``) with what Metadata says: ``brokers``, none of them fenced,
    ``controller_id`` and ``cluster_id``; ``cluster_operations`` (the caller's,
    ``acl.catalog_authorized_operations``) where the request asks for them. Every listener is
    a broker endpoint: asked for controllers (v1+) the answer is MISMATCHED_ENDPOINT_TYPE, for
    any other type UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers."""
    cls = apis.response_class(request.api_key, request.api_version)
    body = request.body
    endpoint_type = getattr(body, "endpoint_type", BROKER_ENDPOINT)
    common = dict(
        endpoint_type=BROKER_ENDPOINT, cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED
    )
    if endpoint_type == CONTROLLER_ENDPOINT:
        return build(
            cls,
            error_code=ErrorCode.mismatched_endpoint_type,
            error_message="groupcoord's listeners are brokers; it has no controller endpoint",
            cluster_id="",
            controller_id=-1,
            brokers=(),
            **common,
        )
    if endpoint_type != BROKER_ENDPOINT:
        return build(
            cls,
            error_code=ErrorCode.unsupported_endpoint_type,
            error_message=f"Unsupported endpoint type {endpoint_type}",
            cluster_id="",
            controller_id=-1,
            brokers=(),
            **common,
        )
    broker_cls = apis.nested_class(cls, "DescribeClusterBroker")
    if body.include_cluster_authorized_operations:
        common["cluster_authorized_operations"] = cluster_operations
    return build(
        cls,
        error_code=ErrorCode.none,
        error_message=None,
        cluster_id=cluster_id,
        controller_id=controller_id,
        brokers=tuple(
            build(
                broker_cls,
                broker_id=b.node_id,
                host=b.host,
                port=b.port,
                rack=None,
                is_fenced=False,
            )
            for b in brokers
        ),
        **common,
    )


def _known(partitions: Mapping[str, int], topic: str, partition: int) -> bool:
    return 0 <= partition < partitions.get(topic, 0)


def list_offsets_response(
    request: WireRequest,
    *,
    partitions: Mapping[str, int],
    end_offsets: Mapping[tuple[str, int], int] | None = None,
) -> Payload:
    """Answer ListOffsets: the earliest offset is 0, the latest ``end_offsets[(topic, p)]``
    (0 when absent); a lookup by time finds nothing (offset -1), as Kafka answers for a time
    after the last record."""
    cls = apis.response_class(request.api_key, request.api_version)
    topic_cls = apis.nested_class(cls, "ListOffsetsTopicResponse")
    partition_cls = apis.nested_class(cls, "ListOffsetsPartitionResponse")
    ends = end_offsets or {}

    def answer(topic: str, p):
        if not _known(partitions, topic, p.partition_index):
            return build(
                partition_cls,
                partition_index=p.partition_index,
                error_code=ErrorCode.unknown_topic_or_partition,
                timestamp=-1,
                offset=-1,
                leader_epoch=-1,
            )
        if p.timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            offset = 0
        elif p.timestamp == LATEST_TIMESTAMP:
            offset = ends.get((topic, p.partition_index), 0)
        else:
            offset = -1
        return build(
            partition_cls,
            partition_index=p.partition_index,
            error_code=ErrorCode.none,
            timestamp=-1,
            offset=offset,
            leader_epoch=-1,
        )

    return build(
        cls,
        topics=tuple(
            topic_cls(name=t.name, partitions=tuple(answer(t.name, p) for p in t.partitions))
            for t in request.body.topics
        ),
    )


def fetch_response(
    request: WireRequest,
    *,
    partitions: Mapping[str, int],
    end_offsets: Mapping[tuple[str, int], int] | None = None,
) -> Payload:
    """Answer Fetch with no records: known partitions report their end offset (at least the
    fetch offset, see the module docstring), unknown ones UNKNOWN_TOPIC_OR_PARTITION. No fetch
    session is ever created (session id 0), so clients send full fetches."""
    cls = apis.response_class(request.api_key, request.api_version)
    topic_cls = apis.nested_class(cls, "FetchableTopicResponse")
    partition_cls = apis.nested_class(cls, "PartitionData")
    ends = end_offsets or {}

    def answer(topic: str, p):
        if not _known(partitions, topic, p.partition):
            return build(
                partition_cls,
                partition_index=p.partition,
                error_code=ErrorCode.unknown_topic_or_partition,
                high_watermark=-1,
                last_stable_offset=-1,
                log_start_offset=-1,
                aborted_transactions=None,
                preferred_read_replica=-1,
                records=None,
            )
        end = max(ends.get((topic, p.partition), 0), p.fetch_offset)
        return build(
            partition_cls,
            partition_index=p.partition,
            error_code=ErrorCode.none,
            high_watermark=end,
            last_stable_offset=end,
            log_start_offset=0,
            aborted_transactions=(),
            preferred_read_replica=-1,
            records=b"",
        )

    return build(
        cls,
        error_code=ErrorCode.none,
        session_id=0,
        responses=tuple(
            topic_cls(topic=t.topic, partitions=tuple(answer(t.topic, p) for p in t.partitions))
            for t in request.body.topics
        ),
    )


def produce_expects_response(request: WireRequest) -> bool:
    """False for a Produce with acks=0: the client expects no answer, so a refusal can only be
    said by closing the connection, which is what Kafka does when such a request fails."""
    return request.body.acks != 0


def produce_response(request: WireRequest, *, partitions: Mapping[str, int]) -> Payload:
    """Refuse a Produce (acks 1 or -1), storing nothing: every partition of a known topic gets
    INVALID_REQUEST with ``PRODUCE_REFUSED`` as its message (v8+), a non-retriable error, so a
    producer fails the batch at once instead of retrying; others get
    UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers them."""
    cls = apis.response_class(request.api_key, request.api_version)
    topic_cls = apis.nested_class(cls, "TopicProduceResponse")
    partition_cls = apis.nested_class(cls, "PartitionProduceResponse")

    def answer(topic: str, index: int):
        known = _known(partitions, topic, index)
        return build(
            partition_cls,
            index=index,
            error_code=ErrorCode.invalid_request if known else ErrorCode.unknown_topic_or_partition,
            base_offset=-1,
            log_append_time=None,
            log_start_offset=-1,
            record_errors=(),
            error_message=PRODUCE_REFUSED if known else None,
        )

    return build(
        cls,
        responses=tuple(
            topic_cls(
                name=t.name,
                partition_responses=tuple(answer(t.name, p.index) for p in t.partition_data),
            )
            for t in request.body.topic_data
        ),
    )
