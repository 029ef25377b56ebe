"""groupcoord.storage: the durable log of each offsets partition, its snapshots and its loader.

On disk, ``<log_dir>/partition-<n>/`` holds:

* ``<base_offset:020d>.log``: segments of framed, CRC-checked batches of record envelopes
  (``codec``); read them with ``list_segments`` / ``read_log`` (read-only, lock-free, safe while
  a writer appends) or decode with ``decode_records``.
* ``snapshot-<offset:020d>.snap``: the compacted state below ``offset`` (``snapshot``).
* ``writer.lock`` (flock'd by the one live writer), ``epoch.json`` (incarnation counter),
  ``log-id.json`` (which log this is, kept for good: ``read_log_id``),
  ``durable-end`` (how far lock-free readers may read: ``durable_end_offset``), optionally
  ``skipped-offsets.json`` (offsets the writer durably skipped after a crash: ``skips``) and
  ``export-watermark.<key>.json`` written by the exporter, one per lake (``watermark``).

Writers use ``open_partition_log(dir, LogConfig(...))`` -> ``PartitionLog`` (``load_into``,
``append``, ``maybe_snapshot``, ``close``); ``load(dir, shard)`` loads without writing.
"""

import os
from collections.abc import Callable

from groupcoord.coordinator.shard import Shard

from .codec import HEADER_BYTES, BatchHeader, RecordFormatError, decode_records, encode_record
from .config import (
    CorruptLogError,
    LogClosedError,
    LogConfig,
    LogFencedError,
    LogLockedError,
    RecordTooLargeError,
    StorageError,
)
from .durable_end import DURABLE_END_FILE, durable_end_offset, read_durable_end
from .loader import LoadProgress, LoadSummary, load_partition
from .log_id import LOG_ID_FILE, read_log_id
from .partition_log import PartitionLog, open_partition_log
from .segments import (
    LogEntry,
    SegmentInfo,
    TruncationReport,
    batch_crc_holding,
    list_segments,
    log_start_offset,
    read_log,
)
from .skips import SKIPS_FILE, read_skipped_ranges
from .watermark import (
    WATERMARK_PREFIX,
    lake_key,
    read_export_watermarks,
    watermark_file,
    write_export_watermark,
)


def partition_dir(log_dir: str, partition: int) -> str:
    """Where partition ``partition`` of a cluster rooted at ``log_dir`` keeps its log."""
    return os.path.join(log_dir, f"partition-{partition}")


def load(
    log_dir: str, shard: Shard, progress: Callable[[LoadProgress], None] | None = None
) -> LoadSummary:
    """Load ``shard`` from the partition directory ``log_dir`` read-only (no lock, no repair:
    a torn tail is skipped and reported, not truncated)."""
    return load_partition(log_dir, shard, None, progress)


__all__ = [
    "DURABLE_END_FILE",
    "HEADER_BYTES",
    "LOG_ID_FILE",
    "SKIPS_FILE",
    "WATERMARK_PREFIX",
    "BatchHeader",
    "CorruptLogError",
    "LoadProgress",
    "LoadSummary",
    "LogClosedError",
    "LogConfig",
    "LogEntry",
    "LogFencedError",
    "LogLockedError",
    "PartitionLog",
    "RecordFormatError",
    "RecordTooLargeError",
    "SegmentInfo",
    "StorageError",
    "TruncationReport",
    "batch_crc_holding",
    "decode_records",
    "durable_end_offset",
    "encode_record",
    "list_segments",
    "lake_key",
    "load",
    "log_start_offset",
    "open_partition_log",
    "partition_dir",
    "read_durable_end",
    "read_export_watermarks",
    "read_log",
    "read_log_id",
    "read_skipped_ranges",
    "watermark_file",
    "write_export_watermark",
]
