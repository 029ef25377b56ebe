"""The server-side assignors (``uniform``, ``range``): the interface's promises over seeded
random groups (every subscribed partition to exactly one subscriber, nothing else), balance,
stickiness, and worked examples."""

import random

import pytest
from msgspec.structs import replace

from groupcoord.coordinator.server_assignors import (
    SERVER_ASSIGNORS,
    AssignmentSpec,
    MemberSpec,
    RangeAssignor,
    UniformAssignor,
)


def spec_of(members, topics):
    return AssignmentSpec(
        {m: MemberSpec(frozenset(subs), current) for m, (subs, current) in members.items()},
        topics,
    )


def check_valid(spec, result):
    assert set(result) == set(spec.members)
    owner = {}
    for member_id, topics in result.items():
        for topic, parts in topics.items():
            assert topic in spec.members[member_id].subscribed_topics
            for p in parts:
                assert 0 <= p < spec.topics[topic]
                assert (topic, p) not in owner, (topic, p)
                owner[(topic, p)] = member_id
    wanted = {
        (t, p)
        for t, n in spec.topics.items()
        if any(t in m.subscribed_topics for m in spec.members.values())
        for p in range(n)
    }
    assert set(owner) == wanted


def load(result, member_id):
    return sum(len(p) for p in result[member_id].values())


def random_spec(rng, homogeneous):
    topics = {f"t{i}": rng.randint(1, 12) for i in range(rng.randint(1, 5))}
    names = sorted(topics)
    members = {}
    for i in range(rng.randint(1, 9)):
        subs = names if homogeneous else rng.sample(names, rng.randint(1, len(names)))
        current = {}
        for t in rng.sample(names, rng.randint(0, len(names))):
            current[t] = frozenset(p for p in range(topics[t] + 2) if rng.random() < 0.3)
        members[f"m{i}"] = (subs, current)
    return spec_of(members, topics)


@pytest.mark.parametrize("name", sorted(SERVER_ASSIGNORS))
def test_every_subscribed_partition_has_exactly_one_subscriber(name):
    rng = random.Random(848)
    assignor = SERVER_ASSIGNORS[name]
    for _ in range(300):
        spec = random_spec(rng, homogeneous=rng.random() < 0.5)
        result = assignor.assign(spec)
        check_valid(spec, result)
        assert assignor.assign(spec) == result  # deterministic


def test_uniform_balances_homogeneous_groups_within_one():
    rng = random.Random(1)
    for _ in range(200):
        spec = random_spec(rng, homogeneous=True)
        result = UniformAssignor().assign(spec)
        loads = [load(result, m) for m in spec.members]
        assert max(loads) - min(loads) <= 1


def test_uniform_balances_heterogeneous_groups_where_subscriptions_allow():
    rng = random.Random(2)
    for _ in range(200):
        spec = random_spec(rng, homogeneous=False)
        result = UniformAssignor().assign(spec)
        # No partition could move to a subscriber holding two or more fewer.
        for giver, topics in result.items():
            for topic, parts in topics.items():
                if not parts:
                    continue
                for taker, m in spec.members.items():
                    if topic in m.subscribed_topics:
                        assert load(result, taker) >= load(result, giver) - 1


def test_uniform_is_sticky_when_a_member_joins():
    topics = {"foo": 6, "bar": 3}
    two = spec_of({"a": (topics, {}), "b": (topics, {})}, topics)
    before = UniformAssignor().assign(two)
    three = spec_of(
        {"a": (topics, before["a"]), "b": (topics, before["b"]), "c": (topics, {})}, topics
    )
    after = UniformAssignor().assign(three)
    check_valid(three, after)
    assert [load(after, m) for m in "abc"] == [3, 3, 3]
    moved = sum(len(after[m].get(t, set()) - before[m].get(t, set())) for m in "ab" for t in topics)
    assert moved == 0  # a and b only lose partitions, to c


def test_uniform_example_two_members_two_topics():
    topics = {"foo": 3, "bar": 3}
    result = UniformAssignor().assign(spec_of({"A": (topics, {}), "B": (topics, {})}, topics))
    assert [load(result, m) for m in "AB"] == [3, 3]


def test_range_worked_example():
    # Kafka's range: per topic, contiguous ranges in member order, the first ones one larger.
    topics = {"t1": 3, "t2": 3}
    spec = spec_of({"A": (["t1", "t2"], {}), "B": (["t1", "t2"], {})}, topics)
    assert RangeAssignor().assign(spec) == {
        "A": {"t1": frozenset({0, 1}), "t2": frozenset({0, 1})},
        "B": {"t1": frozenset({2}), "t2": frozenset({2})},
    }
    spec = spec_of({"A": (["t1"], {}), "B": (["t1", "t2"], {}), "C": (["t2"], {})}, topics)
    assert RangeAssignor().assign(spec) == {
        "A": {"t1": frozenset({0, 1})},
        "B": {"t1": frozenset({2}), "t2": frozenset({0, 1})},
        "C": {"t2": frozenset({2})},
    }


def test_no_members_and_unknown_topics():
    assert UniformAssignor().assign(spec_of({}, {"t": 3})) == {}
    spec = spec_of({"A": (["gone"], {"gone": frozenset({0})})}, {"t": 3})
    assert UniformAssignor().assign(spec) == {"A": {}}
    assert RangeAssignor().assign(spec) == {"A": {}}


def fs(*parts):
    return frozenset(parts)


def test_uniform_homogeneous_kafka_examples_first_assignment():
    # Kafka's UniformHomogeneousAssignmentBuilderTest, first assignments.
    # No subscribed topic that exists: nobody gets anything.
    spec = spec_of({"A": ([], {})}, {"topic1": 3})
    assert UniformAssignor().assign(spec) == {"A": {}}
    # Two members, two topics (3 and 2 partitions): 3 and 2, contiguous runs in topic order.
    topics = {"topic1": 3, "topic3": 2}
    spec = spec_of({"A": (topics, {}), "B": (topics, {})}, topics)
    assert UniformAssignor().assign(spec) == {
        "A": {"topic1": fs(0, 1, 2)},
        "B": {"topic3": fs(0, 1)},
    }
    # More members than partitions: one member gets the only partition, the other nothing.
    spec = spec_of({"A": (["topic3"], {}), "B": (["topic3"], {})}, {"topic3": 1})
    assert UniformAssignor().assign(spec) == {"A": {"topic3": fs(0)}, "B": {}}


def test_uniform_homogeneous_kafka_examples_reassignment():
    topics = {"topic1": 3, "topic2": 3}
    # Unbalanced previous assignment (4 and 2): A gives back one partition, B takes it.
    # (Kafka's expected result, partition for partition.)
    spec = spec_of(
        {
            "A": (topics, {"topic1": fs(0, 1), "topic2": fs(0, 1)}),
            "B": (topics, {"topic1": fs(2), "topic2": fs(2)}),
        },
        topics,
    )
    assert UniformAssignor().assign(spec) == {
        "A": {"topic1": fs(0, 1), "topic2": fs(0)},
        "B": {"topic1": fs(2), "topic2": fs(1, 2)},
    }
    # Partitions added (topic1 3 -> 6, topic2 3 -> 5): both keep all they had, 11 = 6 + 5.
    a = {"topic1": fs(0, 2), "topic2": fs(0)}
    b = {"topic1": fs(1), "topic2": fs(1, 2)}
    grown = {"topic1": 6, "topic2": 5}
    result = UniformAssignor().assign(spec_of({"A": (grown, a), "B": (grown, b)}, grown))
    check_valid(spec_of({"A": (grown, a), "B": (grown, b)}, grown), result)
    assert sorted(load(result, m) for m in "AB") == [5, 6]
    for m, before in (("A", a), ("B", b)):
        assert all(parts <= result[m][t] for t, parts in before.items())
    # A member joins the same group: each ends with 2, A and B only give partitions up.
    spec = spec_of({"A": (topics, a), "B": (topics, b), "C": (topics, {})}, topics)
    assert UniformAssignor().assign(spec) == {
        "A": {"topic1": fs(0, 2)},
        "B": {"topic1": fs(1), "topic2": fs(1)},
        "C": {"topic2": fs(0, 2)},
    }
    # A member leaves a group of three: its partitions go to the two that stay.
    spec = spec_of(
        {
            "A": (topics, {"topic1": fs(0), "topic2": fs(0)}),
            "B": (topics, {"topic1": fs(1), "topic2": fs(1)}),
        },
        topics,
    )
    assert UniformAssignor().assign(spec) == {
        "A": {"topic1": fs(0, 2), "topic2": fs(0)},
        "B": {"topic1": fs(1), "topic2": fs(1, 2)},
    }
    # Both unsubscribe from topic1: its partitions are dropped, topic2 is rebalanced.
    spec = spec_of({"A": (["topic2"], a), "B": (["topic2"], b)}, {"topic2": 3})
    assert UniformAssignor().assign(spec) == {
        "A": {"topic2": fs(0)},
        "B": {"topic2": fs(1, 2)},
    }


def test_uniform_homogeneous_keeps_up_to_quota_at_scale():
    # 1,000 members x 10,000 partitions (10 topics), then one more member: balance within one,
    # and every member of the first round keeps all it had up to its new quota.
    topics = {f"t{i}": 1_000 for i in range(10)}
    members = {f"m{i:04d}": (topics, {}) for i in range(1_000)}
    first = UniformAssignor().assign(spec_of(members, topics))
    assert {load(first, m) for m in members} == {10}
    members = {m: (topics, first[m]) for m in members} | {"new": (topics, {})}
    spec = spec_of(members, topics)
    second = UniformAssignor().assign(spec)
    check_valid(spec, second)
    loads = [load(second, m) for m in members]
    assert max(loads) - min(loads) <= 1
    for m in first:
        kept = sum(len(second[m].get(t, fs()) & parts) for t, parts in first[m].items())
        assert kept == load(second, m)  # nothing new: only the newcomer takes partitions
    assert load(second, "new") == 10_000 - sum(load(second, m) for m in first)


def test_uniform_takes_partitions_from_the_members_due_to_heartbeat_soonest():
    # Ten members hold ten partitions each, four partitions are free, an eleventh member joins:
    # 104 = 11 x 9 + 5, so five old members keep ten and five give one up. Among equals, those
    # due to heartbeat soonest give (they learn of it first); a member whose time is unknown
    # (a classic member) counts as due last.
    due: dict[str, int | None] = {f"m{i}": 1_000 + (i * 7) % 10 * 10 for i in range(10)}
    due["m3"] = None
    members = {
        m: MemberSpec(frozenset({"t"}), {"t": frozenset(range(i * 10, i * 10 + 10))}, None, None, d)
        for i, (m, d) in enumerate(due.items())
    }
    members["new"] = MemberSpec(frozenset({"t"}), {}, None, None, 2_000)
    spec = AssignmentSpec(members, {"t": 104})
    result = UniformAssignor().assign(spec)
    check_valid(spec, result)
    by_due = sorted((d, m) for m, d in due.items() if d is not None)
    givers = {m for _, m in by_due[:5]}
    assert {m for m in due if load(result, m) == 9} == givers
    assert {m for m in due if load(result, m) == 10} == set(due) - givers  # m3 among them
    assert load(result, "new") == 9
    for i, m in enumerate(due):  # each keeps its own partitions: nothing else moves
        assert result[m]["t"] <= frozenset(range(i * 10, i * 10 + 10))
    # With no time known, the member id decides, as before.
    plain = {m: replace(s, heartbeat_due_ms=None) for m, s in members.items()}
    result = UniformAssignor().assign(AssignmentSpec(plain, {"t": 104}))
    assert {m for m in due if load(result, m) == 9} == {"m5", "m6", "m7", "m8", "m9"}
