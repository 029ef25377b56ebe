"""Storage configuration (``LogConfig``) and the named errors storage raises.

Every limit has a default and a validated range; a bad value is a ``ValueError`` naming the field,
raised when the config is built, so a misconfigured partition never gets as far as its log.
"""

from __future__ import annotations

import msgspec

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
FSYNC_POLICIES = ("always", "interval", "never")


class StorageError(Exception):
    """Base class of every error storage raises on purpose."""


class RecordTooLargeError(StorageError, ValueError):
    """One record encodes to more than ``max_record_bytes``; nothing of its append was written."""


class LogLockedError(StorageError):
    """Another live process holds the partition directory's writer lock."""


class LogFencedError(StorageError):
    """This incarnation was replaced: another one opened the log (``epoch.json`` no longer holds
    our epoch), e.g. after our lock was lost. Nothing more may be written or acknowledged; the
    log is failed."""


class LogClosedError(StorageError):
    """The log was closed, or failed (a write or fsync error) and must be reopened."""


class CorruptLogError(StorageError):
    """Damage that is not a torn tail: acknowledged data cannot be read back.

    ``path`` is the damaged file, ``position`` the byte position in it, ``offset`` the log offset
    expected there (-1 when not meaningful, e.g. for a snapshot set).
    """

    def __init__(self, path: str, position: int, offset: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt at byte {position} (log offset {offset}): {reason}")
        self.path, self.position, self.offset, self.reason = path, position, offset, reason


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if type(value) is not int:
        raise ValueError(f"LogConfig.{name} must be an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"LogConfig.{name} must be in [{low}, {high}], got {value}")


class LogConfig(msgspec.Struct, frozen=True):
    """How one partition log writes, rolls, snapshots and retains.

    fsync_policy: "always" (append returns after fsync), "interval" (a background thread fsyncs
    at most ``fsync_interval_ms`` after a write) or "never" (the OS decides). Segment rolls,
    snapshots and close always fsync, whatever the policy.
    snapshot_every_records / snapshot_every_bytes: take a snapshot once this many records or
    bytes were appended since the last one (0 disables that trigger).
    keep_snapshots: snapshots kept; segments are deleted only below the OLDEST kept snapshot, so a
    damaged newest snapshot can fall back to the previous one plus the log.
    retain_until_exported: never delete a segment holding offsets a lake has not yet exported
    (the lowest ``export-watermark.<key>.json``, one per lake; no file means keep everything).
    freeze_loaded_state: after ``load_into``, move everything allocated so far into the garbage
    collector's permanent generation (``gc.freeze``; see ``loader``): the loaded state is
    long-lived, and skipping it in collections saves ~0.3 s per million offsets at load and
    in every later full collection. Process-wide, hence a switch.
    """

    fsync_policy: str = "always"
    fsync_interval_ms: int = 200
    segment_bytes: int = 16 * MiB
    max_record_bytes: int = 1 * MiB
    max_batch_bytes: int = 4 * MiB
    snapshot_every_records: int = 200_000
    snapshot_every_bytes: int = 32 * MiB
    keep_snapshots: int = 2
    retain_until_exported: bool = False
    freeze_loaded_state: bool = True

    def __post_init__(self) -> None:
        if self.fsync_policy not in FSYNC_POLICIES:
            raise ValueError(
                f"LogConfig.fsync_policy must be one of {FSYNC_POLICIES}, got {self.fsync_policy!r}"
            )
        _check_int("fsync_interval_ms", self.fsync_interval_ms, 1, 60_000)
        _check_int("segment_bytes", self.segment_bytes, 4 * KiB, 1 * GiB)
        _check_int("max_record_bytes", self.max_record_bytes, 64, 64 * MiB)
        # A batch must hold one maximal record plus its 38-byte header and array header.
        _check_int("max_batch_bytes", self.max_batch_bytes, self.max_record_bytes + 64, 128 * MiB)
        _check_int("snapshot_every_records", self.snapshot_every_records, 0, 1 << 40)
        _check_int("snapshot_every_bytes", self.snapshot_every_bytes, 0, 1 << 50)
        _check_int("keep_snapshots", self.keep_snapshots, 1, 100)
        for name in ("retain_until_exported", "freeze_loaded_state"):
            if type(getattr(self, name)) is not bool:
                raise ValueError(f"LogConfig.{name} must be a bool")
