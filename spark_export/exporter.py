"""The export: partition logs -> Delta tables, exactly once, in bounded rounds.

Each round:
1. reads every table's watermark per log partition (``lake.watermarks``) and the log's start
   offset;
2. plans splits from the lowest watermark, at most ``max_segments_per_round`` segments per
   partition (this bounds driver memory), and materialises the source once
   (``localCheckpoint``) so all three tables see the same rows. History between the lowest
   watermark and the first offset the plan can still read (the log start, or a later segment
   when retention ran meanwhile) is a ``Gap``: compacted away before it was exported. Every
   gap, in any round, is reported and recorded in the commits that skip it, never hidden;
3. per table, keeps the rows at or above that table's own watermark and commits them together
   with the new watermarks (``lake.commit_append`` / ``lake.commit_latest``). A table that
   another export moved first raises ``Raced`` and is simply re-planned next round.
Rounds repeat until every partition is read to its durable end (what its writer has published as
fsynced; see ``source``). Tables are independent, so a crash
between two tables' commits only leaves the later table behind, and the next run catches it up.

Before the first round, each log's id (``storage.log_id``) is compared with the one the tables
recorded with their watermarks. A different id means the log was wiped or replaced, or
``log_dir`` is another deployment's: its offsets are not the ones the watermarks count, so the
export refuses (``LogReplacedError``) before it reads or writes anything, rather than skip the
new log's records below the old watermark and mix the rest into the old log's history. A copy
of a log keeps its id: put back from a backup older than the lake, it gives offsets the lake
has already passed to new commits. So each table also recorded the log's tail at its watermark
(``lake.tail_fingerprint``: the CRC of the batch before the watermark), and a log whose batch
there differs, or that no longer reaches it, is refused the same way. Once retention has
removed that batch there is nothing left to compare, and the log is taken as it is. Finding
that batch walks the headers of the segment holding it: about 0.1 s for a full 16 MiB segment
of one-record appends, once per partition at the start and once per partition a round moves.

Finally the lowest watermark of the three tables is written beside each partition's log, in
this lake's own file (``storage.watermark``: keyed by the lake's id, ``lake.lake_id``, and the
cluster), so a log configured with ``retain_until_exported`` keeps every segment some table of
some lake still needs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import msgspec
from pyspark.sql import Window
from pyspark.sql import functions as F

from groupcoord.storage import (
    batch_crc_holding,
    lake_key,
    log_start_offset,
    read_log_id,
    write_export_watermark,
)

from . import lake, source
from .schema import GROUP_GENERATIONS, OFFSET_COMMITS, OFFSETS_LATEST, TABLES

MS_PER_DAY = 86_400_000


class ExportConfig(msgspec.Struct, frozen=True):
    cluster: str = "default"
    max_segments_per_round: int = 64  # per log partition; bounds one round's memory
    max_rounds: int = 10_000  # a safety stop; each round makes progress or races

    def __post_init__(self) -> None:
        if not self.cluster or ":" in self.cluster:
            raise ValueError(f"cluster must be non-empty and free of ':', got {self.cluster!r}")
        if self.max_segments_per_round < 1 or self.max_rounds < 1:
            raise ValueError("max_segments_per_round and max_rounds must be >= 1")


DEFAULT_EXPORT_CONFIG = ExportConfig()  # frozen, so one instance serves every call


class LogReplacedError(Exception):
    """A log is not the one the lake's watermarks were taken from (module docstring)."""


class Gap(msgspec.Struct, frozen=True):
    log_partition: int
    from_offset: int  # first offset that no table has and the log no longer holds
    to_offset: int  # exclusive: the log's start offset


class ExportResult(msgspec.Struct):
    cluster: str
    rows: dict[str, int]  # rows committed per table in this run
    rounds: int = 0
    raced: int = 0  # table commits abandoned to a concurrent export
    gaps: list[Gap] = []
    watermarks: dict[int, int] = {}  # next offset per log partition, all tables agreeing
    seconds: float = 0.0

    def summary(self) -> str:
        rows = ", ".join(f"{name} +{n}" for name, n in self.rows.items())
        text = (
            f"exported cluster {self.cluster!r} in {self.rounds} round(s), "
            f"{self.seconds:.1f}s: {rows}"
        )
        if self.raced:
            text += f"; {self.raced} commit(s) yielded to a concurrent export"
        for gap in self.gaps:
            text += (
                f"\nGAP: log partition {gap.log_partition} offsets "
                f"[{gap.from_offset}, {gap.to_offset}) were compacted away before export"
            )
        return text


def export(
    spark,
    log_dir: str,
    lake_dir: str,
    config: ExportConfig = DEFAULT_EXPORT_CONFIG,
    progress: Callable[[str], None] | None = None,
) -> ExportResult:
    """Export every not-yet-exported record of ``log_dir``'s partitions into ``lake_dir``."""
    say = progress or (lambda _line: None)
    started = time.monotonic()
    dirs = source.partition_dirs(log_dir)
    ids = check_log_ids(dirs, lake_dir, config.cluster)
    result = ExportResult(config.cluster, {name: 0 for name in TABLES})
    gaps: dict[tuple[int, int], Gap] = {}  # by (log partition, from offset)
    while result.rounds < config.max_rounds:
        more = _round(spark, dirs, ids, lake_dir, config, result, gaps, say)
        result.rounds += 1
        if not more:
            break
    result.gaps = sorted(gaps.values(), key=lambda g: (g.log_partition, g.from_offset))
    result.watermarks = _publish_watermarks(dirs, lake_dir, config.cluster)
    result.seconds = time.monotonic() - started
    return result


def check_log_ids(dirs: dict[int, str], lake_dir: str, cluster: str) -> dict[int, int | None]:
    """Each partition's log id; ``LogReplacedError`` when a table holds a watermark of that
    partition taken from another log. A table that recorded no id (exported before logs had
    ids) accepts the log, and records its id with its next commit."""
    ids = {p: read_log_id(pdir) for p, pdir in dirs.items()}
    crcs: dict[tuple[int, int], int | None] = {}  # (partition, watermark): the tables share them
    for name in TABLES:
        table = lake.table_or_path(lake_dir, name)
        marks = lake.watermarks(table, cluster, dirs)
        for p, recorded in lake.log_ids(table, cluster, dirs).items():
            if marks[p] is None or recorded is None or recorded == ids[p]:
                continue
            found = "has no log id" if ids[p] is None else f"has log id {ids[p]:x}"
            raise LogReplacedError(
                f"log partition {p} ({dirs[p]}) {found}, but table {name!r} exported log "
                f"{recorded:x} to offset {marks[p]} as cluster {cluster!r}: the log was wiped or "
                f"replaced, or these logs are another deployment's; nothing was exported. "
                f"Export them under another --cluster, or point --logs at the exported logs"
            )
        for p, recorded in lake.tails(table, cluster, dirs).items():
            if marks[p] is not None and recorded is not None:
                if (p, marks[p]) not in crcs:
                    crcs[(p, marks[p])] = batch_crc_holding(dirs[p], marks[p] - 1)
                _check_tail(p, dirs[p], marks[p], crcs[(p, marks[p])], recorded, name, cluster)
    return ids


def _check_tail(
    p: int, pdir: str, watermark: int, crc: int | None, recorded: int, name: str, cluster: str
) -> None:
    """``LogReplacedError`` unless ``crc``, of the batch the log holds before ``watermark``
    (``storage.batch_crc_holding``), is the one table ``name`` recorded
    (``lake.tail_fingerprint``), or that batch is below the log's start."""
    if crc is None and watermark - 1 < log_start_offset(pdir):
        return  # removed by retention (maybe while it was looked for): nothing to compare
    if lake.tail_fingerprint(watermark, crc) == recorded:
        return
    held = "no longer holds offset" if crc is None else "holds another batch at offset"
    raise LogReplacedError(
        f"log partition {p} ({pdir}) {held} {watermark - 1}, the last that table {name!r} "
        f"exported from it as cluster {cluster!r}: the log was restored from an older copy, "
        f"or these logs are a copy that went its own way; nothing was exported. Export them "
        f"under another --cluster, or point --logs at the exported logs"
    )


def _round(spark, dirs, ids, lake_dir, config, result, gaps, say) -> bool:
    """One round; True when some partition has more to read (or a commit raced)."""
    # A table not yet created stays a path until its first commit creates it with rows.
    tables = {name: lake.table_or_path(lake_dir, name) for name in TABLES}
    marks = {name: lake.watermarks(t, config.cluster, dirs) for name, t in tables.items()}
    starts: dict[str, dict[int, int]] = {name: {} for name in TABLES}
    splits, stops = [], {}
    for p, pdir in dirs.items():
        log_start = log_start_offset(pdir)
        for name in TABLES:
            starts[name][p] = max(marks[name][p] or 0, log_start)
        lowest = min((marks[name][p] or 0) for name in TABLES)
        planned, stops[p] = source.plan_splits(
            p, pdir, min(s[p] for s in starts.values()), config.max_segments_per_round
        )
        # The plan lists the segments after log_start was read: retention may have moved on.
        first = max(log_start, planned[0].from_offset if planned else 0)
        if lowest < first:
            known = gaps.get((p, lowest))
            if known is None or known.to_offset < first:
                gaps[(p, lowest)] = Gap(p, lowest, first)
                say(
                    f"GAP: log partition {p}: offsets [{lowest}, {first}) were compacted "
                    f"away before export; exporting from {first}"
                )
            for name in TABLES:
                starts[name][p] = max(starts[name][p], first)
        splits += planned
    if not splits:
        return False
    say(
        f"round {result.rounds + 1}: reading {len(splits)} segment(s) of "
        f"{len(dirs)} log partition(s)"
    )
    rows = (
        source.load(spark, splits)
        .withColumn("cluster", F.lit(config.cluster))
        .localCheckpoint(eager=True)
    )
    ends = {
        r["log_partition"]: r["end"]
        for r in rows.groupBy("log_partition").agg(F.max("log_offset").alias("end")).collect()
    }
    new = {}
    for p in dirs:
        floor = min(s[p] for s in starts.values())
        new[p] = max(floor, ends.get(p, -1) + 1, stops[p] or 0)
    movings = {
        name: {p: v for p, v in new.items() if marks[name][p] is None or v > marks[name][p]}
        for name in TABLES
    }
    # The log's tail at each new watermark, for the partitions some table moves to it (reading
    # a segment's headers: not for the partitions that stay).
    tails = {
        p: lake.tail_fingerprint(new[p], batch_crc_holding(dirs[p], new[p] - 1))
        for p in set().union(*movings.values())
    }
    builders = {
        OFFSET_COMMITS: _offset_commits,
        OFFSETS_LATEST: _offsets_latest,
        GROUP_GENERATIONS: _group_generations,
    }
    raced = False
    for name in TABLES:
        moving = movings[name]
        if not moving:
            continue
        batch = builders[name](rows, {p: starts[name][p] for p in moving}).toArrow()
        commit = lake.commit_latest if name == OFFSETS_LATEST else lake.commit_append
        try:
            commit(
                tables[name],
                batch,
                config.cluster,
                {p: marks[name][p] for p in moving},
                moving,
                note=_gap_note(gaps, marks[name], moving),
                ids=ids,
                tails=tails,
            )
        except lake.Raced as exc:
            raced = True
            result.raced += 1
            say(f"{name}: yielded to a concurrent export ({exc})")
            continue
        result.rows[name] += batch.num_rows
        say(f"{name}: +{batch.num_rows} rows, watermarks {moving}")
    # A raced table is re-planned from its new watermarks next round.
    return raced or any(stop is not None for stop in stops.values())


def _gap_note(gaps: dict[tuple[int, int], Gap], marks, moving: dict[int, int]) -> dict:
    """The gaps a commit moving ``marks`` to ``moving`` steps over."""
    found = [
        msgspec.to_builtins(g)
        for g in sorted(gaps.values(), key=lambda g: (g.log_partition, g.from_offset))
        if g.log_partition in moving
        and g.from_offset < moving[g.log_partition]
        and g.to_offset > (marks[g.log_partition] or 0)
    ]
    return {"groupcoord.gaps": found} if found else {}


def _above(starts: dict[int, int]):
    """Rows at or above their partition's start offset (partitions not listed are dropped)."""
    pairs = [F.lit(x) for p, s in sorted(starts.items()) for x in (p, s)]
    return F.col("log_offset") >= F.create_map(*pairs)[F.col("log_partition")]


def _offset_commits(rows, starts):
    # The UTC day, computed without the session time zone (spark-submit may set another).
    day = F.expr(f"date_from_unix_date(CAST(floor(commit_timestamp_ms / {MS_PER_DAY}) AS INT))")
    return rows.filter((F.col("kind") == "offset") & _above(starts)).withColumn("commit_date", day)


def _offsets_latest(rows, starts):
    # A group's records live in one log partition (spec §7.1), where log order is the truth;
    # the partition tie-break only matters for an offsets topic that was resized.
    newest = Window.partitionBy("cluster", "group_id", "topic", "partition").orderBy(
        F.col("log_partition").desc(), F.col("log_offset").desc()
    )
    return (
        rows.filter((F.col("kind") == "offset") & _above(starts))
        .withColumn("_rank", F.row_number().over(newest))
        .filter(F.col("_rank") == 1)
        .drop("_rank")
    )


def _group_generations(rows, starts):
    return rows.filter((F.col("kind") == "group") & _above(starts))


def _publish_watermarks(dirs: dict[int, str], lake_dir: str, cluster: str) -> dict[int, int]:
    """Write each partition's lowest table watermark beside its log, in this lake's file.
    Always the value read from the tables: a slower concurrent export may write a lower one,
    which only makes retention keep more; never a value above what every table holds."""
    tables = [lake.table_or_path(lake_dir, name) for name in TABLES]
    published = {}
    named = None  # this lake's file key and what its body says of the lake: found once
    for p, pdir in dirs.items():
        marks = [lake.watermarks(t, cluster, [p])[p] for t in tables]
        if any(m is None for m in marks):
            continue
        if named is None:  # every table exists: each holds a watermark
            lake_id = lake.lake_id(tables[0])
            where = {"cluster": cluster, "lake": os.path.abspath(lake_dir), "lake_id": lake_id}
            named = (lake_key(lake_id, cluster), where)
        key, where = named
        published[p] = min(marks)
        write_export_watermark(pdir, key, published[p], **where)
    return published
