"""Snapshots: the compacted live state of a partition at a log offset, and storage's own copy of it.

Theory of operation
-------------------
A snapshot file ``snapshot-<offset:020d>.snap`` holds the state that replaying every record with
an offset below ``offset`` gives: per group, its latest group record (``None`` once tombstoned),
its live offsets, and the latest value of each of its other records (KIP-848's consumer-group
records, kept as ``SnapRecord`` envelopes: type number, encoded key, encoded value, so a reader
skips the types it does not know); dead tombstones and groups with none of these are dropped.
Layout: a 36-byte little-endian header (magic ``b"GCS\\x01"``, CRC-32 of the rest, payload
length, offset, offset count, group count) and a msgpack payload, the array of one ``SnapGroup``
per group.

``SnapGroup`` is array-like and holds its offsets column-wise per topic (partition numbers, then
the values as array-like ``SnapValue``), so a million offsets decode in one fast msgspec pass
per group and turn into the shard's ``{(topic, partition): OffsetCommitValue}`` with C-level
iteration only. ``SnapValue`` is generated from ``OffsetCommitValue``'s own fields, so a field
appended there (with a default) is carried here without anyone touching this module.

``CompactState`` is storage's private copy of the live state, built from storage's own data and
never from the (concurrently mutating) shard: ``base`` maps each group to the encoded bytes of
its ``SnapGroup`` as of the last snapshot, and ``overlay`` collects every record appended since.
Taking a snapshot re-encodes only the groups the overlay touched and copies every other group's
bytes verbatim, so it costs the size of the state to write but only the churn to compute.

Writes are atomic: write a temporary file, fsync it, rename it into place, fsync the directory.
"""

from __future__ import annotations

import json
import os
import re
import struct
import uuid
import zlib
from itertools import repeat, starmap

import msgspec
from msgspec.structs import astuple, fields

from groupcoord.coordinator.records import (
    RECORD_TYPE_OF,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)

from .codec import decode_parts
from .config import CorruptLogError

SNAPSHOT_MAGIC = b"GCS\x01"
SNAPSHOT_HEADER = struct.Struct("<4sIQQQI")
_SNAPSHOT_NAME = re.compile(r"^snapshot-(\d{20})\.snap$")
DAMAGED_SUFFIX = ".damaged"  # a snapshot the writer found unreadable, set aside


def _field_spec(f: msgspec.structs.FieldInfo) -> tuple:
    if f.required:
        return (f.name, f.type)
    if f.default_factory is not msgspec.NODEFAULT:
        return (f.name, f.type, msgspec.field(default_factory=f.default_factory))
    return (f.name, f.type, f.default)


# Same fields, types and defaults as OffsetCommitValue, encoded as an array (a quarter the bytes).
SnapValue = msgspec.defstruct(
    "SnapValue",
    [_field_spec(f) for f in fields(OffsetCommitValue)],
    array_like=True,
    frozen=True,
    module=__name__,
)


class SnapTopic(msgspec.Struct, array_like=True, frozen=True):
    topic: str
    partitions: list[int]
    values: list[SnapValue]  # type: ignore[valid-type]


class SnapRecord(msgspec.Struct, array_like=True, frozen=True):
    """A record other than an offset or classic group record: its envelope, as the log's."""

    record_type: int
    key: msgspec.Raw
    value: msgspec.Raw


class SnapGroup(msgspec.Struct, array_like=True, frozen=True):
    group: str
    metadata: GroupMetadataValue | None
    topics: list[SnapTopic]
    # Appended (older readers ignore it; older snapshots decode with none).
    records: list[SnapRecord] = []


class SnapshotDamaged(ValueError):
    """A snapshot file that cannot be used (short, bad CRC, undecodable)."""


_encoder = msgspec.msgpack.Encoder()
_raws_decoder = msgspec.msgpack.Decoder(list[msgspec.Raw])
_group_decoder = msgspec.msgpack.Decoder(SnapGroup)


def snapshot_path(partition_dir: str, offset: int) -> str:
    return os.path.join(partition_dir, f"snapshot-{offset:020d}.snap")


def list_snapshots(partition_dir: str) -> list[tuple[int, str]]:
    """(offset, path) of every snapshot file, oldest first."""
    found = []
    for name in os.listdir(partition_dir):
        match = _SNAPSHOT_NAME.match(name)
        if match is not None:
            found.append((int(match.group(1)), os.path.join(partition_dir, name)))
    return sorted(found)


def offsets_of(group: SnapGroup) -> dict[tuple[str, int], OffsetCommitValue]:
    """A snapshot group's offsets in the shard's own shape (a fresh dict, C-level iteration)."""
    offsets: dict[tuple[str, int], OffsetCommitValue] = {}
    for topic in group.topics:
        offsets.update(
            zip(
                zip(repeat(topic.topic), topic.partitions),
                starmap(OffsetCommitValue, map(astuple, topic.values)),
                strict=True,
            )
        )
    return offsets


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str, chunks: list[bytes]) -> None:
    """Write, fsync, rename into place, fsync the directory: all of ``path`` or none of it.

    Through a temporary name of this call's own, ``<path>.<pid>-<random>.tmp``: two writers of
    one path (a fenced writer still running beside its successor, concurrent exporters) never
    write into one file, and whichever renames last is there whole. A crash leaves that name
    behind; whoever owns the directory removes ``*.tmp`` leftovers when it opens. A write or
    rename that fails (a full disk) removes it itself."""
    tmp = _write_private(path, chunks)
    try:
        os.replace(tmp, path)
    except BaseException:
        _remove_quietly(tmp)
        raise
    fsync_dir(os.path.dirname(path) or ".")


def create_atomically(path: str, chunks: list[bytes]) -> bool:
    """``write_atomically`` where ``path`` does not exist yet; False, and nothing changed, where
    it does, also when another writer created it between the caller's look and this write."""
    tmp = _write_private(path, chunks)
    try:
        os.link(tmp, path)  # unlike a rename, refuses to replace
    except FileExistsError:
        return False
    finally:
        os.remove(tmp)
    fsync_dir(os.path.dirname(path) or ".")
    return True


def _write_private(path: str, chunks: list[bytes]) -> str:
    """``chunks`` written and fsynced under a temporary name beside ``path`` of this call's own;
    returns that name. Where a write or the fsync fails, that name is removed before the error
    goes on."""
    tmp = f"{path}.{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        try:
            for chunk in chunks:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        _remove_quietly(tmp)
        raise
    return tmp


def _remove_quietly(path: str) -> None:
    """Remove ``path`` if it can be: the caller is already raising the error that matters."""
    try:
        os.remove(path)
    except OSError:
        pass


def read_json_field(path: str, name: str, what: str, hint: str = "") -> object:
    """Field ``name`` of the JSON object in ``path`` (one of the small files written with
    ``write_atomically``), or None when there is no such file. ``CorruptLogError`` ("unreadable
    <what> (why)<hint>") when the file cannot be read, is not a JSON object or has no (or a
    null) ``name``; the caller checks the value's type and range."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise CorruptLogError(path, 0, -1, f"unreadable {what} ({exc!r}){hint}") from None
    value = data.get(name) if isinstance(data, dict) else None
    if value is None:
        raise CorruptLogError(path, 0, -1, f"unreadable {what} (no {name!r} in it){hint}")
    return value


def write_snapshot(
    partition_dir: str, offset: int, raws: list[msgspec.Raw], offset_count: int
) -> str:
    payload = _encoder.encode(raws)
    rest = SNAPSHOT_HEADER.pack(SNAPSHOT_MAGIC, 0, len(payload), offset, offset_count, len(raws))[
        8:
    ]
    crc = zlib.crc32(payload, zlib.crc32(rest))
    path = snapshot_path(partition_dir, offset)
    write_atomically(path, [SNAPSHOT_MAGIC + crc.to_bytes(4, "little") + rest, payload])
    return path


class SnapshotImage(msgspec.Struct, frozen=True):
    offset: int
    groups: list[SnapGroup]
    raws: list[msgspec.Raw]
    offset_count: int
    size_bytes: int
    # Per group id, its ``SnapGroup.records`` decoded (types this reader knows), in order.
    records: dict[str, list[Record]] = {}


def records_of(group: SnapGroup) -> list[Record]:
    """A snapshot group's other records, decoded; unknown types are skipped (a warning)."""
    decoded = (decode_parts(r.record_type, r.key, r.value) for r in group.records)
    return [record for record in decoded if record is not None]


def read_snapshot(path: str) -> SnapshotImage:
    """Read and fully validate a snapshot; SnapshotDamaged (with the reason) when unusable."""
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except OSError as exc:
        raise SnapshotDamaged(f"unreadable: {exc}") from None
    if len(buf) < SNAPSHOT_HEADER.size:
        raise SnapshotDamaged(f"short header ({len(buf)} bytes)")
    magic, crc, length, offset, offset_count, group_count = SNAPSHOT_HEADER.unpack_from(buf)
    if magic != SNAPSHOT_MAGIC:
        raise SnapshotDamaged("bad magic")
    if SNAPSHOT_HEADER.size + length != len(buf):
        raise SnapshotDamaged(
            f"payload is {len(buf) - SNAPSHOT_HEADER.size} bytes, header says {length}"
        )
    view = memoryview(buf)
    if zlib.crc32(view[8:]) != crc:
        raise SnapshotDamaged("CRC mismatch")
    match = _SNAPSHOT_NAME.match(os.path.basename(path))
    if match is not None and int(match.group(1)) != offset:
        raise SnapshotDamaged(f"file name says offset {match.group(1)}, header says {offset}")
    try:
        raws = _raws_decoder.decode(view[SNAPSHOT_HEADER.size :])
        groups = [_group_decoder.decode(raw) for raw in raws]
        records = {group.group: records_of(group) for group in groups if group.records}
    except msgspec.MsgspecError as exc:
        raise SnapshotDamaged(f"undecodable: {exc}") from None
    except RecursionError:  # msgspec's, for arrays or maps nested past its depth limit
        raise SnapshotDamaged("undecodable: nested too deep") from None
    if len(groups) != group_count:
        raise SnapshotDamaged(f"{len(groups)} groups, header says {group_count}")
    return SnapshotImage(offset, groups, raws, offset_count, len(buf), records)


class _Delta:
    """The records appended for one group since the base: its group record and offset changes."""

    __slots__ = ("has_metadata", "metadata", "offsets", "records")

    def __init__(self) -> None:
        self.has_metadata = False
        self.metadata: GroupMetadataValue | None = None
        self.offsets: dict[tuple[str, int], OffsetCommitValue | None] = {}
        # (record type, encoded key) -> latest value (None: tombstone), other record types
        self.records: dict[tuple[int, bytes], object] = {}


class CompactState:
    """Latest value per key, as of the last appended record (module docstring)."""

    def __init__(self) -> None:
        self.base: dict[str, msgspec.Raw] = {}
        self.base_offset_count = 0
        self._overlay: dict[str, _Delta] = {}

    def reset(self, image: SnapshotImage | None) -> None:
        self._overlay = {}
        if image is None:
            self.base, self.base_offset_count = {}, 0
        else:
            self.base = {
                group.group: raw for group, raw in zip(image.groups, image.raws, strict=True)
            }
            self.base_offset_count = image.offset_count

    def apply_all(self, records: list[Record]) -> None:
        """Record the latest value of each key of ``records`` (runs after every append)."""
        overlay = self._overlay
        for record in records:
            key = record.key
            delta = overlay.get(key.group)
            if delta is None:
                delta = overlay[key.group] = _Delta()
            if type(key) is OffsetCommitKey:
                delta.offsets[(key.topic, key.partition)] = record.value
            elif type(key) is GroupMetadataKey:
                delta.has_metadata, delta.metadata = True, record.value
            else:
                delta.records[(RECORD_TYPE_OF[type(key)], _encoder.encode(key))] = record.value

    def compact(self) -> tuple[list[msgspec.Raw], int]:
        """Fold the overlay into the base; returns (encoded groups, live offset count)."""
        count = self.base_offset_count
        for group_id, delta in self._overlay.items():
            old = self.base.get(group_id)
            group = _group_decoder.decode(old) if old is not None else None
            count -= sum(len(t.partitions) for t in group.topics) if group is not None else 0
            merged, live = _merge(group_id, group, delta)
            count += live
            if merged is None:
                self.base.pop(group_id, None)
            else:
                self.base[group_id] = merged
        self._overlay = {}
        self.base_offset_count = count
        return list(self.base.values()), count


def _merge(group_id: str, group: SnapGroup | None, delta: _Delta) -> tuple[msgspec.Raw | None, int]:
    metadata = group.metadata if group is not None else None
    offsets = {}
    if group is not None:
        for topic in group.topics:
            offsets.update(
                zip(zip(repeat(topic.topic), topic.partitions), topic.values, strict=True)
            )
    if delta.has_metadata:
        metadata = delta.metadata
    for key, value in delta.offsets.items():
        if value is None:
            offsets.pop(key, None)  # a tombstone only matters until compaction
        else:
            offsets[key] = SnapValue(*astuple(value))
    records = {
        (r.record_type, bytes(r.key)): r for r in (group.records if group is not None else ())
    }
    for (record_type, key), value in delta.records.items():
        if value is None:
            records.pop((record_type, key), None)
        else:
            records[(record_type, key)] = SnapRecord(
                record_type, msgspec.Raw(key), msgspec.Raw(_encoder.encode(value))
            )
    if metadata is None and not offsets and not records:
        return None, 0
    columns: dict[str, tuple[list[int], list]] = {}
    for (topic, partition), value in offsets.items():
        partitions, values = columns.setdefault(topic, ([], []))
        partitions.append(partition)
        values.append(value)
    topics = [
        SnapTopic(topic, partitions, values) for topic, (partitions, values) in columns.items()
    ]
    snap = SnapGroup(group_id, metadata, topics, list(records.values()))
    return msgspec.Raw(_encoder.encode(snap)), len(offsets)
