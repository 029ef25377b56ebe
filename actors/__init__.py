"""groupcoord.actors: the Ray runtime, the client library and the CLI.

``start()`` / ``connect()`` give a ``Deployment`` (the router handle and its partitions);
``GroupMember`` / ``SyncGroupMember`` are consumer-group members; ``AdminClient`` lists,
describes and deletes groups and resets offsets. ``PartitionRuntime`` is the Ray-free core of a
partition actor (see runtime.py's theory of operation).
"""

from .admin import AdminClient, AdminError, GroupDescription, PartitionStatus
from .assignment import AssignmentPlan, RebalanceListener
from .bootstrap import DEFAULT_NAMESPACE, Deployment, connect, start, stop
from .channel import CoordinatorChannel, CoordinatorUnavailable
from .client import CommitFailedError, GroupMember, GroupMemberError, SyncGroupMember
from .runtime import PartitionRuntime
from .wire_service import WireConfig

__all__ = [
    "AdminClient",
    "AdminError",
    "AssignmentPlan",
    "CommitFailedError",
    "CoordinatorChannel",
    "CoordinatorUnavailable",
    "DEFAULT_NAMESPACE",
    "Deployment",
    "GroupDescription",
    "GroupMember",
    "GroupMemberError",
    "PartitionRuntime",
    "PartitionStatus",
    "RebalanceListener",
    "SyncGroupMember",
    "WireConfig",
    "connect",
    "start",
    "stop",
]
