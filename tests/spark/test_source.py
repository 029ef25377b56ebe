"""The Spark source's planning and split reading, called directly (no Spark session needed):
it reads only what the writer has made durable, and refuses a hole like every other reader."""

from __future__ import annotations

import os

import pytest

from groupcoord.coordinator import Errors, OffsetCommitRequest, OffsetCommitRequestPartition, Shard
from groupcoord.spark_export import source
from groupcoord.storage import (
    CorruptLogError,
    LogConfig,
    list_segments,
    open_partition_log,
    write_export_watermark,
)
from tests.storage.helpers import records_between

SMALL = dict(
    segment_bytes=4096,
    max_record_bytes=1024,
    max_batch_bytes=2048,
    snapshot_every_records=0,
    snapshot_every_bytes=0,
)


def _exported_offsets(partition_dir: str, start: int = 0) -> list[int]:
    splits, stop = source.plan_splits(0, partition_dir, start, 1000)
    assert stop is None
    offsets = []
    for split in splits:
        for batch in source.read_split(split):
            offsets += batch.column("log_offset").to_pylist()
    return offsets


def test_the_source_exports_only_what_the_writer_synced(tmp_path):
    # With fsync "never" the active segment's bytes sit in the page cache: a machine crash can
    # take them back after the exporter read them. Only sealed (fsynced) segments go out.
    path = str(tmp_path / "partition-0")
    with open_partition_log(path, LogConfig(fsync_policy="never", **SMALL)) as log:
        log.load_into(Shard(0, 1))
        while len(list_segments(path)) < 3:
            start = log.end_offset
            log.append(records_between(start, start + 20))
        sealed = list_segments(path)[-1].base_offset
        assert _exported_offsets(path) == list(range(sealed))
        end = log.end_offset
    assert _exported_offsets(path) == list(range(end))  # closing synced the rest


def test_the_source_refuses_a_missing_segment_in_the_middle(tmp_path):
    path = str(tmp_path / "partition-0")
    with open_partition_log(path, LogConfig(**SMALL)) as log:
        while len(list_segments(path)) < 4:
            start = log.end_offset
            log.append(records_between(start, start + 20))
        end = log.end_offset
    segments = list_segments(path)
    os.remove(segments[1].path)
    hole = rf"offsets {segments[1].base_offset}\.\.{segments[2].base_offset - 1} are missing"
    with pytest.raises(CorruptLogError, match=hole):  # the split before the hole says so
        _exported_offsets(path)
    above = _exported_offsets(path, segments[2].base_offset)  # nothing missing up there
    assert above == list(range(segments[2].base_offset, end))


def test_the_source_reads_across_a_recorded_skip(tmp_path):
    # The writer continued above the watermark after a crash: the hole is recorded, so the
    # split before it is accepted and the source reads both sides.
    path = str(tmp_path / "partition-0")
    with open_partition_log(path, LogConfig(**SMALL)) as log:
        log.append(records_between(0, 30))
    write_export_watermark(path, "lake1", 35)
    with open_partition_log(path, LogConfig(**SMALL)) as log:
        log.load_into(Shard(0, 1))
        log.append(records_between(35, 50))
    assert _exported_offsets(path, 20) == list(range(20, 30)) + list(range(35, 50))


def test_a_commit_kept_for_the_longest_retention_exports(tmp_path):
    # OffsetCommit v2-4 carries any int64 retention; now + the largest one is past int64, which
    # an Arrow int64 column (and Kafka's record) cannot hold: the record must stay in range.
    path = str(tmp_path / "partition-0")
    longest = 2**63 - 1
    offsets = [OffsetCommitRequestPartition("t", 0, 42)]
    with open_partition_log(path, LogConfig(**SMALL)) as log:
        shard = Shard(0, 1)
        log.load_into(shard)
        shard.on_loaded(1_700_000_000_000)
        step = shard.handle(
            1_700_000_000_000, 1, OffsetCommitRequest("g", -1, "", offsets, None, longest)
        )
        assert step.replies[0][1].partitions[0].error is Errors.NONE
        log.append(step.records)
    splits, _ = source.plan_splits(0, path, 0, 1000)
    rows = [row for split in splits for b in source.read_split(split) for row in b.to_pylist()]
    assert [(r["committed_offset"], r["expire_timestamp_ms"]) for r in rows] == [(42, longest)]
