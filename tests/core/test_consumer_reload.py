"""A reloaded shard's consumer groups before the runtime hands it the topic catalog: the
timers re-armed on load (session, rebalance timeout) still fence members, keeping the partition
counts last recorded in the group's ConsumerGroupPartitionMetadata record, and the catalog's
arrival then refreshes them; heartbeats wait (COORDINATOR_LOAD_IN_PROGRESS) and nothing raises."""

from groupcoord.coordinator import (
    DeleteGroupsRequest,
    Errors,
    GroupState,
    OffsetDeleteRequest,
    TopicPartition,
)
from groupcoord.coordinator.consumer_messages import ConsumerGroupDescribeRequest

from .consumer_harness import CATALOG, ConsumerHarness, as_dict
from .test_consumer_group_migration import classic_join, synced

FOO_BAR = {"foo": frozenset(range(6)), "bar": frozenset(range(3))}


def test_rebalance_timeout_fires_before_the_catalog_arrives():
    h = ConsumerHarness()
    h.subscribe("m1", rebalance_ms=1_000)
    h.hb("m1", 2, owned=FOO_BAR)
    h.subscribe("m2", rebalance_ms=1_000)
    assert h.hb("m1", 2, owned=FOO_BAR).member_epoch == 2  # it must revoke some first
    recorded = dict(h.group().partition_metadata)
    h.reload(hand_catalog=False)
    before = (h.group().group_epoch, len(h.records))
    assert h.hb("m2", 3).error_code == Errors.COORDINATOR_LOAD_IN_PROGRESS
    assert len(h.records) == before[1]  # a refused heartbeat writes nothing
    h.advance(1_000)  # m1 did not revoke in time: fenced without a catalog
    assert set(h.group().members) == {"m2"}
    assert h.group().group_epoch == before[0] + 1
    assert h.group().partition_metadata == recorded  # the last recorded counts stay
    h.set_topics({**CATALOG, "foo": 8})  # the catalog arrives: counts refreshed, a new epoch
    assert h.group().partition_metadata == {"bar": 3, "foo": 8}
    r = h.hb("m2", 3)
    assert r.error_code == Errors.NONE and r.member_epoch == h.group().group_epoch
    assert as_dict(r.assignment) == {"foo": frozenset(range(8)), "bar": frozenset(range(3))}


def test_session_expiry_of_regex_members_before_the_catalog_arrives():
    h = ConsumerHarness()
    h.hb("m1", 0, regex="ba.*", owned={}, rebalance_ms=1_000)
    h.subscribe("m2", names=["foo"])
    h.reload(hand_catalog=False)
    h.advance(h.config.consumer_group_session_timeout_ms)  # both sessions, re-armed on load
    assert not h.group().members and h.group().state.value == "Empty"
    h.set_topics(CATALOG)
    r = h.subscribe("m3")
    assert r.error_code == Errors.NONE and as_dict(r.assignment) == FOO_BAR


def test_classic_member_session_expiry_and_downgrade_before_the_catalog_arrives():
    h = ConsumerHarness(consumer_group_session_timeout_ms=60_000)
    h.subscribe("m1", names=["zar"])
    classic = classic_join(h, session_ms=3_000).member_id
    assert synced(h, classic, 3) == {"foo": set(range(6)), "bar": set(range(3))}
    h.reload(hand_catalog=False)
    h.advance(3_000)  # the classic member's own session: fenced, m1 stays
    assert set(h.group().members) == {"m1"}
    # A classic member that outlives the consumer one: the group becomes classic again.
    h.reload()
    h.hb("m1", h.group().group_epoch, owned={"zar": frozenset(range(2))})
    classic = classic_join(h, session_ms=600_000).member_id
    h.reload(hand_catalog=False)
    h.advance(60_000)  # m1's session expires; only the classic member is left
    assert h.shard.consumer_group("groupId") is None
    assert h.state() == GroupState.PREPARING_REBALANCE
    assert list(h.shard.group("groupId").members) == [classic]


def test_admin_requests_on_a_consumer_group_before_the_catalog_arrives():
    h = ConsumerHarness()
    h.hb("m1", 0, regex="fo.*", owned={}, rebalance_ms=1_000)  # foo, matched by the regex
    h.commit({("foo", 0): 1, ("bar", 0): 2}, member_id="m1", generation=2)
    h.reload(hand_catalog=False)
    [described] = h.call(ConsumerGroupDescribeRequest(["groupId"])).groups
    assert (described.error_code, described.group_state, described.group_epoch) == (
        Errors.NONE,
        "Stable",
        2,
    )
    deleted = h.call(
        OffsetDeleteRequest("groupId", [TopicPartition("foo", 0), TopicPartition("bar", 0)])
    )
    # The regex's match is known from the recorded partition metadata, without a catalog.
    assert [p.error for p in deleted.partitions] == [Errors.GROUP_SUBSCRIBED_TO_TOPIC, Errors.NONE]
    assert h.call(DeleteGroupsRequest(["groupId"])).results[0].error == Errors.NON_EMPTY_GROUP
    h.advance(h.config.consumer_group_session_timeout_ms)
    assert h.call(DeleteGroupsRequest(["groupId"])).results[0].error == Errors.NONE
    assert h.group() is None and h.committed() == {}
