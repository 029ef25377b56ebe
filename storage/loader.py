"""Loading a partition: newest usable snapshot into ``Shard.restore``, then the log tail into
``Shard.replay``.

Theory of operation
-------------------
1. Scan the last segment first: its end is the log end, and a torn tail there is reported.
2. Pick the newest snapshot that reads back intact (CRC, decode). A damaged one is reported and
   the next older one tried; with none left, replay the whole log, which is only possible while
   the log still starts at offset 0 (otherwise: ``CorruptLogError``). A snapshot is decoded
   completely before the first ``restore`` call, so a bad one never half-loads a shard.
3. Restore every snapshot group in bulk, then replay each record at offset >= the snapshot
   offset, checking that segments continue each other where records are needed (a hole is
   accepted only where the writer recorded a skip: ``segments.check_segment_follows``),
   passing over what a replaced incarnation wrote after the takeover (``segments``: by epoch;
   counted in ``LoadSummary.passed_over_batches``), and that no segment begins with an older
   epoch than those before it (``segments.check_epoch_order``).

The cyclic garbage collector is paused while loading: a load allocates millions of small
objects that all stay alive, and the collector's repeated passes over them would cost more than
the load itself. It is restored (if it was on) whatever happens. With ``freeze_gc`` (the
writer's ``LogConfig.freeze_loaded_state``), a successful load ends with ``gc.freeze()``: the
loaded state lives as long as the partition, so it goes to the permanent generation instead of
costing a ~0.3 s pass now and again in every later full collection. Frozen objects are still
freed by reference counting; only cyclic garbage that exists at that moment would be kept.

Progress goes to an optional callable as ``LoadProgress`` every ``PROGRESS_EVERY`` records or
offsets and at each phase end; the result is a ``LoadSummary``.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import msgspec

from groupcoord.coordinator.shard import Shard

from .config import CorruptLogError
from .segments import (
    SegmentInfo,
    SegmentScan,
    TruncationReport,
    check_epoch_order,
    check_segment_follows,
    decode_batch,
    list_segments,
    read_segment_bytes,
    scan_segment,
    trim_superseded,
)
from .snapshot import (
    CompactState,
    SnapshotDamaged,
    SnapshotImage,
    list_snapshots,
    offsets_of,
    read_snapshot,
)

log = logging.getLogger("groupcoord.storage")
PROGRESS_EVERY = 100_000


class LoadProgress(msgspec.Struct, frozen=True):
    phase: str  # "snapshot" | "log" | "done"
    records: int  # log records replayed so far
    offsets: int  # snapshot offsets restored so far
    bytes: int  # snapshot and segment bytes read so far
    elapsed_ms: int


class LoadSummary(msgspec.Struct, frozen=True):
    records: int  # log records replayed (after the snapshot)
    bytes: int  # snapshot + segment bytes read
    snapshot_offset: int  # -1: no snapshot used
    snapshot_groups: int
    snapshot_offsets: int
    start_offset: int  # first offset replayed from the log
    end_offset: int  # log end (next offset to be written)
    elapsed_ms: float
    snapshot_ms: float
    replay_ms: float
    segments: int  # segments read
    skipped_records: int = 0  # records of unknown types
    truncated: TruncationReport | None = None
    damaged_snapshots: list[str] = []
    damaged_snapshot_paths: list[str] = []  # the unreadable files themselves (not stale ones)
    passed_over_batches: int = 0  # a replaced incarnation's, in the segments read (segments)

    @property
    def records_per_s(self) -> float:
        return self.records / (self.replay_ms / 1000) if self.replay_ms > 0 else 0.0


@contextmanager
def _gc_paused(freeze_after: bool) -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        if freeze_after:
            gc.freeze()
    finally:
        if was_enabled:
            gc.enable()


class _Tracker:
    def __init__(self, progress: Callable[[LoadProgress], None] | None) -> None:
        self.progress = progress
        self.started = time.perf_counter()
        self.records = self.offsets = self.bytes = 0
        self._next_report = PROGRESS_EVERY

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def tick(self, phase: str, force: bool = False) -> None:
        done = self.records + self.offsets
        if self.progress is not None and (force or done >= self._next_report):
            self._next_report = done + PROGRESS_EVERY
            self.progress(
                LoadProgress(phase, self.records, self.offsets, self.bytes, int(self.elapsed_ms()))
            )


class RecoveredTail(msgspec.Struct, frozen=True):
    """The writer's scan of the last segment on open, handed to its load so it is not redone."""

    path: str
    buf: bytes
    scan: SegmentScan
    verified_from: int  # batches ending at or below this offset were not CRC-checked


def scan_last_segment(partition_dir: str, segments: list[SegmentInfo]) -> RecoveredTail | None:
    """Scan the last segment, CRC-checking what the newest snapshot does not cover (that is all
    a load will replay unless the snapshot turns out damaged, and then it is checked again)."""
    if not segments:
        return None
    snapshots = list_snapshots(partition_dir)
    verified_from = snapshots[-1][0] if snapshots else 0
    last = segments[-1]
    buf = read_segment_bytes(last.path)
    scan = scan_segment(
        buf, last.path, last.base_offset, is_last=True, verify_from_offset=verified_from
    )
    return RecoveredTail(last.path, buf, scan, verified_from)


def load_partition(
    partition_dir: str,
    shard: Shard,
    state: CompactState | None = None,
    progress: Callable[[LoadProgress], None] | None = None,
    truncated: TruncationReport | None = None,
    recovered: RecoveredTail | None = None,
    freeze_gc: bool = False,
) -> LoadSummary:
    """Load ``shard`` (still loading) from the partition directory; see the module docstring.

    ``state`` (the writer's CompactState) is reset to the loaded state. ``truncated`` is the
    writer's report of a tail it truncated on open, ``recovered`` its scan of the (truncated)
    last segment; a read-only load scans itself and reports the torn tail it stopped at.
    """
    tracker = _Tracker(progress)
    with _gc_paused(freeze_gc):
        segments = list_segments(partition_dir)
        log_start = segments[0].base_offset if segments else 0
        if recovered is None or not segments or recovered.path != segments[-1].path:
            recovered = scan_last_segment(partition_dir, segments)
        last_buf, last_scan = (recovered.buf, recovered.scan) if recovered else (b"", None)
        log_end = last_scan.next_offset if last_scan is not None else 0
        truncated = truncated or (last_scan.torn if last_scan is not None else None)

        image, damaged, unreadable = _newest_usable_snapshot(partition_dir, log_start)
        if image is None and log_start > 0:
            raise CorruptLogError(
                partition_dir,
                0,
                log_start,
                "no usable snapshot, and segments "
                f"below offset {log_start} were deleted: the state cannot be rebuilt"
                + (f" (damaged: {'; '.join(damaged)})" if damaged else ""),
            )
        snapshot_started = time.perf_counter()
        start = 0
        if image is not None:
            start = image.offset
            tracker.bytes += image.size_bytes
            for group in image.groups:
                offsets = offsets_of(group)
                tracker.offsets += len(offsets)
                shard.restore(group.group, group.metadata, offsets)
                for record in image.records.get(group.group, ()):
                    shard.replay(record)  # KIP-848 consumer-group records
                tracker.tick("snapshot")
            tracker.tick("snapshot", force=True)
        if state is not None:
            state.reset(image)
        snapshot_ms = (time.perf_counter() - snapshot_started) * 1000

        if recovered is not None and recovered.verified_from > start:  # fell back: check more
            last = segments[-1]
            last_scan = scan_segment(last_buf, last.path, last.base_offset, True, start)
        replay_started = time.perf_counter()
        used, skipped, passed_over = _replay_tail(
            partition_dir, segments, last_buf, last_scan, start, shard, state, tracker
        )
        replay_ms = (time.perf_counter() - replay_started) * 1000
        tracker.tick("done", force=True)
    summary = LoadSummary(
        records=tracker.records,
        bytes=tracker.bytes,
        snapshot_offset=image.offset if image is not None else -1,
        snapshot_groups=len(image.groups) if image is not None else 0,
        snapshot_offsets=tracker.offsets,
        start_offset=start,
        end_offset=max(log_end, start),
        elapsed_ms=tracker.elapsed_ms(),
        snapshot_ms=snapshot_ms,
        replay_ms=replay_ms,
        segments=used,
        skipped_records=skipped,
        truncated=truncated,
        damaged_snapshots=damaged,
        damaged_snapshot_paths=unreadable,
        passed_over_batches=passed_over,
    )
    if passed_over:
        log.warning(
            "%s: passed over %d batches a replaced incarnation wrote after the takeover "
            "(never acknowledged)",
            partition_dir,
            passed_over,
        )
    log.info(
        "loaded %s: snapshot@%d (%d groups, %d offsets) + %d records in %.0f ms",
        partition_dir,
        summary.snapshot_offset,
        summary.snapshot_groups,
        summary.snapshot_offsets,
        summary.records,
        summary.elapsed_ms,
    )
    return summary


def _newest_usable_snapshot(
    partition_dir: str, log_start: int
) -> tuple[SnapshotImage | None, list[str], list[str]]:
    """(image or None, why each newer snapshot was passed over, paths of the unreadable ones)."""
    damaged: list[str] = []
    unreadable: list[str] = []
    for offset, path in reversed(list_snapshots(partition_dir)):
        if offset < log_start:
            damaged.append(f"{path}: older than the log start {log_start}")
            continue
        try:
            return read_snapshot(path), damaged, unreadable
        except SnapshotDamaged as exc:
            log.warning("snapshot %s is damaged (%s); falling back to an older one", path, exc)
            damaged.append(f"{path}: {exc}")
            unreadable.append(path)
    return None, damaged, unreadable


def _replay_tail(
    partition_dir: str,
    segments: list[SegmentInfo],
    last_buf: bytes,
    last_scan: SegmentScan | None,
    start: int,
    shard,
    state: CompactState | None,
    tracker: _Tracker,
) -> tuple[int, int, int]:
    """Replay the segments from ``start`` on: (segments read, records of unknown types,
    batches passed over)."""
    used = skipped = passed_over = epoch = 0
    expected: int | None = None  # where the next segment must begin
    replay, apply_all = shard.replay, (state.apply_all if state is not None else None)
    for i, info in enumerate(segments):
        is_last = i == len(segments) - 1
        if not is_last and segments[i + 1].base_offset <= start:
            continue  # wholly below the snapshot
        if expected is not None or info.base_offset > start:
            check_segment_follows(partition_dir, expected if expected is not None else start, info)
        buf = last_buf if is_last else read_segment_bytes(info.path)
        if is_last:
            scan = last_scan
        else:
            scan = scan_segment(buf, info.path, info.base_offset, False, start)
            scan = trim_superseded(scan, segments[i + 1])
        epoch = check_epoch_order(epoch, scan, info.path)
        used += 1
        passed_over += len(scan.passed_over)
        tracker.bytes += len(buf)
        for pos, header in scan.batches:
            if header.end_offset <= start:
                continue
            records = decode_batch(buf, pos, header, info.path)
            first = max(start - header.base_offset, 0)
            if first:
                records = records[first:]
            if None in records:  # unknown types (rare): skip them
                skipped += records.count(None)
                records = [record for record in records if record is not None]
            for record in records:
                replay(record)
            if apply_all is not None:
                apply_all(records)
            tracker.records += len(records)
            tracker.tick("log")
        expected = scan.next_offset
    return used, skipped, passed_over
