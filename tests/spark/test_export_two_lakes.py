"""Two lakes exporting the same logs, with ``retain_until_exported``: retention waits for both.

Each lake keeps its own watermark beside the log; before, both wrote ``export-watermark.json``
and the last export won, so the lake that was ahead let retention delete history the other had
not exported yet (reported to it as a gap).
"""

from __future__ import annotations

import collections
import os

from groupcoord.spark_export import lake
from groupcoord.spark_export.exporter import export
from groupcoord.spark_export.schema import OFFSET_COMMITS
from groupcoord.storage import list_segments
from tests.spark.conftest import CoordinatorRun


def _live_rows(lake_dir: str) -> collections.Counter:
    rows = lake.read_arrow(lake_dir, OFFSET_COMMITS).to_pylist()
    return collections.Counter(
        (r["group_id"], r["topic"], r["partition"], r["committed_offset"])
        for r in rows
        if not r["is_tombstone"]
    )


def test_a_lake_behind_another_keeps_its_history(spark, tmp_path):
    run = CoordinatorRun(
        str(tmp_path / "logs"),
        snapshot_every_records=50,
        keep_snapshots=1,
        retain_until_exported=True,
    )
    logs = os.path.dirname(run.dir)
    behind, ahead = str(tmp_path / "behind"), str(tmp_path / "ahead")
    try:
        run.play(rounds=10)
        behind_mark = export(spark, logs, behind).watermarks[0]
        run.play(rounds=30)
        export(spark, logs, ahead)
        run.play(rounds=30)  # snapshots: retention runs with both watermarks published
        assert list_segments(run.dir)[0].base_offset <= behind_mark
        result = export(spark, logs, behind)
        assert not result.gaps
        assert _live_rows(behind) == collections.Counter(run.acked)
    finally:
        run.close()
