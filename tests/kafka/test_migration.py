"""Online migration between the classic and the consumer (KIP-848) group protocols, with real
clients over the wire, against each coordinator under test (the `bootstrap` fixture: a real
Kafka broker and groupcoord's listeners, both with the bidirectional migration policy).

- Two classic confluent-kafka (librdkafka) members share a topic; a `group.protocol=consumer`
  member joins the same group: the group becomes a consumer group, the classic members stay in
  it (served through JoinGroup and SyncGroup) and commit, and the three own every partition
  disjointly. When the consumer-protocol member leaves, the group is classic again and the two
  classic members share every partition.
- An empty classic group with committed offsets becomes a consumer group on the first
  consumer-protocol heartbeat, and keeps its offsets.
"""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupType

from tests.kafka.admin import (
    committed_offsets,
    create_topic,
    describe_group,
    listed_group_types,
    unique_name,
)
from tests.kafka.members import wait_until

CLASSIC = "confluent-kafka"
CONSUMER = "confluent-kafka-consumer-protocol"
PARTITIONS = 4
ALL = frozenset(range(PARTITIONS))
REBALANCE_TIMEOUT_S = 60.0

pytestmark = pytest.mark.timeout(300)


def owns_all_disjointly(members) -> bool:
    owned = [m.assignment() for m in members]
    return all(owned) and sum(map(len, owned)) == PARTITIONS and frozenset().union(*owned) == ALL


def group_type(bootstrap: str, group: str) -> str | None:
    """The group's type as ListGroups v5 names it ("CLASSIC", "CONSUMER"), None if unlisted."""
    types = {ConsumerGroupType.CLASSIC, ConsumerGroupType.CONSUMER}
    return listed_group_types(bootstrap, types).get(group)


def test_classic_group_upgrades_for_a_consumer_member_and_downgrades_when_it_leaves(
    bootstrap, members
):
    topic = create_topic(bootstrap, PARTITIONS)
    group = unique_name("migrate")
    classic = [members(CLASSIC, group, topic, "range") for _ in range(2)]
    wait_until(
        lambda: owns_all_disjointly(classic),
        REBALANCE_TIMEOUT_S,
        "two classic members share every partition",
        lambda: [m.assignments for m in classic],
    )
    assert group_type(bootstrap, group) == "CLASSIC"

    joining = members(CONSUMER, group, topic, "uniform")
    everyone = [*classic, joining]
    wait_until(
        lambda: owns_all_disjointly(everyone),
        REBALANCE_TIMEOUT_S,
        "the consumer-protocol member and both classic members share every partition",
        lambda: [m.assignments for m in everyone],
    )
    assert group_type(bootstrap, group) == "CONSUMER"
    description = describe_group(bootstrap, group)
    assert (description.type, len(description.members)) == (ConsumerGroupType.CONSUMER, 3)
    # The classic members are still members: their generation-checked commits are accepted.
    expected = {}
    for offset, member in enumerate(everyone, start=10):
        mine = {p: offset for p in member.assignment()}
        member.commit(mine)
        expected |= mine
    assert committed_offsets(bootstrap, group, topic) == expected

    joining.close()
    wait_until(
        lambda: group_type(bootstrap, group) == "CLASSIC" and owns_all_disjointly(classic),
        REBALANCE_TIMEOUT_S,
        "a classic group again, its two members sharing every partition",
        lambda: (group_type(bootstrap, group), [m.assignments for m in classic]),
    )
    assert committed_offsets(bootstrap, group, topic) == expected


def test_empty_classic_group_with_offsets_becomes_a_consumer_group_and_keeps_them(
    bootstrap, members
):
    topic = create_topic(bootstrap, PARTITIONS)
    group = unique_name("convert")
    first = members(CLASSIC, group, topic, "range")
    wait_until(
        lambda: first.assignment() == ALL,
        REBALANCE_TIMEOUT_S,
        "the classic member owns every partition",
        lambda: first.assignments,
    )
    expected = {p: 100 + p for p in ALL}
    first.commit(expected)
    first.close()
    assert group_type(bootstrap, group) == "CLASSIC"

    joining = members(CONSUMER, group, topic, "uniform")
    wait_until(
        lambda: joining.assignment() == ALL,
        REBALANCE_TIMEOUT_S,
        "the consumer-protocol member owns every partition",
        lambda: joining.assignments,
    )
    assert group_type(bootstrap, group) == "CONSUMER"
    assert joining.committed(set(ALL)) == expected
