"""The test's own look at a coordinator, through confluent-kafka's admin client (librdkafka):
create a topic, produce to it, describe and list groups and read a group's committed offsets.
Every call is bounded by `ADMIN_TIMEOUT_S`."""

from __future__ import annotations

import uuid

from confluent_kafka import ConsumerGroupTopicPartitions, ConsumerGroupType, Producer
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription, NewTopic

ADMIN_TIMEOUT_S = 30.0


def admin_client(bootstrap: str) -> AdminClient:
    """A new admin client; keep a reference while waiting on its futures (destroying it fails
    them with _DESTROY)."""
    return AdminClient({"bootstrap.servers": bootstrap})


def unique_name(prefix: str) -> str:
    """A topic or group name no other test of the session uses (the broker lives all session)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def create_topic(bootstrap: str, partitions: int) -> str:
    """Create a fresh topic with `partitions` partitions; return its name once created."""
    name = unique_name("topic")
    admin = admin_client(bootstrap)
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)],
        operation_timeout=ADMIN_TIMEOUT_S,
        request_timeout=ADMIN_TIMEOUT_S,
    )
    futures[name].result(timeout=ADMIN_TIMEOUT_S)
    return name


def produce(bootstrap: str, topic: str, values_by_partition: dict[int, list[str]]) -> None:
    """Write each partition's values, in order, and wait until all are acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    try:
        for partition, values in values_by_partition.items():
            for value in values:
                producer.produce(topic, value=value.encode(), partition=partition)
        remaining = producer.flush(ADMIN_TIMEOUT_S)
    finally:
        producer.close()
    assert remaining == 0, f"{remaining} messages not acknowledged in {ADMIN_TIMEOUT_S} s"


def describe_group(bootstrap: str, group: str) -> ConsumerGroupDescription:
    admin = admin_client(bootstrap)
    futures = admin.describe_consumer_groups([group], request_timeout=ADMIN_TIMEOUT_S)
    return futures[group].result(timeout=ADMIN_TIMEOUT_S)


def group_summary(bootstrap: str, group: str) -> str:
    """The group as its coordinator describes it, in one line: state, protocol, and each
    member's id with the partitions it was assigned."""
    described = describe_group(bootstrap, group)
    members = ", ".join(
        f"{m.member_id} {sorted(tp.partition for tp in m.assignment.topic_partitions)}"
        for m in described.members
    )
    return (
        f"group {group} {described.state.name} protocol {described.partition_assignor!r} "
        f"members [{members}]"
    )


def listed_group_types(bootstrap: str, types: set[ConsumerGroupType]) -> dict[str, str]:
    """ListGroups (v5, KIP-848) filtered on group types: {group id: its type's name}."""
    admin = admin_client(bootstrap)
    future = admin.list_consumer_groups(types=types, request_timeout=ADMIN_TIMEOUT_S)
    result = future.result(timeout=ADMIN_TIMEOUT_S)
    return {g.group_id: g.type.name for g in result.valid}


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset of each partition of `topic` that has one."""
    admin = admin_client(bootstrap)
    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=ADMIN_TIMEOUT_S
    )
    result = futures[group].result(timeout=ADMIN_TIMEOUT_S)
    return {
        tp.partition: tp.offset
        for tp in result.topic_partitions
        if tp.topic == topic and tp.offset >= 0
    }
