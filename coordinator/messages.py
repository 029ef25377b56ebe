"""Request and response messages: Kafka's group APIs as frozen msgspec Structs.

Names and fields are Kafka's (snake_cased), in the order of ../shared/DESIGN.md's core contract,
which external tests construct positionally. Fields are only ever appended, with defaults.
Kafka's nullable strings are ``None`` here; byte fields are ``bytes``.

The Shard trusts field *types* (Structs do not check them on construction); callers that take
requests from outside Python's type system (the actors) pass them through ``validate`` first.
The Shard checks every *value*.
"""

from __future__ import annotations

import msgspec

from .consumer_messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from .errors import Errors


class _Msg(msgspec.Struct, frozen=True):
    pass


# ---- JoinGroup ------------------------------------------------------------------------------


class JoinGroupRequestProtocol(_Msg):
    name: str
    metadata: bytes


class JoinGroupRequest(_Msg):
    group_id: str
    member_id: str
    protocol_type: str
    protocols: list[JoinGroupRequestProtocol]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = True
    reason: str | None = None


class JoinGroupResponseMember(_Msg):
    member_id: str
    group_instance_id: str | None
    metadata: bytes


class JoinGroupResponse(_Msg):
    error: Errors
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str
    skip_assignment: bool
    member_id: str
    members: list[JoinGroupResponseMember]


# ---- SyncGroup ------------------------------------------------------------------------------


class SyncGroupRequestAssignment(_Msg):
    member_id: str
    assignment: bytes


class SyncGroupRequest(_Msg):
    group_id: str
    generation_id: int
    member_id: str
    assignments: list[SyncGroupRequestAssignment]
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None


class SyncGroupResponse(_Msg):
    error: Errors
    protocol_type: str | None
    protocol_name: str | None
    assignment: bytes


# ---- Heartbeat / LeaveGroup -----------------------------------------------------------------


class HeartbeatRequest(_Msg):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


class HeartbeatResponse(_Msg):
    error: Errors


class MemberIdentity(_Msg):
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


class LeaveGroupRequest(_Msg):
    group_id: str
    members: list[MemberIdentity]


class LeaveGroupResponseMember(_Msg):
    member_id: str
    group_instance_id: str | None
    error: Errors


class LeaveGroupResponse(_Msg):
    error: Errors
    members: list[LeaveGroupResponseMember]


# ---- Offsets --------------------------------------------------------------------------------


class TopicPartition(_Msg):
    topic: str
    partition: int


class OffsetCommitRequestPartition(_Msg):
    topic: str
    partition: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = ""


class OffsetCommitRequest(_Msg):
    group_id: str
    generation_id: int
    member_id: str
    offsets: list[OffsetCommitRequestPartition]
    group_instance_id: str | None = None
    retention_time_ms: int = -1


class OffsetCommitResponsePartition(_Msg):
    topic: str
    partition: int
    error: Errors


class OffsetCommitResponse(_Msg):
    partitions: list[OffsetCommitResponsePartition]


class OffsetFetchRequest(_Msg):
    group_id: str
    partitions: list[TopicPartition] | None
    require_stable: bool = False
    # OffsetFetch v9+ (KIP-848): checked against a consumer group's member epochs only; a
    # classic group ignores them, as before.
    member_id: str | None = None
    member_epoch: int = -1


class OffsetFetchResponsePartition(_Msg):
    topic: str
    partition: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str
    error: Errors


class OffsetFetchResponse(_Msg):
    error: Errors
    partitions: list[OffsetFetchResponsePartition]


class OffsetDeleteRequest(_Msg):
    group_id: str
    partitions: list[TopicPartition]


class OffsetDeleteResponsePartition(_Msg):
    topic: str
    partition: int
    error: Errors


class OffsetDeleteResponse(_Msg):
    error: Errors
    partitions: list[OffsetDeleteResponsePartition]


# ---- Admin ----------------------------------------------------------------------------------


class DescribeGroupsRequest(_Msg):
    group_ids: list[str]


class DescribedGroupMember(_Msg):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


class DescribedGroup(_Msg):
    error: Errors
    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: list[DescribedGroupMember]
    generation_id: int
    leader: str


class DescribeGroupsResponse(_Msg):
    groups: list[DescribedGroup]


class ListGroupsRequest(_Msg):
    states_filter: tuple[str, ...] = ()


class ListedGroup(_Msg):
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str = "classic"  # KIP-848: "consumer" for a consumer group (ListGroups v5)


class ListGroupsResponse(_Msg):
    error: Errors
    groups: list[ListedGroup]


class DeleteGroupsRequest(_Msg):
    group_ids: list[str]


class DeletableGroupResult(_Msg):
    group_id: str
    error: Errors


class DeleteGroupsResponse(_Msg):
    results: list[DeletableGroupResult]


REQUEST_TYPES = (
    JoinGroupRequest,
    SyncGroupRequest,
    HeartbeatRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetDeleteRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    DeleteGroupsRequest,
    ConsumerGroupHeartbeatRequest,  # KIP-848 (consumer_messages)
    ConsumerGroupDescribeRequest,
)

_ENCODER = msgspec.msgpack.Encoder()


def validate(request: object) -> _Msg:
    """Return ``request`` if it is a request Struct whose fields all have their declared types.

    Raises ``ValueError`` naming the problem otherwise. Used at trust boundaries (actor calls),
    not on the Shard's hot path. Round-tripping through msgpack is the cheapest way to make
    msgspec check every nested field.
    """
    kind = type(request)
    if kind not in REQUEST_TYPES:
        raise ValueError(f"not a groupcoord request: {kind.__name__}")
    try:
        return msgspec.msgpack.decode(_ENCODER.encode(request), type=kind)
    except (msgspec.ValidationError, TypeError, OverflowError) as exc:
        raise ValueError(f"invalid {kind.__name__}: {exc}") from None
