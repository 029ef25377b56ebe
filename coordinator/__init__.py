"""groupcoord.coordinator: the sans-IO core (DESIGN.md "The core contract").

Start reading at ``shard.py`` (theory of operation), then ``shard_members.py`` and
``shard_offsets.py`` for the protocol, ``group.py`` for one group's state.
"""

from .config import CoordinatorConfig
from .errors import Errors
from .group import GroupState, IllegalStateTransition
from .messages import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
    JoinGroupResponseMember,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveGroupResponseMember,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    SyncGroupResponse,
    TopicPartition,
)
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from .routing import java_string_hashcode, partition_for, utils_abs
from .shard import Event, SequentialIds, Shard, Step

__all__ = [name for name in dir() if name[0].isupper()] + [
    "java_string_hashcode",
    "partition_for",
    "utils_abs",
]
