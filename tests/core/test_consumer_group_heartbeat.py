"""KIP-848 ConsumerGroupHeartbeat scenarios, rewritten from the facts of Kafka's
``GroupMetadataManagerTest`` (consumer-group cases): joining, rebalancing with revocation,
leaving, fencing, static membership, session and rebalance timeouts, metadata changes and
request validation. Every Step is checked for replay equivalence and single ownership
(``consumer_harness``)."""

import pytest
from msgspec.structs import replace

from groupcoord.coordinator import Errors
from groupcoord.coordinator.consumer_messages import ConsumerGroupHeartbeatRequest
from groupcoord.coordinator.consumer_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
)
from groupcoord.coordinator.reconcile import (
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
)

from .consumer_harness import REBALANCE_MS, ConsumerHarness, as_dict
from .harness import GROUP, OTHER_GROUP, Harness

ALL = {"foo": frozenset(range(6)), "bar": frozenset(range(3))}


def record_keys(h, since):
    return [type(r.key) for r in h.records[since:]]


def test_member_joins_empty_group_and_gets_every_partition():
    h = ConsumerHarness()
    start = len(h.records)
    r = h.subscribe("m1")
    assert r.error_code == Errors.NONE
    # A new group starts at epoch 1 (an empty assignment): the first member gets epoch 2, as
    # from Kafka 4.3 (KAFKA-20268).
    assert (r.member_id, r.member_epoch, r.heartbeat_interval_ms) == ("m1", 2, 5_000)
    assert as_dict(r.assignment) == ALL
    assert record_keys(h, start) == [
        ConsumerGroupMemberMetadataKey,
        ConsumerGroupPartitionMetadataKey,
        ConsumerGroupMetadataKey,
        ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupTargetAssignmentMetadataKey,
        ConsumerGroupCurrentMemberAssignmentKey,
    ]
    group = h.group()
    assert (group.group_epoch, group.assignment_epoch, group.state.value) == (2, 2, "Stable")
    assert group.partition_metadata == {"foo": 6, "bar": 3}


def test_heartbeat_without_change_writes_nothing_and_omits_the_assignment():
    h = ConsumerHarness()
    h.subscribe("m1")
    start = len(h.records)
    r = h.hb("m1", 2)
    assert (r.error_code, r.member_epoch, r.assignment) == (Errors.NONE, 2, None)
    assert h.records[start:] == []
    # A full request (rebalance timeout, subscription and owned partitions) gets it again.
    r = h.hb("m1", 2, names=["foo", "bar"], owned=ALL, rebalance_ms=REBALANCE_MS)
    assert as_dict(r.assignment) == ALL


def test_v0_member_id_is_generated_by_the_coordinator():
    h = ConsumerHarness()
    r = h.hb("", 0, names=["foo"], owned={}, rebalance_ms=REBALANCE_MS, api_version=0)
    assert r.error_code == Errors.NONE and r.member_id and r.member_epoch == 2
    assert h.group().members.keys() == {r.member_id}
    # v1: the client names itself, and an empty id is invalid.
    r = h.hb("", 0, names=["foo"], owned={}, rebalance_ms=REBALANCE_MS, api_version=1)
    assert (r.error_code, r.error_message) == (Errors.INVALID_REQUEST, "MemberId can't be empty.")


def test_new_member_triggers_rebalance_with_revocation_before_assignment():
    h = ConsumerHarness()
    h.subscribe("m1")
    r2 = h.subscribe("m2")
    assert r2.member_epoch == 3
    # m2's target partitions are still m1's: it gets none yet and waits for them.
    assert as_dict(r2.assignment) == {}
    assert h.member("m2").assignment.state == UNRELEASED_PARTITIONS
    target1, target2 = h.group().target["m1"], h.group().target["m2"]
    assert sum(len(p) for p in target1.values()) + sum(len(p) for p in target2.values()) == 9
    # m1 must revoke what moved: it stays at epoch 2 until it reports them gone.
    r1 = h.hb("m1", 2, owned=ALL)
    assert r1.member_epoch == 2
    assert as_dict(r1.assignment) == target1
    m1 = h.member("m1").assignment
    assert m1.state == UNREVOKED_PARTITIONS and m1.pending_revocation == target2
    # Still owning them: nothing moves.
    assert h.hb("m1", 2, owned=ALL).member_epoch == 2
    assert h.hb("m2", 3, owned={}).assignment is None  # unchanged: still nothing
    # m1 releases them: it moves to epoch 3, and m2 can take them.
    r1 = h.hb("m1", 2, owned=target1)
    assert r1.member_epoch == 3 and h.member("m1").assignment.state == STABLE
    r2 = h.hb("m2", 3, owned={})
    assert as_dict(r2.assignment) == target2 and r2.member_epoch == 3
    assert h.group().state.value == "Stable"


@pytest.mark.parametrize("first", ["m1", "m2"])
def test_a_newcomer_takes_from_the_member_due_first_and_heartbeats_sooner_meanwhile(first):
    # Not in Kafka (README, "Deliberate differences"): where either old member could give a
    # partition up, the one due to heartbeat first does; and the newcomer, waiting for it, is
    # told to heartbeat every consumer_group_unreleased_heartbeat_interval_ms, not every 5 s.
    h = ConsumerHarness(catalog={"t": 4}, consumer_group_unreleased_heartbeat_interval_ms=200)
    every = {"t": frozenset(range(4))}
    h.subscribe("m1", names=["t"])
    r2 = h.subscribe("m2", names=["t"])
    assert r2.heartbeat_interval_ms == 200  # waiting for m1's partitions
    h.hb("m1", 2, owned=every)
    h.hb("m1", 2, owned=h.group().target["m1"])
    r2 = h.hb("m2", 3, owned={})
    assert r2.heartbeat_interval_ms == 5_000 and h.group().state.value == "Stable"
    second = "m2" if first == "m1" else "m1"
    owned = {m: h.group().target[m] for m in ("m1", "m2")}
    h.now += 1_000
    assert h.hb(first, 3, owned=owned[first]).heartbeat_interval_ms == 5_000
    h.now += 1_000
    h.hb(second, 3, owned=owned[second])
    h.now += 1_000
    r3 = h.subscribe("m3", names=["t"])
    assert as_dict(r3.assignment) == {} and r3.heartbeat_interval_ms == 200
    target = h.group().target
    assert len(target[first]["t"]) == 1 and target[second] == owned[second]  # first gives
    assert target["m3"]["t"] <= owned[first]["t"]
    h.now += 200
    assert h.hb("m3", 4, owned={}).heartbeat_interval_ms == 200  # still not released
    r = h.hb(first, 3, owned=owned[first])  # learns: revokes, then says so
    assert r.heartbeat_interval_ms == 5_000
    h.hb(first, 3, owned=target[first])
    h.now += 200
    r3 = h.hb("m3", 4, owned={})
    assert as_dict(r3.assignment) == target["m3"] and r3.heartbeat_interval_ms == 5_000
    assert h.group().state.value == "Reconciling"  # second learns its epoch at its heartbeat


def test_assignment_interval_batches_joins_into_one_assignor_run():
    # Kafka 4.3 (KIP-1263): the target is recomputed at most once per interval, by the first
    # heartbeat after it; the group is Assigning meanwhile.
    h = ConsumerHarness(consumer_group_assignment_interval_ms=1_000)
    h.subscribe("m1")  # the group's first target: at once
    start = len(h.records)
    r2, r3 = h.subscribe("m2"), h.subscribe("m3")
    assert (r2.member_epoch, r3.member_epoch) == (2, 2)  # the old target's epoch: nothing yet
    assert as_dict(r2.assignment) == as_dict(r3.assignment) == {}
    group = h.group()
    assert (group.group_epoch, group.assignment_epoch, group.state.value) == (4, 2, "Assigning")
    assert ConsumerGroupTargetAssignmentMetadataKey not in record_keys(h, start)
    h.now += 999
    assert h.hb("m1", 2, owned=ALL).member_epoch == 2 and h.group().assignment_epoch == 2
    h.now += 1
    # One assignor run for both joins: one target per member, one target epoch.
    start = len(h.records)
    r1 = h.hb("m1", 2, owned=ALL)
    keys = record_keys(h, start)
    assert keys.count(ConsumerGroupTargetAssignmentMetadataKey) == 1
    assert keys.count(ConsumerGroupTargetAssignmentMemberKey) == 3
    assert h.group().assignment_epoch == 4
    assert sum(len(p) for p in as_dict(r1.assignment).values()) == 3  # keeps a third, revokes


def test_member_leaves_and_bumps_the_group_epoch():
    h = ConsumerHarness()
    h.subscribe("m1")
    h.subscribe("m2")
    start = len(h.records)
    r = h.hb("m2", -1)
    assert (r.error_code, r.member_id, r.member_epoch) == (Errors.NONE, "m2", -1)
    assert record_keys(h, start) == [
        ConsumerGroupCurrentMemberAssignmentKey,
        ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupMemberMetadataKey,
        ConsumerGroupMetadataKey,
    ]
    assert all(r.value is None for r in h.records[start : start + 3])
    assert h.group().group_epoch == 4 and "m2" not in h.group().members
    # m1's next heartbeat computes the target at epoch 4: everything is m1's, as before, so
    # only its epoch moves (an unchanged assignment is not sent).
    r = h.hb("m1", 2, owned=ALL)
    assert (r.member_epoch, r.assignment) == (4, None)
    assert h.member("m1").assignment.assigned == ALL
    assert h.hb("m2", 3).error_code == Errors.UNKNOWN_MEMBER_ID


def test_subscription_change_triggers_new_target_assignment():
    h = ConsumerHarness()
    h.subscribe("m1")
    r = h.hb("m1", 2, names=["foo", "bar", "zar"])
    assert r.member_epoch == 3
    assert as_dict(r.assignment) == {**ALL, "zar": frozenset({0, 1})}
    assert h.group().partition_metadata == {"foo": 6, "bar": 3, "zar": 2}


def test_member_epoch_validation():
    h = ConsumerHarness()
    h.subscribe("m1")
    h.subscribe("m2")
    h.hb("m1", 2, owned=ALL)
    h.hb("m1", 2, owned=h.group().target["m1"])  # m1 now at epoch 3, previous 2
    m1 = h.member("m1").assignment
    assert (m1.member_epoch, m1.previous_member_epoch) == (3, 2)
    greater = h.hb("m1", 4)
    assert greater.error_code == Errors.FENCED_MEMBER_EPOCH
    assert "greater member epoch (4)" in greater.error_message
    # The previous epoch is accepted with a subset of the assignment (a lost response) ...
    ok = h.hb("m1", 2, owned=h.group().target["m1"])
    assert (ok.error_code, ok.member_epoch) == (Errors.NONE, 3)
    # ... not without owned partitions, nor with partitions outside the assignment.
    assert h.hb("m1", 2).error_code == Errors.FENCED_MEMBER_EPOCH
    assert h.hb("m1", 2, owned=ALL).error_code == Errors.FENCED_MEMBER_EPOCH
    # A fenced member rejoins with epoch 0 under its id (KAFKA-19233) and gets its assignment.
    rejoin = h.subscribe("m1")
    assert (rejoin.error_code, rejoin.member_epoch) == (Errors.NONE, 3)
    assert as_dict(rejoin.assignment) == h.group().target["m1"]


def test_unknown_group_and_unknown_member():
    h = ConsumerHarness()
    r = h.hb("m1", 10)
    assert r.error_code == Errors.GROUP_ID_NOT_FOUND
    h.subscribe("m1")
    r = h.hb("m9", 1)
    assert r.error_code == Errors.UNKNOWN_MEMBER_ID
    assert r.error_message == f"Member m9 is not a member of group {GROUP}."
    assert h.hb("m9", -1).error_code == Errors.UNKNOWN_MEMBER_ID


def test_group_max_size():
    h = ConsumerHarness(consumer_group_max_size=2)
    h.subscribe("m1")
    h.subscribe("m2")
    before = len(h.records)
    r = h.subscribe("m3")
    assert r.error_code == Errors.GROUP_MAX_SIZE_REACHED
    assert h.records[before:] == []
    assert h.hb("m2", 3).error_code == Errors.NONE  # members already in are fine


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(group_id=""), "GroupId can't be empty."),
        (dict(instance_id=""), "InstanceId can't be empty."),
        (dict(rack_id=""), "RackId can't be empty."),
        (dict(rebalance_timeout_ms=-1), "RebalanceTimeoutMs must be provided in first request."),
        (dict(topic_partitions=None), "TopicPartitions must be empty when (re-)joining."),
        (
            dict(subscribed_topic_names=[]),
            "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
        ),
        (dict(member_epoch=-3), "MemberEpoch is invalid."),
        (dict(member_epoch=-2, instance_id=None), "InstanceId can't be null."),
        (dict(member_epoch=5, member_id=""), "MemberId can't be empty."),
    ],
)
def test_invalid_requests_change_nothing(fields, message):
    h = ConsumerHarness()
    base = ConsumerGroupHeartbeatRequest(
        GROUP,
        "m1",
        0,
        rebalance_timeout_ms=5000,
        subscribed_topic_names=["foo"],
        topic_partitions=[],
    )
    before = len(h.records)
    r = h.call(replace(base, **fields))
    assert (r.error_code, r.error_message) == (Errors.INVALID_REQUEST, message)
    assert h.records[before:] == [] and h.group() is None


def test_unsupported_assignor_and_invalid_regex():
    h = ConsumerHarness()
    r = h.subscribe("m1", assignor="sticky")
    assert r.error_code == Errors.UNSUPPORTED_ASSIGNOR
    assert r.error_message == (
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    )
    r = h.hb("m1", 0, regex="foo(", owned={}, rebalance_ms=1)
    assert r.error_code == Errors.INVALID_REGULAR_EXPRESSION
    # Kafka's words (RE2/J's description); before: "... expression: b'missing ): foo('."
    assert r.error_message == (
        "SubscribedTopicRegex `foo(` is not a valid regular expression: missing closing )."
    )
    assert h.group() is None
    # RE2 takes a name given to two groups; Kafka (RE2/J) refuses it, and so does the shard.
    r = h.hb("m1", 0, regex="(?P<n>foo)|(?P<n>bar)", owned={}, rebalance_ms=1)
    assert (r.error_code, r.error_message) == (
        Errors.INVALID_REGULAR_EXPRESSION,
        "SubscribedTopicRegex `(?P<n>foo)|(?P<n>bar)` is not a valid regular expression: "
        "duplicate capture group name.",
    )
    assert h.group() is None


def test_regex_subscription_follows_the_catalog():
    h = ConsumerHarness()
    r = h.hb("m1", 0, regex="ba.*", owned={}, rebalance_ms=REBALANCE_MS)
    assert as_dict(r.assignment) == {"bar": frozenset(range(3))}
    # A new matching topic is a metadata change: a new epoch, and the member gets it.
    h.set_topics({"foo": 6, "bar": 3, "zar": 2, "baz": 2})
    assert h.group().group_epoch == 3
    r = h.hb("m1", 2, owned={"bar": {0, 1, 2}})
    assert r.member_epoch == 3
    assert as_dict(r.assignment) == {"bar": frozenset(range(3)), "baz": frozenset({0, 1})}
    # RE2 matches whole names only.
    assert "zbar" not in h.group().partition_metadata


def test_partition_count_change_bumps_subscribed_groups_only():
    h = ConsumerHarness()
    h.subscribe("m1", names=["foo"])
    other = h.subscribe("m1", names=["zar"], group_id=OTHER_GROUP)  # another partition's
    assert other.error_code == Errors.NOT_COORDINATOR
    h.set_topics({"foo": 8, "bar": 3, "zar": 2})
    assert h.group().group_epoch == 3
    r = h.hb("m1", 2, owned={"foo": range(6)})
    assert as_dict(r.assignment) == {"foo": frozenset(range(8))}
    # Topic deleted: the member must give its partitions up before it moves on.
    h.set_topics({"bar": 3})
    r = h.hb("m1", 3, owned={"foo": range(8)})
    assert r.member_epoch == 3 and as_dict(r.assignment) == {}
    assert h.member("m1").assignment.state == UNREVOKED_PARTITIONS
    assert h.hb("m1", 3, owned={}).member_epoch == 4
    assert h.group().partition_metadata == {}


def test_heartbeat_before_the_catalog_is_known_is_retriable():
    h = Harness()
    r = h.call(
        ConsumerGroupHeartbeatRequest(
            GROUP,
            "m1",
            0,
            rebalance_timeout_ms=1,
            subscribed_topic_names=["foo"],
            topic_partitions=[],
        )
    )
    assert r.error_code == Errors.COORDINATOR_LOAD_IN_PROGRESS and r.error_code.retriable


def test_session_timeout_fences_the_member():
    h = ConsumerHarness(consumer_group_session_timeout_ms=45_000)
    h.subscribe("m1")
    h.subscribe("m2")
    h.advance(40_000)
    h.hb("m1", 2, owned=ALL)
    h.hb("m1", 2, owned=h.group().target["m1"])  # revoked: no rebalance deadline left
    h.advance(5_000)  # m2's session (armed at 0) expires; m1's was renewed at 40 s
    assert "m2" not in h.group().members and "m1" in h.group().members
    assert h.group().group_epoch == 4
    assert h.hb("m2", 3).error_code == Errors.UNKNOWN_MEMBER_ID
    h.advance(40_000)
    assert h.group().members == {} and h.group().state.value == "Empty"


def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    h = ConsumerHarness()
    h.subscribe("m1", rebalance_ms=1_000)
    h.subscribe("m2")
    h.hb("m1", 2, owned=ALL)
    assert h.member("m1").assignment.state == UNREVOKED_PARTITIONS
    h.advance(999)
    assert "m1" in h.group().members
    h.hb("m1", 2, owned=ALL)  # heartbeats do not extend the revocation deadline
    h.advance(1)
    assert "m1" not in h.group().members
    # Its partitions are free: m2 gets everything at the next epoch.
    r = h.hb("m2", 3, owned={})
    assert as_dict(r.assignment) == ALL and r.member_epoch == 4


def test_revoking_in_time_cancels_the_rebalance_timeout():
    h = ConsumerHarness()
    h.subscribe("m1", rebalance_ms=1_000)
    h.subscribe("m2")
    h.hb("m1", 1, owned=ALL)
    h.hb("m1", 1, owned=h.group().target["m1"])
    h.advance(2_000)
    assert "m1" in h.group().members


def test_static_member_leaves_with_epoch_minus_two_and_is_replaced():
    h = ConsumerHarness()
    h.subscribe("m1", instance_id="i1")
    h.subscribe("m2", instance_id="i2")
    h.hb("m1", 2, owned=ALL, instance_id="i1")
    h.hb("m1", 2, owned=h.group().target["m1"], instance_id="i1")
    h.hb("m2", 3, owned={}, instance_id="i2")
    assert h.group().state.value == "Stable"
    target2 = h.group().target["m2"]
    epoch = h.group().group_epoch
    r = h.hb("m2", -2, instance_id="i2")
    assert (r.error_code, r.member_id, r.member_epoch) == (Errors.NONE, "m2", -2)
    assert h.member("m2").assignment.assigned == target2  # kept for the new instance
    assert h.group().group_epoch == epoch  # no rebalance
    # The same instance comes back under a new member id: it takes over without a rebalance.
    r = h.subscribe("m2-new", instance_id="i2")
    assert r.error_code == Errors.NONE and r.member_epoch == epoch
    assert as_dict(r.assignment) == target2
    assert "m2" not in h.group().members and h.group().group_epoch == epoch


def test_static_member_rejoining_before_leaving_gets_unreleased_instance_id():
    h = ConsumerHarness()
    h.subscribe("m1", instance_id="i1")
    r = h.subscribe("m1-new", instance_id="i1")
    assert r.error_code == Errors.UNRELEASED_INSTANCE_ID
    assert "cannot join the group because the instance id is owned by m1" in r.error_message


def test_static_member_identity_checks():
    h = ConsumerHarness()
    h.subscribe("m1", instance_id="i1")
    assert h.hb("m1", 1, instance_id="unknown").error_code == Errors.UNKNOWN_MEMBER_ID
    assert h.hb("other", 1, instance_id="i1").error_code == Errors.FENCED_INSTANCE_ID
    assert h.hb("other", -2, instance_id="i1").error_code == Errors.FENCED_INSTANCE_ID
    # A static member leaving with -1 leaves for good.
    assert h.hb("m1", -1, instance_id="i1").member_epoch == -1
    assert h.group().members == {}


def test_static_member_that_left_is_fenced_by_its_session():
    h = ConsumerHarness(consumer_group_session_timeout_ms=10_000)
    h.subscribe("m1", instance_id="i1")
    h.hb("m1", -2, instance_id="i1")
    h.advance(10_000)
    assert h.group().members == {}


def test_uniform_is_default_and_range_on_request():
    h = ConsumerHarness()
    h.subscribe("m1", assignor="range")
    h.subscribe("m2", assignor="range")
    group = h.group()
    assert group.target["m1"] == {"foo": frozenset({0, 1, 2}), "bar": frozenset({0, 1})}
    assert group.target["m2"] == {"foo": frozenset({3, 4, 5}), "bar": frozenset({2})}


def test_a_subscription_larger_than_a_group_record_may_be_is_refused():
    h = ConsumerHarness(group_metadata_max_bytes=2_000)
    names = [f"topic-{i:04d}" for i in range(300)]
    r = h.subscribe("m1", names=names)
    assert (r.error_code, r.error_message) == (
        Errors.INVALID_REQUEST,
        "The subscription is too large.",
    )
    assert h.group() is None
    assert h.subscribe("m1", names=names[:10]).error_code == Errors.NONE


def test_reconciliation_of_three_members_step_by_step():
    # Kafka's reconciliation walk-through, with the (deterministic) range assignor: each member
    # gives partitions up before anyone gets them, one epoch at a time.
    h = ConsumerHarness()

    def step(member_id, epoch, owned):
        r = h.hb(member_id, epoch, owned=owned)
        a = h.member(member_id).assignment
        return r.member_epoch, a.state, a.assigned, a.pending_revocation

    def parts(foo=(), bar=()):
        return {t: frozenset(p) for t, p in (("foo", foo), ("bar", bar)) if p}

    h.subscribe("m1", assignor="range")
    h.subscribe("m2", assignor="range")  # epoch 3: m1 foo 0-2 bar 0-1, m2 foo 3-5 bar 2
    assert h.member("m2").assignment.state == UNRELEASED_PARTITIONS
    assert step("m1", 2, ALL) == (
        2,
        UNREVOKED_PARTITIONS,
        parts(foo={0, 1, 2}, bar={0, 1}),
        parts(foo={3, 4, 5}, bar={2}),
    )
    # m3 joins at epoch 4 (m1 foo 0-1 bar 0, m2 foo 2-3 bar 1, m3 foo 4-5 bar 2): all of its
    # partitions are still m1's.
    r3 = h.subscribe("m3", assignor="range")
    assert (r3.member_epoch, as_dict(r3.assignment)) == (4, {})
    # m1 releases epoch 3's revocations and goes on to revoke epoch 4's.
    assert step("m1", 2, parts(foo={0, 1, 2}, bar={0, 1})) == (
        3,
        UNREVOKED_PARTITIONS,
        parts(foo={0, 1}, bar={0}),
        parts(foo={2}, bar={1}),
    )
    # m2 gets foo 3 (free) but not foo 2 and bar 1 (m1 still holds them).
    assert step("m2", 3, {}) == (4, UNRELEASED_PARTITIONS, parts(foo={3}), {})
    assert step("m3", 4, {}) == (4, STABLE, parts(foo={4, 5}, bar={2}), {})
    assert step("m1", 3, parts(foo={0, 1}, bar={0})) == (4, STABLE, parts(foo={0, 1}, bar={0}), {})
    assert step("m2", 4, parts(foo={3})) == (4, STABLE, parts(foo={2, 3}, bar={1}), {})
    assert h.group().state.value == "Stable"
