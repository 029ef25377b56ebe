"""The published durable end: ``<partition_dir>/durable-end``, how far lock-free readers may read.

Theory of operation
-------------------
A lock-free reader (the lake exporter) that reads the active segment sees bytes still in the
page cache: a machine crash can take them back, and the exporter would have exported records
the log no longer holds. So the writer publishes the end offset it knows to be on disk, and such
readers read below it only (``durable_end_offset``). The writer overwrites the file in place
(one ``pwrite`` of 20 bytes, no fsync: it is a lower bound, never a promise) right after each
fsync of the active segment: after every append with policy "always", after each background
fsync with "interval", and on open, segment rolls, snapshots and close (so with "never" the
exporter trails the writer by up to a segment or a snapshot interval).

Why a stale file is safe: a value is written only after the fsync that made those offsets
durable returned, so whatever version of the file survives a crash never names an offset above
what the disk holds. Layout: magic ``b"GCE\\x01"``, end offset (u64), epoch (u32), CRC-32 of
the preceding 16 bytes (u32), little-endian.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib

from .segments import list_segments

log = logging.getLogger("groupcoord.storage")
DURABLE_END_FILE = "durable-end"
_MAGIC = b"GCE\x01"
_BODY = struct.Struct("<4sQI")


def encode_durable_end(end_offset: int, epoch: int) -> bytes:
    body = _BODY.pack(_MAGIC, end_offset, epoch)
    return body + zlib.crc32(body).to_bytes(4, "little")


def read_durable_end(partition_dir: str) -> int | None:
    """The published durable end offset, or None when there is no readable one."""
    path = os.path.join(partition_dir, DURABLE_END_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read(_BODY.size + 4)
    except FileNotFoundError:
        return None
    if (
        len(data) != _BODY.size + 4
        or zlib.crc32(data[: _BODY.size]) != int.from_bytes(data[_BODY.size :], "little")
        or data[:4] != _MAGIC
    ):
        log.warning("%s is unreadable: reading only the sealed segments", path)
        return None
    return _BODY.unpack_from(data)[1]


def durable_end_offset(partition_dir: str) -> int:
    """Where a lock-free reader should stop: the published durable end or, without one (a log
    no writer of this version has opened), the end of the sealed segments, which were fsynced
    when the writer rolled past them."""
    published = read_durable_end(partition_dir)
    if published is not None:
        return published
    segments = list_segments(partition_dir)
    return segments[-1].base_offset if segments else 0
