"""The exporter's watermark: ``<partition_dir>/export-watermark.json``, ``{"next_offset": N, ...}``.

Offsets below N are exported. The exporter writes it atomically; the writer only reads it, to
keep segments the exporter still needs when ``LogConfig.retain_until_exported`` is set, and on
open, never to reuse an offset below it (``skips``). An
exporter that dies mid-write may leave a small ``export-watermark.json.<pid>-<thread>.tmp``
behind; the writer never removes those, since it cannot tell them from a write in progress.
"""

from __future__ import annotations

import json
import logging
import os
import threading

from .config import CorruptLogError
from .snapshot import read_json_field, write_atomically

log = logging.getLogger("groupcoord.storage")
WATERMARK_FILE = "export-watermark.json"


def read_export_watermark(partition_dir: str) -> int | None:
    """N from the watermark file, or None when there is none. An unreadable file counts as
    "nothing exported" (0), so retention keeps everything rather than guess."""
    path = os.path.join(partition_dir, WATERMARK_FILE)
    try:
        offset = read_json_field(path, "next_offset", "export watermark")
    except CorruptLogError as exc:
        log.warning("%s: %s: keeping every segment", path, exc.reason)
        return 0
    if offset is None:
        return None
    if type(offset) is not int or offset < 0:
        log.warning("export watermark %s has no valid next_offset: keeping every segment", path)
        return 0
    return offset


def write_export_watermark(partition_dir: str, next_offset: int, **extra: object) -> None:
    """Atomically record that offsets below ``next_offset`` are exported (for the exporter)."""
    if type(next_offset) is not int or next_offset < 0:
        raise ValueError(f"next_offset must be an int >= 0, got {next_offset!r}")
    body = json.dumps({"next_offset": next_offset, **extra}, sort_keys=True).encode()
    path = os.path.join(partition_dir, WATERMARK_FILE)
    # A temporary name of our own: concurrent exports must not write or rename each other's,
    # and the partition's writer leaves ``WATERMARK_FILE.*.tmp`` alone when it opens.
    write_atomically(path, [body], f"{path}.{os.getpid()}-{threading.get_ident()}.tmp")
