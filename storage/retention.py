"""Retention after a snapshot: only ``keep_snapshots`` snapshots stay, and segments wholly below
the oldest kept one are deleted (never the active segment, and, with ``retain_until_exported``,
never a segment holding offsets the exporter has not exported). See ``partition_log``."""

from __future__ import annotations

import logging
import os
from itertools import pairwise

from .config import LogConfig
from .segments import list_segments
from .snapshot import fsync_dir, list_snapshots
from .watermark import read_export_watermarks

log = logging.getLogger("groupcoord.storage")


def apply_retention(partition_dir: str, config: LogConfig) -> None:
    """Delete the snapshots beyond the newest ``keep_snapshots`` and the segments the oldest
    kept one (and the export watermark, if it must be waited for) make unnecessary."""
    snapshots = list_snapshots(partition_dir)
    keep = config.keep_snapshots
    for _, path in snapshots[:-keep]:
        os.remove(path)
    cutoff = snapshots[-keep:][0][0]
    if config.retain_until_exported:
        # Every lake that has exported is waited for; with none, nothing is exported yet.
        marks = read_export_watermarks(partition_dir)
        slowest = min(marks, key=marks.__getitem__, default=None)
        if slowest is None:
            cutoff = 0
        elif marks[slowest] < cutoff:
            cutoff = marks[slowest]
            # Which lake holds the log's history (and disk) back, for the operator.
            log.info("%s: retention waits at offset %d for %s", partition_dir, cutoff, slowest)
    segments = list_segments(partition_dir)
    removed = 0
    for current, following in pairwise(segments):
        if following.base_offset > cutoff:
            break
        os.remove(current.path)
        removed += 1
    if removed or len(snapshots) > keep:
        fsync_dir(partition_dir)
    if removed:
        log.info("%s: deleted %d segments below offset %d", partition_dir, removed, cutoff)
