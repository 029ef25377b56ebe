"""A lake can hold several clusters (``groupcoord export --cluster``); a report is about one.

Their groups share names but nothing else, so a report over all of them would list a group's
partition once per cluster and run one progress and activity series through both."""

from __future__ import annotations

import pytest

from groupcoord.spark_export import cli
from groupcoord.spark_export.exporter import ExportConfig, export
from groupcoord.spark_export.report import build_report
from tests.core.harness import GROUP
from tests.spark.conftest import played


@pytest.fixture
def two_clusters(spark, tmp_path):
    """A lake holding cluster 'east' (3 rounds of commits) and 'west' (6 rounds), whose group
    GROUP commits 10 * (rounds - 1) on partition 0 last: 20 in east, 50 in west."""
    lake_dir = str(tmp_path / "lake")
    for name, rounds in (("east", 3), ("west", 6)):
        played(str(tmp_path / name), rounds)
        export(spark, str(tmp_path / name), lake_dir, ExportConfig(cluster=name))
    return lake_dir


def _offsets_of(text: str, group: str) -> list[tuple[int, int]]:
    """(partition, offset) of ``group``'s rows in the committed-offsets section."""
    section = text.split("committed offsets (now)\n", 1)[1].split("\n\n", 1)[0]
    return sorted(
        (int(cells[2]), int(cells[3]))
        for cells in (line.split() for line in section.splitlines()[2:])
        if cells[0] == group
    )


def test_a_report_names_its_cluster_and_shows_only_its_rows(spark, two_clusters):
    east = build_report(spark, two_clusters, cluster="east", now_ms=1_800_000_000_000)
    west = build_report(spark, two_clusters, cluster="west", now_ms=1_800_000_000_000)
    assert "cluster 'east'" in east.splitlines()[0]
    assert _offsets_of(east, GROUP) == [(0, 20), (1, 21), (2, 10)]
    assert _offsets_of(west, GROUP) == [(0, 50), (1, 51), (2, 25)]
    # Progress counts one cluster's commits: 3 rounds, not 3 + 6.
    progress = east.split("partition progress", 1)[1].split("\n\n", 1)[0]
    [row] = [
        cells
        for cells in (line.split() for line in progress.splitlines())
        if cells[:1] == [GROUP] and cells[2] == "0"
    ]
    assert row[3:5] == ["3", "20"]


def test_a_lake_of_several_clusters_needs_one_named(spark, two_clusters, capsys):
    with pytest.raises(ValueError, match=r"2 clusters \('east', 'west'\): choose one"):
        build_report(spark, two_clusters)
    with pytest.raises(ValueError, match=r"no rows of cluster 'north' \(it holds: 'east', 'west'"):
        build_report(spark, two_clusters, cluster="north")
    assert cli.report_main(["--lake", two_clusters]) == 2
    err = capsys.readouterr().err
    assert err.startswith("groupcoord report: lake ") and "--cluster" in err
    assert len(err.strip().splitlines()) == 1
    assert cli.report_main(["--lake", two_clusters, "--cluster", "west"]) == 0
    assert "cluster 'west'" in capsys.readouterr().out
