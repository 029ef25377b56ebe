"""JoinGroup, SyncGroup and the join phase (spec §2.3, §2.4, §4.2–4.4, §5), in Kafka's test
style."""

from groupcoord.coordinator import DescribeGroupsRequest, Errors, GroupState, JoinGroupRequest

from .harness import (
    GROUP,
    GROUP2,
    GROUP3,
    OTHER_GROUP,
    PROTOCOL_SUPERSET,
    PROTOCOLS,
    REBALANCE_MS,
    SESSION_MS,
    Harness,
    protocols_of,
)


def test_join_wrong_coordinator():
    h = Harness()
    rid = h.join(group_id=OTHER_GROUP)
    assert h.reply(rid).error == Errors.NOT_COORDINATOR
    assert h.reply(rid).generation_id == -1 and h.reply(rid).protocol_type is None


def test_join_invalid_group_id_and_session_bounds():
    h = Harness()
    assert h.reply(h.join(group_id="")).error == Errors.INVALID_GROUP_ID
    assert h.reply(h.join(session_ms=9)).error == Errors.INVALID_SESSION_TIMEOUT
    assert h.reply(h.join(session_ms=600_001)).error == Errors.INVALID_SESSION_TIMEOUT
    assert h.shard.group(GROUP) is None  # checked before the group is created
    ok = h.join(session_ms=10)  # bounds are inclusive
    h.advance(50)
    assert h.reply(ok).error == Errors.NONE


def test_join_unknown_member_new_group_is_not_created():
    h = Harness()
    rid = h.join(member_id="memberId")
    assert h.reply(rid).error == Errors.UNKNOWN_MEMBER_ID
    assert h.reply(rid).member_id == "memberId"
    assert h.shard.group(GROUP) is None


def test_valid_join_first_member_is_leader_and_gets_member_list():
    h = Harness()
    rid = h.join(protocols=[("range", b"meta")])
    assert h.reply(rid) is None  # initial rebalance delay
    h.advance(49)
    assert h.reply(rid) is None
    h.advance(1)  # fires at now >= deadline
    response = h.reply(rid)
    assert response.error == Errors.NONE
    assert response.generation_id == 1 and response.leader == response.member_id
    assert response.protocol_type == "consumer" and response.protocol_name == "range"
    assert [m.metadata for m in response.members] == [b"meta"]
    assert response.member_id.startswith("client-")
    assert h.state() == GroupState.COMPLETING_REBALANCE


def test_a_zero_initial_delay_completes_at_once_on_the_test_timer():
    # Kafka's test timer (which the ported scenarios use) runs a timer armed with no delay
    # before the call returns: the first member forms generation 1 alone.
    h = Harness(group_initial_rebalance_delay_ms=0)
    first = h.join()
    assert h.reply(first).generation_id == 1 and len(h.reply(first).members) == 1
    second = h.join()
    assert h.reply(second) is None  # a new member: generation 1 is rebalanced at once
    assert h.state() == GroupState.PREPARING_REBALANCE


def test_a_zero_initial_delay_takes_every_join_before_the_next_timer_poll():
    # immediate_timers=False (the actors): as in Kafka's running coordinator, a timer due now
    # acts after the requests already received, so members joining together form one
    # generation instead of one member's generation and a rebalance.
    h = Harness(group_initial_rebalance_delay_ms=0, immediate_timers=False)
    joins = [h.join() for _ in range(3)]
    assert all(h.reply(j) is None for j in joins)
    assert h.shard.next_deadline_ms() == h.now  # due: the runtime polls at once
    h.advance(0)
    answers = [h.reply(j) for j in joins]
    assert {a.generation_id for a in answers} == {1}
    assert len(answers[0].members) == 3 and answers[0].leader == answers[0].member_id
    assert h.state() == GroupState.COMPLETING_REBALANCE


def test_member_id_required_then_join_with_id():
    h = Harness()
    first = h.reply(h.join(require_known=True))
    assert first.error == Errors.MEMBER_ID_REQUIRED and first.member_id
    assert h.state() == GroupState.EMPTY
    rid = h.join(member_id=first.member_id, require_known=True)
    h.advance(50)
    assert h.reply(rid).error == Errors.NONE and h.reply(rid).member_id == first.member_id


def test_pending_member_blocks_join_completion_until_it_expires():
    h = Harness()
    ids, gen = h.join_stable(1)
    pending = h.reply(h.join(require_known=True)).member_id
    rejoin = h.join(member_id=ids[0])  # leader rejoins: rebalance
    assert h.state() == GroupState.PREPARING_REBALANCE
    assert h.reply(rejoin) is None  # blocked by the pending member
    h.advance(SESSION_MS)  # pending member expires
    assert h.reply(rejoin).error == Errors.NONE
    assert h.reply(rejoin).generation_id == gen + 1
    assert pending not in h.shard.group(GROUP).pending_members


def test_pending_member_joins_and_completes_the_phase():
    h = Harness()
    ids, gen = h.join_stable(1)
    pending = h.reply(h.join(require_known=True)).member_id
    rejoin = h.join(member_id=ids[0])
    second = h.join(member_id=pending)
    assert h.reply(rejoin).error == Errors.NONE and h.reply(second).error == Errors.NONE
    assert h.reply(rejoin).generation_id == gen + 1
    assert len(h.reply(rejoin).members) == 2


def test_group_max_size_rejects_fifth_member():
    h = Harness()
    rids = [h.join() for _ in range(5)]
    assert h.reply(rids[4]).error == Errors.GROUP_MAX_SIZE_REACHED  # rejected at once
    h.advance(50)
    h.advance(50)  # the others joined in the first window
    errors = [h.reply(r).error for r in rids]
    assert errors.count(Errors.NONE) == 4
    assert errors[4] == Errors.GROUP_MAX_SIZE_REACHED and h.reply(rids[4]).member_id == ""


def test_inconsistent_protocol_type_and_protocols():
    h = Harness()
    h.join_stable(1, protocols=PROTOCOL_SUPERSET)
    rid = h.join(protocol_type="connect")
    assert h.reply(rid).error == Errors.INCONSISTENT_GROUP_PROTOCOL
    rid = h.join(protocols=[("sticky", b"")])
    assert h.reply(rid).error == Errors.INCONSISTENT_GROUP_PROTOCOL
    assert (
        h.reply(h.join(protocol_type="", group_id=GROUP2)).error
        == Errors.INCONSISTENT_GROUP_PROTOCOL
    )
    assert (
        h.reply(h.join(protocols=[], group_id=GROUP3)).error == Errors.INCONSISTENT_GROUP_PROTOCOL
    )


def test_protocol_vote():
    h = Harness()
    a = h.join(protocols=[("range", b""), ("roundrobin", b"")])
    b = h.join(protocols=[("roundrobin", b""), ("range", b"")])
    c = h.join(protocols=[("roundrobin", b""), ("range", b"")])
    h.advance_until_answered([a, b, c])
    assert {h.reply(r).protocol_name for r in (a, b, c)} == {"roundrobin"}


def test_vote_chooses_compatible_protocol():
    h = Harness()
    a = h.join(protocols=[("range", b""), ("roundrobin", b"")])
    b = h.join(protocols=[("roundrobin", b""), ("blah", b"")])
    h.advance_until_answered([a, b])
    assert h.reply(a).protocol_name == h.reply(b).protocol_name == "roundrobin"


def test_sync_errors():
    h = Harness()
    assert h.reply(h.sync("m", 1, group_id=OTHER_GROUP)).error == Errors.NOT_COORDINATOR
    assert h.reply(h.sync("m", 1)).error == Errors.UNKNOWN_MEMBER_ID
    ids, gen = h.join_stable(1)
    assert h.reply(h.sync("unknown", gen)).error == Errors.UNKNOWN_MEMBER_ID
    assert h.reply(h.sync(ids[0], gen + 1)).error == Errors.ILLEGAL_GENERATION
    ok = h.reply(h.sync(ids[0], gen))  # Stable: immediate, current assignment
    assert ok.error == Errors.NONE and ok.assignment == ids[0].encode()


def test_sync_follower_waits_for_leader_and_missing_members_get_empty_assignment():
    h = Harness()
    a, b = h.join(), h.join()
    h.advance_until_answered([a, b])
    leader, follower = h.reply(a), h.reply(b)
    gen = leader.generation_id
    f = h.sync(follower.member_id, gen)
    assert h.reply(f) is None
    lead = h.sync(leader.member_id, gen, {leader.member_id: b"L"})
    assert h.reply(lead).assignment == b"L"
    assert h.reply(f).error == Errors.NONE and h.reply(f).assignment == b""
    assert h.reply(f).protocol_name == "range" and h.state() == GroupState.STABLE


def test_sync_in_preparing_rebalance_and_heartbeat_states():
    h = Harness()
    ids, gen = h.join_stable(2)
    h.join(member_id=ids[0])  # leader rejoin -> PreparingRebalance
    assert h.reply(h.sync(ids[1], gen)).error == Errors.REBALANCE_IN_PROGRESS
    assert h.heartbeat(ids[1], gen) == Errors.REBALANCE_IN_PROGRESS
    assert h.heartbeat(ids[1], gen + 5) == Errors.ILLEGAL_GENERATION
    assert h.heartbeat("nobody", gen) == Errors.UNKNOWN_MEMBER_ID
    assert h.heartbeat("nobody", gen, group_id="unknown-group") == Errors.UNKNOWN_MEMBER_ID


def test_unchanged_follower_join_in_stable_does_not_rebalance():
    h = Harness()
    ids, gen = h.join_stable(2)
    response = h.reply(h.join(member_id=ids[1]))
    assert response.error == Errors.NONE and response.generation_id == gen
    assert response.members == [] and response.leader == ids[0]
    assert h.state() == GroupState.STABLE


def test_leader_join_in_stable_rebalances_immediately_when_alone():
    h = Harness()
    ids, gen = h.join_stable(1)
    response = h.reply(h.join(member_id=ids[0]))
    assert response.generation_id == gen + 1 and response.members
    assert h.state() == GroupState.COMPLETING_REBALANCE


def test_rejoin_in_completing_rebalance_with_same_metadata_gets_current_generation():
    h = Harness()
    a, b = h.join(), h.join()
    h.advance_until_answered([a, b])
    gen = h.reply(a).generation_id
    again = h.reply(h.join(member_id=h.reply(b).member_id))
    assert again.generation_id == gen and again.members == []
    leader_again = h.reply(h.join(member_id=h.reply(a).member_id))
    assert len(leader_again.members) == 2
    assert h.state() == GroupState.COMPLETING_REBALANCE


def test_rebalance_removes_dynamic_members_that_do_not_rejoin():
    h = Harness()
    ids, gen = h.join_stable(2)
    rejoin = h.join(member_id=ids[0])
    assert h.heartbeat(ids[1], gen) == Errors.REBALANCE_IN_PROGRESS
    h.advance(REBALANCE_MS)
    response = h.reply(rejoin)
    assert response.generation_id == gen + 1 and [m.member_id for m in response.members] == [ids[0]]
    assert ids[1] not in h.shard.group(GROUP).members


def test_leader_that_does_not_rejoin_loses_leadership():
    h = Harness()
    ids, gen = h.join_stable(2)
    follower_rejoin = h.join(member_id=ids[1], protocols=[("range", b"changed")])
    h.advance(REBALANCE_MS)
    response = h.reply(follower_rejoin)
    assert response.leader == ids[1] and response.generation_id == gen + 1


def test_second_join_from_same_member_drops_the_first():
    h = Harness()
    ids, gen = h.join_stable(2)
    first = h.join(member_id=ids[1], protocols=[("range", b"x")])
    second = h.join(member_id=ids[1], protocols=[("range", b"x")])
    assert first in h.dropped
    h.join(member_id=ids[0])
    assert h.reply(first) is None and h.reply(second).error == Errors.NONE


def test_initial_rebalance_delay_extends_while_members_arrive():
    h = Harness(group_initial_rebalance_delay_ms=50)
    first = h.join(rebalance_ms=500)
    h.advance(40)
    second = h.join()
    h.advance(10)  # t=50: someone joined, extend to 100
    assert h.reply(first) is None
    h.advance(50)  # t=100: nobody new in the last window
    assert h.reply(first).error == Errors.NONE and h.reply(second).error == Errors.NONE


def test_initial_rebalance_delay_is_capped_by_rebalance_timeout():
    h = Harness(group_initial_rebalance_delay_ms=50)
    first = h.join(rebalance_ms=100)
    for _ in range(2):  # someone joins in every window
        h.advance(25)
        h.join()
        h.advance(25)
    assert h.now == 100 and h.reply(first).error == Errors.NONE  # capped at the 100 ms RT


def test_zero_initial_delay_completes_within_the_same_call():
    h = Harness(group_initial_rebalance_delay_ms=0)
    rid = h.join()
    assert h.reply(rid).error == Errors.NONE


def test_new_member_join_timeout_removes_stuck_new_member():
    # Kafka's testNewMemberJoinExpiration: a protracted rebalance waits for the first member.
    h = Harness()
    session_ms, rebalance_ms = 305_000, 600_000
    first = h.join(session_ms=session_ms, rebalance_ms=rebalance_ms)
    h.advance(50)
    first_id = h.reply(first).member_id
    newcomer = h.join(session_ms=session_ms, rebalance_ms=rebalance_ms)
    group = h.shard.group(GROUP)
    assert len(group.members) == 2 and sum(m.is_new for m in group.members.values()) == 1
    h.advance(300_000)
    assert h.reply(newcomer).error == Errors.UNKNOWN_MEMBER_ID
    assert h.reply(newcomer).member_id == ""
    assert list(group.members) == [first_id]


def test_new_member_timeout_no_longer_applies_after_the_join_phase():
    h = Harness()
    session_ms = 305_000
    rid = h.join(session_ms=session_ms)
    h.advance(50)
    member_id = h.reply(rid).member_id
    h.sync(member_id, 1, {member_id: b""})
    group = h.shard.group(GROUP)
    h.advance(300_100)
    assert member_id in group.members
    h.advance(session_ms)
    assert member_id not in group.members


def test_pending_sync_expiry_evicts_members_that_never_sync():
    h = Harness()
    a, b = h.join(session_ms=2_000), h.join(session_ms=2_000)
    h.advance_until_answered([a, b])
    leader, follower = h.reply(a), h.reply(b)
    gen = leader.generation_id
    h.sync(leader.member_id, gen, {leader.member_id: b"x"})
    assert h.state() == GroupState.STABLE
    h.advance(REBALANCE_MS)  # follower never synced
    group = h.shard.group(GROUP)
    assert follower.member_id not in group.members
    assert group.state == GroupState.PREPARING_REBALANCE


def test_pending_sync_does_not_expire_when_everyone_synced():
    h = Harness()
    ids, gen = h.join_stable(2)
    for _ in range(4):
        h.advance(REBALANCE_MS // 2)
        assert h.heartbeat(ids[0], gen) == Errors.NONE
        assert h.heartbeat(ids[1], gen) == Errors.NONE
    assert h.state() == GroupState.STABLE


def test_session_expiry_and_heartbeat_keeps_member():
    h = Harness()
    ids, gen = h.join_stable(2)
    h.advance(SESSION_MS - 1)
    assert h.heartbeat(ids[0], gen) == Errors.NONE
    h.advance(1)  # ids[1] expires at exactly SESSION_MS
    group = h.shard.group(GROUP)
    assert ids[1] not in group.members and ids[0] in group.members
    assert h.heartbeat(ids[0], gen) == Errors.REBALANCE_IN_PROGRESS


def test_member_parked_in_join_is_not_expired_by_session():
    h = Harness()
    ids, gen = h.join_stable(2)
    rejoin_a = h.join(member_id=ids[0], rebalance_ms=5_000)
    rejoin_b = h.join(member_id=ids[1], rebalance_ms=5_000)
    assert h.reply(rejoin_a).generation_id == gen + 1 == h.reply(rejoin_b).generation_id


def test_leave_group_batch_and_errors():
    h = Harness()
    ids, gen = h.join_stable(2)
    response = h.leave(ids[1], "nobody", group_id=GROUP)
    assert response.error == Errors.NONE
    assert [m.error for m in response.members] == [Errors.NONE, Errors.UNKNOWN_MEMBER_ID]
    assert h.state() == GroupState.PREPARING_REBALANCE
    assert h.leave("x", group_id=OTHER_GROUP).error == Errors.NOT_COORDINATOR
    unknown = h.leave("x", group_id=GROUP2)
    assert unknown.error == Errors.NONE and unknown.members[0].error == Errors.UNKNOWN_MEMBER_ID


def test_last_member_leaving_empties_group_with_a_record():
    h = Harness()
    ids, gen = h.join_stable(1)
    h.leave(ids[0])
    group = h.shard.group(GROUP)
    assert group.state == GroupState.EMPTY and group.generation_id == gen + 1
    assert group.protocol_name is None and group.persisted.members == ()


def test_leave_while_parked_in_join_answers_unknown_member():
    h = Harness()
    ids, gen = h.join_stable(2)
    parked = h.join(member_id=ids[1], protocols=[("range", b"new")])
    h.leave(ids[1])
    assert h.reply(parked).error == Errors.UNKNOWN_MEMBER_ID and h.reply(parked).member_id == ""


def test_join_request_with_bad_values_changes_nothing():
    h = Harness()
    huge = JoinGroupRequest(
        GROUP,
        "",
        "consumer",
        protocols_of(PROTOCOLS),
        SESSION_MS,
        REBALANCE_MS,
        client_id="x" * 40_000,
    )
    assert h.call(huge).error == Errors.INVALID_REQUEST
    surrogate = JoinGroupRequest(
        GROUP, "", "consumer", protocols_of([("\ud800", b"")]), SESSION_MS, REBALANCE_MS
    )
    assert h.call(surrogate).error == Errors.INVALID_REQUEST
    overflow = JoinGroupRequest(GROUP, "", "consumer", protocols_of(PROTOCOLS), SESSION_MS, 2**40)
    assert h.call(overflow).error == Errors.INVALID_REQUEST
    assert h.shard.group(GROUP) is None


def test_heartbeat_in_completing_rebalance_is_none_and_keeps_the_session():
    # spec §2.5 and §10: since Kafka 2.7 a heartbeat while the leader assigns resets the session.
    # A long rebalance timeout keeps the pending-sync eviction (§4.4) out of the way.
    h = Harness()
    a, b = h.join(rebalance_ms=5_000), h.join(rebalance_ms=5_000)
    h.advance_until_answered([a, b])
    members = [h.reply(a).member_id, h.reply(b).member_id]
    gen = h.reply(a).generation_id
    for _ in range(3):  # three sessions' worth of heartbeats
        h.advance(SESSION_MS - 10)
        assert [h.heartbeat(m, gen) for m in members] == [Errors.NONE, Errors.NONE]
    group = h.shard.group(GROUP)
    assert group.state == GroupState.COMPLETING_REBALANCE and list(group.members) == members
    h.advance(SESSION_MS)  # silence: sessions lapse, the group rebalances
    assert not group.members and h.state() != GroupState.COMPLETING_REBALANCE


def test_changed_protocols_in_completing_rebalance_start_a_new_rebalance():
    h = Harness()
    a, b = h.join(), h.join()
    h.advance_until_answered([a, b])
    gen = h.reply(a).generation_id
    leader = h.reply(a).leader
    follower = next(h.reply(r).member_id for r in (a, b) if h.reply(r).member_id != leader)
    parked_sync = h.sync(follower, gen)  # waits for the leader
    changed = h.join(member_id=follower, protocols=[("range", b"new-subscription")])
    assert h.state() == GroupState.PREPARING_REBALANCE
    assert h.reply(changed) is None  # parked in the new phase
    assert (
        h.reply(parked_sync) is None or h.reply(parked_sync).error == Errors.REBALANCE_IN_PROGRESS
    )


def test_describe_fills_generation_and_leader_in_every_state():
    h = Harness()
    ids, gen = h.join_stable(2)
    h.join(member_id=ids[0])  # PreparingRebalance
    described = h.call(DescribeGroupsRequest([GROUP])).groups[0]
    assert described.group_state == "PreparingRebalance"
    assert (described.generation_id, described.leader) == (gen, ids[0])
    h.leave(ids[0], ids[1])
    h.advance(REBALANCE_MS)
    empty = h.call(DescribeGroupsRequest([GROUP])).groups[0]
    assert empty.group_state == "Empty" and empty.leader == "" and empty.generation_id > gen
