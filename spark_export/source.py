"""Spark source ``groupcoord_log``: reads partition logs in parallel, one input split per segment.

The driver plans the splits (``plan_splits``): for each log partition, the segments that hold
offsets at or above the partition's start offset and below its durable end (what the writer
has published as fsynced: ``groupcoord.storage.durable_end_offset``; bytes still in the page
cache could vanish in a machine crash after being exported), at most ``max_segments`` of them.
The plan travels to the reader as a JSON option; each Spark task reads its one segment from its
start offset to that end through ``groupcoord.storage.read_log`` (read-only; it stops cleanly at
a torn tail, skips unknown record types, and refuses, like every reader of the log, a hole
between its segment and the next that the writer did not record as skipped) and yields Arrow
record batches in ``schema.SOURCE_SCHEMA``. Nothing here writes, and nothing talks to an actor,
so an export never slows the coordinator.

Every split is bounded, but the exporter still materialises the source once per round
(``localCheckpoint``) so every table of the round reads the log once and sees the same rows.
"""

from __future__ import annotations

import json
import os
import re

import msgspec
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from groupcoord.coordinator.consumer_protocol import decode_assignment, subscribed_topics
from groupcoord.coordinator.records import GroupMetadataKey, OffsetCommitKey
from groupcoord.storage import durable_end_offset, list_segments, read_log
from groupcoord.storage.writer_files import is_partition_log

from . import schema

SOURCE_NAME = "groupcoord_log"
PARTITION_DIR = re.compile(r"^partition-(\d+)$")
BATCH_ROWS = 32_768  # rows per Arrow batch a task yields (bounds worker memory)
MAX_SPLITS = 100_000  # a plan larger than this is a configuration error


class Split(msgspec.Struct, frozen=True):
    log_partition: int
    partition_dir: str
    segment_path: str
    from_offset: int
    to_offset: int  # exclusive: the durable end when the plan was made


def partition_dirs(log_dir: str) -> dict[int, str]:
    """``{n: path}`` for every ``partition-<n>`` folder under ``log_dir``; a ValueError when
    there is none."""
    if not os.path.isdir(log_dir):
        raise ValueError(f"log directory {log_dir!r} does not exist")
    found = {}
    for name in os.listdir(log_dir):
        match = PARTITION_DIR.match(name)
        if match and os.path.isdir(os.path.join(log_dir, name)):
            found[int(match.group(1))] = os.path.join(log_dir, name)
    if not found:  # a typo or one partition's directory, not an export of nothing
        hint = ""
        if is_partition_log(log_dir):
            parent = os.path.dirname(os.path.normpath(log_dir))
            hint = f": it is one partition's own directory: pass its parent, {parent!r}"
        raise ValueError(f"log directory {log_dir!r} holds no partition-<n> directories{hint}")
    return dict(sorted(found.items()))


def plan_splits(
    log_partition: int, partition_dir: str, start_offset: int, max_segments: int
) -> tuple[list[Split], int | None]:
    """Splits for one partition from ``start_offset`` to its durable end; also the offset where
    the plan stops short (the next unplanned segment's base offset), or None when it reaches
    the durable end."""
    durable_end = durable_end_offset(partition_dir)  # read first: segments only grow past it
    segments = sorted(list_segments(partition_dir), key=lambda s: s.base_offset)
    splits: list[Split] = []
    for i, seg in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if next_base is not None and next_base <= start_offset:
            continue  # wholly below the watermark
        if seg.base_offset >= durable_end:
            break  # nothing in it is known to be on disk yet
        if len(splits) == max_segments:
            return splits, seg.base_offset
        splits.append(
            Split(
                log_partition,
                partition_dir,
                str(seg.path),
                max(start_offset, seg.base_offset),
                durable_end,
            )
        )
    return splits, None


class GroupcoordLogSource(DataSource):
    """``spark.read.format("groupcoord_log").option("splits", json).load()``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self):
        return schema.spark_schema(schema.SOURCE_SCHEMA)

    def reader(self, schema) -> LogReader:
        return LogReader(self.options.get("splits", "[]"))


class _SplitPartition(InputPartition):
    def __init__(self, split: Split) -> None:
        super().__init__(msgspec.json.encode(split))


class LogReader(DataSourceReader):
    def __init__(self, splits_json: str) -> None:
        self.splits = msgspec.json.decode(splits_json, type=list[Split])
        if len(self.splits) > MAX_SPLITS:
            raise ValueError(f"{len(self.splits)} splits exceed the limit of {MAX_SPLITS}")

    def partitions(self):
        # An empty plan still needs one partition; it reads nothing.
        return [_SplitPartition(s) for s in self.splits] or [InputPartition(None)]

    def read(self, partition):
        if partition.value is None:
            return
        yield from read_split(msgspec.json.decode(partition.value, type=Split))


def read_split(split: Split):
    """Arrow batches of the split's entries (runs in a Spark Python worker). A segment that
    retention deleted after planning fails the task, so the round commits nothing and the next
    run reports the gap instead of skipping it."""
    rows = _Columns(split.log_partition)
    for entry in read_log(
        split.partition_dir,
        from_offset=split.from_offset,
        segment=split.segment_path,
        to_offset=split.to_offset,
    ):
        rows.add(entry.offset, entry.record)
        if rows.count >= BATCH_ROWS:
            yield rows.batch()
            rows = _Columns(split.log_partition)
    if rows.count:
        yield rows.batch()


class _Columns:
    """Column lists for one Arrow batch; decoding a record appends one value to each."""

    def __init__(self, log_partition: int) -> None:
        self.log_partition = log_partition
        self.cols = {f.name: [] for f in schema.SOURCE_SCHEMA}
        self.count = 0

    def add(self, log_offset: int, record) -> None:
        key, value, c = record.key, record.value, self.cols
        if isinstance(key, OffsetCommitKey):
            kind, topic, partition = "offset", key.topic, key.partition
            offset_value = (
                (None,) * 5
                if value is None
                else (
                    value.offset,
                    value.leader_epoch,
                    value.metadata,
                    value.commit_timestamp_ms,
                    _expiry(value.expire_timestamp_ms),
                )
            )
            group_value = (None,) * 7
        elif isinstance(key, GroupMetadataKey):
            kind, topic, partition = "group", None, None
            offset_value = (None,) * 5
            group_value = (
                (None,) * 7
                if value is None
                else (
                    value.protocol_type,
                    value.generation,
                    value.protocol,
                    value.leader,
                    value.current_state_timestamp_ms,
                    len(value.members),
                    [_member(m, value.protocol_type) for m in value.members],
                )
            )
        else:  # a key type this exporter does not know: skip it
            return
        for name, item in zip(
            (
                "kind",
                "log_partition",
                "log_offset",
                "group_id",
                "topic",
                "partition",
                "committed_offset",
                "leader_epoch",
                "metadata",
                "commit_timestamp_ms",
                "expire_timestamp_ms",
                "is_tombstone",
                "protocol_type",
                "generation",
                "protocol",
                "leader",
                "state_timestamp_ms",
                "member_count",
                "members",
            ),
            (
                kind,
                self.log_partition,
                log_offset,
                key.group,
                topic,
                partition,
                *offset_value,
                value is None,
                *group_value,
            ),
            strict=True,
        ):
            c[name].append(item)
        self.count += 1

    def batch(self) -> pa.RecordBatch:
        return pa.RecordBatch.from_pydict(self.cols, schema=schema.SOURCE_SCHEMA)


def _expiry(expire_timestamp_ms: int | None) -> int | None:
    return None if expire_timestamp_ms is None or expire_timestamp_ms < 0 else expire_timestamp_ms


def _member(m, protocol_type: str) -> dict:
    topics = assigned = None
    if protocol_type == "consumer":
        found = subscribed_topics(m.subscription)
        topics = sorted(found) if found is not None else None
        try:
            assigned = [
                {"topic": t, "partition": p} for t, p in decode_assignment(m.assignment).partitions
            ]
        except ValueError:
            assigned = None  # unparsable bytes: "assignment unknown", not an error
    return {
        "member_id": m.member_id,
        "group_instance_id": m.group_instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "rebalance_timeout_ms": m.rebalance_timeout_ms,
        "session_timeout_ms": m.session_timeout_ms,
        "subscription": m.subscription,
        "assignment": m.assignment,
        "subscribed_topics": topics,
        "assigned_partitions": assigned,
    }


def load(spark, splits: list[Split]):
    """The source DataFrame for ``splits`` (registers the source on first use)."""
    spark.dataSource.register(GroupcoordLogSource)
    return (
        spark.read.format(SOURCE_NAME)
        .option("splits", json.dumps([msgspec.to_builtins(s) for s in splits]))
        .load()
    )
