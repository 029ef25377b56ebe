"""Real Python Kafka clients in a consumer group, against each coordinator under test.

The bootstrap address comes from the `bootstrap` fixture (tests/kafka/conftest.py), which is
parametrised over the coordinators: a real Apache Kafka broker and groupcoord's Kafka
listeners; every scenario here runs against both, unchanged.

One scenario, for each client and each assignor it has: a member subscribes and gets every
partition; a second joins and the group rebalances to two disjoint halves; both commit; one
reads back every committed offset; the second leaves and the first gets everything back; the
first leaves and the group is Empty with its offsets kept. And the harness's record of a member's
assignments keeps one that lasted less than one of its polls.
"""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupState

from tests.kafka.admin import (
    committed_offsets,
    create_topic,
    describe_group,
    group_summary,
    unique_name,
)
from tests.kafka.members import client_threads, wait_until

PARTITIONS = 4
ALL = frozenset(range(PARTITIONS))
REBALANCE_TIMEOUT_S = 60.0
# Longer than the second member's whole stay in test_an_assignment_held_within_one_poll_is_kept.
LONG_POLL_MS = 6_000

CASES = [
    ("confluent-kafka", "range"),
    ("confluent-kafka", "roundrobin"),
    ("confluent-kafka", "cooperative-sticky"),
    ("kafka-python", "range"),
    ("kafka-python", "roundrobin"),
    ("kafka-python", "cooperative-sticky"),
    # aiokafka has no cooperative assignor.
    ("aiokafka", "range"),
    ("aiokafka", "roundrobin"),
]

pytestmark = pytest.mark.timeout(300)


def wait_for_group(
    bootstrap: str,
    group: str,
    state: ConsumerGroupState,
    members: int,
    assignor: str | None = None,
) -> None:
    """Wait until one DescribeGroups answer shows ``state`` with ``members`` members and, given
    ``assignor``, names it. The assignor is checked in that same answer: a classic group names
    its protocol only while Stable, and a client may start another rebalance at any time, so a
    second DescribeGroups may find the group rebalancing. (A kafka-python leader that assigned
    before the metadata update its subscribe requested rejoins when that update arrives; against
    groupcoord, which answers a join within milliseconds, 3 groups in 40 did so after a
    DescribeGroups had shown them Stable.)"""

    def reached() -> bool:
        description = describe_group(bootstrap, group)
        return (
            description.state == state
            and len(description.members) == members
            and (assignor is None or description.partition_assignor == assignor)
        )

    wait_until(
        reached,
        REBALANCE_TIMEOUT_S,
        f"group {group} {state.name} with {members}" + (f" by {assignor}" if assignor else ""),
        lambda: group_summary(bootstrap, group),
    )


@pytest.mark.parametrize(("client", "assignor"), CASES, ids=[f"{c}-{a}" for c, a in CASES])
def test_two_members_rebalance_commit_and_leave(bootstrap, members, client, assignor):
    topic = create_topic(bootstrap, PARTITIONS)
    group = unique_name(f"{client}-{assignor}")

    first = members(client, group, topic, assignor)
    wait_until(
        lambda: first.assignment() == ALL,
        REBALANCE_TIMEOUT_S,
        "first member owns all",
        lambda: first.assignments,
    )
    wait_for_group(bootstrap, group, ConsumerGroupState.STABLE, 1, assignor)

    second = members(client, group, topic, assignor)

    def split_in_halves() -> bool:
        mine, theirs = first.assignment(), second.assignment()
        return mine | theirs == ALL and len(mine) == len(theirs) == PARTITIONS // 2

    wait_until(
        split_in_halves,
        REBALANCE_TIMEOUT_S,
        "two disjoint halves",
        # The coordinator's view and the clients' threads too: a kafka-python member has been
        # seen holding every partition for the whole wait, both members reporting ALL.
        lambda: (
            first.assignments,
            second.assignments,
            group_summary(bootstrap, group),
            client_threads(),
        ),
    )
    wait_for_group(bootstrap, group, ConsumerGroupState.STABLE, 2)
    if assignor == "cooperative-sticky":
        # Incremental rebalancing (KIP-429): the first member keeps partitions throughout.
        owned = first.assignments[first.assignments.index(ALL) :]
        assert all(owned), first.assignments

    expected = {p: 100 + p for p in ALL}
    first.commit({p: expected[p] for p in first.assignment()})
    second.commit({p: expected[p] for p in second.assignment()})
    assert first.committed(set(ALL)) == expected

    second.close()
    wait_until(
        lambda: first.assignment() == ALL,
        REBALANCE_TIMEOUT_S,
        "first member owns all again",
        lambda: first.assignments,
    )
    wait_for_group(bootstrap, group, ConsumerGroupState.STABLE, 1)

    first.close()
    wait_for_group(bootstrap, group, ConsumerGroupState.EMPTY, 0)
    assert committed_offsets(bootstrap, group, topic) == expected


def test_an_assignment_held_within_one_poll_is_kept(bootstrap, members):
    # librdkafka runs rebalances inside poll(): while one long poll of the first member runs, a
    # second member joins, takes half its partitions (cooperative-sticky: given up first) and
    # leaves, and the first takes them back. Read only after each poll, its assignment was ALL
    # before and after; the half it held meanwhile was missed (a mixed-group test failed so).
    topic = create_topic(bootstrap, PARTITIONS)
    group = unique_name("one-poll")
    first = members(
        "confluent-kafka", group, topic, "cooperative-sticky", poll_timeout_ms=LONG_POLL_MS
    )
    wait_until(
        lambda: first.assignment() == ALL,
        REBALANCE_TIMEOUT_S,
        "first member owns all",
        lambda: first.assignments,
    )
    second = members("confluent-kafka", group, topic, "cooperative-sticky")
    wait_until(
        lambda: len(second.assignment()) == PARTITIONS // 2,
        REBALANCE_TIMEOUT_S,
        "second member owns half",
        lambda: second.assignments,
    )
    taken = second.assignment()
    second.close()
    wait_for_group(bootstrap, group, ConsumerGroupState.STABLE, 1)
    assert first.call("assignment") == ALL  # answered after the poll that ran meanwhile
    history = first.assignments
    assert history[0] == ALL and ALL - taken in history and history[-1] == ALL, history
