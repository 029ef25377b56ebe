"""OffsetCommit/Fetch, retention, OffsetDelete, Describe/List/Delete groups (spec §2.7–2.12, §6)."""

import struct

from groupcoord.coordinator import (
    CoordinatorConfig,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    Errors,
    GroupState,
    HeartbeatRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    Shard,
    SyncGroupRequest,
    TopicPartition,
)
from groupcoord.coordinator.records import GroupMetadataKey, OffsetCommitKey

from .harness import GROUP, GROUP2, OTHER_GROUP, Harness, replayed_shard

DAY_MS = 24 * 3600 * 1000
TP = ("topic", 0)


def subscription(*topics: str) -> bytes:
    """A v0 ConsumerProtocol subscription (version, topics, null user data)."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def test_simple_commit_creates_group_and_fetches():
    h = Harness()
    assert h.commit({TP: 10}) == {TP: Errors.NONE}
    group = h.shard.group(GROUP)
    assert group.state == GroupState.EMPTY and group.protocol_type is None
    assert h.committed() == {TP: 10}
    response = h.fetch([TP, ("topic", 1)])
    assert [(p.committed_offset, p.metadata, p.error) for p in response.partitions] == [
        (10, "", Errors.NONE),
        (-1, "", Errors.NONE),
    ]


def test_commit_errors():
    h = Harness()
    assert h.commit({TP: 1}, group_id=OTHER_GROUP) == {TP: Errors.NOT_COORDINATOR}
    assert h.commit({TP: 1}, member_id="m", generation=1) == {TP: Errors.ILLEGAL_GENERATION}
    assert h.shard.group(GROUP) is None
    ids, gen = h.join_stable(1)
    assert h.commit({TP: 1}) == {TP: Errors.UNKNOWN_MEMBER_ID}  # anonymous
    assert h.commit({TP: 1}, ids[0], gen + 1) == {TP: Errors.ILLEGAL_GENERATION}
    assert h.commit({TP: 1}, "stranger", gen) == {TP: Errors.UNKNOWN_MEMBER_ID}
    assert h.commit({TP: 1}, ids[0], gen) == {TP: Errors.NONE}


def test_manual_commit_to_empty_group_ignores_member_and_instance():
    h = Harness()
    assert h.commit({TP: 5}, member_id="whatever", instance_id="x") == {TP: Errors.NONE}


def test_commit_in_completing_rebalance_is_rejected_and_stores_nothing():
    h = Harness()
    rid = h.join()
    h.advance(50)
    response = h.reply(rid)
    result = h.commit({TP: 1}, response.member_id, response.generation_id)
    assert result == {TP: Errors.REBALANCE_IN_PROGRESS}
    assert h.committed() == {}


def test_commit_in_preparing_rebalance_is_allowed_and_keeps_session():
    h = Harness()
    ids, gen = h.join_stable(2)
    h.join(member_id=ids[0])  # PreparingRebalance
    assert h.commit({TP: 7}, ids[1], gen) == {TP: Errors.NONE}
    assert h.committed() == {TP: 7}


def test_commit_maintains_session():
    h = Harness()
    ids, gen = h.join_stable(1)
    for _ in range(3):
        h.advance(400)
        assert h.commit({TP: 1}, ids[0], gen) == {TP: Errors.NONE}
    assert ids[0] in h.shard.group(GROUP).members


def test_metadata_limit_counts_utf16_units_and_rejects_only_that_partition():
    h = Harness(offset_metadata_max_bytes=4)
    result = h.commit(
        {
            ("a", 0): (1, -1, "abcd"),
            ("b", 0): (2, -1, "abcde"),
            ("c", 0): (3, -1, "😀😀"),
            ("d", 0): (4, -1, "😀😀😀"),
        }
    )
    assert result == {
        ("a", 0): Errors.NONE,
        ("b", 0): Errors.OFFSET_METADATA_TOO_LARGE,
        ("c", 0): Errors.NONE,
        ("d", 0): Errors.OFFSET_METADATA_TOO_LARGE,
    }
    assert h.committed() == {("a", 0): 1, ("c", 0): 3}


def test_commit_bad_values_change_nothing():
    h = Harness()
    assert h.commit({TP: 2**63}) == {TP: Errors.INVALID_REQUEST}
    assert h.commit({("t", -1): 1}) == {("t", -1): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    assert h.commit({("", 0): 1}) == {("", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
    # One bad value anywhere refuses the whole request, the topic names too (each distinct
    # name is checked once, however many partitions share it).
    fine = {(TP[0], p): 1 for p in range(3)}
    for bad in (
        {("\ud800", 0): 1},
        {("x" * 40_000, 0): 1},
        {(TP[0], 3): (1, 2**31, "")},
        {(TP[0], 2**31): 1},
        {(TP[0], 3): (1, -1, "\udfff")},
        {(TP[0], 3): -(2**63) - 1},
    ):
        assert set(h.commit(fine | bad).values()) == {Errors.INVALID_REQUEST}
    # A topic is checked again wherever the one before it differs: a bad name between two
    # runs of a good one is still found.
    between = {(TP[0], 0): 1, ("\ud800", 0): 1, (TP[0], 1): 1}
    assert set(h.commit(between).values()) == {Errors.INVALID_REQUEST}
    assert h.committed() == {}


def test_fetch_all_is_sorted_and_unknown_group_is_empty():
    h = Harness()
    h.commit({("b", 1): 1, ("a", 2): 2, ("a", 0): 3})
    assert [(p.topic, p.partition) for p in h.fetch().partitions] == [("a", 0), ("a", 2), ("b", 1)]
    assert h.fetch(group_id=GROUP2).partitions == []
    assert h.fetch([TP], group_id=OTHER_GROUP).error == Errors.NOT_COORDINATOR


def test_explicit_retention_sets_expire_timestamp():
    h = Harness(offsets_retention_check_interval_ms=1_000)
    h.commit({TP: 1}, retention_ms=5_000)
    assert h.shard.group(GROUP).offsets[TP].expire_timestamp_ms == 5_000
    h.advance(4_000)
    assert h.committed() == {TP: 1}
    h.advance(1_000)
    assert h.shard.group(GROUP) is None  # expired, then the empty group died


def test_simple_group_offsets_expire_by_commit_time_without_group_tombstone():
    h = Harness(offsets_retention_ms=DAY_MS, offsets_retention_check_interval_ms=600_000)
    h.commit({TP: 1})
    h.advance(DAY_MS - 600_000)
    h.commit({("later", 0): 2})
    h.advance(600_000)
    assert h.committed() == {("later", 0): 2}
    tombstones = [r.key for r in h.records if r.value is None]
    assert tombstones == [OffsetCommitKey(GROUP, "topic", 0)]


def test_empty_consumer_group_offsets_expire_from_when_it_emptied():
    h = Harness(offsets_retention_ms=10_000, offsets_retention_check_interval_ms=1_000)
    ids, gen = h.join_stable(1)
    h.commit({TP: 3}, ids[0], gen)
    h.advance(20_000 - h.now)  # long after the commit, still Stable
    h.heartbeat(ids[0], gen)
    assert h.committed() == {TP: 3}  # subscription unknown: nothing expires
    h.leave(ids[0])  # Empty at t=20000
    h.advance(9_000)
    assert h.committed() == {TP: 3}
    h.advance(1_000)
    assert h.shard.group(GROUP) is None
    assert h.records[-1].key == GroupMetadataKey(GROUP) and h.records[-1].value is None


def test_stable_consumer_group_expires_only_unsubscribed_topics():
    h = Harness(offsets_retention_ms=10_000, offsets_retention_check_interval_ms=1_000)
    ids, gen = h.join_stable(1, protocols=[("range", subscription("topic"))])
    h.commit({TP: 1, ("gone", 0): 2}, ids[0], gen)
    for _ in range(28):  # 11.2 s of 400 ms heartbeats
        h.advance(400)
        assert h.heartbeat(ids[0], gen) == Errors.NONE
    assert h.committed() == {TP: 1}


def test_offset_delete():
    h = Harness()
    assert (
        h.call(OffsetDeleteRequest(GROUP2, [TopicPartition("t", 0)])).error
        == Errors.GROUP_ID_NOT_FOUND
    )
    ids, gen = h.join_stable(1, protocols=[("range", subscription("topic"))])
    h.commit({TP: 1, ("other", 0): 2}, ids[0], gen)
    response = h.call(
        OffsetDeleteRequest(GROUP, [TopicPartition("topic", 0), TopicPartition("other", 0)])
    )
    assert response.error == Errors.NONE
    assert [p.error for p in response.partitions] == [Errors.GROUP_SUBSCRIBED_TO_TOPIC, Errors.NONE]
    assert h.committed() == {TP: 1}


def test_offset_delete_unparsable_subscription_counts_every_topic_as_subscribed():
    h = Harness()
    ids, gen = h.join_stable(1, protocols=[("range", b"\x00")])
    h.commit({TP: 1}, ids[0], gen)
    response = h.call(OffsetDeleteRequest(GROUP, [TopicPartition("topic", 0)]))
    assert response.partitions[0].error == Errors.GROUP_SUBSCRIBED_TO_TOPIC


def test_offset_delete_non_consumer_group_and_empty_group():
    h = Harness()
    rid = h.join(protocol_type="connect")
    h.advance(50)
    member = h.reply(rid)
    h.sync(member.member_id, member.generation_id, {member.member_id: b""})
    h.commit({TP: 1}, member.member_id, member.generation_id)
    assert (
        h.call(OffsetDeleteRequest(GROUP, [TopicPartition("topic", 0)])).error
        == Errors.NON_EMPTY_GROUP
    )
    h.leave(member.member_id)
    response = h.call(OffsetDeleteRequest(GROUP, [TopicPartition("topic", 0)]))
    assert response.error == Errors.NONE and response.partitions[0].error == Errors.NONE
    assert h.shard.group(GROUP) is None  # last offset gone: the group died


def test_describe_groups():
    h = Harness()
    ids, gen = h.join_stable(1, protocols=[("range", b"meta")])
    described = h.call(DescribeGroupsRequest([GROUP, GROUP2, OTHER_GROUP])).groups
    stable, dead, wrong = described
    assert stable.group_state == "Stable" and stable.protocol_data == "range"
    assert stable.generation_id == gen and stable.leader == ids[0]
    assert stable.members[0].member_metadata == b"meta"
    assert stable.members[0].member_assignment == ids[0].encode()
    assert stable.members[0].client_host == "/127.0.0.1"
    assert (dead.error, dead.group_state, dead.members) == (Errors.NONE, "Dead", [])
    assert wrong.error == Errors.NOT_COORDINATOR
    h.join(member_id=ids[0], protocols=[("range", b"meta2")])  # alone: straight to Completing
    rebalancing = h.call(DescribeGroupsRequest([GROUP])).groups[0]
    assert rebalancing.group_state == "CompletingRebalance" and rebalancing.protocol_data == ""
    assert rebalancing.members[0].member_metadata == b""


def test_list_groups_with_state_filter():
    h = Harness()
    h.join_stable(1)
    h.commit({TP: 1}, group_id=GROUP2)
    listed = h.call(ListGroupsRequest())
    assert {(g.group_id, g.group_state, g.protocol_type) for g in listed.groups} == {
        (GROUP, "Stable", "consumer"),
        (GROUP2, "Empty", ""),
    }
    assert [g.group_id for g in h.call(ListGroupsRequest(["Empty"])).groups] == [GROUP2]


def test_delete_groups():
    h = Harness()
    ids, gen = h.join_stable(1)
    h.commit({TP: 1}, ids[0], gen)
    h.commit({TP: 1}, group_id=GROUP2)
    results = h.call(DeleteGroupsRequest([GROUP, GROUP2, "group-4", OTHER_GROUP, ""])).results
    assert [r.error for r in results] == [
        Errors.NON_EMPTY_GROUP,
        Errors.NONE,
        Errors.GROUP_ID_NOT_FOUND,
        Errors.NOT_COORDINATOR,
        Errors.GROUP_ID_NOT_FOUND,
    ]
    assert h.fetch(group_id=GROUP2).partitions == []
    h.leave(ids[0])
    assert h.call(DeleteGroupsRequest([GROUP])).results[0].error == Errors.NONE
    assert h.records[-1].key == GroupMetadataKey(GROUP) and h.records[-1].value is None
    assert h.shard.group(GROUP) is None


def test_requests_while_loading_and_after_unloading():
    shard = Shard(0, 2, CoordinatorConfig())

    def answer(request):
        return shard.handle(0, 1, request).replies[0][1]

    assert (
        answer(JoinGroupRequest(GROUP, "", "consumer", [], 10_000, 10_000)).error
        == Errors.COORDINATOR_LOAD_IN_PROGRESS
    )
    assert answer(SyncGroupRequest(GROUP, 1, "m", [])).error == Errors.REBALANCE_IN_PROGRESS
    assert answer(HeartbeatRequest(GROUP, 1, "m")).error == Errors.NONE
    commit = answer(OffsetCommitRequest(GROUP, -1, "", [OffsetCommitRequestPartition("t", 0, 1)]))
    assert commit.partitions[0].error == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert answer(OffsetFetchRequest(GROUP, None)).error == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert answer(ListGroupsRequest()).error == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert answer(HeartbeatRequest(OTHER_GROUP, 1, "m")).error == Errors.NOT_COORDINATOR
    shard.on_loaded(0)
    shard.on_unloaded(0)
    assert answer(HeartbeatRequest(GROUP, 1, "m")).error == Errors.NOT_COORDINATOR


def test_unload_answers_parked_requests_not_coordinator():
    h = Harness(check_replay=False)
    ids, gen = h.join_stable(2)
    parked_join = h.join(member_id=ids[0])
    step = h.shard.on_unloaded(h.now)
    assert dict(step.replies)[parked_join].error == Errors.NOT_COORDINATOR
    assert h.shard.groups() == [] and h.shard.next_deadline_ms() is None


def test_load_rearms_sessions_and_over_capacity_group_rebalances():
    h = Harness(group_max_size=4)
    ids, gen = h.join_stable(3)
    h.commit({TP: 9}, ids[0], gen)
    smaller = Harness(group_max_size=2).config
    shard = replayed_shard(h.shard, h.records)
    shard.config = smaller
    shard.on_loaded(1_000)
    group = shard.group(GROUP)
    assert group.state == GroupState.PREPARING_REBALANCE  # over the new max size
    assert shard.group(GROUP).offsets[TP].offset == 9
    same = replayed_shard(h.shard, h.records)
    same.on_loaded(1_000)
    assert same.group(GROUP).state == GroupState.STABLE
    assert same.next_deadline_ms() == 1_000 + 500  # every member: now + session
