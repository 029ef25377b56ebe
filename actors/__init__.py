"""groupcoord.actors: the Ray runtime, the client library and the CLI.

``start()`` / ``connect()`` give a ``Deployment`` (the router handle and its partitions);
``GroupMember`` / ``SyncGroupMember`` are consumer-group members (classic or KIP-848 protocol:
``group_protocol``); ``AdminClient`` lists, describes and deletes groups and resets offsets;
``end_offsets_source`` gives an ``EndOffsetsFn`` (log-end offsets from a JSON file, an upstream
Kafka cluster or Python code) for lag.
``PartitionRuntime`` is the Ray-free core of a partition actor (see runtime.py's theory of
operation). ``WireConfig`` starts Kafka listeners, secured by its ``ListenerSecurity``;
``UsersFile`` manages their SASL users. ``start(http=HttpConfig(...))`` serves live lag over
HTTP: Burrow's v3 API and a web view (http_service.py).
"""

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
