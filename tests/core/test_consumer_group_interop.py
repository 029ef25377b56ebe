"""Consumer groups beside classic ones in one Shard: offsets checked against member epochs
(Kafka's ``ConsumerGroup.validateOffsetCommit`` / ``validateOffsetFetch``), the classic APIs on
a consumer group's id, ConsumerGroupDescribe, List/Describe/Delete groups, retention, and the
replay of everything on load."""

import pytest

from groupcoord.coordinator import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    Errors,
    ListGroupsRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    TopicPartition,
)
from groupcoord.coordinator.consumer_messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)
from groupcoord.coordinator.messages import validate

from .consumer_harness import ConsumerHarness
from .harness import GROUP, GROUP2, replayed_shard


def test_commit_needs_the_member_and_its_current_epoch():
    h = ConsumerHarness()
    h.subscribe("m1")
    assert h.commit({("foo", 0): 10}, member_id="m1", generation=2) == {("foo", 0): Errors.NONE}
    assert h.committed() == {("foo", 0): 10}
    assert h.commit({("foo", 0): 11}, member_id="m1", generation=3) == {
        ("foo", 0): Errors.STALE_MEMBER_EPOCH
    }
    assert h.commit({("foo", 0): 11}, member_id="m9", generation=2) == {
        ("foo", 0): Errors.UNKNOWN_MEMBER_ID
    }
    # An admin commit (no member, epoch -1) is refused while the group has members ...
    assert h.commit({("foo", 0): 12}) == {("foo", 0): Errors.UNKNOWN_MEMBER_ID}
    assert h.committed() == {("foo", 0): 10}
    # ... and accepted once it is empty.
    h.hb("m1", -1)
    assert h.commit({("foo", 0): 12}) == {("foo", 0): Errors.NONE}
    assert h.committed() == {("foo", 0): 12}


def test_fetch_checks_member_epoch_when_given():
    h = ConsumerHarness()
    h.subscribe("m1")
    h.commit({("foo", 1): 5}, member_id="m1", generation=2)
    parts = [TopicPartition("foo", 1)]
    ok = h.call(OffsetFetchRequest(GROUP, parts, member_id="m1", member_epoch=2))
    assert ok.error == Errors.NONE and ok.partitions[0].committed_offset == 5
    stale = h.call(OffsetFetchRequest(GROUP, parts, member_id="m1", member_epoch=0))
    assert stale.error == Errors.STALE_MEMBER_EPOCH
    unknown = h.call(OffsetFetchRequest(GROUP, parts, member_id="m9", member_epoch=2))
    assert unknown.error == Errors.UNKNOWN_MEMBER_ID
    assert h.call(OffsetFetchRequest(GROUP, parts)).error == Errors.NONE  # admin fetch


def test_classic_requests_for_consumer_protocol_members_are_refused():
    h = ConsumerHarness()
    h.subscribe("m1")
    join = h.reply(h.join())  # its metadata is no ConsumerProtocol subscription
    assert join.error == Errors.INCONSISTENT_GROUP_PROTOCOL
    # m1 speaks the consumer protocol: the classic APIs do not know it (Kafka's answer).
    assert h.reply(h.sync("m1", 1)).error == Errors.UNKNOWN_MEMBER_ID
    assert h.heartbeat("m1", 1) == Errors.UNKNOWN_MEMBER_ID
    assert [m.error for m in h.leave("m1").members] == [Errors.UNKNOWN_MEMBER_ID]
    assert "m1" in h.group().members
    assert h.shard.group(GROUP) is None  # no classic group appeared


def test_consumer_heartbeat_on_a_classic_group():
    h = ConsumerHarness()
    ids, generation = h.join_stable(1)
    r = h.subscribe("m1")
    assert r.error_code == Errors.GROUP_ID_NOT_FOUND
    assert r.error_message == f"Group {GROUP} is not a consumer group."
    # Once the classic group is empty, a consumer group takes its id; its offsets stay.
    h.commit({("foo", 0): 7}, member_id=ids[0], generation=generation)
    h.leave(ids[0])
    assert h.shard.group(GROUP).persisted is not None
    r = h.subscribe("m1")
    assert r.error_code == Errors.NONE and r.member_epoch == 2
    assert h.shard.group(GROUP).persisted is None  # the classic group record is tombstoned
    assert h.committed() == {("foo", 0): 7}


def test_consumer_group_describe():
    h = ConsumerHarness()
    h.subscribe("m1", instance_id="i1", rack_id="r1", assignor="range")
    h.join(group_id=GROUP2)
    response = h.call(ConsumerGroupDescribeRequest([GROUP, "unknown", GROUP2, ""]))
    group, unknown, classic, empty = response.groups
    assert (group.error_code, group.group_state, group.group_epoch) == (Errors.NONE, "Stable", 2)
    assert (group.assignment_epoch, group.assignor_name) == (2, "range")
    [member] = group.members
    assert (member.member_id, member.instance_id, member.rack_id) == ("m1", "i1", "r1")
    assert (member.member_epoch, member.client_id, member.client_host) == (
        2,
        "client",
        "/127.0.0.1",
    )
    assert member.subscribed_topic_names == ["bar", "foo"]
    assert member.subscribed_topic_regex == ""  # no regex: "" as Kafka's, not null
    assigned = {tp.topic_name: tp.partitions for tp in member.assignment.topic_partitions}
    assert assigned == {"bar": [0, 1, 2], "foo": [0, 1, 2, 3, 4, 5]}
    assert member.target_assignment == member.assignment
    assert unknown.error_code == Errors.GROUP_ID_NOT_FOUND
    assert classic.error_code == Errors.GROUP_ID_NOT_FOUND
    assert classic.error_message == f"Group {GROUP2} is not a consumer group."
    assert empty.error_code == Errors.INVALID_GROUP_ID


def test_list_describe_and_delete_groups_see_the_consumer_group():
    h = ConsumerHarness()
    h.subscribe("m1")
    h.commit({("foo", 0): 1}, member_id="m1", generation=1)
    listed = {g.group_id: g for g in h.call(ListGroupsRequest()).groups}
    assert (listed[GROUP].protocol_type, listed[GROUP].group_state) == ("consumer", "Stable")
    assert [g.group_id for g in h.call(ListGroupsRequest(["Reconciling"])).groups] == []
    described = h.call(DescribeGroupsRequest([GROUP])).groups[0]
    assert (described.error, described.group_state) == (Errors.NONE, "Dead")
    delete = h.call(DeleteGroupsRequest([GROUP]))
    assert delete.results[0].error == Errors.NON_EMPTY_GROUP
    h.hb("m1", -1)
    delete = h.call(DeleteGroupsRequest([GROUP, GROUP2]))
    assert [r.error for r in delete.results] == [Errors.NONE, Errors.GROUP_ID_NOT_FOUND]
    assert h.group() is None and h.committed() == {}
    assert h.call(ListGroupsRequest()).groups == []


def test_describe_shows_what_a_member_still_owns_while_it_revokes():
    h = ConsumerHarness()
    h.subscribe("m1")
    h.subscribe("m2")
    h.hb("m1", 2, owned={"foo": range(6), "bar": range(3)})
    pending = h.member("m1").assignment.pending_revocation
    assert pending  # m1 must give some partitions to m2 first
    [group] = h.call(ConsumerGroupDescribeRequest([GROUP])).groups
    m1 = next(m for m in group.members if m.member_id == "m1")
    # Kafka 4.3 describes the assignment plus what is pending revocation: all of it still.
    assigned = {tp.topic_name: tp.partitions for tp in m1.assignment.topic_partitions}
    assert assigned == {"bar": [0, 1, 2], "foo": [0, 1, 2, 3, 4, 5]}
    target = {
        tp.topic_name: frozenset(tp.partitions) for tp in m1.target_assignment.topic_partitions
    }
    assert target == h.group().target["m1"]


def test_offset_delete_refuses_subscribed_topics():
    h = ConsumerHarness()
    h.subscribe("m1", names=["foo"])
    h.commit({("foo", 0): 1, ("bar", 0): 2}, member_id="m1", generation=2)
    response = h.call(
        OffsetDeleteRequest(GROUP, [TopicPartition("foo", 0), TopicPartition("bar", 0)])
    )
    assert [p.error for p in response.partitions] == [
        Errors.GROUP_SUBSCRIBED_TO_TOPIC,
        Errors.NONE,
    ]
    assert h.committed() == {("foo", 0): 1}


def test_retention_keeps_subscribed_offsets_and_deletes_empty_groups():
    retention_ms = 1_000_000
    h = ConsumerHarness(
        offsets_retention_ms=retention_ms,
        offsets_retention_check_interval_ms=retention_ms,
        consumer_group_session_timeout_ms=10 * retention_ms,
    )
    h.subscribe("m1", names=["foo"])
    h.commit({("foo", 0): 1, ("bar", 0): 2}, member_id="m1", generation=2)
    h.advance(retention_ms)
    assert h.committed() == {("foo", 0): 1}  # unsubscribed bar expired
    h.hb("m1", -1)
    h.advance(retention_ms)
    # Empty: foo expires too, and the group without members or offsets is deleted.
    assert h.group() is None and h.committed() == {}
    # A group that never committed is deleted by the next sweep once empty.
    h.subscribe("m2", names=["foo"])
    h.hb("m2", -1)
    h.advance(retention_ms)
    assert h.group() is None


def test_load_rearms_sessions_and_revocation_deadlines():
    h = ConsumerHarness(consumer_group_session_timeout_ms=10_000)
    h.subscribe("m1", rebalance_ms=3_000)
    h.subscribe("m2")
    h.hb("m1", 2, owned={"foo": range(6), "bar": range(3)})
    shard = replayed_shard(h.shard, h.records)
    assert shard.consumer_durable_state() == h.shard.consumer_durable_state()
    shard.on_loaded(100_000)
    shard.update_topics(100_000, {"foo": 6, "bar": 3, "zar": 2})
    step = shard.on_timer(103_000)  # m1 did not revoke within its rebalance timeout
    assert "m1" not in shard.consumer_group(GROUP).members
    assert any(r.value is None for r in step.records)
    shard.on_timer(110_000)  # m2's session, re-armed at load
    assert shard.consumer_group(GROUP).members == {}


def test_unloading_forgets_consumer_groups():
    h = ConsumerHarness()
    h.subscribe("m1")
    h.shard.on_unloaded(h.now)
    assert h.shard.consumer_groups() == [] and h.shard.next_deadline_ms() is None


def test_a_catalog_change_while_loading_bumps_the_epoch_once_loaded():
    h = ConsumerHarness()
    h.subscribe("m1", names=["foo"])
    shard = replayed_shard(h.shard, h.records)
    step = shard.update_topics(0, {"foo": 9})
    assert step.records == []  # loading: nothing is written yet
    step = shard.on_loaded(0)
    group = shard.consumer_group(GROUP)
    assert (group.group_epoch, group.partition_metadata) == (3, {"foo": 9})
    assert [type(r.key).__name__ for r in step.records] == [
        "ConsumerGroupPartitionMetadataKey",
        "ConsumerGroupMetadataKey",
    ]


def test_describe_is_bounded_and_a_loading_shard_says_so():
    h = ConsumerHarness(max_groups_per_request=2)
    response = h.call(ConsumerGroupDescribeRequest([GROUP, GROUP2, "x"]))
    assert [g.error_code for g in response.groups] == [Errors.INVALID_REQUEST] * 3
    loading = replayed_shard(h.shard, h.records)
    step = loading.handle(0, 1, ConsumerGroupDescribeRequest([GROUP]))
    assert step.replies[0][1].groups[0].error_code == Errors.COORDINATOR_LOAD_IN_PROGRESS
    join = ConsumerGroupHeartbeatRequest(
        GROUP, "m1", 0, rebalance_timeout_ms=1, subscribed_topic_names=["foo"], topic_partitions=[]
    )
    step = loading.handle(0, 2, join)
    assert step.replies[0][1].error_code == Errors.COORDINATOR_LOAD_IN_PROGRESS


def test_actor_boundary_validation_knows_the_consumer_requests():
    request = ConsumerGroupHeartbeatRequest(GROUP, "m1", 0, subscribed_topic_names=["foo"])
    assert validate(request) == request
    assert validate(ConsumerGroupDescribeRequest([GROUP])) == ConsumerGroupDescribeRequest([GROUP])
    with pytest.raises(ValueError, match="member_epoch"):
        validate(ConsumerGroupHeartbeatRequest(GROUP, "m1", "0"))
