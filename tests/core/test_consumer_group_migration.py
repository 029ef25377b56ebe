"""Classic members in consumer groups and online migration between the two group types,
after Kafka's GroupMetadataManagerTest classic<->consumer scenarios (rewritten from the facts):
classic JoinGroup/SyncGroup/Heartbeat/LeaveGroup served by a consumer group, an empty group of
either type giving its id to the other, and the migration policy. Every step is checked for
replay equivalence and single ownership by the harness."""

import pytest

from groupcoord.coordinator import (
    ConsumerGroupDescribeRequest,
    CoordinatorConfig,
    Errors,
    GroupState,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
)
from groupcoord.coordinator.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)

from .consumer_harness import ConsumerHarness
from .harness import GROUP, protocols_of, replayed_shard

CLASSIC_SESSION_MS = 3_000


def subscription(topics=("foo", "bar"), owned=()):
    return encode_subscription(Subscription(tuple(topics), None, tuple(owned)))


def classic_join(h, member_id="", topics=("foo", "bar"), owned=(), require_known=False, **kw):
    kw.setdefault("protocols", [("range", subscription(topics, owned))])
    kw.setdefault("session_ms", CLASSIC_SESSION_MS)
    return h.reply(h.join(member_id, require_known=require_known, **kw))


def synced(h, member_id, generation):
    response = h.reply(h.sync(member_id, generation))
    assert response.error == Errors.NONE, response
    assert (response.protocol_type, response.protocol_name) == ("consumer", "range")
    parts = {}
    for topic, p in decode_assignment(response.assignment).partitions:
        parts.setdefault(topic, set()).add(p)
    return parts


def owned_list(parts):
    return [(t, p) for t, ps in sorted(parts.items()) for p in sorted(ps)]


def test_classic_member_joins_a_consumer_group_and_waits_for_released_partitions():
    h = ConsumerHarness()
    h.subscribe("m1")  # takes all 9 partitions of foo and bar
    first = classic_join(h, require_known=True)
    assert first.error == Errors.MEMBER_ID_REQUIRED and first.member_id.startswith("client-")
    assert h.group().group_epoch == 2  # asking for a member id changes nothing
    joined = classic_join(h, first.member_id)
    classic = joined.member_id
    assert joined.error == Errors.NONE
    assert (joined.generation_id, joined.protocol_name, joined.leader, joined.members) == (
        3,
        "range",
        "",
        [],
    )
    group = h.group()
    assert group.group_epoch == 3 and group.members[classic].uses_classic_protocol
    # m1 still owns everything: the classic member gets nothing yet and must wait.
    assert synced(h, classic, 3) == {}
    assert h.heartbeat(classic, 3) == Errors.NONE
    # m1 learns its new target and revokes; the freed partitions are the classic member's.
    target = group.target["m1"]
    h.hb("m1", 2, owned={"foo": range(6), "bar": range(3)})
    h.hb("m1", 2, owned=target)
    assert h.heartbeat(classic, 3) == Errors.REBALANCE_IN_PROGRESS  # released: rejoin
    again = classic_join(h, classic)
    assert (again.error, again.generation_id) == (Errors.NONE, 3)
    mine = synced(h, classic, 3)
    assert {t: frozenset(p) for t, p in mine.items()} == group.target[classic]
    assert sum(map(len, mine.values())) + sum(map(len, target.values())) == 9
    assert h.heartbeat(classic, 3) == Errors.NONE


def test_classic_member_rejoins_when_the_group_epoch_moves_on():
    h = ConsumerHarness()
    h.subscribe("m1", names=["foo"])
    classic = classic_join(h, topics=["foo"]).member_id
    assert synced(h, classic, 3) == {}  # m1 holds foo until it revokes
    h.hb("m1", 2, owned={"foo": range(6)})
    h.hb("m1", 3, owned=h.group().target["m1"])
    h.subscribe("m2", names=["foo"])  # epoch 4
    assert h.heartbeat(classic, 3) == Errors.REBALANCE_IN_PROGRESS
    assert h.reply(h.sync(classic, 3)).error == Errors.REBALANCE_IN_PROGRESS
    rejoined = classic_join(h, classic, topics=["foo"])
    assert rejoined.generation_id == 4
    assert h.heartbeat(classic, 3) == Errors.ILLEGAL_GENERATION
    assert h.reply(h.sync(classic, 2)).error == Errors.ILLEGAL_GENERATION
    assert h.heartbeat("nobody", 4) == Errors.UNKNOWN_MEMBER_ID
    assert h.heartbeat("m1", 3) == Errors.UNKNOWN_MEMBER_ID  # not a classic member


def test_cooperative_classic_member_revokes_through_its_owned_partitions():
    h = ConsumerHarness()
    h.subscribe("m1", names=["zar"])
    classic = classic_join(h).member_id
    held = synced(h, classic, 3)
    assert sum(map(len, held.values())) == 9  # nobody else wants foo and bar
    h.subscribe("m2")  # epoch 4: the classic member must give up part of its partitions
    assert h.heartbeat(classic, 3) == Errors.REBALANCE_IN_PROGRESS
    # Rejoining while still owning everything: it stays in epoch 3 with partitions to revoke.
    still = classic_join(h, classic, owned=owned_list(held))
    assert still.generation_id == 3
    assert h.group().members[classic].assignment.state == "unrevoked_partitions"
    assert h.heartbeat(classic, 3) == Errors.REBALANCE_IN_PROGRESS
    keep = h.group().target[classic]
    done = classic_join(h, classic, owned=owned_list(keep))
    assert done.generation_id == 4
    assert {t: frozenset(p) for t, p in synced(h, classic, 4).items()} == keep


def test_classic_members_leave_and_expire_like_consumer_members():
    h = ConsumerHarness(consumer_group_session_timeout_ms=60_000)
    h.subscribe("m1")
    first = classic_join(h).member_id
    second = classic_join(h).member_id
    assert h.group().group_epoch == 4
    left = h.leave(first, "nobody")
    assert left.error == Errors.NONE
    assert [m.error for m in left.members] == [Errors.NONE, Errors.UNKNOWN_MEMBER_ID]
    assert first not in h.group().members and h.group().group_epoch == 5
    # The classic member's own session timeout applies, not the consumer group's.
    h.hb("m1", 2)
    h.advance(CLASSIC_SESSION_MS)
    assert second not in h.group().members and "m1" in h.group().members


def test_classic_join_refusals_change_nothing():
    h = ConsumerHarness()
    h.subscribe("m1")
    before = len(h.records)
    bad_metadata = h.reply(h.join(protocols=[("range", b"\x00")]))
    assert bad_metadata.error == Errors.INCONSISTENT_GROUP_PROTOCOL
    wrong_type = classic_join(h, protocol_type="connect")
    assert wrong_type.error == Errors.INCONSISTENT_GROUP_PROTOCOL
    as_classic = classic_join(h, "m1")  # a consumer-protocol member cannot join as classic
    assert as_classic.error == Errors.UNKNOWN_MEMBER_ID
    bad_session = classic_join(h, session_ms=1)
    assert bad_session.error == Errors.INVALID_SESSION_TIMEOUT
    classic = classic_join(h, protocols=[("roundrobin", subscription())]).member_id
    no_common = classic_join(h)  # "range" only: no protocol in common with the member above
    assert no_common.error == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.reply(h.sync(classic, 3)).error == Errors.NONE
    assert len(h.records) > before and h.group().group_epoch == 3


def test_classic_join_takes_the_id_of_an_empty_consumer_group():
    h = ConsumerHarness()
    h.subscribe("m1")
    h.commit({("foo", 0): 3}, member_id="m1", generation=2)
    h.hb("m1", -1)
    assert h.group().members == {}
    rid = h.join(protocols=[("range", subscription())], session_ms=CLASSIC_SESSION_MS)
    h.advance_until_answered([rid])  # a classic join phase (the initial rebalance delay)
    response = h.reply(rid)
    assert response.error == Errors.NONE and response.leader == response.member_id
    assert h.shard.consumer_group(GROUP) is None
    assert h.shard.group(GROUP).members.keys() == {response.member_id}
    assert h.committed() == {("foo", 0): 3}  # offsets belong to the id, whatever its type


def test_load_rearms_a_classic_members_own_session():
    h = ConsumerHarness(consumer_group_session_timeout_ms=60_000)
    h.subscribe("m1")
    classic = classic_join(h).member_id
    shard = replayed_shard(h.shard, h.records)
    assert shard.consumer_durable_state() == h.shard.consumer_durable_state()
    shard.on_loaded(h.now)
    shard.update_topics(h.now, {"foo": 6, "bar": 3, "zar": 2})
    shard.on_timer(h.now + CLASSIC_SESSION_MS)
    assert set(shard.consumer_group(GROUP).members) == {"m1"}, classic


def test_migration_policy_is_validated():
    for policy in ("bidirectional", "upgrade", "downgrade", "disabled"):
        assert CoordinatorConfig(consumer_group_migration_policy=policy)
    with pytest.raises(ValueError, match="consumer_group_migration_policy"):
        CoordinatorConfig(consumer_group_migration_policy="sideways")


A_PARTS = {"foo": {0, 1, 2}, "bar": {0, 1}}
B_PARTS = {"foo": {3, 4, 5}, "bar": {2}}


def classic_group(h):
    """Two classic members (ConsumerProtocol metadata) in a Stable classic group, the leader
    having assigned A_PARTS and B_PARTS; returns their ids and the generation."""
    protocols = [("range", subscription())]
    rids = [h.join(protocols=protocols, session_ms=CLASSIC_SESSION_MS) for _ in range(2)]
    h.advance_until_answered(rids)
    a, b = (h.reply(r) for r in rids)
    generation = a.generation_id
    assignments = {
        a.member_id: encode_assignment(Assignment(tuple(owned_list(A_PARTS)))),
        b.member_id: encode_assignment(Assignment(tuple(owned_list(B_PARTS)))),
    }
    h.sync(a.member_id, generation, assignments)
    h.sync(b.member_id, generation)
    assert h.state() == GroupState.STABLE
    return a.member_id, b.member_id, generation


def as_frozen(parts):
    return {t: frozenset(p) for t, p in parts.items()}


def test_upgrade_keeps_classic_members_and_their_partitions():
    h = ConsumerHarness()
    a, b, generation = classic_group(h)
    joined = h.subscribe("m1")
    assert joined.error_code == Errors.NONE
    group = h.group()
    assert group.group_epoch == generation + 1
    assert h.shard.group(GROUP).persisted is None  # the classic record is tombstoned
    for member_id, parts in ((a, A_PARTS), (b, B_PARTS)):
        member = group.members[member_id]
        assert member.uses_classic_protocol
        assert member.assignment.assigned == as_frozen(parts)  # kept, nobody lost a partition
    # m1 waits for what a and b must give up; they learn it from their heartbeats.
    assert joined.assignment.topic_partitions == []
    assert h.heartbeat(a, generation) == Errors.REBALANCE_IN_PROGRESS
    for member_id, parts in ((a, A_PARTS), (b, B_PARTS)):
        keep = group.target[member_id]
        assert classic_join(h, member_id, owned=owned_list(parts)).generation_id == generation
        done = classic_join(h, member_id, owned=owned_list(keep))
        assert done.generation_id == generation + 1
        assert as_frozen(synced(h, member_id, generation + 1)) == keep
    response = h.hb("m1", generation + 1)
    mine = {tp.topic: frozenset(tp.partitions) for tp in response.assignment.topic_partitions}
    assert mine == group.target["m1"] and sum(map(len, mine.values())) == 3
    # ConsumerGroupDescribe tells the classic members from the consumer-protocol one.
    [described] = h.call(ConsumerGroupDescribeRequest([GROUP])).groups
    classic = {m.member_id: m.uses_classic_protocol for m in described.members}
    assert classic == {a: True, b: True, "m1": False}


def test_upgrade_is_refused_when_the_policy_forbids_it():
    for policy in ("downgrade", "disabled"):
        h = ConsumerHarness(consumer_group_migration_policy=policy)
        classic_group(h)
        before = len(h.records)
        response = h.subscribe("m1")
        assert response.error_code == Errors.GROUP_ID_NOT_FOUND
        assert response.error_message == f"Group {GROUP} is not a consumer group."
        assert len(h.records) == before and h.state() == GroupState.STABLE


def test_upgrade_is_refused_for_metadata_that_is_no_consumer_subscription():
    h = ConsumerHarness()
    h.join_stable(1)  # metadata b""
    assert h.subscribe("m1").error_code == Errors.GROUP_ID_NOT_FOUND


def test_static_classic_members_upgrade_restart_and_downgrade():
    h = ConsumerHarness()
    rid = h.join(protocols=[("range", subscription())], instance_id="i1", session_ms=3_000)
    h.advance_until_answered([rid])
    old_id, generation = h.reply(rid).member_id, h.reply(rid).generation_id
    h.sync(old_id, generation, {old_id: encode_assignment(Assignment(owned_list(A_PARTS)))})
    assert h.subscribe("m1").error_code == Errors.NONE  # upgraded, the member stays static
    assert h.group().static_member("i1").member_id == old_id
    # Restarted, it joins without its member id: the new id takes over its partitions.
    fenced = classic_join(h, "client-other", instance_id="i1")
    assert fenced.error == Errors.FENCED_INSTANCE_ID
    new = classic_join(h, instance_id="i1", owned=owned_list(A_PARTS))
    assert new.error == Errors.NONE and new.member_id != old_id
    group = h.group()
    assert old_id not in group.members and group.static_member("i1").member_id == new.member_id
    held = group.members[new.member_id].owned_partitions()
    assert all(held[t] <= as_frozen(A_PARTS)[t] for t in held)
    h.hb("m1", -1)  # downgrade: the classic group knows the instance id
    classic = h.shard.group(GROUP)
    assert classic.members[new.member_id].group_instance_id == "i1"


def test_downgrade_when_the_last_consumer_member_leaves():
    h = ConsumerHarness()
    a, b, generation = classic_group(h)
    h.subscribe("m1")
    epoch = h.group().group_epoch
    h.hb("m1", -1)  # the last consumer-protocol member leaves: the group is classic again
    assert h.shard.consumer_group(GROUP) is None
    classic = h.shard.group(GROUP)
    assert classic.state == GroupState.PREPARING_REBALANCE
    # The epoch it had: Kafka converts instead of bumping it for the leave.
    assert classic.persisted.generation == epoch
    assert (classic.protocol_type, classic.protocol_name) == ("consumer", "range")
    for member_id, parts in ((a, A_PARTS), (b, B_PARTS)):
        assigned = decode_assignment(classic.members[member_id].assignment).partitions
        assert sorted(assigned) == owned_list(parts)
    # A classic member at that generation is told to join again, one at an older is fenced.
    assert h.heartbeat(a, epoch) == Errors.REBALANCE_IN_PROGRESS
    assert h.heartbeat(a, generation) == Errors.ILLEGAL_GENERATION
    # The members join again the classic way and the group settles.
    rids = [h.join(m, protocols=[("range", subscription())]) for m in (a, b)]
    h.advance_until_answered(rids)
    assert {h.reply(r).error for r in rids} == {Errors.NONE}
    assert h.reply(rids[0]).generation_id == epoch + 1


def test_no_downgrade_under_upgrade_policy_or_with_consumer_members_left():
    h = ConsumerHarness(consumer_group_migration_policy="upgrade")
    a, b, _ = classic_group(h)
    h.subscribe("m1")
    h.hb("m1", -1)
    assert set(h.group().members) == {a, b}  # still a consumer group, of classic members
    h = ConsumerHarness(consumer_group_session_timeout_ms=60_000)
    a, b, _ = classic_group(h)
    h.subscribe("m1")
    h.subscribe("m2")
    h.hb("m1", -1)
    assert set(h.group().members) == {a, b, "m2"}  # m2 still speaks the consumer protocol
    h.advance(CLASSIC_SESSION_MS)  # the classic members stop heartbeating: only m2 is left
    assert set(h.group().members) == {"m2"}


def test_classic_member_must_rejoin_and_sync_within_its_rebalance_timeout():
    h = ConsumerHarness(consumer_group_session_timeout_ms=60_000)
    h.subscribe("m1", names=["zar"])
    classic = classic_join(h, rebalance_ms=1_000).member_id
    h.advance(900)
    assert synced(h, classic, 3)  # in time: the sync deadline is met
    h.advance(200)
    assert classic in h.group().members
    h.hb("m1", 3)
    h.subscribe("m2")  # epoch 4: the classic member is told to join again ...
    assert h.heartbeat(classic, 3) == Errors.REBALANCE_IN_PROGRESS
    h.advance(600)
    assert h.heartbeat(classic, 3) == Errors.REBALANCE_IN_PROGRESS  # the first answer's clock
    h.advance(400)  # ... and keeps heartbeating without joining: fenced, its partitions freed
    assert classic not in h.group().members
    # A member that joins but never sends its SyncGroup is fenced the same way.
    silent = classic_join(h, rebalance_ms=1_000).member_id
    assert silent in h.group().members
    h.advance(1_000)
    assert silent not in h.group().members


def test_classic_join_and_leave_wait_for_the_topic_catalog():
    h = ConsumerHarness()
    h.subscribe("m1")
    classic = classic_join(h).member_id
    shard = replayed_shard(h.shard, h.records)
    shard.on_loaded(h.now)  # loaded, but no catalog handed in yet
    join = JoinGroupRequest(
        GROUP, "", "consumer", protocols_of([("range", subscription())]), 3_000, 500
    )
    step = shard.handle(h.now, 1, join)
    assert step.replies[0][1].error == Errors.COORDINATOR_LOAD_IN_PROGRESS and not step.records
    step = shard.handle(h.now, 2, LeaveGroupRequest(GROUP, [MemberIdentity(classic)]))
    assert step.replies[0][1].error == Errors.COORDINATOR_LOAD_IN_PROGRESS and not step.records
    assert classic in shard.consumer_group(GROUP).members


def test_upgrade_counts_the_classic_members_against_the_maximum_size():
    h = ConsumerHarness(consumer_group_max_size=2)
    classic_group(h)  # two members: the group is full once upgraded
    before = len(h.records)
    response = h.subscribe("m1")
    assert response.error_code == Errors.GROUP_MAX_SIZE_REACHED
    assert len(h.records) == before and h.state() == GroupState.STABLE
    h = ConsumerHarness(consumer_group_max_size=1)
    classic_group(h)  # more members than a consumer group may have: no upgrade at all
    assert h.subscribe("m1").error_code == Errors.GROUP_ID_NOT_FOUND
