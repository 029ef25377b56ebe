"""One local SparkSession for the whole test session, and real logs written by the coordinator.

``coordinator_log`` drives a real ``Shard`` (through tests/core/harness.py) through joins,
commits by group members and by a simple consumer, an OffsetDelete and a DeleteGroups, and
appends every record of every step, in order, to a real partition log (small segments, so the
source gets several splits). It returns what the coordinator acknowledged.
"""

from __future__ import annotations

import collections
import os
import sys

import pytest
from pyspark.sql import SparkSession

from groupcoord.coordinator import (
    DeleteGroupsRequest,
    Errors,
    OffsetDeleteRequest,
    Shard,
    TopicPartition,
)
from groupcoord.spark_export import lake
from groupcoord.spark_export.exporter import export
from groupcoord.spark_export.schema import OFFSET_COMMITS
from groupcoord.storage import LogConfig, open_partition_log
from tests.core.harness import GROUP, GROUP2, GROUP3, Harness

SEGMENT_BYTES = 4096
TOPIC = "orders"
START_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z, so commits span more than one UTC day


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

    session = (
        SparkSession.builder.master("local[2]")
        .appName("groupcoord-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


class CoordinatorRun:
    """A harness whose records go to a partition log as they are produced."""

    def __init__(self, log_dir: str, **log_config) -> None:
        self.dir = os.path.join(log_dir, "partition-0")
        # fsync "always" (the default): the exporter reads up to the published durable end,
        # which that policy moves with every append.
        self.log = open_partition_log(
            self.dir, LogConfig(**{"segment_bytes": SEGMENT_BYTES, **log_config})
        )
        self.h = Harness(check_replay=False, group_max_size=10)
        # The writer snapshots (and so compacts) only with the state loaded, as in a partition.
        self.log.load_into(Shard(partition=0, num_partitions=2, config=self.h.config))
        self.h.now = START_MS
        self.acked: list[tuple[str, str, int, int]] = []  # (group, topic, partition, offset)
        self.flushed = 0

    def flush(self) -> None:
        new = self.h.records[self.flushed :]
        if new:
            self.log.append(new)
            self.log.maybe_snapshot()
        self.flushed = len(self.h.records)

    def commit(self, group: str, offsets: dict, member: str = "", generation: int = -1) -> None:
        errors = self.h.commit(
            {(TOPIC, p): o for p, o in offsets.items()},
            member_id=member,
            generation=generation,
            group_id=group,
        )
        self.acked += [
            (group, TOPIC, p, offsets[p]) for (_, p), e in errors.items() if e == Errors.NONE
        ]
        self.flush()

    def play(self, rounds: int, step_ms: int = 300_000) -> None:
        """Members of two groups commit ``rounds`` times, a simple consumer commits too."""
        h = self.h
        ids, gen = h.join_stable(2, group_id=GROUP, session_ms=600_000)
        ids2, gen2 = h.join_stable(1, group_id=GROUP2, session_ms=600_000)
        self.flush()
        for r in range(rounds):
            self.commit(GROUP, {0: 10 * r, 1: 10 * r + 1}, ids[0], gen)
            self.commit(GROUP, {2: 5 * r}, ids[1], gen)
            self.commit(GROUP2, {0: 100 + r}, ids2[0], gen2)
            self.commit(GROUP3, {3: 7 * r})
            h.advance(step_ms)
            for m in ids:
                assert h.heartbeat(m, gen) == Errors.NONE
            assert h.heartbeat(ids2[0], gen2, group_id=GROUP2) == Errors.NONE
            self.flush()

    def delete_offset(self, group: str, partition: int) -> None:
        response = self.h.call(OffsetDeleteRequest(group, [TopicPartition(TOPIC, partition)]))
        assert response.error == Errors.NONE
        self.flush()

    def delete_group(self, group: str) -> None:
        response = self.h.call(DeleteGroupsRequest([group]))
        assert response.results[0].error == Errors.NONE
        self.flush()

    def close(self) -> None:
        self.log.close()


def retained_run(log_dir: str) -> CoordinatorRun:
    """A run whose log snapshots (and so compacts) every 50 records, keeping one snapshot, but
    never past what the exporter has exported (``retain_until_exported``)."""
    return CoordinatorRun(
        log_dir, snapshot_every_records=50, keep_snapshots=1, retain_until_exported=True
    )


def export_holds_every_commit(spark, run: CoordinatorRun, lake_dir: str) -> None:
    """Export ``run``'s logs into ``lake_dir``: no gap, and every commit ``run`` acknowledged is
    a row of offset_commits."""
    result = export(spark, os.path.dirname(run.dir), lake_dir)
    assert not result.gaps
    rows = lake.read_arrow(lake_dir, OFFSET_COMMITS).to_pylist()
    assert live_commits(rows) == collections.Counter(run.acked)


def live_commits(rows) -> collections.Counter:
    """The (group, topic, partition, offset) of every offset_commits row that is no tombstone."""
    return collections.Counter(
        (r["group_id"], r["topic"], r["partition"], r["committed_offset"])
        for r in rows
        if not r["is_tombstone"]
    )


def played(log_dir: str, rounds: int) -> CoordinatorRun:
    """A closed log of ``rounds`` rounds of ``CoordinatorRun.play``."""
    run = CoordinatorRun(log_dir)
    run.play(rounds=rounds)
    run.close()
    return run


@pytest.fixture
def coordinator_run(tmp_path):
    run = CoordinatorRun(str(tmp_path / "logs"))
    yield run
    run.close()
