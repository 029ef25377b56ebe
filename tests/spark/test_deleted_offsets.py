"""Deleted offsets leave the report's views of a moment (describe as of a time, progress,
Burrow status) once the log proves the deletion, though a tombstone stores no time."""

from __future__ import annotations

import pytest

from groupcoord.spark_export import analytics
from tests.spark.test_analytics import COMMIT_COLUMNS, MIN, T0


def _row(log_partition, log_offset, group, partition, offset=None, at=None):
    tombstone = offset is None
    return (
        "c",
        log_partition,
        log_offset,
        group,
        "t",
        partition,
        offset,
        -1,
        "",
        at,
        None,
        tombstone,
    )


@pytest.fixture(scope="module")
def commits(spark):
    return spark.createDataFrame(
        [
            _row(0, 0, "g", 0, 5, T0),
            _row(0, 1, "g", 1, 7, T0 + MIN),
            _row(0, 2, "g", 2, 3, T0 + MIN),
            _row(0, 3, "g", 0),  # OffsetDelete of g's partitions 0 and 2, some time after T0 + 1m
            _row(0, 4, "g", 2),
            _row(0, 5, "h", 0, 1, T0 + 3 * MIN),  # logged after them: they happened by now
            _row(0, 6, "g", 2, 9, T0 + 4 * MIN),  # committed again
            _row(0, 7, "g", 1),  # the last record of its log: nothing proves when
            _row(1, 0, "x", 0, 1, T0 + 2 * MIN),  # another log partition proves nothing
        ],
        COMMIT_COLUMNS,
    )


def test_a_deleted_offset_is_gone_from_the_first_record_logged_after_it(commits):
    def offsets_as_of(at_ms):
        return {
            (r["group_id"], r["partition"]): r["current_offset"]
            for r in analytics.describe(analytics.latest_offsets(commits, at_ms))
        }

    assert offsets_as_of(T0 + 2 * MIN) == {("g", 0): 5, ("g", 1): 7, ("g", 2): 3, ("x", 0): 1}
    assert offsets_as_of(T0 + 3 * MIN) == {("g", 1): 7, ("h", 0): 1, ("x", 0): 1}
    assert offsets_as_of(T0 + 4 * MIN) == {("g", 1): 7, ("g", 2): 9, ("h", 0): 1, ("x", 0): 1}
    assert offsets_as_of(T0 + 60 * MIN)[("g", 1)] == 7
    assert offsets_as_of(T0 - 1) == {}


def test_progress_and_burrow_status_leave_deleted_partitions_out(spark, commits):
    now = T0 + 60 * MIN
    progress = {
        (r["group_id"], r["partition"]): r["commits"]
        for r in analytics.partition_progress(commits, now).collect()
    }
    # g's partition 2 was committed again after its deletion: it starts over.
    assert progress == {("g", 1): 1, ("g", 2): 1, ("h", 0): 1, ("x", 0): 1}
    log_end = spark.createDataFrame(
        [("t", p, T0 + m * MIN, 100 + m) for p in range(3) for m in range(61)],
        "topic string, partition int, timestamp_ms bigint, log_end_offset bigint",
    )
    status = analytics.burrow_status(commits, log_end, now)
    assert {(p.group_id, p.partition) for g in status for p in g.partitions} == set(progress)

    # The lag over time stops where the deletion is proven and starts again with a commit.
    minutes: dict = {}
    for r in analytics.lag_timeline(commits, log_end).collect():
        key = (r["group_id"], r["partition"])
        minutes.setdefault(key, []).append((r["timestamp_ms"] - T0) // MIN)
    assert sorted(minutes[("g", 0)]) == [0, 1, 2]
    assert sorted(minutes[("g", 1)]) == list(range(1, 61))
    assert sorted(minutes[("g", 2)]) == [1, 2, *range(4, 61)]
