"""Benchmark of the lake export: partition logs -> Delta, full and incremental.

Run: ``.venv/bin/python bench/export.py [--quick]``. Prints a table and writes
``bench/results/export.json``. Figures are ratios against baselines measured in the same run:

* full export: 1,000,000 offset commits in 4 partition logs (written with the real storage
  writer) exported to the three Delta tables, in rows/s, against Spark writing the same rows as
  plain Parquet from driver memory (``createDataFrame(arrow).write.parquet``). Goal >= 0.5.
* incremental: 1% new commits appended to the logs, then exported again; its time against the
  full export's (goal: proportional to the new rows, so far below 1), and against a 5% increment
  (time should grow with the new rows, not with the table).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime

from groupcoord.coordinator.records import OffsetCommitKey, OffsetCommitValue, Record
from groupcoord.spark_export import lake
from groupcoord.spark_export.exporter import export
from groupcoord.spark_export.schema import OFFSET_COMMITS
from groupcoord.spark_export.session import get_session
from groupcoord.storage import LogConfig, open_partition_log

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "export.json")
PARTITIONS = 4
GROUPS_PER_PARTITION = 250
TOPIC_PARTITIONS = 8
APPEND_BATCH = 2_000
T0_MS = 1_700_000_000_000


class Writer:
    """Appends synthetic commits to the partition logs, continuing offsets and clocks."""

    def __init__(self, log_dir: str) -> None:
        # The default policy, fsync before each append returns: the exporter reads only what
        # a log has published as durable, so commits left in the page cache are not exported.
        config = LogConfig(
            segment_bytes=16 * 1024 * 1024,
            snapshot_every_records=0,
            snapshot_every_bytes=0,
        )
        self.logs = [
            open_partition_log(os.path.join(log_dir, f"partition-{p}"), config)
            for p in range(PARTITIONS)
        ]
        self.sequence = 0

    def commits(self, total: int) -> None:
        per = total // PARTITIONS
        for p, log in enumerate(self.logs):
            batch = []
            for i in range(per):
                n = self.sequence + i
                batch.append(
                    Record(
                        OffsetCommitKey(
                            f"group-{p}-{n % GROUPS_PER_PARTITION}",
                            "events",
                            n // GROUPS_PER_PARTITION % TOPIC_PARTITIONS,
                        ),
                        OffsetCommitValue(n, 3, "", T0_MS + n * 50, None),
                    )
                )
                if len(batch) == APPEND_BATCH:
                    log.append(batch)
                    batch = []
            if batch:
                log.append(batch)
        self.sequence += per

    def close(self) -> None:
        for log in self.logs:
            log.close()


def timed(fn):
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100,000 commits instead of 1M")
    args = parser.parse_args()
    total = 100_000 if args.quick else 1_000_000
    work = tempfile.mkdtemp(prefix="groupcoord-bench-export-")
    logs, lake_dir = os.path.join(work, "logs"), os.path.join(work, "lake")
    try:
        writer = Writer(logs)
        write_s, _ = timed(lambda: writer.commits(total))
        spark = get_session()
        spark.sparkContext.setLogLevel("ERROR")
        # Warm the Python workers and the JVM once, so neither side pays start-up alone.
        export(spark, logs, os.path.join(work, "warm-lake"))
        shutil.rmtree(os.path.join(work, "warm-lake"))
        shutil.rmtree(lake_dir, ignore_errors=True)

        full_s, full = timed(lambda: export(spark, logs, lake_dir))
        rows = lake.read_arrow(lake_dir, OFFSET_COMMITS)
        assert rows.num_rows == total == full.rows[OFFSET_COMMITS]
        parquet_dir = os.path.join(work, "parquet")
        base_s, _ = timed(
            lambda: spark.createDataFrame(rows).write.mode("overwrite").parquet(parquet_dir)
        )

        increments = {}
        for share in (0.01, 0.05):
            new = int(total * share)
            writer.commits(new)
            seconds, result = timed(lambda: export(spark, logs, lake_dir))
            assert result.rows[OFFSET_COMMITS] == new - new % PARTITIONS
            increments[share] = (new, seconds)
        writer.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    (n1, s1), (n5, s5) = increments[0.01], increments[0.05]
    figures = {
        "commits": total,
        "log_write_s": round(write_s, 2),
        "full_export_s": round(full_s, 2),
        "full_export_rows_per_s": round(total / full_s),
        "parquet_baseline_s": round(base_s, 2),
        "parquet_baseline_rows_per_s": round(total / base_s),
        "export_vs_parquet_ratio": round(base_s / full_s, 3),
        "incremental_1pct_rows": n1,
        "incremental_1pct_s": round(s1, 2),
        "incremental_1pct_vs_full_time_ratio": round(s1 / full_s, 3),
        "incremental_5pct_rows": n5,
        "incremental_5pct_s": round(s5, 2),
        "incremental_5pct_vs_1pct_time_ratio": round(s5 / s1, 3),
    }
    print(f"{'measure':<40} {'value':>14}")
    print("-" * 55)
    for key, value in figures.items():
        print(f"{key:<40} {value:>14}")
    print(
        f"\ngoal: export_vs_parquet_ratio >= 0.5 -> "
        f"{'met' if figures['export_vs_parquet_ratio'] >= 0.5 else 'NOT met'}; "
        f"incremental 1% takes {figures['incremental_1pct_vs_full_time_ratio']:.1%} of a "
        f"full export"
    )
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(
            {
                "benchmark": "export",
                "when": datetime.now(UTC).isoformat(),
                "machine": {
                    "python": sys.version.split()[0],
                    "platform": platform.platform(),
                    "cpus": os.cpu_count(),
                },
                "quick": args.quick,
                "figures": figures,
            },
            f,
            indent=2,
        )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
