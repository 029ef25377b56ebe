"""The Delta lake: table creation, exactly-once commits, reading back, maintenance.

Exactly once rests on Delta application transactions (``txn`` actions). Each (cluster, log
partition) has an app id; its version is the partition's export watermark: the next log offset
not yet in that table. Every commit carries the new watermarks of the partitions it covers, in
the same atomic commit as its rows. A commit is made only if the watermarks in the table are
still the ones the rows were computed from (checked on a refreshed snapshot), and delta-rs's
conflict checker rejects it if a concurrent commit set any of the same app ids after that
snapshot. So a replayed or concurrent export either commits exactly the rows above the
watermark or commits nothing (``Raced``); a crash before the commit leaves the table unchanged.

A watermark means something only for the log it was taken from, so each commit also records,
under a second app id per (cluster, log partition), that log's id (``storage.log_id``) as the
transaction's version: the one value per app id a Delta snapshot keeps current, committed
atomically with the rows and watermarks. A copy of a log keeps its id, so under a third app id
the commit records the log's tail at the new watermark: a fingerprint of the watermark and the
CRC of the batch holding the offset before it (``tail_fingerprint``). The exporter compares both
with the log's before it reads anything (``exporter``).

The export never creates an empty table: a table that does not exist yet is named by its path
(``table_or_path``), has no watermarks, and is created by its first commit, together with its
first rows and watermarks. Of two exports creating it at once one wins version 0; the other's
commit fails as ``Raced`` (never retried: delta-rs would retry it as version 1 without the app
id check). So a first export that fails leaves no table behind.

Tables are always read through the Delta log (``file_uris`` of the current snapshot), never as a
folder of Parquet files: compaction leaves old files in place until vacuum, and a folder read
would count their rows twice.
"""

from __future__ import annotations

import datetime as dt_
import os
import struct
import zlib

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import CommitProperties, Transaction

from .schema import (
    OFFSETS_LATEST,
    OFFSETS_LATEST_SCHEMA,
    TABLE_PARTITION_BY,
    TABLE_SCHEMAS,
    spark_schema,
)

APP_PREFIX = "groupcoord-export"
LOG_APP_PREFIX = "groupcoord-export-log"
TAIL_APP_PREFIX = "groupcoord-export-tail"
MAX_COMMIT_RETRIES = 5  # delta-rs retries a commit this often when unrelated commits race


class Raced(Exception):
    """Another export moved this table's watermarks first; nothing was committed."""


def table_path(lake_dir: str, name: str) -> str:
    return os.path.join(lake_dir, name)


def app_id(cluster: str, log_partition: int) -> str:
    return f"{APP_PREFIX}:{cluster}:{log_partition}"


def log_app_id(cluster: str, log_partition: int) -> str:
    return f"{LOG_APP_PREFIX}:{cluster}:{log_partition}"


def tail_app_id(cluster: str, log_partition: int) -> str:
    return f"{TAIL_APP_PREFIX}:{cluster}:{log_partition}"


def tail_fingerprint(watermark: int, batch_crc: int | None) -> int:
    """What a table records of its log's tail: the watermark and the CRC of the batch holding
    offset ``watermark - 1`` (``storage.batch_crc_holding``; None: no batch holds it), hashed
    into a non-negative 32-bit transaction version."""
    crc = -1 if batch_crc is None else batch_crc
    return zlib.crc32(struct.pack(">qq", watermark, crc))


def open_table(lake_dir: str, name: str, create: bool = True) -> DeltaTable:
    """The table; when missing, created empty with its schema (concurrent creators are fine),
    or a ValueError when ``create`` is false (reading a lake that was never exported)."""
    path = table_path(lake_dir, name)
    try:
        return DeltaTable(path)
    except TableNotFoundError:
        if not create:
            raise ValueError(
                f"no Delta table {name!r} in lake {lake_dir!r}: export first"
            ) from None
    os.makedirs(lake_dir, exist_ok=True)
    try:
        return DeltaTable.create(
            path,
            TABLE_SCHEMAS[name],
            partition_by=TABLE_PARTITION_BY[name],
            mode="ignore",
            name=name,
        )
    except Exception:  # lost a creation race: the other creator's table is as good
        return DeltaTable(path)


def table_or_path(lake_dir: str, name: str) -> DeltaTable | str:
    """The table, or its path while it does not exist (its first commit creates it)."""
    try:
        return DeltaTable(table_path(lake_dir, name))
    except TableNotFoundError:
        return table_path(lake_dir, name)


def check_tables(lake_dir: str) -> None:
    """A ValueError unless every table exists (cheap: looks for their Delta logs only)."""
    for name in TABLE_SCHEMAS:
        if not os.path.isdir(os.path.join(table_path(lake_dir, name), "_delta_log")):
            raise ValueError(f"no Delta table {name!r} in lake {lake_dir!r}: export first")


def _versions(table: DeltaTable | str, app, cluster: str, log_partitions) -> dict[int, int | None]:
    """The transaction version of app id ``app(cluster, p)`` per log partition (None: none)."""
    if isinstance(table, str):
        return {p: None for p in log_partitions}
    return {p: table.transaction_version(app(cluster, p)) for p in log_partitions}


def lake_id(table: DeltaTable | str) -> str:
    """The id that names this lake however it is reached (a path, a mount, a URI): the
    Delta table id of ``table``, one of its tables."""
    if isinstance(table, str):
        raise ValueError(f"no Delta table at {table}: a lake's id is its first table's")
    return table.metadata().id


def watermarks(table: DeltaTable | str, cluster: str, log_partitions) -> dict[int, int | None]:
    """Next offset to export per log partition (None: never exported to this table)."""
    return _versions(table, app_id, cluster, log_partitions)


def log_ids(table: DeltaTable | str, cluster: str, log_partitions) -> dict[int, int | None]:
    """The id of the log each partition's watermark was taken from (None: not recorded, as in
    a table exported before logs had ids)."""
    return _versions(table, log_app_id, cluster, log_partitions)


def tails(table: DeltaTable | str, cluster: str, log_partitions) -> dict[int, int | None]:
    """The ``tail_fingerprint`` recorded with each partition's watermark (None: not recorded,
    as in a table exported before tails were)."""
    return _versions(table, tail_app_id, cluster, log_partitions)


def _created(path: str) -> bool:
    # Opening, not looking for _delta_log: a creator that crashed before committing version 0
    # can leave the folder behind, and that is no table.
    try:
        DeltaTable(path)
    except TableNotFoundError:
        return False
    return True


def _name(table: DeltaTable | str) -> str:
    return os.path.basename(table) if isinstance(table, str) else table.metadata().name


def _check_and_props(
    table: DeltaTable | str,
    cluster: str,
    expected: dict[int, int | None],
    new: dict[int, int],
    note: dict | None,
    ids: dict[int, int | None] | None,
    tails: dict[int, int] | None,
) -> CommitProperties:
    if isinstance(table, str):
        if _created(table):
            raise Raced(f"{_name(table)}: created by another export meanwhile")
        now = {p: None for p in expected}
    else:
        table.update_incremental()
        now = watermarks(table, cluster, expected)
    if now != expected:
        raise Raced(f"{_name(table)}: watermarks moved from {expected} to {now}")
    # Per moving partition: its watermark, and what is known of its log (id, tail).
    transactions = [
        Transaction(app(cluster, p), version)
        for app, versions in ((app_id, new), (log_app_id, ids), (tail_app_id, tails))
        for p, version in sorted((versions or {}).items())
        if p in new and version is not None
    ]
    return CommitProperties(
        app_transactions=transactions,
        # A creating commit must win version 0 or fail: delta-rs would retry a lost one as
        # version 1 without checking the winner's app ids, committing the rows twice.
        max_commit_retries=0 if isinstance(table, str) else MAX_COMMIT_RETRIES,
        custom_metadata={
            "groupcoord.cluster": cluster,
            "groupcoord.watermarks": {str(p): v for p, v in new.items()},
            **(note or {}),
        },
    )


def commit_append(
    table: DeltaTable | str,
    rows: pa.Table,
    cluster: str,
    expected: dict[int, int | None],
    new: dict[int, int],
    note: dict | None = None,
    ids: dict[int, int | None] | None = None,
    tails: dict[int, int] | None = None,
) -> None:
    """Append ``rows`` and move the watermarks from ``expected`` to ``new`` in one commit
    (``table`` a path: create the table with them), recording the ``ids`` of the logs they
    were read from and their ``tails`` (``tail_fingerprint``) at the new watermarks."""
    props = _check_and_props(table, cluster, expected, new, note, ids, tails)
    name = _name(table)
    schema = TABLE_SCHEMAS[name]
    rows = rows.select(schema.names).cast(schema)
    try:
        if isinstance(table, str):
            write_deltalake(
                table,
                rows,
                mode="error",
                name=name,
                partition_by=TABLE_PARTITION_BY[name] or None,
                commit_properties=props,
            )
        else:
            write_deltalake(table, rows, mode="append", commit_properties=props)
    except CommitFailedError as exc:
        raise Raced(str(exc)) from exc
    except DeltaError as exc:
        if isinstance(table, str) and _created(table):
            raise Raced(f"{name}: created by another export meanwhile ({exc})") from exc
        raise


_LATEST_KEY = (
    "s.cluster = t.cluster AND s.group_id = t.group_id AND s.topic = t.topic"
    " AND s.partition = t.partition"
)
# Within one log partition the log order is the truth; a group that moved to another log
# partition (the offsets topic was resized) is ordered by commit time.
_NEWER = (
    "((s.log_partition = t.log_partition AND s.log_offset > t.log_offset) OR"
    " (s.log_partition <> t.log_partition AND"
    " coalesce(s.commit_timestamp_ms, 0) >= coalesce(t.commit_timestamp_ms, 0)))"
)


def commit_latest(
    table: DeltaTable | str,
    rows: pa.Table,
    cluster: str,
    expected: dict[int, int | None],
    new: dict[int, int],
    note: dict | None = None,
    ids: dict[int, int | None] | None = None,
    tails: dict[int, int] | None = None,
) -> None:
    """MERGE the newest row per key (``rows`` has one per key plus ``is_tombstone``); into a
    table not yet created (a path), that is inserting the rows that are not tombstones."""
    if isinstance(table, str):
        live = rows.filter(pc.invert(rows["is_tombstone"])) if rows.num_rows else rows
        commit_append(table, live, cluster, expected, new, note, ids, tails)
        return
    if rows.num_rows == 0:  # an empty MERGE commits nothing; the watermarks must still move
        empty = OFFSETS_LATEST_SCHEMA.empty_table()
        commit_append(table, empty, cluster, expected, new, note, ids, tails)
        return
    props = _check_and_props(table, cluster, expected, new, note, ids, tails)
    columns = {name: f"s.{name}" for name in OFFSETS_LATEST_SCHEMA.names}
    try:
        (
            table.merge(
                rows, _LATEST_KEY, source_alias="s", target_alias="t", commit_properties=props
            )
            .when_matched_delete(f"s.is_tombstone AND {_NEWER}")
            .when_matched_update(columns, f"NOT s.is_tombstone AND {_NEWER}")
            .when_not_matched_insert(columns, "NOT s.is_tombstone")
            .execute()
        )
    except CommitFailedError as exc:
        raise Raced(str(exc)) from exc


# -- reading back ---------------------------------------------------------------------------------


def read_arrow(lake_dir: str, name: str) -> pa.Table:
    return open_table(lake_dir, name, create=False).to_pyarrow_table()


def read_spark(spark, lake_dir: str, name: str):
    """A Spark DataFrame of the table's current snapshot (exactly its live files)."""
    table = open_table(lake_dir, name, create=False)
    files = table.file_uris()
    struct = spark_schema(TABLE_SCHEMAS[name])
    if not files:
        return spark.createDataFrame([], struct)
    return spark.read.schema(struct).option("basePath", table_path(lake_dir, name)).parquet(*files)


# -- maintenance ----------------------------------------------------------------------------------


def compact(
    lake_dir: str, today: dt_.date | None = None, target_size_bytes: int = 128 * 1024 * 1024
) -> dict[str, int]:
    """Merge small files: offset_commits day by day for closed days (before ``today``, UTC) and
    its undated tombstone rows, the two small tables whole. Returns files removed per table."""
    today = today or dt_.datetime.now(dt_.UTC).date()
    removed = {}
    commits = open_table(lake_dir, "offset_commits")
    actions = pa.table(commits.get_add_actions(flatten=True)).to_pydict()
    per_day: dict[str, int] = {}
    for day in actions.get("partition.commit_date", []):
        # Tombstones carry no time, so their rows have no date: delta-rs names that partition
        # "" in a filter. It never closes, so it is compacted whenever it has several files.
        if day is None:
            per_day[""] = per_day.get("", 0) + 1
        elif dt_.date.fromisoformat(str(day)) < today:
            per_day[str(day)] = per_day.get(str(day), 0) + 1
    total = 0
    for day, files in sorted(per_day.items()):
        if files > 1:
            metrics = commits.optimize.compact(
                partition_filters=[("commit_date", "=", day)], target_size=target_size_bytes
            )
            total += metrics["numFilesRemoved"]
    removed["offset_commits"] = total
    for name in (OFFSETS_LATEST, "group_generations"):
        table = open_table(lake_dir, name)
        if len(table.file_uris()) > 1:
            removed[name] = table.optimize.compact(target_size=target_size_bytes)["numFilesRemoved"]
        else:
            removed[name] = 0
    return removed


def vacuum(lake_dir: str, retention_hours: int, enforce_retention: bool = True) -> dict[str, int]:
    """Delete files no snapshot within ``retention_hours`` needs; returns files deleted per
    table."""
    if retention_hours < 0:
        raise ValueError(f"retention_hours must be >= 0, got {retention_hours}")
    deleted = {}
    for name in TABLE_SCHEMAS:
        try:
            deleted[name] = len(
                open_table(lake_dir, name).vacuum(
                    retention_hours=retention_hours,
                    dry_run=False,
                    enforce_retention_duration=enforce_retention,
                )
            )
        except DeltaError as exc:
            # Below the table's minimum retention (a guard for concurrent readers).
            raise ValueError(f"vacuum of {name}: {exc}") from exc
    return deleted
