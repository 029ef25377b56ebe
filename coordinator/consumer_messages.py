"""KIP-848's consumer-group APIs as frozen msgspec Structs: ConsumerGroupHeartbeat (v0-v1) and
ConsumerGroupDescribe (v0), beside the classic messages of ``messages.py``.

Names and fields are Kafka's (snake_cased), with one deliberate difference: partitions are named
by topic *name* (``topic``) where Kafka's schema carries a topic id. The core works with names;
the wire layer maps ids to names through the topic catalog. Kafka's nullable fields are ``None``
here, with Kafka's defaults. Fields are only ever appended, with defaults.

Three fields are not in Kafka's request body but in its request context: ``client_id`` and
``client_host`` (as on ``JoinGroupRequest``) and ``api_version``, the request header's version,
which decides who generates the member id (v0: the coordinator, for an empty id at epoch 0;
v1+: the client, and an empty id is INVALID_REQUEST).
"""

from __future__ import annotations

import msgspec

from .errors import Errors

# Kafka's member epochs with a meaning of their own (ConsumerGroupHeartbeatRequest).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class _Msg(msgspec.Struct, frozen=True):
    pass


class ConsumerGroupHeartbeatTopicPartitions(_Msg):
    """A topic's partitions, in a heartbeat's owned partitions or an assignment."""

    topic: str
    partitions: list[int]


class ConsumerGroupHeartbeatRequest(_Msg):
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1  # -1: unchanged
    subscribed_topic_names: list[str] | None = None  # None: unchanged
    subscribed_topic_regex: str | None = None  # None: unchanged; "" clears it (v1)
    server_assignor: str | None = None  # None: unchanged
    # The partitions the member owns; None: unchanged since the last heartbeat.
    topic_partitions: list[ConsumerGroupHeartbeatTopicPartitions] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


class ConsumerGroupHeartbeatAssignment(_Msg):
    topic_partitions: list[ConsumerGroupHeartbeatTopicPartitions]


class ConsumerGroupHeartbeatResponse(_Msg):
    error_code: Errors
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # The member's whole assignment; None when it did not change (and the request was not full).
    assignment: ConsumerGroupHeartbeatAssignment | None = None


class ConsumerGroupDescribeRequest(_Msg):
    group_ids: list[str]
    include_authorized_operations: bool = False


class ConsumerGroupDescribeTopicPartitions(_Msg):
    topic_name: str
    partitions: list[int]


class ConsumerGroupDescribeAssignment(_Msg):
    topic_partitions: list[ConsumerGroupDescribeTopicPartitions]


class ConsumerGroupDescribeMember(_Msg):
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: ConsumerGroupDescribeAssignment
    target_assignment: ConsumerGroupDescribeAssignment
    # A classic member served inside the consumer group (JoinGroup/SyncGroup/Heartbeat).
    uses_classic_protocol: bool = False


class DescribedConsumerGroup(_Msg):
    error_code: Errors
    error_message: str | None
    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: list[ConsumerGroupDescribeMember]
    authorized_operations: int = -(2**31)  # Kafka's "not requested"


class ConsumerGroupDescribeResponse(_Msg):
    groups: list[DescribedConsumerGroup]
