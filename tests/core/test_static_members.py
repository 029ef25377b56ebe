"""Static membership (group.instance.id): spec §2.3.1, fencing, leave by instance id."""

from groupcoord.coordinator import Errors, GroupState

from .harness import GROUP, PROTOCOL_SUPERSET, Harness

LEADER, FOLLOWER = "leader-instance", "follower-instance"


def stable_static_group(h: Harness, protocols=PROTOCOL_SUPERSET, session_ms=800):
    # Sessions outlast the 500 ms rebalance timeout, so the two deadlines never coincide.
    ids, gen = h.join_stable(
        2, protocols=protocols, instance_ids=[LEADER, FOLLOWER], session_ms=session_ms
    )
    return ids[0], ids[1], gen


def test_static_member_gets_instance_prefixed_id_and_never_member_id_required():
    h = Harness()
    rid = h.join(instance_id=LEADER, require_known=True)
    assert h.reply(rid) is None  # parked, not MEMBER_ID_REQUIRED
    h.advance(50)
    assert h.reply(rid).member_id.startswith(LEADER + "-")


def test_static_follower_rejoin_with_unknown_id_in_stable_keeps_generation():
    h = Harness()
    leader, follower, gen = stable_static_group(h)
    response = h.reply(h.join(instance_id=FOLLOWER, protocols=PROTOCOL_SUPERSET))
    assert response.error == Errors.NONE and response.generation_id == gen
    assert response.member_id != follower and response.leader == leader
    assert response.skip_assignment is False and response.members == []
    group = h.shard.group(GROUP)
    assert group.state == GroupState.STABLE and response.member_id in group.members
    assert group.persisted.members[1].member_id == response.member_id  # persisted at once
    # The old id is fenced now.
    assert h.heartbeat(follower, gen, instance_id=FOLLOWER) == Errors.FENCED_INSTANCE_ID
    assert h.heartbeat(follower, gen) == Errors.UNKNOWN_MEMBER_ID
    assert h.heartbeat(response.member_id, gen, instance_id=FOLLOWER) == Errors.NONE


def test_static_leader_rejoin_in_stable_gets_skip_assignment_and_members():
    h = Harness()
    leader, follower, gen = stable_static_group(h)
    response = h.reply(h.join(instance_id=LEADER, protocols=PROTOCOL_SUPERSET))
    assert response.generation_id == gen and response.leader == response.member_id
    assert response.skip_assignment is True and len(response.members) == 2


def test_static_rejoin_with_protocol_change_triggers_rebalance():
    h = Harness()
    leader, follower, gen = stable_static_group(h)
    rid = h.join(instance_id=FOLLOWER, protocols=[("roundrobin", b"")])
    assert h.reply(rid) is None
    assert h.state() == GroupState.PREPARING_REBALANCE


def test_static_replacement_fences_parked_join():
    h = Harness()
    leader, follower, gen = stable_static_group(h)
    parked = h.join(member_id=follower, instance_id=FOLLOWER, protocols=[("range", b"v2")])
    assert h.reply(parked) is None  # rebalance started, parked
    h.join(instance_id=FOLLOWER, protocols=[("range", b"v2")])
    assert h.reply(parked).error == Errors.FENCED_INSTANCE_ID
    assert h.reply(parked).member_id == follower


def test_static_replacement_fences_parked_sync_in_completing_rebalance():
    h = Harness()
    a = h.join(instance_id=LEADER)
    b = h.join(instance_id=FOLLOWER)
    h.advance_until_answered([a, b])
    gen, follower = h.reply(b).generation_id, h.reply(b).member_id
    parked_sync = h.sync(follower, gen, instance_id=FOLLOWER)
    assert h.reply(parked_sync) is None
    h.join(instance_id=FOLLOWER)
    assert h.reply(parked_sync).error == Errors.FENCED_INSTANCE_ID
    assert h.state() == GroupState.PREPARING_REBALANCE


def test_static_members_that_do_not_rejoin_are_kept_until_session_expiry():
    h = Harness()
    leader, follower, gen = stable_static_group(h)
    rejoin = h.join(member_id=leader, instance_id=LEADER, protocols=PROTOCOL_SUPERSET)
    h.advance(500)  # rebalance timeout: follower kept
    response = h.reply(rejoin)
    assert response.generation_id == gen + 1
    assert {m.member_id for m in response.members} == {leader, follower}


def test_join_phase_waits_when_only_unjoined_static_members_remain():
    h = Harness()
    leader, follower, gen = stable_static_group(h)
    h.leave((leader, LEADER))  # leave -> PreparingRebalance
    group = h.shard.group(GROUP)
    h.advance(500)  # nobody rejoined: wait again
    assert group.state == GroupState.PREPARING_REBALANCE and follower in group.members
    h.advance(300)  # session expiry removes the follower
    assert group.state == GroupState.EMPTY


def test_wrong_instance_and_member_combinations():
    h = Harness()
    leader, follower, gen = stable_static_group(h)
    assert h.heartbeat(leader, gen, instance_id="unknown-instance") == Errors.UNKNOWN_MEMBER_ID
    assert h.heartbeat(leader, gen, instance_id=FOLLOWER) == Errors.FENCED_INSTANCE_ID
    response = h.reply(h.sync(follower, gen, instance_id=LEADER))
    assert response.error == Errors.FENCED_INSTANCE_ID


def test_leave_by_instance_id_only():
    h = Harness()
    leader, follower, gen = stable_static_group(h)
    response = h.leave(("", FOLLOWER), ("", "nobody"))
    assert [m.error for m in response.members] == [Errors.NONE, Errors.UNKNOWN_MEMBER_ID]
    assert follower not in h.shard.group(GROUP).members


def test_pending_member_id_with_instance_id_is_rejected_without_change():
    h = Harness()
    pending = h.reply(h.join(require_known=True)).member_id
    response = h.reply(h.join(member_id=pending, instance_id="x"))
    assert response.error == Errors.UNKNOWN_SERVER_ERROR
    assert pending in h.shard.group(GROUP).pending_members
