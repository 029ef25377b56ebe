"""Properties of the four assignors over generated groups (hypothesis).

Groups have up to 7 members subscribing to subsets of four topics (plus one the metadata does
not know), claiming arbitrary, possibly conflicting, partitions with arbitrary generations.
"""

from collections import Counter

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from groupcoord.coordinator.assignors import get_assignor, revocation_plan
from groupcoord.coordinator.consumer_protocol import (
    Subscription,
    decode_assignment,
    encode_assignment,
)

TOPICS = ("t0", "t1", "t2", "t3")
EAGER_NAMES = ("range", "roundrobin", "sticky")
NAMES = EAGER_NAMES + ("cooperative-sticky",)
MAX_COOPERATIVE_ROUNDS = 5  # observed: 2 with identical subscriptions (proved), at most 3 else


@st.composite
def groups(draw, identical=False, claims=True):
    counts = draw(st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 9)))
    members = draw(st.lists(st.sampled_from([f"m{i}" for i in range(7)]), unique=True, max_size=7))
    topic_sets = st.lists(st.sampled_from(TOPICS + ("unknown",)), unique=True, max_size=5)
    shared = draw(topic_sets)
    claim_sets = st.lists(
        st.tuples(st.sampled_from(TOPICS + ("unknown",)), st.integers(0, 10)),
        unique=True,
        max_size=12,
    )
    subs = {}
    for member in members:
        topics = shared if identical else draw(topic_sets)
        owned = draw(claim_sets) if claims else []
        subs[member] = Subscription(tuple(topics), None, tuple(owned), draw(st.integers(-1, 4)))
    return counts, subs


def subscribed_partitions(counts, subs):
    return {
        (t, p)
        for t, n in counts.items()
        for p in range(n)
        if any(t in s.topics for s in subs.values())
    }


def holders(result):
    return Counter(tp for assignment in result.values() for tp in assignment.partitions)


def check_eligible(result, subs):
    assert set(result) == set(subs)
    for member, assignment in result.items():
        assert all(tp[0] in subs[member].topics for tp in assignment.partitions)


def check_balanced(result, subs):
    """Kafka's criterion: no member could take a partition from one with 2+ more. In
    particular members with identical subscriptions differ by at most one."""
    count = {m: len(a.partitions) for m, a in result.items()}
    for taker in result:
        for donor, assignment in result.items():
            if count[donor] > count[taker] + 1:
                assert not any(tp[0] in subs[taker].topics for tp in assignment.partitions), (
                    f"{taker} ({count[taker]}) could take from {donor} ({count[donor]})"
                )


def rejoin(result, subs, generation):
    return {
        m: Subscription(s.topics, None, result[m].partitions, generation) for m, s in subs.items()
    }


def run_cooperative(counts, subs):
    """Rebalance until nobody revokes; checks safety each round. Returns (final, rounds)."""
    coop = get_assignor("cooperative-sticky")
    for rounds in range(1, MAX_COOPERATIVE_ROUNDS + 1):
        result = coop.assign(counts, subs)
        check_eligible(result, subs)
        assert max(holders(result).values(), default=1) == 1  # at most once
        for member, assignment in result.items():
            for tp in assignment.partitions:  # handed over only once nobody else holds it
                assert tp in subs[member].owned_partitions or not any(
                    tp in s.owned_partitions for o, s in subs.items() if o != member
                )
        plans = {
            m: revocation_plan(set(subs[m].owned_partitions), set(a.partitions))
            for m, a in result.items()
        }
        if not any(plan.rejoin_needed for plan in plans.values()):
            return result, rounds
        subs = rejoin(result, subs, generation=10 + rounds)
    raise AssertionError(f"no convergence in {MAX_COOPERATIVE_ROUNDS} rounds")


@settings(max_examples=150, deadline=None)
@given(group=groups(), name=st.sampled_from(EAGER_NAMES))
def test_every_subscribed_partition_assigned_exactly_once(group, name):
    counts, subs = group
    result = get_assignor(name).assign(counts, subs)
    check_eligible(result, subs)
    assert holders(result) == Counter(subscribed_partitions(counts, subs))


@settings(max_examples=150, deadline=None)
@given(group=groups())
def test_cooperative_is_safe_and_converges_to_exactly_once(group):
    counts, subs = group
    final, _ = run_cooperative(counts, subs)
    assert holders(final) == Counter(subscribed_partitions(counts, subs))
    check_balanced(final, subs)


@settings(max_examples=100, deadline=None)
@given(group=groups(identical=True))
def test_cooperative_completes_in_two_rebalances_with_identical_subscriptions(group):
    counts, subs = group
    _, rounds = run_cooperative(counts, subs)
    assert rounds <= 2


@settings(max_examples=150, deadline=None)
@given(group=groups())
def test_sticky_is_balanced(group):
    counts, subs = group
    check_balanced(get_assignor("sticky").assign(counts, subs), subs)


@settings(max_examples=100, deadline=None)
@given(group=groups(), name=st.sampled_from(NAMES))
def test_deterministic_whatever_the_member_order(group, name):
    counts, subs = group
    assignor = get_assignor(name)
    forward = assignor.assign(counts, subs)
    backward = assignor.assign(dict(reversed(counts.items())), dict(reversed(subs.items())))
    assert forward == backward


@settings(max_examples=100, deadline=None)
@given(group=groups(claims=False), name=st.sampled_from(("sticky", "cooperative-sticky")))
def test_a_sticky_result_fed_back_is_kept(group, name):
    counts, subs = group
    assignor = get_assignor(name)
    first = assignor.assign(counts, subs)
    assert assignor.assign(counts, rejoin(first, subs, generation=1)) == first


@settings(max_examples=100, deadline=None)
@given(group=groups(identical=True, claims=False), data=st.data())
def test_sticky_member_leaving_moves_only_its_partitions(group, data):
    counts, subs = group
    sticky = get_assignor("sticky")
    assume(subs)
    before = sticky.assign(counts, subs)
    gone = data.draw(st.sampled_from(sorted(subs)))
    rest = {m: s for m, s in rejoin(before, subs, 1).items() if m != gone}
    after = sticky.assign(counts, rest)
    for member in rest:
        assert set(before[member].partitions) <= set(after[member].partitions)


@settings(max_examples=100, deadline=None)
@given(group=groups(identical=True, claims=False))
def test_sticky_member_joining_takes_only_its_share(group):
    counts, subs = group
    assume(subs)
    sticky = get_assignor("sticky")
    before = sticky.assign(counts, subs)
    joined = rejoin(before, subs, 1)
    joined["newcomer"] = Subscription(next(iter(subs.values())).topics)
    after = sticky.assign(counts, joined)
    moved = {tp for m in subs for tp in set(before[m].partitions) - set(after[m].partitions)}
    assert moved == set(after["newcomer"].partitions)  # only moves to the newcomer
    for m in subs:  # and no one else gains
        assert set(after[m].partitions) <= set(before[m].partitions)
    check_balanced(after, joined)


@settings(max_examples=100, deadline=None)
@given(group=groups(), name=st.sampled_from(NAMES))
def test_assignments_round_trip_through_the_codec(group, name):
    counts, subs = group
    for assignment in get_assignor(name).assign(counts, subs).values():
        assert decode_assignment(encode_assignment(assignment)) == assignment


@settings(max_examples=100, deadline=None)
@given(
    owned=st.sets(st.tuples(st.sampled_from(TOPICS), st.integers(0, 5))),
    assigned=st.sets(st.tuples(st.sampled_from(TOPICS), st.integers(0, 5))),
)
def test_revocation_plan_partitions_the_difference(owned, assigned):
    revoked, added = revocation_plan(owned, assigned)
    assert revoked | (owned & assigned) == owned and not revoked & assigned
    assert added | (owned & assigned) == assigned and not added & owned
