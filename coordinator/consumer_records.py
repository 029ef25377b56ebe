"""KIP-848's consumer-group records: Kafka's record types 3 to 8 of ``__consumer_offsets``.

Each key names its group as ``group`` (as ``OffsetCommitKey`` and ``GroupMetadataKey`` do, so
storage's compaction finds every record's group the same way); a ``None`` value is a tombstone.
Partitions are named by topic name (see ``consumer_messages``). Fields are only appended, with
defaults. ``records.RECORD_TYPES`` numbers them with Kafka's key versions, so a reader that
predates them skips them.

    3  ConsumerGroupMetadataKey(group)                   -> (epoch)           the group epoch
    4  ConsumerGroupPartitionMetadataKey(group)          -> (topics)          subscribed topics'
                                                                              partition counts
    5  ConsumerGroupMemberMetadataKey(group, member_id)  -> the member's subscription
    6  ConsumerGroupTargetAssignmentMetadataKey(group)   -> (assignment_epoch)
    7  ConsumerGroupTargetAssignmentMemberKey(group, member_id) -> the member's target partitions
    8  ConsumerGroupCurrentMemberAssignmentKey(group, member_id) -> the member's epochs, state,
                                                                    assigned and pending-revocation
                                                                    partitions
"""

from __future__ import annotations

import msgspec


class ConsumerGroupTopicPartitions(msgspec.Struct, frozen=True):
    topic: str
    partitions: tuple[int, ...]


class ConsumerGroupMetadataKey(msgspec.Struct, frozen=True):
    group: str


class ConsumerGroupMetadataValue(msgspec.Struct, frozen=True):
    epoch: int


class ConsumerGroupPartitionMetadataKey(msgspec.Struct, frozen=True):
    group: str


class ConsumerGroupPartitionMetadataTopic(msgspec.Struct, frozen=True):
    topic_name: str
    num_partitions: int


class ConsumerGroupPartitionMetadataValue(msgspec.Struct, frozen=True):
    topics: tuple[ConsumerGroupPartitionMetadataTopic, ...] = ()


class ConsumerGroupMemberMetadataKey(msgspec.Struct, frozen=True):
    group: str
    member_id: str


class ConsumerGroupMemberMetadataValue(msgspec.Struct, frozen=True):
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None


class ConsumerGroupTargetAssignmentMetadataKey(msgspec.Struct, frozen=True):
    group: str


class ConsumerGroupTargetAssignmentMetadataValue(msgspec.Struct, frozen=True):
    assignment_epoch: int


class ConsumerGroupTargetAssignmentMemberKey(msgspec.Struct, frozen=True):
    group: str
    member_id: str


class ConsumerGroupTargetAssignmentMemberValue(msgspec.Struct, frozen=True):
    topic_partitions: tuple[ConsumerGroupTopicPartitions, ...] = ()


class ConsumerGroupCurrentMemberAssignmentKey(msgspec.Struct, frozen=True):
    group: str
    member_id: str


class ConsumerGroupCurrentMemberAssignmentValue(msgspec.Struct, frozen=True):
    member_epoch: int
    previous_member_epoch: int
    state: str  # MemberState's value: "stable", "unrevoked_partitions", "unreleased_partitions"
    assigned_partitions: tuple[ConsumerGroupTopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[ConsumerGroupTopicPartitions, ...] = ()


# record type number -> (key type, value type): Kafka's key versions.
CONSUMER_RECORD_TYPES: dict[int, tuple[type, type]] = {
    3: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    4: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue),
    5: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    6: (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
    7: (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
    8: (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
}
CONSUMER_KEY_TYPES = frozenset(key for key, _ in CONSUMER_RECORD_TYPES.values())

Partitions = dict[str, frozenset[int]]  # topic name -> partition numbers


def to_topic_partitions(partitions: Partitions) -> tuple[ConsumerGroupTopicPartitions, ...]:
    """The record form of an assignment: topics and partitions sorted, empty topics left out."""
    return tuple(
        ConsumerGroupTopicPartitions(topic, tuple(sorted(parts)))
        for topic, parts in sorted(partitions.items())
        if parts
    )


def from_topic_partitions(items: tuple[ConsumerGroupTopicPartitions, ...]) -> Partitions:
    return {item.topic: frozenset(item.partitions) for item in items if item.partitions}
