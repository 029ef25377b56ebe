"""The exporters' watermarks: ``<partition_dir>/export-watermark.<key>.json``, one per lake.

Each holds ``{"next_offset": N, ...}``: offsets below N are in that lake. ``key`` names the lake
and the ``--cluster`` it exports under (``lake_key``), so two lakes exporting the same logs keep
two files: with one shared file the last export won, and the lake that was ahead let retention
delete history the other had not read yet.

The exporter writes its file atomically. The writer only reads them:

* ``LogConfig.retain_until_exported`` keeps every segment above the LOWEST watermark
  (``retention``), so each lake that has exported once is waited for. A lake given up for good
  keeps its file, and so holds retention back, until that file is removed; its body names the
  lake and cluster.
* On open the writer never reuses an offset below the HIGHEST one (``skips``): some lake has
  read those offsets already.

``export-watermark.json`` (no key) is the single file of versions before per-lake files; it is
read like any other watermark, and the first exporter to publish its own file removes it.

An exporter that dies mid-write may leave a small ``export-watermark.<key>.json.<pid>-<random>.tmp``
behind; the writer never removes those (names starting ``WATERMARK_PREFIX``), since it cannot
tell them from a write in progress.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os

from .config import CorruptLogError
from .snapshot import fsync_dir, read_json_field, write_atomically

log = logging.getLogger("groupcoord.storage")
WATERMARK_PREFIX = "export-watermark"
LEGACY_WATERMARK_FILE = f"{WATERMARK_PREFIX}.json"
_SUFFIX = ".json"
_KEY_HEX_CHARS = 16


def lake_key(lake_id: str, cluster: str) -> str:
    """The file key of a lake's watermarks for one cluster: 16 hex digits of a hash, so any
    lake id and cluster name make a safe file name."""
    digest = hashlib.sha256(f"{lake_id}\n{cluster}".encode()).hexdigest()
    return digest[:_KEY_HEX_CHARS]


def watermark_file(key: str) -> str:
    return f"{WATERMARK_PREFIX}.{key}{_SUFFIX}"


def read_export_watermarks(partition_dir: str) -> dict[str, int]:
    """Every lake's N, by file name. An unreadable file counts as "nothing exported" (0), so
    retention keeps everything rather than guess."""
    marks = {}
    for name in os.listdir(partition_dir):
        if name.startswith(WATERMARK_PREFIX) and name.endswith(_SUFFIX):
            mark = _read(os.path.join(partition_dir, name))
            if mark is not None:
                marks[name] = mark
    return marks


def _read(path: str) -> int | None:
    try:
        offset = read_json_field(path, "next_offset", "export watermark")
    except CorruptLogError as exc:
        log.warning("%s: %s: keeping every segment", path, exc.reason)
        return 0
    if offset is None:  # removed since the listing
        return None
    if type(offset) is not int or offset < 0:
        log.warning("export watermark %s has no valid next_offset: keeping every segment", path)
        return 0
    return offset


def write_export_watermark(partition_dir: str, key: str, next_offset: int, **extra: object) -> None:
    """Atomically record that offsets below ``next_offset`` are in the lake ``key`` names (for
    the exporter); then remove the pre-per-lake ``export-watermark.json``, if any."""
    if type(next_offset) is not int or next_offset < 0:
        raise ValueError(f"next_offset must be an int >= 0, got {next_offset!r}")
    if not key or not key.isalnum():
        raise ValueError(f"a watermark key must be letters and digits, got {key!r}")
    body = json.dumps({"next_offset": next_offset, **extra}, sort_keys=True).encode()
    path = os.path.join(partition_dir, watermark_file(key))
    # Its temporary name is private to this call; the partition's writer leaves
    # ``WATERMARK_PREFIX*.tmp`` alone when it opens (an export may be writing one right now).
    write_atomically(path, [body])
    try:
        os.remove(os.path.join(partition_dir, LEGACY_WATERMARK_FILE))
    except FileNotFoundError:
        return
    fsync_dir(partition_dir)
