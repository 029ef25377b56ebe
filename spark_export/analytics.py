"""Analytics over the lake, in Spark: activity, progress, lag, Burrow status, describe.

Inputs are DataFrames of one cluster's rows of the lake tables (``lake.read_spark``, filtered
as ``report.choose_cluster`` says: groups are keyed without the cluster) and, for anything
about lag, a table of log-end offsets observed over time (topic, partition, timestamp_ms,
log_end_offset): the coordinator never sees the topics' ends, so lag needs them supplied. Two
as-of joins:

* the lag of a commit (``commit_lags``): the latest log-end observation at or before the
  commit, minus the committed offset (floored at 0), which is what Burrow stores with each
  commit;
* lag over time (``lag_timeline``, ``lag_series``) runs on the log-end timeline instead: at each
  log-end observation, the last commit at or before it. A consumer that stopped committing
  keeps its last offset while the log end moves on, so its lag grows, and a partition without
  commits in some interval still has a lag there.

Time buckets are whole multiples of ``bucket_ms`` since the epoch, so no time zone is involved.
A deleted offset (a tombstone) ends its group partition's history in the views of a moment:
``describe`` as of a past time, partition progress and Burrow status leave it out once the
log proves the deletion, from the next record logged after the tombstone (``current_commits``;
the tombstone itself stores no time), and the lag timeline stops there until the partition is
committed again. ``describe`` "now" reads ``offsets_latest``, where tombstones are applied.
Activity and commit lags are history: they keep a deleted partition's commits.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from groupcoord.coordinator import burrow
from groupcoord.coordinator.validation import INT64_MAX, INT64_MIN

from .schema import LOG_END_SCHEMA, spark_schema

KEY = ("group_id", "topic", "partition")
TP = ("topic", "partition")
# Exact for every int64 and for the difference of any two.
_EXACT = "decimal(20,0)"


def load_log_end(spark, path: str) -> DataFrame:
    """Log-end offsets from a Parquet file/folder or a CSV file with a header."""
    struct = spark_schema(LOG_END_SCHEMA)
    if path.endswith(".csv"):
        frame = spark.read.option("header", True).schema(struct).csv(path)
    else:
        frame = spark.read.parquet(path)
    missing = set(LOG_END_SCHEMA.names) - set(frame.columns)
    if missing:
        raise ValueError(f"log-end table {path!r} lacks columns {sorted(missing)}")
    return frame.select(
        *[
            F.col(f.name).cast(t.dataType)
            for f, t in zip(LOG_END_SCHEMA, struct.fields, strict=True)
        ]
    )


def _commits(commits: DataFrame, until_ms: int | None = None) -> DataFrame:
    live = commits.filter(~F.col("is_tombstone"))
    return live if until_ms is None else live.filter(F.col("commit_timestamp_ms") <= until_ms)


def commit_activity(commits: DataFrame, bucket_ms: int = 3_600_000) -> DataFrame:
    """Per group and time bucket: commits, partitions committed, offsets advanced."""
    _positive(bucket_ms, "bucket_ms")
    prev = Window.partitionBy(*KEY).orderBy("commit_timestamp_ms", "log_offset")
    return (
        _commits(commits)
        .withColumn(
            "advance",
            F.greatest(
                _difference(F.col("committed_offset"), F.lag("committed_offset").over(prev)),
                F.lit(0),
            ),
        )
        .withColumn(
            "bucket_start_ms", F.floor(F.col("commit_timestamp_ms") / bucket_ms) * bucket_ms
        )
        .groupBy("group_id", "bucket_start_ms")
        .agg(
            F.count("*").alias("commits"),
            F.countDistinct("topic", "partition").alias("partitions"),
            _as_long(F.coalesce(F.sum("advance"), F.lit(0))).alias("offsets_advanced"),
        )
        .orderBy("group_id", "bucket_start_ms")
    )


def partition_progress(commits: DataFrame, now_ms: int) -> DataFrame:
    """Per group partition not deleted by ``now_ms`` (``current_commits``): velocity, commit
    interval, rewinds, stalls, commit silence."""
    prev = Window.partitionBy(*KEY).orderBy("commit_timestamp_ms", "log_offset")

    def step(column):
        return _difference(F.col(column), F.lag(column).over(prev))

    steps = (
        current_commits(commits, now_ms)
        .withColumn("d_offset", step("committed_offset"))
        .withColumn("d_ms", step("commit_timestamp_ms"))
    )
    return (
        steps.groupBy(*KEY)
        .agg(
            F.count("*").alias("commits"),
            F.min("commit_timestamp_ms").alias("first_commit_ms"),
            F.max("commit_timestamp_ms").alias("last_commit_ms"),
            F.min_by("committed_offset", F.struct("commit_timestamp_ms", "log_offset")).alias(
                "first_offset"
            ),
            F.max_by("committed_offset", F.struct("commit_timestamp_ms", "log_offset")).alias(
                "last_offset"
            ),
            F.avg("d_ms").alias("mean_commit_interval_ms"),
            F.max("d_ms").alias("max_commit_interval_ms"),
            F.sum(F.when(F.col("d_offset") < 0, 1).otherwise(0)).alias("rewinds"),
            F.sum(F.when(F.col("d_offset") == 0, 1).otherwise(0)).alias("stalled_commits"),
        )
        .withColumn(
            "offsets_per_s",
            F.when(
                F.col("last_commit_ms") > F.col("first_commit_ms"),
                _difference(F.col("last_offset"), F.col("first_offset")).cast("double")
                * 1000.0
                / (F.col("last_commit_ms") - F.col("first_commit_ms")),
            ),
        )
        .withColumn("silence_ms", F.lit(now_ms) - F.col("last_commit_ms"))
        .orderBy(*KEY)
    )


def commit_lags(commits: DataFrame, log_end: DataFrame) -> DataFrame:
    """Each live commit with ``log_end_offset`` as of its time and ``lag`` (null when no
    log-end observation precedes it)."""
    # As-of join without a range join: interleave both streams per topic partition in time
    # order (an observation at the same millisecond sorts first) and carry the last end offset.
    ends = log_end.select(
        *TP, F.col("timestamp_ms").alias("t"), "log_end_offset", F.lit(0).alias("_order")
    )
    rows = (
        _commits(commits)
        .withColumn("t", F.col("commit_timestamp_ms"))
        .withColumn("_order", F.lit(1))
        .withColumn("log_end_offset", F.lit(None).cast("long"))
    )
    stream = rows.unionByName(ends, allowMissingColumns=True)
    upto = Window.partitionBy(*TP).orderBy("t", "_order").rowsBetween(Window.unboundedPreceding, 0)
    return (
        stream.withColumn("log_end_offset", F.last("log_end_offset", ignorenulls=True).over(upto))
        .filter(F.col("_order") == 1)
        .drop("t", "_order")
        .withColumn("lag", _lag("committed_offset"))
    )


def _end_as_of(log_end: DataFrame, as_of_ms: int | None) -> DataFrame:
    ends = log_end if as_of_ms is None else log_end.filter(F.col("timestamp_ms") <= as_of_ms)
    return ends.groupBy(*TP).agg(F.max_by("log_end_offset", "timestamp_ms").alias("log_end_offset"))


def _with_proven_time(commits: DataFrame) -> DataFrame:
    """``commits`` with ``_at``: a commit's time, or for a tombstone the first moment the log
    proves it (``current_commits``; null while nothing was logged after it)."""
    later = (
        Window.partitionBy("cluster", "log_partition")
        .orderBy(F.col("log_offset").desc())
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    at = F.when(F.col("is_tombstone"), F.min("commit_timestamp_ms").over(later)).otherwise(
        F.col("commit_timestamp_ms")
    )
    return commits.withColumn("_at", at)


def current_commits(commits: DataFrame, as_of_ms: int) -> DataFrame:
    """The live commits at or before ``as_of_ms`` of each group partition whose offset was
    not deleted after them by then (OffsetDelete, a deleted or expired group): what Burrow
    and ``kafka-consumer-groups`` still know of it. A partition committed again after its
    deletion starts over.

    A tombstone's time is not stored, but every record logged after it in its log partition
    was stamped later than it happened, so it counts from the earliest of those stamps: the
    first moment the log proves it. Until a later record is logged, it does not count (the
    report "now" reads ``offsets_latest``, where it does)."""
    position = F.struct("_at", "log_offset")
    deleted = F.max(F.when(F.col("is_tombstone"), position)).over(Window.partitionBy(*KEY))
    return (
        _with_proven_time(commits)
        .filter(F.col("_at") <= as_of_ms)
        .withColumn("_deleted", deleted)
        .filter(
            ~F.col("is_tombstone") & (F.col("_deleted").isNull() | (position > F.col("_deleted")))
        )
        .drop("_at", "_deleted")
    )


def latest_offsets(commits: DataFrame, as_of_ms: int) -> DataFrame:
    """The committed offset per group partition as of a time, from the history; a partition
    whose offset was deleted by then has no row (``current_commits``)."""
    newest = Window.partitionBy(*KEY).orderBy(
        F.col("commit_timestamp_ms").desc(), F.col("log_offset").desc()
    )
    return (
        current_commits(commits, as_of_ms)
        .withColumn("_rank", F.row_number().over(newest))
        .filter(F.col("_rank") == 1)
        .drop("_rank")
    )


def describe(
    latest: DataFrame, log_end: DataFrame | None = None, as_of_ms: int | None = None
) -> list[dict]:
    """``kafka-consumer-groups --describe`` rows: GROUP TOPIC PARTITION CURRENT-OFFSET
    LOG-END-OFFSET LAG (lag None without log-end offsets)."""
    frame = latest.select(
        *KEY, F.col("committed_offset").alias("current_offset"), "commit_timestamp_ms", "metadata"
    )
    if log_end is None:
        frame = frame.withColumn("log_end_offset", F.lit(None).cast("long"))
    else:
        frame = frame.join(_end_as_of(log_end, as_of_ms), list(TP), "left")
    frame = frame.withColumn("lag", _lag("current_offset"))
    return [row.asDict() for row in frame.orderBy(*KEY).collect()]


def burrow_status(
    commits: DataFrame,
    log_end: DataFrame,
    now_ms: int,
    window: int = burrow.DEFAULT_WINDOW,
    min_distance_ms: int = burrow.DEFAULT_MIN_DISTANCE_MS,
) -> list[burrow.GroupStatus]:
    """Burrow's verdict per group as of ``now_ms`` (commits after it are ignored), over
    ``window`` slots per partition filled as Burrow fills them (``burrow_slots``)."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if min_distance_ms < 0:
        raise ValueError(f"min_distance_ms must be >= 0, got {min_distance_ms}")
    stored = burrow_slots(commits, log_end, now_ms, window, min_distance_ms)
    # Burrow's ring of recent broker offsets: the last ``window`` log-end observations.
    last_ends = Window.partitionBy(*TP).orderBy(F.col("timestamp_ms").desc())
    ends = (
        log_end.filter(F.col("timestamp_ms") <= now_ms)
        .withColumn("_rank", F.row_number().over(last_ends))
        .filter(F.col("_rank") <= window)
        .groupBy(*TP)
        .agg(
            F.max_by("log_end_offset", "timestamp_ms").alias("log_end_offset"),
            F.collect_list("log_end_offset").alias("recent_log_ends"),
        )
    )
    rows = stored.join(ends, list(TP), "left").collect()
    per_group: dict[str, list[burrow.PartitionStatus]] = {}
    for row in rows:
        points = [
            burrow.CommitPoint(p["offset"], p["timestamp_ms"], p["lag"]) for p in row["slots"]
        ]
        last = points[-1]
        end = row["log_end_offset"]
        current_lag = max(end - last.offset, 0) if end is not None else last.lag
        per_group.setdefault(row["group_id"], []).append(
            burrow.partition_status(
                row["group_id"],
                row["topic"],
                row["partition"],
                points,
                current_lag,
                now_ms,
                window,
                row["recent_log_ends"] or (),
            )
        )
    return [burrow.group_status(g, parts) for g, parts in sorted(per_group.items())]


_SLOTS = "array<struct<timestamp_ms:bigint,offset:bigint,lag:bigint>>"


def burrow_slots(
    commits: DataFrame, log_end: DataFrame, now_ms: int, window: int, min_distance_ms: int
) -> DataFrame:
    """Per group partition not deleted by ``now_ms`` (``current_commits``), ``slots``:
    Burrow's ring as of ``now_ms``, oldest first. Commits without a known log end are left
    out, as Burrow drops them."""
    order = Window.partitionBy(*KEY).orderBy("commit_timestamp_ms", "log_offset")
    after = order.rowsBetween(Window.currentRow, Window.unboundedFollowing)
    gap = F.col("commit_timestamp_ms") - F.lag("commit_timestamp_ms").over(order)
    # A commit min-distance or more after the previous one opens a new slot whatever came
    # before (the newest slot's time is at most the previous commit's), so the ring's last
    # ``window`` slots lie within the newest ``window`` runs that start so: older commits
    # cannot matter, and the collapse below reads a bounded history.
    lags = (
        commit_lags(current_commits(commits, now_ms), log_end)
        .filter(F.col("lag").isNotNull())
        .withColumn("_opens", (gap.isNull() | (gap >= min_distance_ms)).cast("int"))
        .withColumn("_run", F.sum("_opens").over(after) + 1 - F.col("_opens"))
        .filter(F.col("_run") <= window)
    )

    def add(slots, commit):
        newest = F.try_element_at(slots, F.lit(-1))
        joins = (F.size(slots) > 0) & (
            commit["commit_timestamp_ms"] - newest["timestamp_ms"] < min_distance_ms
        )
        # Burrow rewinds the ring one slot: the newest slot takes the commit's offset and lag
        # and keeps its own time, so steady fast commits still open a slot per min-distance.
        replaced = F.concat(
            F.slice(slots, 1, F.greatest(F.size(slots) - 1, F.lit(0))),
            F.array(
                F.struct(
                    newest["timestamp_ms"].alias("timestamp_ms"),
                    commit["committed_offset"].alias("offset"),
                    commit["lag"].alias("lag"),
                )
            ),
        )
        grown = F.concat(
            slots,
            F.array(
                F.struct(
                    commit["commit_timestamp_ms"].alias("timestamp_ms"),
                    commit["committed_offset"].alias("offset"),
                    commit["lag"].alias("lag"),
                )
            ),
        )
        kept = F.slice(grown, F.greatest(F.size(grown) - window + 1, F.lit(1)), window)
        return F.when(joins, replaced).otherwise(kept)

    # Struct order sorts by time, then log offset: commits of one millisecond keep log order.
    history = F.array_sort(
        F.collect_list(F.struct("commit_timestamp_ms", "log_offset", "committed_offset", "lag"))
    )
    return lags.groupBy(*KEY).agg(F.aggregate(history, F.array().cast(_SLOTS), add).alias("slots"))


def lag_timeline(commits: DataFrame, log_end: DataFrame) -> DataFrame:
    """Per group partition and log-end observation from its first commit on, until its
    offset's deletion (``current_commits``) and again from its next commit: the offset of the
    last commit at or before the observation, and ``lag`` (end minus offset, floored at 0).
    Columns: group_id, topic, partition, timestamp_ms, log_end_offset, committed_offset, lag."""
    events = _with_proven_time(commits).filter(F.col("_at").isNotNull())
    samples = log_end.join(_commits(commits).select(*KEY).distinct(), list(TP)).select(
        *KEY, F.col("timestamp_ms").alias("t"), "log_end_offset", F.lit(1).alias("_order")
    )
    rows = events.select(
        *KEY,
        F.col("_at").alias("t"),
        "log_offset",
        F.struct("is_tombstone", "committed_offset").alias("_event"),
        F.lit(0).alias("_order"),
    )
    # A commit or deletion at the same millisecond as an observation counts as before it;
    # events of one millisecond keep their log order.
    upto = (
        Window.partitionBy(*KEY)
        .orderBy("t", "_order", "log_offset")
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    last = F.last("_event", ignorenulls=True).over(upto)
    return (
        rows.unionByName(samples, allowMissingColumns=True)
        .withColumn("_last", last)
        .withColumn(
            "committed_offset",
            F.when(~F.col("_last.is_tombstone"), F.col("_last.committed_offset")),
        )
        .filter((F.col("_order") == 1) & F.col("committed_offset").isNotNull())
        .select(
            *KEY,
            F.col("t").alias("timestamp_ms"),
            "log_end_offset",
            "committed_offset",
            _lag("committed_offset").alias("lag"),
        )
    )


def lag_series(commits: DataFrame, log_end: DataFrame, bucket_ms: int) -> DataFrame:
    """Per group and bucket: ``total_lag``, the sum over its partitions of each one's lag at
    its last log-end observation in the bucket, and ``partitions``, how many were summed."""
    _positive(bucket_ms, "bucket_ms")
    last = Window.partitionBy(*KEY, "bucket_start_ms").orderBy(F.col("timestamp_ms").desc())
    return (
        lag_timeline(commits, log_end)
        .withColumn("bucket_start_ms", F.floor(F.col("timestamp_ms") / bucket_ms) * bucket_ms)
        .withColumn("_rank", F.row_number().over(last))
        .filter(F.col("_rank") == 1)
        .groupBy("group_id", "bucket_start_ms")
        .agg(
            _as_long(F.sum(F.col("lag").cast(_EXACT))).alias("total_lag"),
            F.count("*").alias("partitions"),
        )
        .orderBy("group_id", "bucket_start_ms")
    )


def _lag(offset_column: str):
    # greatest() skips nulls, so an unknown log end must stay null explicitly, not become 0.
    return F.when(
        F.col("log_end_offset").isNotNull(),
        _as_long(F.greatest(_difference(F.col("log_end_offset"), F.col(offset_column)), F.lit(0))),
    )


def _difference(left, right):
    """``left - right`` of two int64 columns, exactly. Offsets are whatever clients committed
    (Kafka stores any int64), and the difference of two may not fit an int64, which Spark's
    ANSI arithmetic (its default since 4.0) refuses for the whole query."""
    return left.cast(_EXACT) - right.cast(_EXACT)


def _as_long(column):
    """A whole-number column held within int64, as a long: a lag or an advance beyond int64
    reads as int64's largest."""
    return F.least(F.greatest(column, F.lit(INT64_MIN)), F.lit(INT64_MAX)).cast("long")


def _positive(value: int, name: str) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
