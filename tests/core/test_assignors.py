"""The four assignors on Kafka's documented examples and test cases, input checks, and codecs.

Properties over generated groups are in test_assignors_properties.py.
"""

import doctest
import importlib

import pytest

from groupcoord.coordinator.assignors import (
    ASSIGNORS,
    MAX_MEMBERS,
    MAX_TOTAL_PARTITIONS,
    RebalanceProtocol,
    get_assignor,
    revocation_plan,
)
from groupcoord.coordinator.assignors.base import java_order
from groupcoord.coordinator.assignors.sticky import decode_user_data, encode_user_data
from groupcoord.coordinator.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
)

NAMES = ("range", "roundrobin", "sticky", "cooperative-sticky")


def sub(*topics, owned=(), generation=-1, user_data=None):
    return Subscription(tuple(topics), user_data, tuple(owned), generation)


def parts(spec: str):
    """'t0p0 t1p2' -> (('t0', 0), ('t1', 2))"""
    return tuple((tp.split("p")[0], int(tp.split("p")[1])) for tp in spec.split())


def assigned(result):
    return {m: a.partitions for m, a in result.items()}


@pytest.mark.parametrize("module", ["range_assignor", "roundrobin", "sticky", "cooperative"])
def test_docstring_examples(module):
    mod = importlib.import_module(f"groupcoord.coordinator.assignors.{module}")
    results = doctest.testmod(mod)
    assert results.attempted > 0 and results.failed == 0


def test_registry():
    assert tuple(ASSIGNORS) == NAMES
    for name in NAMES:
        assert get_assignor(name).name == name
    assert get_assignor("range").supported_protocols == (RebalanceProtocol.EAGER,)
    assert get_assignor("sticky").supported_protocols == (RebalanceProtocol.EAGER,)
    assert get_assignor("cooperative-sticky").supported_protocols == (
        RebalanceProtocol.EAGER,
        RebalanceProtocol.COOPERATIVE,
    )
    assert (int(RebalanceProtocol.EAGER), int(RebalanceProtocol.COOPERATIVE)) == (0, 1)
    with pytest.raises(ValueError, match="unknown assignor 'ranged'.*range, roundrobin"):
        get_assignor("ranged")
    with pytest.raises(TypeError):
        ASSIGNORS["mine"] = ASSIGNORS["range"]


# -- range: Kafka's documentation and RangeAssignorTest ------------------------------------------

RANGE_CASES = [
    # (partitions per topic, member -> topics, expected member -> partitions)
    (
        {"t0": 3, "t1": 3},
        {"C0": ("t0", "t1"), "C1": ("t0", "t1")},
        {"C0": "t0p0 t0p1 t1p0 t1p1", "C1": "t0p2 t1p2"},
    ),
    ({"t": 3}, {"c": ()}, {"c": ""}),  # no topic
    ({}, {"c": ("t",)}, {"c": ""}),  # nonexistent topic
    ({"t": 3}, {"c": ("t",)}, {"c": "tp0 tp1 tp2"}),
    ({"t": 3, "other": 3}, {"c": ("t",)}, {"c": "tp0 tp1 tp2"}),  # only subscribed topics
    ({"t": 1}, {"c1": ("t",), "c2": ("t",)}, {"c1": "tp0", "c2": ""}),
    ({"t": 2}, {"c1": ("t",), "c2": ("t",)}, {"c1": "tp0", "c2": "tp1"}),
    (
        {"t1": 3, "t2": 2},
        {"consumer1": ("t1",), "consumer2": ("t1", "t2"), "consumer3": ("t1",)},
        {"consumer1": "t1p0", "consumer2": "t1p1 t2p0 t2p1", "consumer3": "t1p2"},
    ),
    (
        {"t1": 3, "t2": 3},
        {"consumer1": ("t1", "t2"), "consumer2": ("t1", "t2")},
        {"consumer1": "t1p0 t1p1 t2p0 t2p1", "consumer2": "t1p2 t2p2"},
    ),
    (
        {"t": 8},
        {"b": ("t",), "a": ("t",), "c": ("t",)},  # sorted by id, not order
        {"a": "tp0 tp1 tp2", "b": "tp3 tp4 tp5", "c": "tp6 tp7"},
    ),
]


@pytest.mark.parametrize("counts,topics,expected", RANGE_CASES)
def test_range_kafka_cases(counts, topics, expected):
    result = get_assignor("range").assign(counts, {m: sub(*t) for m, t in topics.items()})
    assert assigned(result) == {m: parts(p) for m, p in expected.items()}


# -- roundrobin: Kafka's documentation and RoundRobinAssignorTest ---------------------------------

ROUNDROBIN_CASES = [
    (
        {"t0": 3, "t1": 3},
        {"C0": ("t0", "t1"), "C1": ("t0", "t1")},
        {"C0": "t0p0 t0p2 t1p1", "C1": "t0p1 t1p0 t1p2"},
    ),
    (
        {"t0": 1, "t1": 2, "t2": 3},
        {"C0": ("t0",), "C1": ("t0", "t1"), "C2": ("t0", "t1", "t2")},
        {"C0": "t0p0", "C1": "t1p0", "C2": "t1p1 t2p0 t2p1 t2p2"},
    ),
    ({"t": 3}, {"c": ()}, {"c": ""}),
    ({"t": 3, "other": 3}, {"c": ("t",)}, {"c": "tp0 tp1 tp2"}),
    ({"t": 1}, {"c1": ("t",), "c2": ("t",)}, {"c1": "tp0", "c2": ""}),
    (
        {"t1": 3, "t2": 2},
        {"consumer1": ("t1",), "consumer2": ("t1", "t2"), "consumer3": ("t1",)},
        {"consumer1": "t1p0", "consumer2": "t1p1 t2p0 t2p1", "consumer3": "t1p2"},
    ),
    (
        {"t1": 3, "t2": 3},
        {"consumer1": ("t1", "t2"), "consumer2": ("t1", "t2")},
        {"consumer1": "t1p0 t1p2 t2p1", "consumer2": "t1p1 t2p0 t2p2"},
    ),
]


@pytest.mark.parametrize("counts,topics,expected", ROUNDROBIN_CASES)
def test_roundrobin_kafka_cases(counts, topics, expected):
    result = get_assignor("roundrobin").assign(counts, {m: sub(*t) for m, t in topics.items()})
    assert assigned(result) == {m: parts(p) for m, p in expected.items()}


def test_member_ids_sort_as_in_java():
    # U+FF5E (BMP) sorts after U+1F600 (a surrogate pair, 0xD83D...) in Java, before it in Python.
    ids = ["\uff5e", "\U0001f600"]
    assert sorted(ids, key=java_order) == ["\U0001f600", "\uff5e"]
    result = get_assignor("range").assign({"t": 2}, {m: sub("t") for m in ids})
    assert result["\U0001f600"].partitions == (("t", 0),)


# -- sticky: the StickyAssignor javadoc's examples and stickiness ---------------------------------

FOUR = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}


@pytest.mark.parametrize("name", ["sticky", "cooperative-sticky"])
def test_sticky_javadoc_example_1(name):
    assignor = get_assignor(name)
    first = assignor.assign(FOUR, {m: sub(*FOUR) for m in ("C0", "C1", "C2")})
    assert assigned(first) == {
        "C0": parts("t0p0 t1p1 t3p0"),
        "C1": parts("t0p1 t2p0 t3p1"),
        "C2": parts("t1p0 t2p1"),
    }
    # C1 leaves: the javadoc's sticky answer, where round robin would move five partitions
    again = {m: sub(*FOUR, owned=first[m].partitions, generation=1) for m in ("C0", "C2")}
    second = assignor.assign(FOUR, again)
    assert assigned(second) == {
        "C0": parts("t0p0 t1p1 t2p0 t3p0"),
        "C2": parts("t0p1 t1p0 t2p1 t3p1"),
    }
    rr = get_assignor("roundrobin").assign(FOUR, again)
    assert assigned(rr)["C0"] == parts("t0p0 t1p0 t2p0 t3p0")


@pytest.mark.parametrize("name", ["sticky", "cooperative-sticky"])
def test_sticky_javadoc_example_2(name):
    assignor = get_assignor(name)
    counts = {"t0": 1, "t1": 2, "t2": 3}
    topics = {"C0": ("t0",), "C1": ("t0", "t1"), "C2": ("t0", "t1", "t2")}
    first = assignor.assign(counts, {m: sub(*t) for m, t in topics.items()})
    assert assigned(first) == {
        "C0": parts("t0p0"),
        "C1": parts("t1p0 t1p1"),
        "C2": parts("t2p0 t2p1 t2p2"),
    }
    # C0 leaves: its partition goes to C1; nothing else moves (round robin moves t1p0, t1p1)
    again = {m: sub(*topics[m], owned=first[m].partitions, generation=1) for m in ("C1", "C2")}
    assert assigned(assignor.assign(counts, again)) == {
        "C1": parts("t0p0 t1p0 t1p1"),
        "C2": parts("t2p0 t2p1 t2p2"),
    }


def test_sticky_member_joins_takes_only_what_balance_requires():
    old = {"A": parts("tp0 tp1 tp2 tp3 tp4"), "B": parts("tp5 tp6 tp7 tp8 tp9")}
    subs = {m: sub("t", owned=p, generation=3) for m, p in old.items()}
    subs["C"] = sub("t")
    result = assigned(get_assignor("sticky").assign({"t": 10}, subs))
    assert set(result["A"]) <= set(old["A"]) and set(result["B"]) <= set(old["B"])
    assert sorted(map(len, result.values())) == [3, 3, 4]


def test_sticky_reads_previous_assignment_from_user_data():
    # An eager member has revoked everything before rejoining: owned_partitions is empty and
    # the previous assignment travels in user_data, as Kafka's StickyAssignor does it.
    sticky = get_assignor("sticky")
    subs = {
        "A": sub("t", user_data=sticky.subscription_user_data(parts("tp2 tp3"), 4)),
        "B": sub("t", user_data=sticky.subscription_user_data(parts("tp0 tp1"), 4)),
    }
    assert assigned(sticky.assign({"t": 4}, subs)) == {"A": parts("tp2 tp3"), "B": parts("tp0 tp1")}
    # round robin-like placement without the user data
    plain = {m: sub("t") for m in subs}
    assert assigned(sticky.assign({"t": 4}, plain))["A"] == parts("tp0 tp2")


def test_newest_generation_wins_and_a_tie_leaves_the_partition_unowned():
    sticky = get_assignor("sticky")
    # B (generation 5) and A (stale generation 4) both claim tp0 and tp1: B keeps them.
    subs = {
        "A": sub("t", owned=parts("tp0 tp1"), generation=4),
        "B": sub("t", owned=parts("tp0 tp1"), generation=5),
    }
    assert assigned(sticky.assign({"t": 4}, subs)) == {"A": parts("tp2 tp3"), "B": parts("tp0 tp1")}
    # A tie at the newest generation is not trusted: with no claims left, the result is the
    # fresh assignment (A: p0 p2), not one that keeps p1 and p3 with either claimant.
    subs = {
        "A": sub("t", owned=parts("tp1 tp3"), generation=5),
        "B": sub("t", owned=parts("tp1 tp3"), generation=5),
    }
    assert assigned(sticky.assign({"t": 4}, subs)) == {"A": parts("tp0 tp2"), "B": parts("tp1 tp3")}


def test_claims_on_missing_or_unsubscribed_partitions_are_ignored():
    subs = {
        "A": sub("t", owned=(("t", 7), ("gone", 0), ("u", 0)), generation=2),
        "B": sub("t", "u", owned=parts("tp0 tp1"), generation=2),
    }
    result = assigned(get_assignor("sticky").assign({"t": 2, "u": 1}, subs))
    assert result == {"A": parts("tp0"), "B": parts("tp1 up0")}


# -- cooperative-sticky and the member's revocation plan ------------------------------------------


def test_cooperative_moves_a_partition_in_two_rebalances():
    coop = get_assignor("cooperative-sticky")
    owned = {"A": parts("tp0 tp1 tp2"), "B": parts("tp3")}
    subs = {m: sub("t", owned=p, generation=7) for m, p in owned.items()}
    first = assigned(coop.assign({"t": 4}, subs))
    assert first == {"A": parts("tp0 tp1"), "B": parts("tp3")}  # tp2 withheld
    plan = revocation_plan(set(owned["A"]), set(first["A"]))
    assert (plan.revoked, plan.added, plan.rejoin_needed) == ({("t", 2)}, set(), True)
    subs = {m: sub("t", owned=p, generation=8) for m, p in first.items()}
    second = assigned(coop.assign({"t": 4}, subs))
    assert second == {"A": parts("tp0 tp1"), "B": parts("tp2 tp3")}
    plan = revocation_plan(set(first["B"]), set(second["B"]))
    assert (plan.revoked, plan.added, plan.rejoin_needed) == (set(), {("t", 2)}, False)
    revoked, added = plan  # unpacks as the (revoked, added) pair
    assert revoked == set() and added == {("t", 2)}


def test_cooperative_withholds_only_what_another_member_claims():
    coop = get_assignor("cooperative-sticky")
    # Stale A and newer B both claim tp0: B keeps it (no needless revocation); A keeps tp1.
    subs = {
        "A": sub("t", owned=parts("tp0 tp1"), generation=1),
        "B": sub("t", owned=parts("tp0"), generation=2),
    }
    assert assigned(coop.assign({"t": 2}, subs)) == {"A": parts("tp1"), "B": parts("tp0")}
    # A and B tie on tp2 at generation 2, so it is unowned and the target gives it to C; but
    # both still claim it, so C only gets it once they have revoked it.
    subs = {
        "A": sub("t", owned=parts("tp2"), generation=2),
        "B": sub("t", owned=parts("tp2"), generation=2),
        "C": sub("t"),
    }
    assert assigned(coop.assign({"t": 3}, subs)) == {"A": parts("tp0"), "B": parts("tp1"), "C": ()}
    assert assigned(get_assignor("sticky").assign({"t": 3}, subs))["C"] == parts("tp2")


def test_revocation_plan_rejects_bad_input():
    with pytest.raises(ValueError, match="owned"):
        revocation_plan("t0", set())
    with pytest.raises(ValueError, match="assigned"):
        revocation_plan(set(), {("t", "0")})
    assert revocation_plan([], []) == (set(), set())


# -- input checks -------------------------------------------------------------------------------

BAD_INPUTS = [
    ({"t": -1}, {"a": sub("t")}, "negative|out of range"),
    ({"t": True}, {"a": sub("t")}, "not an integer"),
    ({"t": 1.0}, {"a": sub("t")}, "not an integer"),
    ({1: 1}, {"a": sub("t")}, "not a string"),
    ([("t", 1)], {"a": sub("t")}, "partitions_per_topic"),
    ({"t": 1}, {"a": ("t",)}, "not a Subscription"),
    ({"t": 1}, [("a", sub("t"))], "subscriptions"),
    ({"t": 1}, {7: sub("t")}, "member id"),
    ({"t": 1}, {"a": Subscription("t")}, "topics"),
    ({"t": 1}, {"a": Subscription(("t",), owned_partitions=(("t", "0"),))}, "owned_partitions"),
    ({"t": 1}, {"a": Subscription(("t",), generation_id="1")}, "generation_id"),
    ({"t": 1}, {"a": Subscription(("t",), user_data="x")}, "user_data"),
    ({"t": MAX_TOTAL_PARTITIONS + 1}, {"a": sub("t")}, "exceed the limit"),
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("counts,subs,message", BAD_INPUTS)
def test_bad_input_is_a_value_error(name, counts, subs, message):
    with pytest.raises(ValueError, match=message):
        get_assignor(name).assign(counts, subs)


def test_too_many_members():
    subs = {f"m{i}": sub("t") for i in range(MAX_MEMBERS + 1)}
    with pytest.raises(ValueError, match="members exceed"):
        get_assignor("range").assign({"t": 1}, subs)


def test_subscription_user_data():
    for name in ("range", "roundrobin", "cooperative-sticky"):
        assert get_assignor(name).subscription_user_data(parts("tp0"), 3) is None
    with pytest.raises(ValueError):
        get_assignor("sticky").subscription_user_data((("t", None),), 3)
    with pytest.raises(ValueError):
        get_assignor("sticky").subscription_user_data((), "3")


# -- codecs -------------------------------------------------------------------------------------


def test_sticky_user_data_layout_is_kafkas():
    data = encode_user_data(parts("tp0 tp1"), 5)
    assert data == (
        b"\x00\x00\x00\x01"
        + b"\x00\x01t"
        + b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x00"
        + b"\x00\x00\x00\x01"
        + b"\x00\x00\x00\x05"
    )
    assert decode_user_data(data) == (parts("tp0 tp1"), 5)
    assert decode_user_data(data[:-4]) == (parts("tp0 tp1"), None)  # V0: no generation
    for broken in (data[:-2], data + b"\x00", b"\x00\x00\x00\x01\x00\x05t", b"\xff\xff\xff\xff"):
        assert decode_user_data(broken) is None


def test_undecodable_user_data_counts_as_no_claim():
    subs = {"A": sub("t", user_data=b"\x01garbage"), "B": sub("t")}
    assert assigned(get_assignor("sticky").assign({"t": 2}, subs)) == {
        "A": parts("tp0"),
        "B": parts("tp1"),
    }


def test_v0_user_data_takes_the_subscriptions_generation():
    # B's V0 claim (no generation inside) at subscription generation 9 beats A's generation 8.
    v0 = encode_user_data(parts("tp0"), 0)[:-4]
    subs = {
        "A": sub("t", owned=parts("tp0"), generation=8),
        "B": sub("t", user_data=v0, generation=9),
    }
    assert assigned(get_assignor("sticky").assign({"t": 2}, subs)) == {
        "A": parts("tp1"),
        "B": parts("tp0"),
    }


@pytest.mark.parametrize("name", NAMES)
def test_assignments_round_trip_through_the_consumer_protocol(name):
    counts = {"t0": 3, "t1": 5, "t2": 2}
    subs = {"a": sub("t0", "t1"), "b": sub("t1", "t2"), "c": sub("t0", "t1", "t2"), "d": sub()}
    for assignment in get_assignor(name).assign(counts, subs).values():
        data = encode_assignment(assignment)
        assert decode_assignment(data) == assignment
        assert isinstance(assignment, Assignment)
