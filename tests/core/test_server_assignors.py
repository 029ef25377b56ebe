"""The server-side assignors (``uniform``, ``range``): the interface's promises over seeded
random groups (every subscribed partition to exactly one subscriber, nothing else), balance,
stickiness, and worked examples."""

import random

import pytest

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
