"""The lake export and report on a Spark cluster with real separate executors: a
``local-cluster`` master starts a Spark master, a worker and two executor JVMs, each running
its own Python workers, which read the partition logs from the shared directory. The result
must pass the very exactly-once check the local-mode tests use (tests/spark/test_export.py).

It runs in this folder's pytest invocation because a SparkContext is one per process and the
main session's is a ``local[2]`` one (tests/spark/conftest.py)."""

from __future__ import annotations

import os

import pytest
from pyspark.sql import SparkSession

from groupcoord.spark_export import cli, lake
from groupcoord.spark_export.schema import OFFSET_COMMITS
from tests.core.harness import GROUP, GROUP2, GROUP3
from tests.spark.conftest import CoordinatorRun
from tests.spark.test_export import _assert_exactly_once

# A lost node must never hang the suite: each scenario has a few minutes at most.
pytestmark = pytest.mark.timeout(300)

MASTER = "local-cluster[2,1,1024]"  # 2 executors, 1 core and 1024 MiB each


def test_export_and_report_on_separate_executors(tmp_path, capsys):
    run = CoordinatorRun(str(tmp_path / "logs"))
    try:
        run.play(rounds=20)
        run.delete_offset(GROUP3, 3)
    finally:
        run.close()
    logs, lake_dir = os.path.dirname(run.dir), str(tmp_path / "lake")
    export = ["--logs", logs, "--lake", lake_dir, "--master", MASTER, "--quiet"]
    assert cli.export_main(export) == 0
    spark = SparkSession.getActiveSession()
    try:
        context = spark.sparkContext
        assert context.master == MASTER
        # The driver plus two executors, each its own JVM.
        assert context._jsc.sc().getExecutorMemoryStatus().size() == 3
        commits = _assert_exactly_once(run, lake_dir)
        version = lake.open_table(lake_dir, OFFSET_COMMITS).version()
        assert cli.export_main(export) == 0  # a re-run exports nothing twice
        assert lake.open_table(lake_dir, OFFSET_COMMITS).version() == version
        assert len(lake.read_arrow(lake_dir, OFFSET_COMMITS)) == len(commits)

        capsys.readouterr()
        assert cli.report_main(["--lake", lake_dir, "--master", MASTER]) == 0
        report = capsys.readouterr().out
        for group in (GROUP, GROUP2):  # GROUP3's only offset was deleted
            committed = run.h.committed(group)
            assert committed
            for (topic, partition), offset in committed.items():
                row = [
                    line.split()
                    for line in report.splitlines()
                    if line.split()[:3] == [group, topic, str(partition)]
                ]
                assert row and row[0][3] == str(offset), (group, topic, partition, row)
    finally:
        spark.stop()
