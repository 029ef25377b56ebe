"""The writer's own files in a partition directory, and how it writes: the writer lock
(``writer.lock``), the incarnation epoch (``epoch.json``), creating directories durably, and
vectored writes. ``partition_log`` (its module docstring says how they are used) is the caller.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Sequence

from .config import CorruptLogError, LogLockedError
from .snapshot import fsync_dir, read_json_field, write_atomically

LOCK_FILE, EPOCH_FILE = "writer.lock", "epoch.json"
_IOV_MAX = 1024  # buffers per writev (Linux's UIO_MAXIOV): a big append takes several


def make_dirs_durably(path: str) -> None:
    """``os.makedirs``, then fsync the parent of each directory it created (top-down), so the
    new names survive a machine crash."""
    missing, current = [], os.path.abspath(path)
    while not os.path.isdir(current) and os.path.dirname(current) != current:
        missing.append(current)
        current = os.path.dirname(current)
    os.makedirs(path, exist_ok=True)
    for created in reversed(missing):
        fsync_dir(os.path.dirname(created))


def take_lock(partition_dir: str) -> int:
    path = os.path.join(partition_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown process"
        os.close(fd)
        raise LogLockedError(
            f"{partition_dir} is being written by another live process "
            f"({holder}); only one writer may own a partition log"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
    return fd


def is_partition_log(path: str) -> bool:
    """Whether ``path`` is a partition log's own directory: every writer leaves ``epoch.json``
    there when it opens one."""
    return os.path.isfile(os.path.join(path, EPOCH_FILE))


def read_epoch(partition_dir: str) -> int:
    """The epoch in ``epoch.json`` (0 when there is none)."""
    path = os.path.join(partition_dir, EPOCH_FILE)
    hint = "; fix or remove it only if no other incarnation can be alive"
    epoch = read_json_field(path, "epoch", "epoch file", hint)
    if epoch is None:
        return 0
    if type(epoch) is not int or epoch < 0:
        raise CorruptLogError(path, 0, -1, f"epoch must be an int >= 0, got {epoch!r}")
    return epoch


def epoch_bytes(epoch: int) -> bytes:
    return json.dumps({"epoch": epoch}).encode()


def write_epoch(partition_dir: str, epoch: int) -> int:
    write_atomically(os.path.join(partition_dir, EPOCH_FILE), [epoch_bytes(epoch)])
    return epoch


def write_all(fd: int, parts: Sequence[bytes]) -> None:
    """Vectored writes of every part (no copy into one buffer); finishes short writes."""
    for first in range(0, len(parts), _IOV_MAX):  # writev refuses more (EINVAL)
        # The usual append fits one call: no slice of the parts then.
        chunk = parts if len(parts) <= _IOV_MAX else parts[first : first + _IOV_MAX]
        written = os.writev(fd, chunk)
        if written < sum(map(len, chunk)):
            _finish_short_write(fd, chunk, written)


def _finish_short_write(fd: int, parts: Sequence[bytes], written: int) -> None:
    rest = memoryview(b"".join(parts))[written:]  # rare: a short write, finish it
    while rest:
        rest = rest[os.write(fd, rest) :]
