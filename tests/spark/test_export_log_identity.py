"""A lake knows which log it exported: a wiped, replaced or different log under the same cluster
name is refused, not silently skipped or mixed in (as Kafka's topic ids, KIP-516, tell a
recreated topic from the one a consumer read)."""

from __future__ import annotations

import os
import shutil

import pytest

from groupcoord.coordinator.records import OffsetCommitKey
from groupcoord.spark_export import cli, lake
from groupcoord.spark_export.exporter import ExportConfig, LogReplacedError, export
from groupcoord.spark_export.schema import OFFSET_COMMITS, TABLES
from groupcoord.storage import (
    LOG_ID_FILE,
    batch_crc_holding,
    read_export_watermarks,
    read_log,
    read_log_id,
)
from tests.spark.conftest import CoordinatorRun, played
from tests.spark.test_export import _lake_state


def _commit_offsets(run) -> list[int]:
    return [e.offset for e in read_log(run.dir) if isinstance(e.record.key, OffsetCommitKey)]


def _exported_then_wiped(tmp_path, spark, rounds_after: int):
    """Export a log, wipe its partition's storage, and let a new log of ``rounds_after``
    rounds grow in the same place (the coordinator restarted on empty storage)."""
    logs, lake_dir = str(tmp_path / "logs"), str(tmp_path / "lake")
    first = played(logs, rounds=10)
    export(spark, logs, lake_dir)
    old_id = read_log_id(first.dir)
    shutil.rmtree(first.dir)
    second = played(logs, rounds_after)
    return logs, lake_dir, second, old_id


@pytest.mark.parametrize("rounds_after", [2, 30], ids=["shorter", "longer"])
def test_a_wiped_log_is_refused_and_changes_nothing(spark, tmp_path, rounds_after):
    # Shorter: the new log ends below the lake's watermark, whose records would never be
    # exported. Longer: it has passed the watermark, and the rows above it would be mixed
    # into the old log's history.
    logs, lake_dir, second, old_id = _exported_then_wiped(tmp_path, spark, rounds_after)
    new_id = read_log_id(second.dir)
    assert new_id is not None and new_id != old_id
    before = _lake_state(lake_dir)
    with pytest.raises(LogReplacedError) as refused:
        export(spark, logs, lake_dir)
    message = str(refused.value)
    assert second.dir in message and f"{new_id:x}" in message and f"{old_id:x}" in message
    assert _lake_state(lake_dir) == before
    # Nothing is written beside the new log: its writer would skip to the old watermark.
    assert read_export_watermarks(second.dir) == {}

    # The way out the message names: another cluster name exports the new log from its start.
    other = export(spark, logs, lake_dir, ExportConfig(cluster="replaced"))
    rows = [
        r["log_offset"]
        for r in lake.read_arrow(lake_dir, OFFSET_COMMITS).to_pylist()
        if r["cluster"] == "replaced"
    ]
    assert sorted(rows) == _commit_offsets(second)
    assert [other.watermarks[0]] == list(read_export_watermarks(second.dir).values())


def test_the_cli_says_so_in_one_line_before_starting_spark(spark, tmp_path, capsys, monkeypatch):
    logs, lake_dir, _, _ = _exported_then_wiped(tmp_path, spark, rounds_after=2)
    before = _lake_state(lake_dir)

    def no_spark(*_args, **_kwargs):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(cli, "get_session", no_spark)
    code = cli.export_main(["--logs", logs, "--lake", lake_dir, "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("groupcoord export: failed: ") and "--cluster" in err
    assert "Spark" not in err and len(err.strip().splitlines()) == 1
    assert _lake_state(lake_dir) == before


def test_the_same_log_reopened_keeps_its_identity_and_exports_on(spark, tmp_path):
    logs, lake_dir = str(tmp_path / "logs"), str(tmp_path / "lake")
    run = played(logs, rounds=5)
    first = export(spark, logs, lake_dir)
    identity = read_log_id(run.dir)
    # Every table, those its first commit creates too, records the log's tail at its watermark.
    end = first.watermarks[0]
    tail = lake.tail_fingerprint(end, batch_crc_holding(run.dir, end - 1))
    assert [lake.tails(lake.open_table(lake_dir, t), "default", [0]) for t in TABLES] == [
        {0: tail}
    ] * len(TABLES)
    again = played(logs, rounds=5)  # the writer restarted on the same storage
    assert read_log_id(again.dir) == identity
    more = export(spark, logs, lake_dir)
    assert more.rows[OFFSET_COMMITS] > 0
    assert sorted(
        r["log_offset"] for r in lake.read_arrow(lake_dir, OFFSET_COMMITS).to_pylist()
    ) == _commit_offsets(again)


def test_a_lake_exported_before_logs_had_ids_records_the_id_with_its_next_commit(spark, tmp_path):
    logs, lake_dir = str(tmp_path / "logs"), str(tmp_path / "lake")
    run = played(logs, rounds=5)
    os.remove(os.path.join(run.dir, LOG_ID_FILE))  # a log and a lake of the earlier version
    export(spark, logs, lake_dir)
    tables = [lake.open_table(lake_dir, name) for name in TABLES]
    assert all(lake.log_ids(t, "default", [0]) == {0: None} for t in tables)

    again = played(logs, rounds=5)  # this version's writer gives the log its id
    identity = read_log_id(again.dir)
    export(spark, logs, lake_dir)
    tables = [lake.open_table(lake_dir, name) for name in TABLES]
    assert all(lake.log_ids(t, "default", [0]) == {0: identity} for t in tables)


@pytest.mark.parametrize("rounds_after", [2, 30], ids=["shorter", "longer"])
def test_a_log_restored_from_an_older_copy_is_refused_and_changes_nothing(
    spark, tmp_path, rounds_after
):
    # A copy keeps the log's id, so the id cannot tell it from the log the lake exported. Put
    # back after the lake exported past the copy's end, the writer gives the offsets from the
    # copy's end on to new commits. Shorter: the log ends below the lake's watermark, and
    # commits below it would never be exported. Longer: the log has passed it, and the rows
    # above it would follow a history the lake holds but the log does not.
    logs, lake_dir = str(tmp_path / "logs"), str(tmp_path / "lake")
    first = played(logs, rounds=5)
    backup = str(tmp_path / "backup")
    shutil.copytree(first.dir, backup)
    played(logs, rounds=10)
    export(spark, logs, lake_dir)
    shutil.rmtree(first.dir)
    shutil.copytree(backup, first.dir)
    restored = CoordinatorRun(logs)
    restored.play(rounds=rounds_after, step_ms=60_000)  # a history of its own from its end on
    restored.close()
    assert read_log_id(restored.dir) == read_log_id(backup)
    before = _lake_state(lake_dir)
    with pytest.raises(LogReplacedError) as refused:
        export(spark, logs, lake_dir)
    message = str(refused.value)
    assert restored.dir in message and "--cluster" in message
    assert _lake_state(lake_dir) == before
