"""The topic catalog on disk: a snapshot, and a log of the versions after it.

``<log_dir>/topics.json`` holds the whole catalog as of one version (``{"version": n, "topics":
{name: partitions}, "ids": {name: uuid}, "group_configs": {group id: {setting: value}}}``, the
file's format from the start). ``<log_dir>/topics.json.changes`` holds one JSON line for each
later version, what that version changed: ``{"version": n, "topics": {name: partitions or
null}, "ids": {...}, "group_configs": {...}}``, null for a name removed. Reading takes the
snapshot and replays the lines above its version in order.

Why a log: a change used to rewrite the whole file, so one topic created in a catalog of
90,000 cost the router's loop half a second on a slow day (JSON of 7 MB, written and fsynced),
and a storm of single creates was quadratic. Now a change costs an append of its own size and
one fsync; the snapshot is rewritten (``compacted``) only when the log has grown past the
snapshot's size (and ``COMPACT_MIN_BYTES``), so the bytes written stay proportional to the
changes made.

The order of a rewrite makes a crash harmless at every step: the snapshot is replaced first
(write, fsync, rename, fsync the directory), then an empty log takes the old one's place the
same way, so a crash between the two leaves lines the snapshot already holds, and reading skips
every line not above the snapshot's version. A crash in an append leaves at most one line cut
short at the end, for a change never acknowledged (its fsync had not returned): reading drops
it. Anything else that is not a well-formed line is damage, reported with the line's number.

Fencing: a ``CatalogFiles`` appends only through the descriptor of the log its own rewrite put
in place, and its first write after opening is always a rewrite. So once a newer owner has
written, an older one that still appends writes into a file no reader opens again. (The
owner check before each write, in ``catalog``, is the first line of defence; see there.)
"""

from __future__ import annotations

import json
import os
import uuid
from typing import BinaryIO

from groupcoord.storage.snapshot import fsync_dir, write_atomically

CHANGES_SUFFIX = ".changes"
COMPACT_MIN_BYTES = 1024 * 1024
_FIELDS = ("topics", "ids", "group_configs")


def append_durably(log: BinaryIO, data: bytes) -> None:
    """Write all of ``data`` at the end of ``log`` (unbuffered, opened to append), then fsync."""
    view = memoryview(data)
    while view:
        view = view[log.write(view) or 0 :]
    os.fsync(log.fileno())


class CatalogFiles:
    """The snapshot at ``path`` and its log beside it. Not thread-safe: one owner calls it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.changes_path = path + CHANGES_SUFFIX
        # The log of our own last rewrite (closed with this object); None: rewrite next.
        self._log: BinaryIO | None = None
        self._snapshot_bytes = 0
        self._changes_bytes = 0

    def read(self) -> dict:
        """The catalog's last version as one object in the snapshot's format (versions of the
        log replayed; ``{"version": 0, ...}`` with empty maps when there is no snapshot).
        ValueError naming the file for damage; the caller checks the values."""
        state, self._snapshot_bytes, self._changes_bytes = _read_files(self.path)
        return state

    def write(self, version: int, delta: dict, state) -> None:
        """Make ``version`` durable: append ``delta`` (``{field: {name: value or None}}`` for
        the fields it changed) as its line, or, on the first write, after a failed append or
        when the log has outgrown the snapshot, rewrite both from ``state()`` (the whole
        catalog in the snapshot's format, ``version`` included)."""
        line = (
            json.dumps({"version": version, **delta}, sort_keys=True, separators=(",", ":")) + "\n"
        ).encode()
        due = self._changes_bytes + len(line) > max(COMPACT_MIN_BYTES, self._snapshot_bytes)
        if self._log is None or due:
            self.rewrite(state())
            return
        try:
            append_durably(self._log, line)
        except BaseException:
            self.close()  # the log may end in part of a line now: the next write rewrites
            raise
        self._changes_bytes += len(line)

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def rewrite(self, state: dict) -> None:
        """Replace the snapshot with ``state`` (the whole catalog in its format) and the log
        with an empty one of our own (a compaction; see the module docstring)."""
        data = json.dumps(state, sort_keys=True).encode()
        self.close()
        write_atomically(self.path, [data])  # fsyncs, renames
        self._snapshot_bytes = len(data)
        # An empty log of our own in place of the old one, through a name of ours: we append
        # through this descriptor, so a newer owner's rewrite leaves it on a file nobody reads.
        tmp = f"{self.changes_path}.{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        try:
            os.fsync(fd)
            os.replace(tmp, self.changes_path)
            fsync_dir(os.path.dirname(self.changes_path) or ".")
        except BaseException:
            os.close(fd)
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise
        self._log, self._changes_bytes = os.fdopen(fd, "ab", buffering=0), 0


def read_catalog(path: str) -> dict:
    """What ``CatalogFiles.read`` reads, without owning anything: for readers beside the
    owner (tests, tools)."""
    return _read_files(path)[0]


def _read_files(path: str) -> tuple[dict, int, int]:
    """The catalog's last version, and the sizes of the snapshot and the log it came from."""
    data = _contents(path, "topic catalog")
    if data is None:
        state = {"version": 0, "topics": {}}
    else:
        state = _snapshot(path, data)
    state.setdefault("ids", {})
    state.setdefault("group_configs", {})
    changes_path = path + CHANGES_SUFFIX
    changes = _contents(changes_path, "topic catalog log") or b""
    lines = changes.split(b"\n")
    for number, line in enumerate(lines[:-1], start=1):  # the last: b"" or a line cut short
        _replay(state, _line(changes_path, number, line), f"{changes_path} line {number}")
    return state, len(data or b""), len(changes)


def _contents(path: str, what: str) -> bytes | None:
    """The bytes of ``path``, None when there is no such file."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"{path}: unreadable {what} ({exc})") from None


def _snapshot(path: str, data: bytes) -> dict:
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as exc:  # RecursionError: brackets nested too deep
        raise ValueError(f"{path}: unreadable topic catalog ({exc!r})") from None
    if (
        not isinstance(raw, dict)
        or type(raw.get("version")) is not int
        or not isinstance(raw.get("topics"), dict)
        or not isinstance(raw.get("ids", {}), dict)
        or not isinstance(raw.get("group_configs", {}), dict)
    ):
        raise ValueError(
            f'{path}: expected {{"version": int, "topics": {{...}}, "ids": {{...}}, '
            f'"group_configs": {{...}}}}'
        )
    return raw


def _line(path: str, number: int, line: bytes) -> dict:
    try:
        raw = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{path} line {number}: unreadable ({exc!r})") from None
    if (
        not isinstance(raw, dict)
        or type(raw.get("version")) is not int
        or not all(isinstance(raw.get(field, {}), dict) for field in _FIELDS)
    ):
        raise ValueError(
            f'{path} line {number}: expected {{"version": int, "topics": {{...}}, ...}}'
        )
    return raw


def _replay(state: dict, change: dict, where: str) -> None:
    """Apply one line's changes to ``state`` if its version is the next one; a line the
    snapshot already holds is skipped, one past the next is damage (versions are missing)."""
    version = change["version"]
    if version <= state["version"]:
        return
    if version != state["version"] + 1:
        raise ValueError(
            f"{where}: version {version} follows {state['version']}: versions are missing"
        )
    for field in _FIELDS:
        target = state[field]
        for name, value in change.get(field, {}).items():
            if value is None:
                target.pop(name, None)
            else:
                target[name] = value
    state["version"] = version
