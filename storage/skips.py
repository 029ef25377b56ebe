"""Offsets the log deliberately skips: ``<partition_dir>/skipped-offsets.json``.

Theory of operation
-------------------
Segments continue each other, so a hole between two segments normally means lost data. There
is one legitimate hole: after a machine crash the log may end below offsets that others have
already seen (the exporter's watermark), and the writer then continues above them rather than
reuse them (``PartitionLog.load_into``). Before it creates the segment past the hole, it records
the range here (atomically, fsynced), so the hole is a durable fact and not a guess: every
reader accepts exactly the recorded ranges (``covers``, used through
``segments.check_segment_follows``) and refuses any other hole, whichever snapshot it loads from.
Ranges are never removed: a range below the log start is simply never crossed again.

File layout: ``{"ranges": [[first, end], ...]}``, ``end`` exclusive, written only by the writer
that holds the lock. An unreadable file is damage (``CorruptLogError``), never "no skips".
"""

from __future__ import annotations

import json
import os

from .config import CorruptLogError
from .snapshot import read_json_field, write_atomically

SKIPS_FILE = "skipped-offsets.json"


def read_skipped_ranges(partition_dir: str) -> list[tuple[int, int]]:
    """The recorded ranges ``(first, end)``, sorted; empty when none was ever recorded."""
    path = os.path.join(partition_dir, SKIPS_FILE)
    ranges = read_json_field(path, "ranges", "skipped-offsets file")
    if ranges is None:
        return []
    if not isinstance(ranges, list) or not all(
        isinstance(r, list) and len(r) == 2 and all(type(x) is int for x in r) and 0 <= r[0] < r[1]
        for r in ranges
    ):
        raise CorruptLogError(
            path, 0, -1, f"ranges must be [[first, end], ...] with 0 <= first < end, got {ranges!r}"
        )
    return sorted((first, end) for first, end in ranges)


def record_skip(partition_dir: str, first: int, end: int) -> None:
    """Durably record that offsets ``first``..``end - 1`` hold no records (writer only)."""
    if not 0 <= first < end:
        raise ValueError(f"a skipped range needs 0 <= first < end, got {first}..{end}")
    ranges = read_skipped_ranges(partition_dir) + [(first, end)]
    body = json.dumps({"ranges": [list(r) for r in sorted(ranges)]}).encode()
    write_atomically(os.path.join(partition_dir, SKIPS_FILE), [body])


def covers(ranges: list[tuple[int, int]], first: int, end: int) -> bool:
    """Whether every offset in ``first``..``end - 1`` lies in some recorded range."""
    for low, high in ranges:  # sorted by first offset
        if low <= first < high:
            first = high
    return first >= end
