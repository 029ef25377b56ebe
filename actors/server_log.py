"""Where the coordinator's own logs go: ``<log_dir>/server-logs/``, one rotating file per actor.

Ray keeps an actor's Python logging in its session directory (``/tmp/ray/session_*/logs``),
where no operator looks, and drops INFO (Python's last-resort handler shows WARNING and up).
So each partition actor writes ``partition-<n>.log`` and the router ``router.log`` beside the
data they describe: rebalances with their cause, members removed and why (session expiry,
leave), groups becoming Stable, Empty or Dead, loads and their time, load failures and
failovers. Warnings and worse also still reach the process's stderr, as they did before
(Python's last-resort handler), so Ray's worker logs keep why a process exited. Each file
rotates at ``MAX_BYTES`` and keeps ``BACKUPS`` old ones, so the logs of a long-running
deployment stay bounded (about 60 MiB per actor).
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import time

SERVER_LOGS = "server-logs"
MAX_BYTES = 10 * 1024 * 1024
BACKUPS = 5
FORMAT = "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s %(message)s"


def server_log_path(log_dir: str, name: str) -> str:
    return os.path.join(log_dir, SERVER_LOGS, f"{name}.log")


def log_to_file(log_dir: str, name: str, level: int = logging.INFO) -> str:
    """Send the ``groupcoord`` loggers of this process at ``level`` and above to
    ``server_log_path(log_dir, name)`` (rotating); returns the path. Calling it again replaces
    the handler rather than adding a second one."""
    path = server_log_path(log_dir, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    handler = logging.handlers.RotatingFileHandler(
        path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8"
    )
    formatter = logging.Formatter(FORMAT, datefmt="%Y-%m-%dT%H:%M:%S")
    formatter.converter = time.gmtime  # ISO-8601 UTC, like every table of the CLI
    handler.setFormatter(formatter)
    handler.set_name("groupcoord-server-log")
    stderr = logging.StreamHandler()
    stderr.setLevel(logging.WARNING)
    stderr.setFormatter(formatter)
    stderr.set_name("groupcoord-stderr")
    root = logging.getLogger("groupcoord")
    names = (handler.get_name(), stderr.get_name())
    for old in [h for h in root.handlers if h.get_name() in names]:
        root.removeHandler(old)
        old.close()
    root.addHandler(handler)
    root.addHandler(stderr)
    root.setLevel(level)
    return path
