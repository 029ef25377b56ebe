"""bench/export.py's writer leaves every commit it writes where the exporter reads it: below each
log's published durable end (the exporter leaves out what may still be only in the page cache,
so a benchmark written past that end measured, and then asserted, fewer rows than it wrote)."""

from __future__ import annotations

import os

from bench.export import PARTITIONS, Writer
from groupcoord.storage import durable_end_offset


def test_every_commit_the_writer_appends_is_below_the_durable_end(tmp_path):
    writer = Writer(str(tmp_path))
    try:
        writer.commits(4_000)
        writer.commits(40)  # an increment, as the benchmark appends before re-exporting
        ends = [log.end_offset for log in writer.logs]
        durable = [
            durable_end_offset(os.path.join(tmp_path, f"partition-{p}")) for p in range(PARTITIONS)
        ]
    finally:
        writer.close()
    assert ends == [1_010] * PARTITIONS
    assert durable == ends
