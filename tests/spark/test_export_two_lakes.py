"""Two lakes exporting the same logs, with ``retain_until_exported``: retention waits for both.

Each lake keeps its own watermark beside the log; before, both wrote ``export-watermark.json``
and the last export won, so the lake that was ahead let retention delete history the other had
not exported yet (reported to it as a gap).
"""

from __future__ import annotations

import json
import os

from groupcoord.spark_export.exporter import export
from groupcoord.storage import list_segments, read_export_watermarks
from tests.spark.conftest import export_holds_every_commit, retained_run


def test_a_lake_behind_another_keeps_its_history(spark, tmp_path, monkeypatch):
    run = retained_run(str(tmp_path / "logs"))
    logs = os.path.dirname(run.dir)
    behind, ahead = str(tmp_path / "behind"), str(tmp_path / "ahead")
    try:
        run.play(rounds=10)
        monkeypatch.chdir(tmp_path)
        behind_mark = export(spark, logs, "behind").watermarks[0]  # a relative path
        # Each lake's file names it wherever the operator looks from: by its absolute path.
        [(name, mark)] = read_export_watermarks(run.dir).items()
        with open(os.path.join(run.dir, name)) as f:
            assert json.load(f)["lake"] == behind
        assert mark == behind_mark
        run.play(rounds=30)
        export(spark, logs, ahead)
        run.play(rounds=30)  # snapshots: retention runs with both watermarks published
        assert list_segments(run.dir)[0].base_offset <= behind_mark
        export_holds_every_commit(spark, run, behind)
    finally:
        run.close()
