"""Per-request bounds (issue #9 item 12): a request naming more groups, members, topics or
partitions than configured gets a Kafka error and changes nothing, before any per-item work.

With the defaults (10,000 of each) a request one over is refused and one at the bound is served;
the same boundaries are checked at small configured bounds.
"""

import pytest

from groupcoord.coordinator import (
    CoordinatorConfig,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    Errors,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    TopicPartition,
)

from .harness import GROUP, GROUP2, Harness

DEFAULT_BOUND = 10_000


def _commit(h: Harness, partitions, group_id=GROUP):
    return h.call(
        OffsetCommitRequest(
            group_id, -1, "", [OffsetCommitRequestPartition(topic, p, 7) for topic, p in partitions]
        )
    )


@pytest.mark.parametrize("extra", [0, 1])
def test_offset_commit_over_the_default_partition_bound_is_refused_and_stores_nothing(extra):
    h = Harness(check_replay=False)
    parts = [("t", p) for p in range(DEFAULT_BOUND + extra)]
    response = _commit(h, parts)
    errors = {p.error for p in response.partitions}
    assert len(response.partitions) == len(parts)
    if extra:
        assert errors == {Errors.INVALID_COMMIT_OFFSET_SIZE}
        assert h.records == [] and h.shard.group(GROUP) is None
    else:
        assert errors == {Errors.NONE} and len(h.records) == DEFAULT_BOUND


@pytest.mark.parametrize("extra", [0, 1])
def test_offset_fetch_over_the_default_partition_bound_is_refused(extra):
    h = Harness(check_replay=False)
    _commit(h, [("t", 0)])
    tps = [TopicPartition("t", p) for p in range(DEFAULT_BOUND + extra)]
    response = h.call(OffsetFetchRequest(GROUP, tps))
    if extra:
        assert response.error == Errors.INVALID_REQUEST and response.partitions == []
    else:
        assert response.error == Errors.NONE and len(response.partitions) == DEFAULT_BOUND
        assert response.partitions[0].committed_offset == 7


@pytest.mark.parametrize("extra", [0, 1])
def test_offset_fetch_of_all_offsets_is_bounded_by_the_group_offsets(extra):
    h = Harness(max_partitions_per_request=5)
    _commit(h, [("t", p) for p in range(4)])
    _commit(h, [("u", p) for p in range(1 + extra)])
    response = h.fetch()
    if extra:
        assert response.error == Errors.INVALID_REQUEST and response.partitions == []
        # Named partitions still work.
        assert h.fetch([("u", 1)]).partitions[0].committed_offset == 7
    else:
        assert response.error == Errors.NONE and len(response.partitions) == 5


@pytest.mark.parametrize("extra", [0, 1])
def test_distinct_topics_are_bounded(extra):
    h = Harness(max_topics_per_request=3)
    parts = [(f"t{i % (3 + extra)}", i) for i in range(8)]
    commit = _commit(h, parts)
    fetch = h.fetch(parts)
    delete = h.call(OffsetDeleteRequest(GROUP, [TopicPartition(t, p) for t, p in parts]))
    if extra:
        assert {p.error for p in commit.partitions} == {Errors.INVALID_COMMIT_OFFSET_SIZE}
        assert fetch.error == delete.error == Errors.INVALID_REQUEST
        assert h.records == []
    else:
        assert {p.error for p in commit.partitions} == {Errors.NONE}
        assert fetch.error == delete.error == Errors.NONE
        assert h.shard.group(GROUP) is None  # all deleted: the group went with them


@pytest.mark.parametrize("extra", [0, 1])
def test_offset_delete_is_bounded_and_deletes_nothing_over_it(extra):
    h = Harness(max_partitions_per_request=4)
    _commit(h, [("t", p) for p in range(4)])
    written = len(h.records)
    tps = [TopicPartition("t", p) for p in range(4 + extra)]
    response = h.call(OffsetDeleteRequest(GROUP, tps))
    if extra:
        assert response.error == Errors.INVALID_REQUEST and response.partitions == []
        assert h.records[written:] == [] and len(h.shard.group(GROUP).offsets) == 4
    else:
        assert response.error == Errors.NONE and len(h.records) == written + 4


@pytest.mark.parametrize("extra", [0, 1])
def test_describe_and_delete_groups_are_bounded(extra):
    h = Harness(max_groups_per_request=2)
    _commit(h, [("t", 0)], GROUP)
    _commit(h, [("t", 0)], GROUP2)
    ids = [GROUP, GROUP2] + ["x"] * extra
    described = h.call(DescribeGroupsRequest(ids)).groups
    assert [g.group_id for g in described] == ids
    deleted = h.call(DeleteGroupsRequest(ids)).results
    assert [r.group_id for r in deleted] == ids
    if extra:
        assert {g.error for g in described} == {Errors.INVALID_REQUEST}
        assert {r.error for r in deleted} == {Errors.INVALID_REQUEST}
        assert h.shard.group(GROUP) is not None and h.shard.group(GROUP2) is not None
    else:
        assert {g.error for g in described} == {r.error for r in deleted} == {Errors.NONE}
        assert h.shard.group(GROUP) is None and h.shard.group(GROUP2) is None


@pytest.mark.parametrize("extra", [0, 1])
def test_leave_members_and_sync_assignments_are_bounded(extra):
    h = Harness(max_members_per_request=2)
    (member,), generation = h.join_stable(1)
    assignments = [SyncGroupRequestAssignment(member, b"a")] + [
        SyncGroupRequestAssignment(f"other-{i}", b"") for i in range(1 + extra)
    ]
    sync = h.call(SyncGroupRequest(GROUP, generation, member, assignments))
    leave = h.call(
        LeaveGroupRequest(
            GROUP, [MemberIdentity(member)] + [MemberIdentity("unknown")] * (1 + extra)
        )
    )
    if extra:
        assert sync.error == leave.error == Errors.INVALID_REQUEST and leave.members == []
        assert member in h.shard.group(GROUP).members
    else:
        assert sync.error == leave.error == Errors.NONE
        assert member not in h.shard.group(GROUP).members


@pytest.mark.parametrize(
    "name",
    [
        "max_groups_per_request",
        "max_members_per_request",
        "max_topics_per_request",
        "max_partitions_per_request",
        "offsets_cleanup_max_offsets_per_turn",
    ],
)
def test_bounds_are_validated(name):
    with pytest.raises(ValueError, match=name):
        CoordinatorConfig(**{name: 0})
    assert getattr(CoordinatorConfig(**{name: 1}), name) == 1
