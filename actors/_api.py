"""The public API of ``groupcoord.actors`` (its ``__init__`` says why it is a module of its own)."""

# The protocols' members (client.py: classic, consumer_member.py: KIP-848) register with
# GroupMember when imported.
from . import client, consumer_member  # noqa: F401
from .admin import AdminClient, AdminError, GroupDescription, PartitionStatus
from .assignment import AssignmentPlan, RebalanceListener
from .bootstrap import DEFAULT_NAMESPACE, Deployment, connect, start, stop
from .channel import CoordinatorChannel, CoordinatorUnavailable
from .end_offsets import (
    EndOffsetsFn,
    end_offsets_source,
    kafka_offsets,
    kafka_offsets_for_times,
    offsets_file,
    python_offsets,
    start_offsets_source,
)
from .http_service import HttpConfig
from .live_lag import LagWindowConfig
from .member import CommitFailedError, GroupMember, GroupMemberError, SyncGroupMember
from .runtime import PartitionRuntime
from .security import ListenerSecurity, UsersFile
from .wire_config import WireConfig

__all__ = [
    "AdminClient",
    "AdminError",
    "AssignmentPlan",
    "CommitFailedError",
    "CoordinatorChannel",
    "CoordinatorUnavailable",
    "DEFAULT_NAMESPACE",
    "Deployment",
    "EndOffsetsFn",
    "GroupDescription",
    "GroupMember",
    "GroupMemberError",
    "HttpConfig",
    "LagWindowConfig",
    "ListenerSecurity",
    "PartitionRuntime",
    "PartitionStatus",
    "RebalanceListener",
    "SyncGroupMember",
    "UsersFile",
    "WireConfig",
    "connect",
    "end_offsets_source",
    "kafka_offsets",
    "kafka_offsets_for_times",
    "offsets_file",
    "python_offsets",
    "start_offsets_source",
    "start",
    "stop",
]
