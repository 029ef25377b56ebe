"""Export round trips from real coordinator logs: exactly once under re-runs, races and crashes."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import threading

import duckdb
import polars as pl
import pytest
from deltalake import DeltaTable

import groupcoord.storage as storage
from groupcoord.coordinator.records import GroupMetadataKey, OffsetCommitKey
from groupcoord.spark_export import cli, exporter, lake, session
from groupcoord.spark_export.exporter import ExportConfig, Gap, export
from groupcoord.spark_export.schema import (
    GROUP_GENERATIONS,
    OFFSET_COMMITS,
    OFFSETS_LATEST,
    TABLES,
)
from groupcoord.storage import list_segments, read_export_watermarks, read_log
from tests.core.harness import GROUP, GROUP2, GROUP3
from tests.spark.conftest import export_holds_every_commit, live_commits, retained_run


def _lake_state(lake_dir):
    return {
        name: (
            lake.open_table(lake_dir, name).version(),
            sorted(map(str, lake.read_arrow(lake_dir, name).to_pylist())),
        )
        for name in TABLES
    }


def _log_entries(run):
    return list(read_log(run.dir))


def _assert_exactly_once(run, lake_dir):
    """The lake holds every log record once, every acked commit, and the shard's offsets."""
    entries = _log_entries(run)
    commits = lake.read_arrow(lake_dir, OFFSET_COMMITS).to_pylist()
    positions = [(r["cluster"], r["log_partition"], r["log_offset"]) for r in commits]
    assert len(positions) == len(set(positions))
    want = {e.offset: e.record for e in entries if isinstance(e.record.key, OffsetCommitKey)}
    assert sorted(r["log_offset"] for r in commits) == sorted(want)
    for row in commits:
        record = want[row["log_offset"]]
        assert (row["group_id"], row["topic"], row["partition"]) == (
            record.key.group,
            record.key.topic,
            record.key.partition,
        )
        assert row["is_tombstone"] == (record.value is None)
        if record.value is not None:
            assert row["committed_offset"] == record.value.offset
            assert row["commit_timestamp_ms"] == record.value.commit_timestamp_ms
            assert (
                row["commit_date"].toordinal()
                == record.value.commit_timestamp_ms // 86_400_000 + 719_163
            )
    assert live_commits(commits) == collections.Counter(run.acked)

    latest = {
        (r["group_id"], r["topic"], r["partition"]): r["committed_offset"]
        for r in lake.read_arrow(lake_dir, OFFSETS_LATEST).to_pylist()
    }
    shard = {}
    for group in (GROUP, GROUP2, GROUP3):
        shard.update({(group, t, p): o for (t, p), o in run.h.committed(group).items()})
    assert latest == shard

    groups = lake.read_arrow(lake_dir, GROUP_GENERATIONS).to_pylist()
    want_groups = sorted(e.offset for e in entries if isinstance(e.record.key, GroupMetadataKey))
    assert sorted(r["log_offset"] for r in groups) == want_groups
    return commits


def test_round_trip_from_coordinator_log(spark, coordinator_run, tmp_path):
    run = coordinator_run
    run.play(rounds=40)
    run.delete_offset(GROUP3, 3)
    lake_dir = str(tmp_path / "lake")
    logs = os.path.dirname(run.dir)

    assert len(list_segments(run.dir)) > 3  # several splits

    lines = []
    result = export(
        spark, logs, lake_dir, ExportConfig(max_segments_per_round=2), progress=lines.append
    )
    assert result.rounds > 1 and not result.gaps and result.raced == 0
    assert any(line.startswith("round 1") for line in lines)
    commits = _assert_exactly_once(run, lake_dir)
    assert result.rows[OFFSET_COMMITS] == len(commits)
    assert any(r["is_tombstone"] for r in commits)
    assert len({r["commit_date"] for r in commits if r["commit_date"]}) > 1

    # The newest generation of the consumer group, with its members' client ids and hosts.
    groups = [
        r
        for r in lake.read_arrow(lake_dir, GROUP_GENERATIONS).to_pylist()
        if r["group_id"] == GROUP
    ]
    newest = max(groups, key=lambda r: r["log_offset"])
    group = run.h.shard.group(GROUP)
    assert (newest["generation"], newest["leader"], newest["member_count"]) == (
        group.generation_id,
        group.leader_id,
        2,
    )
    assert {m["client_host"] for m in newest["members"]} == {"/127.0.0.1"}

    # The watermark beside the log is where every table stands: the log's end.
    assert (
        list(read_export_watermarks(run.dir).values())
        == [_log_entries(run)[-1].offset + 1]
        == [result.watermarks[0]]
    )

    # The same tables read back in Spark, DuckDB and Polars.
    dataset = DeltaTable(lake.table_path(lake_dir, OFFSET_COMMITS)).to_pyarrow_dataset()
    # An explicit connection, closed after use, rather than DuckDB's process-wide default one.
    with duckdb.connect() as con:
        con.register("dataset", dataset)
        by_duckdb = con.sql(
            "SELECT group_id, count(*) FROM dataset WHERE NOT is_tombstone "
            "GROUP BY group_id ORDER BY group_id"
        ).fetchall()
    by_polars = sorted(
        pl.read_delta(lake.table_path(lake_dir, OFFSET_COMMITS))
        .filter(~pl.col("is_tombstone"))
        .group_by("group_id")
        .len()
        .rows()
    )
    by_spark = sorted(
        tuple(r)
        for r in lake.read_spark(spark, lake_dir, OFFSET_COMMITS)
        .filter("NOT is_tombstone")
        .groupBy("group_id")
        .count()
        .collect()
    )
    assert by_duckdb == by_polars == by_spark
    assert sum(n for _, n in by_spark) == len(run.acked)


def test_reruns_change_nothing_and_export_only_new_rows(spark, coordinator_run, tmp_path):
    run = coordinator_run
    run.play(rounds=10)
    lake_dir, logs = str(tmp_path / "lake"), os.path.dirname(run.dir)
    export(spark, logs, lake_dir)
    before = _lake_state(lake_dir)
    again = export(spark, logs, lake_dir)
    assert sum(again.rows.values()) == 0
    assert _lake_state(lake_dir) == before

    run.play(rounds=5)
    run.delete_group(GROUP3)
    more = export(spark, logs, lake_dir)
    assert more.rows[OFFSET_COMMITS] == len(
        [e for e in _log_entries(run) if isinstance(e.record.key, OffsetCommitKey)]
    ) - len(before[OFFSET_COMMITS][1])
    _assert_exactly_once(run, lake_dir)


def test_export_interleaved_with_another_commits_nothing_twice(
    spark, coordinator_run, tmp_path, monkeypatch
):
    """Another export runs to completion after this one checked its watermarks and just
    before it commits: delta-rs rejects the commit (same app ids) and the round is re-planned."""
    run = coordinator_run
    run.play(rounds=8)
    lake_dir, logs = str(tmp_path / "lake"), os.path.dirname(run.dir)
    real_write = lake.write_deltalake
    interleaved = []

    def write_after_rival(*args, **kwargs):
        if not interleaved:
            interleaved.append(None)  # the rival's own commits pass straight through
            interleaved[0] = export(spark, logs, lake_dir)
        return real_write(*args, **kwargs)

    monkeypatch.setattr(lake, "write_deltalake", write_after_rival)
    result = export(spark, logs, lake_dir)
    assert interleaved and sum(interleaved[0].rows.values()) > 0
    assert result.raced >= 1 and result.rows[OFFSET_COMMITS] == 0
    _assert_exactly_once(run, lake_dir)


def _export_in_two_threads(
    spark, logs, lake_dir, config: ExportConfig = exporter.DEFAULT_EXPORT_CONFIG
) -> list:
    """Run two exports of ``logs`` into ``lake_dir`` at once, each on its own thread; their
    results (the test fails if either raised)."""
    results, errors = [], []

    def one():
        try:
            results.append(export(spark, logs, lake_dir, config))
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_concurrent_exports_in_threads(spark, coordinator_run, tmp_path):
    run = coordinator_run
    run.play(rounds=12)
    lake_dir, logs = str(tmp_path / "lake"), os.path.dirname(run.dir)
    lake.open_table(lake_dir, OFFSET_COMMITS)  # both start from an existing table
    results = _export_in_two_threads(spark, logs, lake_dir, ExportConfig(max_segments_per_round=1))
    commits = _assert_exactly_once(run, lake_dir)
    assert sum(r.rows[OFFSET_COMMITS] for r in results) == len(commits)


def test_crash_before_commit_changes_nothing(spark, coordinator_run, tmp_path, monkeypatch):
    run = coordinator_run
    run.play(rounds=6)
    lake_dir, logs = str(tmp_path / "lake"), os.path.dirname(run.dir)
    export(spark, logs, lake_dir)
    run.play(rounds=4)
    before = _lake_state(lake_dir)

    marks = read_export_watermarks(run.dir)

    def crash(*args, **kwargs):
        raise RuntimeError("injected crash between compute and commit")

    monkeypatch.setattr(lake, "write_deltalake", crash)
    with pytest.raises(RuntimeError, match="injected"):
        export(spark, logs, lake_dir)
    assert _lake_state(lake_dir) == before
    assert read_export_watermarks(run.dir) == marks

    # A crash after the first table committed leaves only the later tables behind.
    monkeypatch.undo()
    monkeypatch.setattr(lake, "commit_latest", crash)
    with pytest.raises(RuntimeError, match="injected"):
        export(spark, logs, lake_dir)
    assert _lake_state(lake_dir)[OFFSETS_LATEST] == before[OFFSETS_LATEST]
    monkeypatch.undo()
    caught_up = export(spark, logs, lake_dir)
    assert caught_up.rows[OFFSET_COMMITS] == 0 and caught_up.rows[OFFSETS_LATEST] > 0
    _assert_exactly_once(run, lake_dir)


def test_history_compacted_before_export_is_reported_as_a_gap(spark, coordinator_run, tmp_path):
    run = coordinator_run
    run.play(rounds=20)

    first, second = list_segments(run.dir)[:2]
    os.remove(first.path)  # what retention does without retain_until_exported
    lake_dir = str(tmp_path / "lake")
    result = export(spark, os.path.dirname(run.dir), lake_dir)
    assert result.gaps == [Gap(0, 0, second.base_offset)]
    assert "GAP: log partition 0 offsets [0, " in result.summary()
    offsets = [r["log_offset"] for r in lake.read_arrow(lake_dir, OFFSET_COMMITS).to_pylist()]
    assert min(offsets) >= second.base_offset
    history = lake.open_table(lake_dir, OFFSET_COMMITS).history(1)[0]
    assert history["groupcoord.gaps"] == [
        {"log_partition": 0, "from_offset": 0, "to_offset": second.base_offset}
    ]


def test_retained_log_exports_every_acknowledged_commit(spark, tmp_path):
    """With retain_until_exported, snapshots may compact the log but never past the export."""
    run = retained_run(str(tmp_path / "logs"))
    lake_dir, logs = str(tmp_path / "lake"), os.path.dirname(run.dir)
    try:
        run.play(rounds=10)
        assert list_segments(run.dir)[0].base_offset == 0  # nothing exported: all kept
        export(spark, logs, lake_dir)
        run.play(rounds=30)
        assert list_segments(run.dir)[0].base_offset > 0  # compacted up to the export
        export_holds_every_commit(spark, run, lake_dir)
    finally:
        run.close()


def test_bad_configuration_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="cluster"):
        ExportConfig(cluster="a:b")
    with pytest.raises(ValueError, match="max_segments_per_round"):
        ExportConfig(max_segments_per_round=0)
    with pytest.raises(ValueError, match="does not exist"):
        exporter.export(None, str(tmp_path / "missing"), str(tmp_path / "lake"))


def test_compaction_of_closed_days_and_vacuum(spark, coordinator_run, tmp_path):
    run = coordinator_run
    lake_dir, logs = str(tmp_path / "lake"), os.path.dirname(run.dir)
    for _ in range(3):  # three exports: three small files per day
        run.play(rounds=12)
        run.delete_offset(GROUP3, 3)  # and an undated tombstone row in each
        export(spark, logs, lake_dir)
    table = lake.open_table(lake_dir, OFFSET_COMMITS)
    before_files = len(table.file_uris())
    before_rows = sorted(map(str, lake.read_arrow(lake_dir, OFFSET_COMMITS).to_pylist()))
    days = sorted(
        {
            r["commit_date"]
            for r in lake.read_arrow(lake_dir, OFFSET_COMMITS).to_pylist()
            if r["commit_date"]
        }
    )
    assert len(days) >= 2
    undated_before = sum("__HIVE_DEFAULT_PARTITION__" in uri for uri in table.file_uris())
    assert undated_before > 1  # tombstones of several exports: several files
    # Only days before "today" are closed: the last day keeps its files.
    removed = lake.compact(lake_dir, today=days[-1])
    assert removed[OFFSET_COMMITS] > 0 and removed[GROUP_GENERATIONS] > 0
    table = lake.open_table(lake_dir, OFFSET_COMMITS)
    per_day = collections.Counter(
        uri.split("commit_date=")[1].split("/")[0] for uri in table.file_uris()
    )
    assert all(per_day[str(d)] == 1 for d in days[:-1]) and per_day[str(days[-1])] > 1
    assert per_day["__HIVE_DEFAULT_PARTITION__"] == 1  # tombstone rows compacted too
    assert len(table.file_uris()) < before_files
    # The compacted table, not its folder, is the truth: same rows, in Spark too.
    assert sorted(map(str, lake.read_arrow(lake_dir, OFFSET_COMMITS).to_pylist())) == before_rows
    assert lake.read_spark(spark, lake_dir, OFFSET_COMMITS).count() == len(before_rows)

    with pytest.raises(ValueError, match="retention"):
        lake.vacuum(lake_dir, retention_hours=0)  # below Delta's 168 h guard

    def parquet_files():
        return sum(
            name.endswith(".parquet")
            for _, _, names in os.walk(lake.table_path(lake_dir, OFFSET_COMMITS))
            for name in names
        )

    on_disk = parquet_files()
    deleted = lake.vacuum(lake_dir, retention_hours=0, enforce_retention=False)
    assert deleted[OFFSET_COMMITS] == removed[OFFSET_COMMITS]
    assert parquet_files() == on_disk - deleted[OFFSET_COMMITS] == len(table.file_uris())
    assert sorted(map(str, lake.read_arrow(lake_dir, OFFSET_COMMITS).to_pylist())) == before_rows


def test_every_gap_of_an_export_is_reported_not_only_the_first(spark, coordinator_run, tmp_path):
    """Retention (without retain_until_exported) deletes segments while an export is between
    rounds: the second hole of the same partition is a gap too, recorded in its commit."""
    run = coordinator_run
    run.play(rounds=20)

    segs = list_segments(run.dir)
    assert len(segs) > 4
    os.remove(segs[0].path)
    lake_dir = str(tmp_path / "lake")

    def retention_between_rounds(line):
        if line.startswith(f"{GROUP_GENERATIONS}: +") and os.path.exists(segs[2].path):
            os.remove(segs[1].path)  # round 1 read segment 1; segment 2 is unexported
            os.remove(segs[2].path)

    result = export(
        spark,
        os.path.dirname(run.dir),
        lake_dir,
        ExportConfig(max_segments_per_round=1),
        progress=retention_between_rounds,
    )
    assert result.gaps == [
        Gap(0, 0, segs[1].base_offset),
        Gap(0, segs[2].base_offset, segs[3].base_offset),
    ]
    offsets = {r["log_offset"] for r in lake.read_arrow(lake_dir, OFFSET_COMMITS).to_pylist()}
    assert not offsets & set(range(segs[2].base_offset, segs[3].base_offset))
    notes = [h.get("groupcoord.gaps") for h in lake.open_table(lake_dir, OFFSET_COMMITS).history()]
    assert [
        {"log_partition": 0, "from_offset": segs[2].base_offset, "to_offset": segs[3].base_offset}
    ] in notes


def test_retention_racing_the_planner_is_reported_as_a_gap(
    spark, coordinator_run, tmp_path, monkeypatch
):
    """Retention deletes the first segment after the exporter read the log start and before
    it listed the segments: the plan starts above the watermark, and that hole is a gap."""
    run = coordinator_run
    run.play(rounds=12)

    first, second = list_segments(run.dir)[:2]
    monkeypatch.setattr(storage, "log_start_offset", lambda _pdir: 0)  # read before deletion
    os.remove(first.path)
    lake_dir = str(tmp_path / "lake")
    result = export(spark, os.path.dirname(run.dir), lake_dir)
    assert result.gaps == [Gap(0, 0, second.base_offset)]


def test_a_damaged_log_is_a_clear_cli_error_and_leaves_the_lake_alone(
    spark, coordinator_run, tmp_path, capsys
):
    # Acknowledged data damaged mid-segment: the Spark task that reads it fails. The CLI says
    # what failed in one line (not a JVM-wrapped traceback) and commits nothing.
    run = coordinator_run
    run.play(rounds=20)
    _damage_first_segment(run)
    lake_dir = str(tmp_path / "lake")
    code = cli.export_main(["--logs", os.path.dirname(run.dir), "--lake", lake_dir, "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("groupcoord export: failed: ") and "CorruptLogError" in err
    assert len(err.strip().splitlines()) == 1
    # A failed first export leaves no (empty) table behind.
    assert not any(os.path.exists(lake.table_path(lake_dir, name)) for name in TABLES)


def _damage_first_segment(run):
    first = list_segments(run.dir)[0]
    with open(first.path, "r+b") as f:  # a byte of a batch that later batches follow
        f.seek(first.size_bytes // 2)
        byte = f.read(1)[0]
        f.seek(first.size_bytes // 2)
        f.write(bytes([byte ^ 0xFF]))


def test_export_cli_on_a_damaged_log_prints_one_line_only(coordinator_run, tmp_path):
    """The real command, in its own process with its own Spark: what the operator sees on
    the terminal is the one line, and Spark's executor error, the worker's traceback and the
    JVM stack are in the log file that line names."""
    run = coordinator_run
    run.play(rounds=20)
    _damage_first_segment(run)
    lake_dir = str(tmp_path / "lake")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "groupcoord.spark_export",
            "export",
            "--logs",
            os.path.dirname(run.dir),
            "--lake",
            lake_dir,
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("groupcoord export: failed: ") and "CorruptLogError" in line
    spark_log = line.rsplit("(Spark's log: ", 1)[1].rstrip(")")
    try:
        with open(spark_log) as f:
            details = f.read()
        assert "CorruptLogError" in details and "Traceback" in details
    finally:
        os.remove(spark_log)
    assert not any(os.path.exists(lake.table_path(lake_dir, name)) for name in TABLES)


def test_export_and_report_cli_check_paths_before_starting_spark(tmp_path, monkeypatch, capsys):
    def no_spark(*_args, **_kwargs):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(session, "get_session", no_spark)
    monkeypatch.setattr(cli, "get_session", no_spark, raising=False)
    logs = tmp_path / "logs"
    logs.mkdir()
    one_partition = logs / "partition-3"
    storage.open_partition_log(str(one_partition)).close()
    empty = tmp_path / "empty"
    empty.mkdir()
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    lake_dir = tmp_path / "lake"
    cases = [
        (
            cli.export_main,
            ["--logs", str(tmp_path / "missing"), "--lake", str(lake_dir)],
            f"log directory {str(tmp_path / 'missing')!r} does not exist",
        ),
        (
            cli.export_main,
            ["--logs", str(a_file), "--lake", str(lake_dir)],
            f"log directory {str(a_file)!r} is not a directory",
        ),
        (
            cli.export_main,
            ["--logs", str(logs), "--lake", str(a_file)],
            f"lake directory {str(a_file)!r} is not a directory",
        ),
        (
            cli.export_main,
            ["--logs", str(logs), "--lake", str(a_file / "lake")],
            "cannot be created",
        ),
        (  # an empty root, or one partition's own directory: nothing to export is a mistake
            cli.export_main,
            ["--logs", str(empty), "--lake", str(lake_dir)],
            "holds no partition-<n> directories",
        ),
        (
            cli.export_main,
            ["--logs", str(one_partition), "--lake", str(lake_dir)],
            f"is one partition's own directory: pass its parent, {str(logs)!r}",
        ),
        (cli.report_main, ["--lake", str(tmp_path / "missing")], "does not exist"),
        (cli.report_main, ["--lake", str(logs)], "export first"),
    ]
    for main, argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert not lake_dir.exists()


def test_concurrent_first_exports_create_each_table_once_with_rows(
    spark, coordinator_run, tmp_path
):
    """Two exports into a lake that does not exist yet: one creates each table (its first
    commit already holds rows and watermarks), the other yields and re-plans."""
    run = coordinator_run
    run.play(rounds=12)
    lake_dir, logs = str(tmp_path / "lake"), os.path.dirname(run.dir)
    results = _export_in_two_threads(spark, logs, lake_dir)
    commits = _assert_exactly_once(run, lake_dir)
    assert sum(r.rows[OFFSET_COMMITS] for r in results) == len(commits)
    for name in TABLES:
        first = DeltaTable(lake.table_path(lake_dir, name), version=0)
        assert first.to_pyarrow_table().num_rows > 0, name


def test_a_creator_that_crashed_before_its_first_commit_leaves_no_table(
    spark, coordinator_run, tmp_path
):
    """An empty ``_delta_log`` folder (a creator died before committing version 0) is no
    table: the next export creates it rather than yielding to a creator that never comes."""
    run = coordinator_run
    run.play(rounds=4)
    lake_dir = str(tmp_path / "lake")
    os.makedirs(os.path.join(lake.table_path(lake_dir, OFFSET_COMMITS), "_delta_log"))
    result = export(spark, os.path.dirname(run.dir), lake_dir, ExportConfig(max_rounds=5))
    assert result.raced == 0
    _assert_exactly_once(run, lake_dir)


def test_a_missing_segment_fails_the_export_instead_of_vanishing(
    spark, coordinator_run, tmp_path, capsys
):
    # The source plans one split per segment, so a segment missing in the middle used to
    # vanish from the lake without a word. Its neighbour's split now refuses the hole.
    run = coordinator_run
    run.play(rounds=20)
    segments = list_segments(run.dir)
    os.remove(segments[2].path)
    lake_dir = str(tmp_path / "lake")
    code = cli.export_main(["--logs", os.path.dirname(run.dir), "--lake", lake_dir, "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert (
        "CorruptLogError" in err
        and (f"offsets {segments[2].base_offset}..{segments[3].base_offset - 1} are missing") in err
    )
    assert not any(os.path.exists(lake.table_path(lake_dir, name)) for name in TABLES)
