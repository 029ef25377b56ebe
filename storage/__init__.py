"""groupcoord.storage: the durable log of each offsets partition, its snapshots and its loader.

On disk, ``<log_dir>/partition-<n>/`` holds:

* ``<base_offset:020d>.log``: segments of framed, CRC-checked batches of record envelopes
  (``codec``); read them with ``list_segments`` / ``read_log`` (read-only, lock-free, safe while
  a writer appends) or decode with ``decode_records``.
* ``snapshot-<offset:020d>.snap``: the compacted state below ``offset`` (``snapshot``).
* ``writer.lock`` (flock'd by the one live writer), ``epoch.json`` (incarnation counter) and
  optionally ``export-watermark.json`` written by the exporter (``watermark``).

Writers use ``open_partition_log(dir, LogConfig(...))`` -> ``PartitionLog`` (``load_into``,
``append``, ``maybe_snapshot``, ``close``); ``load(dir, shard)`` loads without writing.
"""

import os

from .codec import HEADER_BYTES, BatchHeader, RecordFormatError, decode_records, encode_record
from .config import (
    CorruptLogError, LogClosedError, LogConfig, LogLockedError, RecordTooLargeError, StorageError,
)
from .loader import LoadProgress, LoadSummary, load_partition
from .partition_log import PartitionLog, open_partition_log
from .segments import LogEntry, SegmentInfo, TruncationReport, list_segments, log_start_offset, read_log
from .watermark import WATERMARK_FILE, read_export_watermark, write_export_watermark


def partition_dir(log_dir: str, partition: int) -> str:
    """Where partition ``partition`` of a cluster rooted at ``log_dir`` keeps its log."""
    return os.path.join(log_dir, f"partition-{partition}")


def load(log_dir: str, shard, progress=None) -> LoadSummary:
    """Load ``shard`` from the partition directory ``log_dir`` read-only (no lock, no repair:
    a torn tail is skipped and reported, not truncated)."""
    return load_partition(log_dir, shard, None, progress)


__all__ = [
    "HEADER_BYTES", "WATERMARK_FILE", "BatchHeader", "CorruptLogError", "LoadProgress",
    "LoadSummary", "LogClosedError", "LogConfig", "LogEntry", "LogLockedError", "PartitionLog",
    "RecordFormatError", "RecordTooLargeError", "SegmentInfo", "StorageError", "TruncationReport",
    "decode_records", "encode_record", "list_segments", "load", "log_start_offset",
    "open_partition_log", "partition_dir", "read_export_watermark", "read_log",
    "write_export_watermark",
]
