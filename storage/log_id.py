"""The log's identity: ``<partition_dir>/log-id.json``, ``{"log_id": N}``.

Theory of operation
-------------------
Offsets name records only within one log. A partition directory that is wiped and written
again starts over at offset 0, and so does another deployment's log of the same partition
number; whoever remembers offsets of the old log (the exporter's lake, through its watermarks)
would read the new one's records as the old one's, or skip them. Kafka tells a recreated topic
from the old one by its topic id (KIP-516); a partition log has this id for the same purpose.
(The deployment's ``deployment.json``, ``actors.identity``, names a whole log root; it stays
when one partition's directory is wiped, and logs written outside a deployment have none.)

The writer creates it when it opens a directory that has none: a new log, or one written before
logs had ids. It is never rewritten, so it stays the same across restarts, epochs, rolls and
retention. ``N`` is a random positive 62-bit integer, small enough to be kept wherever a signed
64-bit number is (the lake keeps it as a Delta transaction version).
"""

from __future__ import annotations

import json
import os
import secrets

from .config import CorruptLogError
from .snapshot import read_json_field, write_atomically

LOG_ID_FILE = "log-id.json"
_LOG_ID_BITS = 62


def read_log_id(partition_dir: str) -> int | None:
    """The log's id, or None when the directory has none (no writer of this version opened it).
    ``CorruptLogError`` when the file is there but unreadable."""
    path = os.path.join(partition_dir, LOG_ID_FILE)
    log_id = read_json_field(path, "log_id", "log id file")
    if log_id is None:
        return None
    if type(log_id) is not int or not 0 < log_id < 1 << _LOG_ID_BITS:
        raise CorruptLogError(
            path, 0, -1, f"log_id must be an int in [1, 2**{_LOG_ID_BITS}), got {log_id!r}"
        )
    return log_id


def ensure_log_id(partition_dir: str) -> int:
    """The log's id, created (atomically, fsynced) when there is none. Writer only, under its
    lock: two creators would race."""
    log_id = read_log_id(partition_dir)
    if log_id is None:
        log_id = secrets.randbits(_LOG_ID_BITS) or 1
        body = json.dumps({"log_id": log_id}).encode()
        write_atomically(os.path.join(partition_dir, LOG_ID_FILE), [body])
    return log_id
