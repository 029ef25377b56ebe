"""Segment files: naming, listing, validation of their batches, and the read-only log reader.

Theory of operation
-------------------
A partition directory (``<log_dir>/partition-<n>/``) holds its log as segment files named by the
offset of their first record, ``<base_offset:020d>.log``; each segment continues exactly where
the previous one ends. Only the newest ("last") segment is ever written; a segment is sealed
(fsynced, never touched again except for deletion) when the writer rolls to a new one.

``scan_segment`` walks a segment's batches (see ``codec``) and decides what damage means:

* In a sealed segment, any invalid batch is a ``CorruptLogError``: it was fsynced whole.
* In the last segment, an invalid batch at byte P is a *torn tail* (a crash while the final
  append was being written, or a reader racing the writer) unless some intact batch after P
  belongs to a LATER append (its ``append`` offset is above the offset expected at P): then
  acknowledged data is damaged and we say so (``CorruptLogError`` with file, byte and offset)
  rather than silently dropping it. The search for later batches looks for the batch magic and
  checks each candidate's CRC, so it also works when the damaged header's length is garbage.
* A torn tail begins where its append begins: an append whose last batch (flag bit 0) is
  missing was never acknowledged, so its intact leading batches are part of the tail too
  (an append is all or nothing, whether it was cut inside a batch or between two).

A replaced incarnation (a "zombie" that lost its lock while it ran, see ``partition_log``) that
passed its owner check just before the takeover can still land one append (all its batches, in
one write) after its successor bumped the epoch: in the segment it had open, or in the one it
was rolling to. It never acknowledges that append (its check after the write sees the new
epoch). Its successor never writes into the segment it found open: it rolls before its first
append, to its own next offset, which is where the zombie rolls too. So the zombie's batches
land at the end of the segment before the successor's, or in the successor's segment, and each
segment is read by epochs, as Kafka truncates a log by leader epoch (``_place``):

* *Stale*: an intact batch of an older epoch than the newest batch taken before it in the
  segment was written after that newer batch, so after the takeover: it is passed over.
* *Superseded*: an intact batch of a newer epoch than every batch taken so far, beginning below
  the expected offset where a taken append began, is the successor's first append; the
  zombie's batches from that offset on (landed between the successor's recovery and its first
  write) are passed over, and the successor's batch is taken. Across segments the same rule
  applies to a segment's trailing batches and the next segment (``trim_superseded``): the
  zombie's append landed at the end of the segment the successor rolled away from. There the
  successor's segment supersedes them also while it holds no intact batch (its first append
  torn by a crash), since no writer starts a segment inside the one before.

A zombie's append that no write of its successor follows (the successor wrote nothing before it
closed or died) cannot be told from one written before the takeover, and is kept, like any
append whose acknowledgement was lost: the next incarnation continues after it. Passed-over
batches are listed in ``SegmentScan.passed_over``. Any other intact batch that does not begin
at the expected offset is damage, handled as above (an append beginning AT the expected offset
after it is acknowledged data), and so is a segment that begins with an older epoch than the
segments before it (``check_epoch_order``).

Across segments, ``check_segment_follows`` is the one rule every reader (``read_log``, the
loader, the exporter's source) applies: a segment begins exactly where the previous one ends,
unless the hole between them is a range the writer recorded as skipped (``skips``); any other
hole or overlap is a ``CorruptLogError`` naming the missing offsets.

The writer truncates a torn tail on open (``partition_log``); readers (``read_log``, the exporter,
the read-only loader) just stop there. None of this takes the writer lock.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import msgspec

from groupcoord.coordinator.records import Record

from .codec import (
    FLAG_LAST_IN_APPEND,
    HEADER_BYTES,
    MAGIC,
    BatchHeader,
    RecordFormatError,
    batch_problem,
    decode_records,
    read_header,
)
from .config import CorruptLogError, StorageError
from .skips import covers, read_skipped_ranges

_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")


class SegmentInfo(msgspec.Struct, frozen=True):
    path: str
    base_offset: int
    size_bytes: int


class LogEntry(msgspec.Struct, frozen=True):
    offset: int
    record: Record


class TruncationReport(msgspec.Struct, frozen=True):
    """A torn tail: ``bytes`` bytes from byte ``position`` of ``segment`` (log offset
    ``offset``)."""

    segment: str
    position: int
    offset: int
    bytes: int
    reason: str


class SegmentScan(msgspec.Struct, frozen=True):
    batches: list[tuple[int, BatchHeader]]  # (byte position, header) of every valid batch
    valid_bytes: int  # bytes up to the end of the last valid batch
    next_offset: int  # offset after the last valid batch
    torn: TruncationReport | None = None
    # (byte position, header) of intact batches a zombie wrote: stale or superseded
    passed_over: list[tuple[int, BatchHeader]] = []


def segment_path(partition_dir: str, base_offset: int) -> str:
    return os.path.join(partition_dir, f"{base_offset:020d}.log")


def list_segments(partition_dir: str) -> list[SegmentInfo]:
    """The partition's segments, sorted by base offset (empty when the directory is missing)."""
    try:
        entries = list(os.scandir(partition_dir))
    except FileNotFoundError:
        return []
    segments = []
    for entry in entries:
        match = _SEGMENT_NAME.match(entry.name)
        if match is None:
            continue
        try:
            size_bytes = entry.stat().st_size
        except FileNotFoundError:  # deleted by the writer's retention meanwhile
            continue
        segments.append(SegmentInfo(entry.path, int(match.group(1)), size_bytes))
    segments.sort(key=lambda s: s.base_offset)
    return segments


def log_start_offset(partition_dir: str) -> int:
    """The first offset still held by a segment (0 for an empty or missing log)."""
    segments = list_segments(partition_dir)
    return segments[0].base_offset if segments else 0


def batch_crc_holding(partition_dir: str, offset: int) -> int | None:
    """The CRC of the batch that holds ``offset`` (a fingerprint of what the log holds there),
    or None when no intact batch does: below the log's start, in a range the writer skipped,
    past the end, or behind damage. Reads the one segment that would hold it (and the first
    batch of the next one, when it may supersede the end of this one), walks its headers and
    checks the CRC of that batch only."""
    segments = list_segments(partition_dir)
    index = None
    for i, info in enumerate(segments):
        if info.base_offset > offset:
            break
        index = i
    if index is None:
        return None
    holder = segments[index]
    following = segments[index + 1] if index + 1 < len(segments) else None
    try:
        with open(holder.path, "rb") as f:
            buf = f.read()
        scan = scan_segment(buf, holder.path, holder.base_offset, following is None, 1 << 62)
    except FileNotFoundError:  # retention deleted it meanwhile: the offset is below the start
        return None
    except CorruptLogError:
        return None
    for pos, header in trim_superseded(scan, following).batches:
        if header.base_offset <= offset < header.end_offset:
            return header.crc if batch_problem(buf, pos, None)[1] is None else None
    return None


def read_segment_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise StorageError(
            f"{path} was deleted while being read (retention moved the log start "
            "past it; an exporter should set retain_until_exported)"
        ) from None


def scan_segment(
    buf: bytes, path: str, base_offset: int, is_last: bool, verify_from_offset: int = 0
) -> SegmentScan:
    """Validate the batches of one segment (module docstring). CRCs of batches wholly below
    ``verify_from_offset`` are not checked: their records are not going to be used."""
    batches: list[tuple[int, BatchHeader]] = []
    passed_over: list[tuple[int, BatchHeader]] = []
    pos, expected, size = 0, base_offset, len(buf)
    while pos < size:
        peek = read_header(buf, pos)
        verify = peek is None or peek.end_offset > verify_from_offset
        header, problem = batch_problem(buf, pos, None, verify_crc=verify)
        if (
            problem is None
            and header.base_offset == expected
            and (not batches or header.epoch >= batches[-1][1].epoch)
        ):  # the usual case, in line: the batch simply comes next
            batches.append((pos, header))
            pos += HEADER_BYTES + header.length
            expected = header.end_offset
            continue
        place = _place(batches, header, expected) if problem is None else None
        if place is not None:
            if place == _STALE:
                passed_over.append((pos, header))
            else:
                passed_over.extend(batches[place:])
                del batches[place:]
                batches.append((pos, header))
                expected = header.end_offset
            pos += HEADER_BYTES + header.length
            continue
        if problem is None:
            problem = f"base offset {header.base_offset}, expected {expected}"
        if not is_last:
            raise CorruptLogError(path, pos, expected, f"{problem} in a sealed segment")
        later = _later_append_at(buf, pos, expected)
        if later is not None:
            raise CorruptLogError(
                path,
                pos,
                expected,
                f"{problem}; an intact batch of a later "
                f"append follows at byte {later}, so acknowledged data is damaged",
            )
        return _drop_incomplete_append(batches, passed_over, path, size, pos, expected, problem)
    if is_last and batches and not batches[-1][1].flags & FLAG_LAST_IN_APPEND:
        return _drop_incomplete_append(batches, passed_over, path, size, pos, expected, None)
    return SegmentScan(batches, pos, expected, passed_over=passed_over)


_STALE = -1


def _place(
    batches: list[tuple[int, BatchHeader]], header: BatchHeader, expected: int
) -> int | None:
    """Where an intact batch that does not simply come next goes, by epoch (module docstring):
    ``_STALE`` (passed over), the index in ``batches`` from which it supersedes them, or None
    when it does not fit (damage)."""
    if not batches:
        return None
    newest = batches[-1][1].epoch
    if header.epoch < newest:
        return _STALE
    if header.epoch > newest and header.base_offset < expected:
        return _append_starting_at(batches, header.base_offset)
    return None


def _append_starting_at(batches: list[tuple[int, BatchHeader]], offset: int) -> int | None:
    """The index of the batch in ``batches`` that begins an append at ``offset``, or None."""
    for index in range(len(batches) - 1, -1, -1):
        header = batches[index][1]
        if header.base_offset == offset:
            return index if header.append_offset == offset else None
        if header.base_offset < offset:
            return None
    return None


def trim_superseded(scan: SegmentScan, following: SegmentInfo | None) -> SegmentScan:
    """``scan`` of a sealed segment without its trailing batches that the ``following``
    segment supersedes (module docstring): it begins below this one's end, and its first batch
    is of a newer epoch, or there is none intact yet (the successor's first append, torn by a
    crash or not written yet; no writer ever starts a segment inside the one before). Reads
    that batch only when the following segment begins below this one's end."""
    if following is None or not scan.batches or following.base_offset >= scan.next_offset:
        return scan
    first = _first_batch(following)
    if first is not None and first.epoch <= scan.batches[-1][1].epoch:
        return scan  # not a successor's: the overlap is refused by check_segment_follows
    cut = _append_starting_at(scan.batches, following.base_offset)
    if cut is None:
        return scan
    return msgspec.structs.replace(
        scan,
        batches=scan.batches[:cut],
        next_offset=following.base_offset,
        passed_over=scan.passed_over + scan.batches[cut:],
    )


def _first_batch(info: SegmentInfo) -> BatchHeader | None:
    """The header of a segment's first batch when that batch is intact, else None."""
    try:
        with open(info.path, "rb") as f:
            head = f.read(HEADER_BYTES)
            header = read_header(head, 0) if len(head) == HEADER_BYTES else None
            if header is None:
                return None
            buf = head + f.read(header.length)
    except FileNotFoundError:
        return None
    header, problem = batch_problem(buf, 0, None)
    return header if problem is None else None


def _drop_incomplete_append(
    batches: list[tuple[int, BatchHeader]],
    passed_over: list[tuple[int, BatchHeader]],
    path: str,
    size: int,
    pos: int,
    expected: int,
    problem: str | None,
) -> SegmentScan:
    """The scan of a last segment whose final append is torn at byte ``pos``: that append was
    never acknowledged, so its intact leading batches go too (an append is all or nothing)."""
    if batches and not batches[-1][1].flags & FLAG_LAST_IN_APPEND:
        append_offset = batches[-1][1].append_offset
        while batches and batches[-1][1].append_offset == append_offset:
            pos, header = batches.pop()
            expected = header.base_offset
        problem = f"incomplete append from offset {expected}" + (f" ({problem})" if problem else "")
    torn = TruncationReport(path, pos, expected, size - pos, problem)
    return SegmentScan(batches, pos, expected, torn, passed_over)


def _later_append_at(buf: bytes, damaged_pos: int, expected_offset: int) -> int | None:
    """Byte position of an intact batch after ``damaged_pos`` whose append began above
    ``expected_offset`` (so it was written after the damaged one was complete), or None.
    When the batch at ``damaged_pos`` is itself intact but starts elsewhere than
    ``expected_offset``, no crash tore it: a replaced incarnation wrote it whole (a zombie that
    passed its owner check just before the takeover). Then an append that begins AT
    ``expected_offset`` after it is the log's own, acknowledged one, and counts too."""
    stray, problem = batch_problem(buf, damaged_pos, None)
    lowest = expected_offset if problem is None and stray is not None else expected_offset + 1
    pos = buf.find(MAGIC, damaged_pos + 1)
    while pos != -1:
        header, problem = batch_problem(buf, pos, None)
        if problem is None and header.append_offset >= lowest:
            return pos
        pos = buf.find(MAGIC, pos + 1)
    return None


def _epoch_problem(epoch: int, previous: int) -> str:
    return (
        f"a batch of epoch {epoch} follows one of epoch {previous}: written by a replaced "
        "incarnation that had lost the writer lock"
    )


def check_epoch_order(previous_epoch: int, scan: SegmentScan, path: str) -> int:
    """Refuse a segment whose first batch is older than the segments before it (their newest
    epoch is ``previous_epoch``); returns the newest epoch up to this segment's end."""
    if not scan.batches:
        return previous_epoch
    pos, first = scan.batches[0]
    if first.epoch < previous_epoch:
        raise CorruptLogError(
            path, pos, first.base_offset, _epoch_problem(first.epoch, previous_epoch)
        )
    return scan.batches[-1][1].epoch  # non-decreasing within a segment (scan_segment)


def check_segment_follows(partition_dir: str, previous_end: int, info: SegmentInfo) -> None:
    """Refuse a segment that does not begin where the data before it ends (``previous_end``),
    unless the hole between them is recorded as skipped (module docstring)."""
    base = info.base_offset
    if base == previous_end:
        return
    if base < previous_end:
        raise CorruptLogError(
            info.path,
            0,
            base,
            f"the segment begins at offset {base}, but the "
            f"one before it ends at {previous_end} (segments overlap)",
        )
    if not covers(read_skipped_ranges(partition_dir), previous_end, base):
        raise CorruptLogError(
            info.path,
            0,
            base,
            f"offsets {previous_end}..{base - 1} are missing (gap before this segment)",
        )


def decode_batch(buf: bytes, pos: int, header: BatchHeader, path: str) -> list[Record | None]:
    """The records of a valid batch (None for skipped unknown types); CorruptLogError when a
    CRC-valid payload does not decode, since skipping it would lose acknowledged data."""
    payload = memoryview(buf)[pos + HEADER_BYTES : pos + HEADER_BYTES + header.length]
    try:
        records = decode_records(payload)
    except RecordFormatError as exc:
        raise CorruptLogError(path, pos, header.base_offset, str(exc)) from None
    if len(records) != header.count:
        raise CorruptLogError(
            path,
            pos,
            header.base_offset,
            f"header says {header.count} records, payload holds {len(records)}",
        )
    return records


def read_log(
    partition_dir: str,
    from_offset: int = 0,
    segment: SegmentInfo | str | None = None,
    to_offset: int | None = None,
) -> Iterator[LogEntry]:
    """Every record at offset >= ``from_offset`` (and < ``to_offset``, when given), in offset
    order, read-only and lock-free.

    Safe while a writer appends: stops cleanly at a torn or incomplete tail of the last segment.
    Records of unknown types are skipped (their offsets are simply absent). ``segment`` (a
    SegmentInfo or a segment path) restricts reading to that one segment, e.g. one Spark input
    split per segment; the segment must still end where the next one begins. A replaced
    incarnation's stale or superseded batches are passed over. A hole between segments that is
    not a recorded skip, a segment beginning with an older epoch than those before it, or
    damage that is not a torn tail raises ``CorruptLogError`` (module docstring).
    """
    if type(from_offset) is not int or from_offset < 0:
        raise ValueError(f"from_offset must be an int >= 0, got {from_offset!r}")
    if to_offset is not None and (type(to_offset) is not int or to_offset < 0):
        raise ValueError(f"to_offset must be an int >= 0 or None, got {to_offset!r}")
    segments = list_segments(partition_dir)
    chosen = range(len(segments))
    if segment is not None:
        wanted = segment.path if isinstance(segment, SegmentInfo) else segment
        chosen = [
            i for i, s in enumerate(segments) if os.path.abspath(s.path) == os.path.abspath(wanted)
        ]
        if not chosen:
            raise ValueError(f"no segment {wanted!r} in {partition_dir}")
    previous_end: int | None = None
    epoch = 0
    for i in chosen:
        info = segments[i]
        following = segments[i + 1] if i + 1 < len(segments) else None
        if following is not None and following.base_offset <= from_offset:
            continue  # wholly below from_offset
        if to_offset is not None and info.base_offset >= to_offset:
            break  # wholly above to_offset
        if previous_end is not None:
            check_segment_follows(partition_dir, previous_end, info)
        buf = read_segment_bytes(info.path)
        scan = scan_segment(buf, info.path, info.base_offset, following is None, from_offset)
        scan = trim_superseded(scan, following)
        epoch = check_epoch_order(epoch, scan, info.path)
        if segment is not None and following is not None:
            check_segment_follows(partition_dir, scan.next_offset, following)
        previous_end = scan.next_offset
        for pos, header in scan.batches:
            if header.end_offset <= from_offset:
                continue
            if to_offset is not None and header.base_offset >= to_offset:
                break
            records = decode_batch(buf, pos, header, info.path)
            for index, record in enumerate(records):
                offset = header.base_offset + index
                if to_offset is not None and offset >= to_offset:
                    break
                if record is not None and offset >= from_offset:
                    yield LogEntry(offset, record)
