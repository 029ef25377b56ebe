"""The writer side of one partition's log: lock, epoch, recovery, group-commit append, snapshots.

Theory of operation
-------------------
``open_partition_log(dir)`` creates the directory (fsyncing the parent of each directory it
creates), takes ``writer.lock`` with ``fcntl.flock`` (non-blocking: a second live writer gets
``LogLockedError``; the kernel drops the lock when the holder dies, so a restarted actor gets it
back), bumps the incarnation epoch in ``epoch.json`` (atomically, under the lock), gives a new
log its identity (``log_id``), removes leftover temporary files and recovers the last segment:
every batch is CRC-checked and a torn tail is truncated and reported in ``truncated``; damage
followed by later appends raises ``CorruptLogError`` (see ``segments``). The epoch is also kept
above every epoch already in the log (a lost ``epoch.json`` must not make new batches look older
than old ones). The last segment is then fsynced (a crashed predecessor may have left
acknowledged bytes only in the page cache) and its end published as the durable end
(``durable_end``).

Fencing: a lock can be lost while its holder still runs (an NFS lease that expired while the
client stalled; someone deleting ``writer.lock``), and the next incarnation then bumps the epoch.
So before each write (append, roll, skip record, snapshot, retention) and again before an append
returns, the writer checks that ``epoch.json`` is still the very file it wrote (it keeps that
file open: one ``fstat`` says whether it still has a name and was not rewritten). If not, it
raises ``LogFencedError`` and the log is failed: a replaced incarnation acknowledges nothing.
The check and the write are not one step, so a replaced incarnation may still land one append;
an incarnation therefore rolls to a segment of its own before its first append, and readers
pass that late append over by epoch (``segments``).

``append(records)`` is the group-commit API: the runtime hands over the records of every request
that arrived since its last append, and they cost ONE write and (policy "always") ONE fsync.
They are split into batches of at most ``max_batch_bytes``; a record over ``max_record_bytes``
or a malformed record raises before a byte is written. The active segment rolls (fsync, seal,
new file, fsync the directory) before an append that would take it past ``segment_bytes``, so
an append never spans two segments, and before the first append into a segment a predecessor
wrote (Fencing). A failed write or fsync fails the log for good (after a failed fsync the
kernel may have dropped the dirty pages, so retrying could lie): the owner must reopen, which
truncates whatever half-append is left. Each fsync of the active segment is
followed by publishing the durable end (a 20-byte ``pwrite``).

``load_into`` never reuses an offset a snapshot or the exporter's watermark has passed: when the
log ends below them (a machine crash took unsynced records), it records the offsets below the
watermark as skipped (``skips``, durably, before anything goes past them) and rolls to a new
segment above both.

``maybe_snapshot`` may run on its own thread, beside appends (building a snapshot of a million
offsets takes ~0.3 s; appends must not wait that long). It never looks at the shard (the event
loop keeps mutating it): storage keeps its own ``CompactState`` fed by ``load_into`` and by
appended records, folded in by whoever holds ``_fold_lock`` (a snapshot, or an append every
100,000 records when no snapshot holds it). The one invariant: a snapshot's offset is the end of
exactly the records folded into its state, so the end offset and the list of records not yet
folded change together, under ``_state_lock``. Before writing a snapshot the active segment is
fsynced (whatever the policy), so the log never ends below a snapshot it holds records of.
After a snapshot, ``retention`` deletes the snapshots and segments no longer needed.

The writer's lock and epoch files, and its vectored writes, are in ``writer_files``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence

from groupcoord.coordinator.records import Record
from groupcoord.coordinator.shard import Shard

from .codec import encode_each, encode_payload, envelopes_of, frame_batches, frame_parts
from .config import (
    CorruptLogError,
    LogClosedError,
    LogConfig,
    LogFencedError,
    StorageError,
)
from .durable_end import DURABLE_END_FILE, encode_durable_end
from .loader import LoadProgress, LoadSummary, load_partition, scan_last_segment
from .log_id import ensure_log_id
from .retention import apply_retention
from .segments import (
    TruncationReport,
    list_segments,
    read_segment_bytes,
    scan_segment,
    segment_path,
)
from .skips import record_skip
from .snapshot import (
    DAMAGED_SUFFIX,
    CompactState,
    fsync_dir,
    write_snapshot,
)
from .watermark import WATERMARK_PREFIX, read_export_watermarks
from .writer_files import (
    EPOCH_FILE,
    epoch_bytes,
    make_dirs_durably,
    read_epoch,
    take_lock,
    write_all,
    write_epoch,
)
from .writer_files import LOCK_FILE as LOCK_FILE  # actors.identity reads it from here

log = logging.getLogger("groupcoord.storage")
# Appended records wait at most this long (in records) to be folded into the compact state, in
# case the owner never calls maybe_snapshot (it holds references to them until then).
_MAX_UNFOLDED_RECORDS = 100_000


def open_partition_log(partition_dir: str, config: LogConfig | None = None) -> PartitionLog:
    """Open (creating if needed) the partition log for writing; see the module docstring."""
    if config is None:
        config = LogConfig()
    elif not isinstance(config, LogConfig):
        raise ValueError(f"config must be a LogConfig, got {type(config).__name__}")
    make_dirs_durably(partition_dir)
    lock_fd = take_lock(partition_dir)
    try:
        epoch = write_epoch(partition_dir, read_epoch(partition_dir) + 1)
        ensure_log_id(partition_dir)  # before any segment: a log never exists without one
        for name in os.listdir(partition_dir):
            # A write_atomically of ours that never reached its rename; the exporter's
            # watermark writes run without the lock and may be in flight right now.
            if name.endswith(".tmp") and not name.startswith(WATERMARK_PREFIX):
                os.remove(os.path.join(partition_dir, name))
        return PartitionLog(partition_dir, config, lock_fd, epoch)
    except BaseException:
        os.close(lock_fd)
        raise


class PartitionLog:
    """An open, locked partition log. Build it with ``open_partition_log``."""

    def __init__(self, partition_dir: str, config: LogConfig, lock_fd: int, epoch: int) -> None:
        self.partition_dir = partition_dir
        self.config = config
        self.epoch = epoch
        self._lock_fd = lock_fd
        self._io_lock = threading.Lock()  # the active fd: append/roll vs the interval flusher
        # Lock order: _snapshot_lock -> _fold_lock -> _state_lock, and _io_lock -> _state_lock.
        self._state_lock = threading.Lock()  # _next_offset moves with _unfolded; the counters
        self._fold_lock = threading.Lock()  # held by whoever touches _state
        self._snapshot_lock = threading.Lock()  # one snapshot at a time; close() waits for it
        self._state = CompactState()
        self._state_loaded = False
        self._unfolded: list[list[Record]] = []  # appended, not yet in _state
        self._unfolded_records = 0
        self._records_since_snapshot = 0
        self._bytes_since_snapshot = 0
        self._failed: BaseException | None = None
        self._closed = False
        self._dirty = False  # written but not yet fsynced
        self._fd = self._epoch_fd = self._end_fd = -1
        try:
            self.truncated: TruncationReport | None = self._recover()
            newest = self._newest_epoch_in_log()
            if newest >= epoch:  # epoch.json was lost or reset: stay above the log
                self.epoch = write_epoch(partition_dir, newest + 1)
            self._hold_epoch_file()
            self._fd = self._open_segment(self._segment_base)
            # A predecessor replaced while it ran may still land one append in its segment,
            # and so in ours if we shared it: we roll before our first write (segments).
            self._inherited = self._size > 0
            os.fsync(self._fd)  # what a crashed predecessor left in the page cache
            self._open_durable_end()
            self._publish_durable_end(self._next_offset)
        except BaseException:
            self._close_fds()  # open_partition_log closes the lock
            raise
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        if config.fsync_policy == "interval":
            self._flusher = threading.Thread(
                target=self._flush_periodically,
                daemon=True,
                name=f"fsync-{os.path.basename(partition_dir)}",
            )
            self._flusher.start()

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.partition_dir!r}, epoch={self.epoch}, "
            f"end_offset={self._next_offset}, policy={self.config.fsync_policy})"
        )

    def __enter__(self) -> PartitionLog:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._next_offset

    # -- opening -------------------------------------------------------------------------------

    def _newest_epoch_in_log(self) -> int:
        """The epoch of the newest batch in the log (0 for an empty log)."""
        if self._recovered is not None and self._recovered.scan.batches:
            return self._recovered.scan.batches[-1][1].epoch
        for info in reversed(list_segments(self.partition_dir)[:-1]):  # the last one is empty
            scan = scan_segment(
                read_segment_bytes(info.path),
                info.path,
                info.base_offset,
                False,
                verify_from_offset=1 << 62,
            )  # headers only, no CRCs
            if scan.batches:
                return scan.batches[-1][1].epoch
        return 0

    def _hold_epoch_file(self) -> None:
        # The file we wrote stays open: another incarnation replaces it by a rename, which
        # leaves ours without a name (st_nlink 0), and an fstat costs half a stat of the path.
        self._epoch_fd = os.open(os.path.join(self.partition_dir, EPOCH_FILE), os.O_RDONLY)
        self._epoch_mtime_ns = os.fstat(self._epoch_fd).st_mtime_ns
        if os.pread(self._epoch_fd, 64, 0) != epoch_bytes(self.epoch):
            self._fence()  # replaced since we wrote it: fenced already

    def _check_owner(self) -> None:
        """Raise ``LogFencedError`` (and fail the log) if another incarnation has replaced this
        one, i.e. ``epoch.json`` is no longer the file this one wrote (module docstring)."""
        try:
            stat = os.fstat(self._epoch_fd)
        except OSError as exc:  # e.g. ESTALE: removed on an NFS server
            self._fence(f"cannot be checked ({exc})")
        if stat.st_nlink and stat.st_mtime_ns == self._epoch_mtime_ns:
            return  # still named, and not rewritten in place
        self._fence()

    def _fence(self, found: str | None = None) -> None:
        if found is None:
            try:
                found = f"now holds epoch {read_epoch(self.partition_dir)}"
            except (OSError, CorruptLogError) as exc:
                found = f"cannot be read ({exc})"
        error = LogFencedError(
            f"{self.partition_dir}: this incarnation (epoch {self.epoch}) was "
            f"replaced: {EPOCH_FILE} {found}; it writes and acknowledges "
            "nothing more"
        )
        self._failed = error
        log.critical("%s", error)
        raise error

    def _open_durable_end(self) -> None:
        path = os.path.join(self.partition_dir, DURABLE_END_FILE)
        created = not os.path.exists(path)
        self._end_fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        if created:
            fsync_dir(self.partition_dir)

    def _publish_durable_end(self, end_offset: int) -> None:
        """Tell lock-free readers that offsets below ``end_offset`` are on disk (call right after
        the fsync that made them so; see ``durable_end``)."""
        os.pwrite(self._end_fd, encode_durable_end(end_offset, self.epoch), 0)

    def _close_fds(self) -> None:
        for name in ("_fd", "_epoch_fd", "_end_fd"):
            fd = getattr(self, name)
            if fd >= 0:
                setattr(self, name, -1)
                os.close(fd)

    def _recover(self) -> TruncationReport | None:
        segments = list_segments(self.partition_dir)
        self._recovered = scan_last_segment(self.partition_dir, segments)  # kept for load_into
        if self._recovered is None:
            self._segment_base = self._next_offset = self._size = 0
            return None
        last, scan = segments[-1], self._recovered.scan
        if scan.torn is not None:
            fd = os.open(last.path, os.O_WRONLY)
            try:
                os.ftruncate(fd, scan.valid_bytes)
                os.fsync(fd)
            finally:
                os.close(fd)
            log.warning(
                "%s: truncated a torn tail of %d bytes at byte %d (offset %d): %s",
                last.path,
                scan.torn.bytes,
                scan.torn.position,
                scan.torn.offset,
                scan.torn.reason,
            )
        self._segment_base, self._next_offset, self._size = (
            last.base_offset,
            scan.next_offset,
            scan.valid_bytes,
        )
        return scan.torn

    def _open_segment(self, base_offset: int) -> int:
        path = segment_path(self.partition_dir, base_offset)
        created = not os.path.exists(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if created:  # the new name must survive a crash too
            try:
                fsync_dir(self.partition_dir)
            except BaseException:
                os.close(fd)
                raise
        return fd

    def load_into(
        self, shard: Shard, progress: Callable[[LoadProgress], None] | None = None
    ) -> LoadSummary:
        """Load ``shard`` (newest usable snapshot + log tail) and storage's own compact state."""
        self._check_usable()
        self._state_loaded = False  # until this load succeeds
        recovered, self._recovered = self._recovered, None  # the scan made by open, once
        if recovered is not None and (
            recovered.scan.valid_bytes != self._size
            or recovered.path != segment_path(self.partition_dir, self._segment_base)
        ):
            recovered = None  # appended since open: scan afresh
        self._unfolded, self._unfolded_records = [], 0  # the load rebuilds _state
        summary = load_partition(
            self.partition_dir,
            shard,
            self._state,
            progress,
            self.truncated,
            recovered,
            freeze_gc=self.config.freeze_loaded_state,
        )
        # Offsets others have already seen are never reused. The log can end below them after
        # a machine crash: records the (fsynced) snapshot holds, with fsync policy
        # "interval"/"never"; or records the lake exporter read between a write and its fsync
        # (it reads without the lock). Reusing those offsets would give new records positions
        # the snapshot or an exporter's watermark has already passed, and they would be lost.
        watermark = max(read_export_watermarks(self.partition_dir).values(), default=0)
        seen = max(summary.snapshot_offset, watermark)
        if seen > self._next_offset or summary.damaged_snapshot_paths:
            self._check_owner()
        if seen > self._next_offset:
            log.warning(
                "%s: log ends at %d, below offset %d already covered by a snapshot or "
                "the export watermark; continuing from there",
                self.partition_dir,
                self._next_offset,
                seen,
            )
            with self._io_lock:
                try:
                    # The offsets below the watermark hold no record any more: say so durably
                    # before a segment goes past them, so every later load accepts the hole.
                    # Offsets only a snapshot holds are not skipped: they are in that snapshot.
                    if watermark > self._next_offset:
                        record_skip(self.partition_dir, self._next_offset, watermark)
                    self._roll(seen)
                except OSError as exc:
                    self._failed = exc
                    raise
        for path in summary.damaged_snapshot_paths:
            # Set aside (kept for inspection, no longer listed): retention must never count an
            # unreadable snapshot among those it keeps, or it would delete the good one it fell
            # back to, and the segments below it, leaving nothing to rebuild from.
            os.replace(path, path + DAMAGED_SUFFIX)
            log.warning("%s: set aside damaged snapshot %s", self.partition_dir, path)
        if summary.damaged_snapshot_paths:
            fsync_dir(self.partition_dir)  # the set-aside must survive a crash too
        self._state_loaded = True
        self._records_since_snapshot = summary.records
        self._bytes_since_snapshot = 0
        return summary

    # -- appending -----------------------------------------------------------------------------

    @property
    def append_may_block(self) -> bool:
        """Whether ``append`` can wait for an fsync: its own (policy "always") or the interval
        flusher's, which holds the write lock while it syncs. With "never" it only writes into
        the page cache (and fsyncs once per ``segment_bytes``, when the segment rolls)."""
        return self.config.fsync_policy != "never"

    def append(self, records: list[Record]) -> int:
        """Make ``records`` durable (per the fsync policy) in one write; returns the end offset."""
        self._check_usable()
        if not records:
            return self._next_offset
        envelopes = envelopes_of(records)  # ValueError when malformed
        payload = encode_payload(envelopes)
        # Usual case: the whole append is smaller than one record may be, so no record is too
        # large and it fits one batch (max_batch_bytes > max_record_bytes): one encode call.
        single = len(payload) <= self.config.max_record_bytes
        encoded = None if single else encode_each(records, self.config.max_record_bytes)
        with self._io_lock:
            self._check_usable()
            self._check_owner()
            parts: Sequence[bytes]
            if single:
                parts = frame_parts(
                    payload, len(records), self._next_offset, self._next_offset, self.epoch, True
                )
            else:
                parts = frame_batches(
                    encoded, self.config.max_batch_bytes, self._next_offset, self.epoch
                )
            size = sum(map(len, parts))
            try:
                if self._size and (
                    self._inherited or self._size + size > self.config.segment_bytes
                ):
                    self._roll(self._next_offset)
                write_all(self._fd, parts)
                synced = self.config.fsync_policy == "always"
                if synced:
                    os.fsync(self._fd)
                else:
                    self._dirty = True
                self._check_owner()  # replaced while writing: acknowledge nothing
                if synced:
                    self._publish_durable_end(self._next_offset + len(records))
            except OSError as exc:
                self._failed = exc
                log.critical(
                    "%s: append failed, the log must be reopened: %r", self.partition_dir, exc
                )
                raise
            self._size += size
            with self._state_lock:
                # The compact state is bookkeeping for snapshots: folded in later, not while
                # callers wait for durability. The end offset moves with the unfolded records.
                self._next_offset += len(records)
                end = self._next_offset
                self._unfolded.append(records)
                self._unfolded_records += len(records)
                self._records_since_snapshot += len(records)
                self._bytes_since_snapshot += size
                fold_now = self._unfolded_records >= _MAX_UNFOLDED_RECORDS
        if fold_now:
            self._fold(wait=False)  # a snapshot holding the state folds them anyway
        return end

    def _fold(self, wait: bool = True) -> None:
        """Fold appended records into the compact state, unless ``wait`` is False and a
        snapshot holds it."""
        if self._fold_lock.acquire(blocking=wait):
            try:
                self._fold_locked()
            finally:
                self._fold_lock.release()

    def _fold_locked(self, snapshot: bool = False) -> int:
        """With ``_fold_lock`` held: fold every appended record; returns the end offset the
        compact state now covers exactly. ``snapshot``: restart the snapshot counters too."""
        with self._state_lock:
            pending, self._unfolded, self._unfolded_records = self._unfolded, [], 0
            end = self._next_offset
            if snapshot:
                self._records_since_snapshot = self._bytes_since_snapshot = 0
        for records in pending:
            self._state.apply_all(records)
        return end

    def _roll(self, new_base: int) -> None:
        """Seal the active segment (fsync, whatever the policy) and start one at ``new_base``."""
        if self._size == 0 and new_base == self._segment_base:
            return
        self._check_owner()
        os.fsync(self._fd)
        # -1 until the new segment is open: if opening it fails, close() must not close the
        # old number again (by then it may belong to another file of this process).
        fd, self._fd = self._fd, -1
        os.close(fd)
        self._fd = self._open_segment(new_base)
        self._segment_base, self._next_offset, self._size, self._dirty = (
            new_base,
            new_base,
            0,
            False,
        )
        self._inherited = False
        self._publish_durable_end(new_base)

    def _flush_periodically(self) -> None:
        interval_s = self.config.fsync_interval_ms / 1000
        while not self._stop.wait(interval_s):
            with self._io_lock:
                if not self._dirty or self._closed or self._failed is not None:
                    continue
                try:
                    os.fsync(self._fd)
                    self._dirty = False
                    self._publish_durable_end(self._next_offset)
                except OSError as exc:
                    self._failed = exc
                    log.critical("%s: background fsync failed: %r", self.partition_dir, exc)

    def _check_usable(self) -> None:
        if self._closed:
            raise LogClosedError(f"{self.partition_dir}: the log is closed")
        if self._failed is not None:
            raise LogClosedError(
                f"{self.partition_dir}: the log failed ({self._failed!r}) and must be reopened"
            )

    # -- snapshots and retention ---------------------------------------------------------------

    def maybe_snapshot(self, shard: Shard | None = None) -> str | None:
        """Take a snapshot if a threshold is crossed (the ``shard`` argument is not used: see the
        module docstring). Returns the snapshot path, or None."""
        if not self._state_loaded or self._closed or self._failed is not None:
            return None
        self._fold(wait=False)  # release the records' references early
        cfg = self.config
        with self._state_lock:
            due = (
                cfg.snapshot_every_records
                and self._records_since_snapshot >= cfg.snapshot_every_records
            ) or (
                cfg.snapshot_every_bytes and self._bytes_since_snapshot >= cfg.snapshot_every_bytes
            )
        if not due:
            return None
        with self._snapshot_lock:
            if self._closed or self._failed is not None:  # closed meanwhile: nothing to do
                return None
            return self._snapshot_locked()

    def snapshot(self) -> str:
        """Snapshot the state at the current end offset now, then apply retention. Safe beside
        appends on another thread: they go on while the snapshot is built and written."""
        with self._snapshot_lock:
            return self._snapshot_locked()

    def _snapshot_locked(self) -> str:
        self._check_usable()
        if not self._state_loaded:
            raise StorageError("snapshot() needs the state: call load_into() first")
        with self._fold_lock:
            offset = self._fold_locked(snapshot=True)
            raws, offset_count = self._state.compact()
        self._sync_active_segment()
        path = write_snapshot(self.partition_dir, offset, raws, offset_count)
        log.info(
            "%s: snapshot at offset %d (%d groups, %d offsets)",
            self.partition_dir,
            offset,
            len(raws),
            offset_count,
        )
        self._apply_retention()
        return path

    def _sync_active_segment(self) -> None:
        """fsync what was written so far, whatever the policy: a snapshot must never be ahead of
        the log on disk (the log would end below it after a crash); also checks ownership."""
        with self._io_lock:
            self._check_usable()
            self._check_owner()
            if self._dirty:
                try:
                    os.fsync(self._fd)
                    self._dirty = False
                    self._publish_durable_end(self._next_offset)
                except OSError as exc:
                    self._failed = exc
                    raise

    def _apply_retention(self) -> None:
        self._check_owner()
        apply_retention(self.partition_dir, self.config)

    # -- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """fsync and release everything, the writer lock last. Idempotent."""
        if self._closed:
            return
        with self._snapshot_lock:  # a snapshot being written finishes first
            self._closed = True
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        error: OSError | None = None
        with self._io_lock:
            try:
                if self._failed is None:
                    os.fsync(self._fd)
                    self._publish_durable_end(self._next_offset)
            except OSError as exc:
                error = exc
            finally:
                try:
                    self._close_fds()
                finally:
                    os.close(self._lock_fd)  # released whatever happened above
        if error is not None:
            raise StorageError(f"{self.partition_dir}: final fsync failed: {error!r}") from error
