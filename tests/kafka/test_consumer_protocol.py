"""KIP-848 (`group.protocol=consumer`) with a real client, against each coordinator under test.

confluent-kafka (librdkafka 2.x) consumers speak ConsumerGroupHeartbeat to the `bootstrap`
fixture's coordinator (a real Kafka broker and groupcoord's listeners, side by side): three
members subscribe and the server-side assignor splits six partitions among them; each commits
its own partitions (OffsetCommit with its member epoch) and one reads them all back (OffsetFetch
v9); the admin client describes the group through ConsumerGroupDescribe (its type, its members'
assignments) and lists it by type (ListGroups v5); a member leaves and the two left take its
partitions; when all have left, the committed offsets are kept.
"""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupType

from tests.kafka.admin import (
    committed_offsets,
    create_topic,
    describe_group,
    group_summary,
    listed_group_types,
    unique_name,
)
from tests.kafka.members import wait_until

CLIENT = "confluent-kafka-consumer-protocol"
PARTITIONS = 6
ALL = frozenset(range(PARTITIONS))
REBALANCE_TIMEOUT_S = 60.0

pytestmark = pytest.mark.timeout(300)


def split(members, parts: int) -> bool:
    """Whether ``members`` own every partition between them, disjointly, ``parts`` each."""
    owned = [m.assignment() for m in members]
    return frozenset().union(*owned) == ALL and all(len(o) == parts for o in owned)


def test_three_members_share_commit_and_one_leaves(bootstrap, members):
    topic = create_topic(bootstrap, PARTITIONS)
    group = unique_name("kip848")
    trio = [members(CLIENT, group, topic, "uniform") for _ in range(3)]

    wait_until(
        lambda: split(trio, PARTITIONS // 3),
        REBALANCE_TIMEOUT_S,
        "three members with two partitions each",
        lambda: [m.assignments for m in trio],
    )

    def described_stable() -> bool:
        description = describe_group(bootstrap, group)
        return description.state == ConsumerGroupState.STABLE and len(description.members) == 3

    wait_until(described_stable, REBALANCE_TIMEOUT_S, "group Stable with 3 members")
    description = describe_group(bootstrap, group)
    assert description.type == ConsumerGroupType.CONSUMER
    assert description.partition_assignor == "uniform"
    described = {
        frozenset(tp.partition for tp in m.assignment.topic_partitions) for m in description.members
    }
    assert described == {m.assignment() for m in trio}
    # ListGroups v5 filters on the group's type.
    assert listed_group_types(bootstrap, {ConsumerGroupType.CONSUMER}).get(group) == "CONSUMER"
    assert group not in listed_group_types(bootstrap, {ConsumerGroupType.CLASSIC})

    expected = {p: 1_000 + p for p in ALL}
    for member in trio:
        member.commit({p: expected[p] for p in member.assignment()})
    assert trio[0].committed(set(ALL)) == expected

    leaving, *staying = trio
    leaving.close()
    wait_until(
        lambda: split(staying, PARTITIONS // 2),
        REBALANCE_TIMEOUT_S,
        "the two left own every partition",
        lambda: [m.assignments for m in staying],
    )
    for member in staying:
        member.close()
    wait_until(
        lambda: describe_group(bootstrap, group).state == ConsumerGroupState.EMPTY,
        REBALANCE_TIMEOUT_S,
        "group Empty",
        lambda: group_summary(bootstrap, group),
    )
    assert committed_offsets(bootstrap, group, topic) == expected
