"""Who a log root belongs to: ``<log_dir>/deployment.json``, and who writes it right now.

A log root holds the partitions of exactly one deployment. Its identity — the partition count
(a group's partition is ``hash % count``, so another count moves groups onto partitions that
never saw them), the namespace it is served in and a cluster id made on first start — is
written once, atomically (write, fsync, rename, fsync the directory), and every later start is
checked against it: a start that disagrees is refused with one line saying what differs and
what to do, before any actor exists. A root written before this file existed is adopted unless
its ``partition-<n>`` directories show another count (one beyond it, or a complete other set).

``writer_of`` probes the partitions' writer locks (storage's ``writer.lock``, flock'd by the one
live writer, holding ``pid N on host H``) without keeping them, so a start can fail within
seconds when another live process serves the same root instead of waiting on the lock.
"""

from __future__ import annotations

import fcntl
import os
import re
import uuid

import msgspec

from groupcoord.storage import partition_dir
from groupcoord.storage.partition_log import LOCK_FILE
from groupcoord.storage.snapshot import create_atomically
from groupcoord.storage.writer_files import EPOCH_FILE, is_partition_log

IDENTITY_FILE = "deployment.json"
_PARTITION_DIR = re.compile(r"partition-(\d+)\Z")
_HOLDER = re.compile(r"pid (\d+) on (\S+)")
_TEMPORARY = re.compile(re.escape(IDENTITY_FILE) + r"\.(\d+)-[0-9a-f]+\.tmp\Z")


class DeploymentIdentity(msgspec.Struct, frozen=True):
    cluster_id: str
    num_partitions: int
    namespace: str


def _existing_partitions(log_dir: str) -> list[int]:
    found = []
    for name in os.listdir(log_dir):
        match = _PARTITION_DIR.match(name)
        if match and os.path.isdir(os.path.join(log_dir, name)):
            found.append(int(match.group(1)))
    return sorted(found)


def read_identity(log_dir: str) -> DeploymentIdentity | None:
    """The identity recorded in ``log_dir``, or None if it has none; ValueError if unreadable."""
    path = os.path.join(log_dir, IDENTITY_FILE)
    try:
        with open(path, "rb") as f:
            return msgspec.json.decode(f.read(), type=DeploymentIdentity)
    except FileNotFoundError:
        return None
    except (OSError, msgspec.DecodeError, RecursionError) as exc:
        # RecursionError: msgspec's, for brackets nested past its depth limit
        reason = "nested too deep" if isinstance(exc, RecursionError) else exc
        raise ValueError(
            f"{path} is unreadable ({reason}); restore it (it names the partition "
            f"count the logs were written with) before starting"
        ) from None


def check(log_dir: str, num_partitions: int, namespace: str) -> DeploymentIdentity | None:
    """The identity recorded in ``log_dir`` if it agrees with these settings, None when there
    is none yet; ValueError (one line: what differs, what to do) when they disagree. Reads
    only, so ``serve`` can ask before it starts Ray."""
    if is_partition_log(log_dir):
        raise ValueError(
            f"{log_dir} is one partition's log (it holds {EPOCH_FILE}), not a log root: use "
            f"{os.path.dirname(os.path.normpath(log_dir))}"
        )
    identity = read_identity(log_dir) if os.path.isdir(log_dir) else None
    if identity is None:
        existing = _existing_partitions(log_dir) if os.path.isdir(log_dir) else []
        # Evidence of another count: a partition beyond this one's, or a complete other set.
        if existing and (
            existing[-1] >= num_partitions
            or existing == list(range(len(existing))) != list(range(num_partitions))
        ):
            raise ValueError(
                f"{log_dir} holds the logs of {len(existing)} partitions "
                f"(partition-{existing[0]}..partition-{existing[-1]}), not {num_partitions}: "
                f"start with --partitions {len(existing)}, or use another --log-dir"
            )
        return None
    if (identity.num_partitions, identity.namespace) != (num_partitions, namespace):
        raise ValueError(
            f"{log_dir} belongs to deployment {identity.cluster_id} with "
            f"{identity.num_partitions} partitions in namespace {identity.namespace!r}, not "
            f"{num_partitions} in {namespace!r}: start it with --partitions "
            f"{identity.num_partitions} --namespace {identity.namespace}, or use another "
            f"--log-dir (another partition count would move every group)"
        )
    return identity


def claim(log_dir: str, num_partitions: int, namespace: str) -> DeploymentIdentity:
    """The identity of ``log_dir`` for a start with these settings: read (``check``), or made
    and written on first start. ValueError (one line: what differs, what to do) when they
    disagree. Temporary files a crashed first start left behind go first."""
    os.makedirs(log_dir, exist_ok=True)
    identity = check(log_dir, num_partitions, namespace)
    _remove_dead_writers_files(log_dir)
    if identity is not None:
        return identity
    made = DeploymentIdentity(uuid.uuid4().hex, num_partitions, namespace)
    if create_atomically(os.path.join(log_dir, IDENTITY_FILE), [msgspec.json.encode(made)]):
        return made
    # Another first start wrote its identity after our look: the one on disk stands.
    identity = check(log_dir, num_partitions, namespace)
    if identity is None:
        raise ValueError(f"{log_dir}: its {IDENTITY_FILE} came and went while starting; retry")
    return identity


def _remove_dead_writers_files(log_dir: str) -> None:
    """Remove the ``deployment.json.<pid>-<random>.tmp`` files (``create_atomically``'s) of
    processes that no longer run: a first start that crashed mid-write. A live writer's stays,
    since a racing first start may be about to link it into place."""
    for name in os.listdir(log_dir):
        match = _TEMPORARY.match(name)
        if match is None or _running(int(match.group(1))):
            continue
        try:
            os.remove(os.path.join(log_dir, name))
        except FileNotFoundError:
            pass  # another start removed it first


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: nothing is sent, only whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    except OverflowError:
        return False  # no such pid can exist
    return True


def writer_of(log_dir: str, num_partitions: int) -> str | None:
    """``"partition-<n> is being written by pid N on host H"`` for the first partition of
    ``log_dir`` whose writer lock a live process holds, else None. Takes no lock for good."""
    for n in range(num_partitions):
        try:
            fd = os.open(os.path.join(partition_dir(log_dir, n), LOCK_FILE), os.O_RDONLY)
        except OSError:  # no lock yet, or no usable directory: the partition
            continue  # itself will report what is wrong with it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
            found = _HOLDER.match(holder)  # storage writes "pid N on HOSTNAME"
            holder = f"pid {found[1]} on host {found[2]}" if found else "another live process"
            return f"partition-{n} is being written by {holder}"
        finally:
            os.close(fd)  # also drops the lock if this probe took it
    return None
