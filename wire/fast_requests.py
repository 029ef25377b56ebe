"""Direct decoders for the requests on every group member's path: OffsetCommit and Heartbeat
(steady traffic), JoinGroup and SyncGroup (every rebalance, once per member).

The general path reads a request body in three passes: ``frame_check`` walks every length
against the bytes left (kio's native reader trusts them), kio builds its entity, and
``translate`` builds the core's request from it. For an OffsetCommit that is 5.4 µs at one
partition and 28 µs at 64 (bench/wire-findings.md, "Where a commit's CPU goes"), on the thread
that limits a group's commit rate; a JoinGroup took 6.5 µs and a follower's SyncGroup 4.5 µs
with the connection's header parse, on the thread whose work bounds a rebalance. These
decoders read the same bytes once, straight into the core's request, checking each length
against what is left as they go:

============== ======== ==================================================================
request        versions fields, in wire order
============== ======== ==================================================================
OffsetCommit   2-9      group id, generation id, member id, group instance id (nullable,
                        v7+), retention time ms (v2-4; later -1, the broker's default),
                        topics: name, partitions: index, offset, leader epoch (v6+; before,
                        -1), metadata (nullable); flexible from v8
Heartbeat      0-4      group id, generation id, member id, group instance id (nullable,
                        v3+); flexible from v4
JoinGroup      0-9      group id, session timeout ms, rebalance timeout ms (v1+; before, the
                        session timeout), member id, group instance id (nullable, v5+),
                        protocol type, protocols: name, metadata (bytes), reason (nullable,
                        v8+); flexible from v6. The client id and host are not in the body:
                        ``request_to_core`` adds them
SyncGroup      0-5      group id, generation id, member id, group instance id (nullable,
                        v3+), protocol type and name (nullable, v5+), assignments: member
                        id, assignment (bytes); flexible from v4
============== ======== ==================================================================

An OffsetCommit's topic whose partitions all carry empty metadata and no tagged field, as
nearly every commit's do, is read in one ``struct.iter_unpack`` (``_plain_partitions``: 11.3
against 19.6 µs for 64 partitions, bench/wire-findings.md, "A commit of many partitions").

``Connection`` reads these with ``DECODERS``: a ``WireRequest``'s body is then the core's
request, which ``request_to_core`` hands on as it is (a JoinGroup's with its client id and
host filled in).

Flexible versions use compact lengths (unsigned varint, length + 1) and end every structure
with a tagged-field section; none of these requests defines a tagged field, so each is skipped
once its lengths are checked. A body they cannot read raises: ``FrameCheckError`` for a length
past the end, ``UnicodeDecodeError`` for a string that is not UTF-8, ``struct.error`` or
``IndexError`` for a field cut short; ``Connection`` closes the connection on any of them,
as for any body it cannot read.

tests/wire/test_fast_requests.py holds all four to kio's reader, at every version, on valid bodies
and on truncated and mutated ones: the same bodies accepted, the same core request built. Two
differences are on purpose, both where kio refuses what Kafka's own readers accept: a
retention time may be any int64 (kio reads a timedelta in microseconds, so refuses one beyond
±(2^63 - 1) / 1000 ms), and an unknown tagged field is skipped (kio refuses it).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TypeVar

from groupcoord.coordinator import messages as core

from .apis import ApiKey
from .frame_check import FrameCheckError, read_uvarint

T = TypeVar("T")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
# An OffsetCommit partition's first bytes by version: index, offset, the leader epoch (v6+),
# and the metadata's length prefix (int16; from v8 a compact length's first byte).
_FIXED = {
    version: struct.Struct(">iq" + ("i" if version >= 6 else "") + ("B" if version >= 8 else "h"))
    for version in range(2, 10)
}
# A partition as clients send nearly all of them: empty metadata (and, flexible, no tagged
# field). Its last two bytes are then the metadata's length prefix and the tag count (from v8:
# compact length 1, 0 tags) or the int16 length 0; the struct skips them as padding.
_PLAIN = {
    version: struct.Struct(">iq" + ("i" if version >= 6 else "") + "xx") for version in range(2, 10)
}
_PLAIN_TAIL = {
    version: (b"\x01", b"\x00") if version >= 8 else (b"\x00", b"\x00") for version in range(2, 10)
}


def _member(
    frame: bytes, at: int, flexible: bool, instance: bool
) -> tuple[str, int, str, str | None, int]:
    """The fields a member's request opens with: group id, generation id, member id and, where
    ``instance``, the group instance id (nullable); then the byte after them."""
    end = len(frame)
    group_id, at = _string(frame, at, end, flexible)
    (generation_id,) = _I32.unpack_from(frame, at)
    member_id, at = _string(frame, at + 4, end, flexible)
    group_instance_id = None
    if instance:
        group_instance_id, at = _string(frame, at, end, flexible, nullable=True)
    return group_id, generation_id, member_id, group_instance_id, at


def _heartbeat(version: int, frame: bytes, at: int) -> core.HeartbeatRequest:
    flexible = version >= 4
    group_id, generation_id, member_id, group_instance_id, at = _member(
        frame, at, flexible, instance=version >= 3
    )
    if flexible:
        _tags(frame, at, len(frame))
    return core.HeartbeatRequest(group_id, generation_id, member_id, group_instance_id)


def _offset_commit(version: int, frame: bytes, at: int) -> core.OffsetCommitRequest:
    flexible, end = version >= 8, len(frame)
    group_id, generation_id, member_id, group_instance_id, at = _member(
        frame, at, flexible, instance=version >= 7
    )
    retention_time_ms = -1
    if version <= 4:
        (retention_time_ms,) = _I64.unpack_from(frame, at)
        at += 8
    # A partition's fixed fields and its metadata's length prefix (a compact one's first
    # byte) in one read: no valid partition is shorter, so it never reads past one.
    fixed = _FIXED[version]
    fixed_bytes, epoch = fixed.size, version >= 6
    offsets: list[core.OffsetCommitRequestPartition] = []
    add = offsets.append
    topics, at = _count(frame, at, end, flexible)
    for _ in range(topics):
        topic, at = _string(frame, at, end, flexible)
        partitions, at = _count(frame, at, end, flexible)
        plain = _plain_partitions(version, topic, frame, at, end, partitions)
        if plain is not None:  # the usual topic: read in one call
            run, at = plain
            offsets.extend(run)
        else:
            for _ in range(partitions):
                values = fixed.unpack_from(frame, at)
                size = values[-1]
                if size == (1 if flexible else 0):  # the usual metadata: empty
                    at += fixed_bytes
                    metadata = ""
                else:  # read it again, in full
                    metadata, at = _string(
                        frame, at + fixed_bytes - (1 if flexible else 2), end, flexible, True
                    )
                if flexible:
                    at = at + 1 if frame[at] == 0 else _tags(frame, at, end)
                add(
                    core.OffsetCommitRequestPartition(
                        topic, values[0], values[1], values[2] if epoch else -1, metadata
                    )
                )
        if flexible:
            at = at + 1 if frame[at] == 0 else _tags(frame, at, end)
    if flexible:
        _tags(frame, at, end)
    return core.OffsetCommitRequest(
        group_id, generation_id, member_id, offsets, group_instance_id, retention_time_ms
    )


def _plain_partitions(
    version: int, topic: str, frame: bytes, at: int, end: int, count: int
) -> tuple[list[core.OffsetCommitRequestPartition], int] | None:
    """A topic's ``count`` partitions from ``at`` and the byte after them, when every one is
    plain (``_PLAIN``) and they fit before ``end``: read in one ``iter_unpack``, with no step
    per partition but building it. Their last two bytes, sliced out in C, tell: before the
    first partition that is not plain, every one is where a plain run puts it, so that one's
    metadata length or tag count sits where a plain one's does, and differs. Else None."""
    plain = _PLAIN[version]
    length_mark, tags_mark = _PLAIN_TAIL[version]
    stride = plain.size
    run_end = at + count * stride
    if (
        run_end > end
        or frame[at + stride - 2 : run_end : stride] != length_mark * count
        or frame[at + stride - 1 : run_end : stride] != tags_mark * count
    ):
        return None
    chunk = frame[at:run_end]
    if version >= 6:
        return [
            core.OffsetCommitRequestPartition(topic, index, offset, leader_epoch, "")
            for index, offset, leader_epoch in plain.iter_unpack(chunk)
        ], run_end
    return [
        core.OffsetCommitRequestPartition(topic, index, offset, -1, "")
        for index, offset in plain.iter_unpack(chunk)
    ], run_end


def _join_group(version: int, frame: bytes, at: int) -> core.JoinGroupRequest:
    """The member's JoinGroup, without what the body does not carry: ``client_id`` (the
    request header's) and ``client_host`` (the peer's) are "" until ``request_to_core``."""
    flexible, end = version >= 6, len(frame)
    group_id, at = _string(frame, at, end, flexible)
    (session_timeout_ms,) = _I32.unpack_from(frame, at)
    at += 4
    rebalance_timeout_ms = session_timeout_ms  # v0: the session timeout bounds both
    if version >= 1:
        (rebalance_timeout_ms,) = _I32.unpack_from(frame, at)
        at += 4
    member_id, at = _string(frame, at, end, flexible)
    group_instance_id = None
    if version >= 5:
        group_instance_id, at = _string(frame, at, end, flexible, nullable=True)
    protocol_type, at = _string(frame, at, end, flexible)
    protocols, at = _named_bytes(frame, at, end, flexible, core.JoinGroupRequestProtocol)
    reason = None
    if version >= 8:
        reason, at = _string(frame, at, end, flexible, nullable=True)
    if flexible:
        _tags(frame, at, end)
    return core.JoinGroupRequest(
        group_id,
        member_id,
        protocol_type,
        protocols,
        session_timeout_ms,
        rebalance_timeout_ms,
        group_instance_id,
        require_known_member_id=version >= 4,
        reason=reason,
    )


def _sync_group(version: int, frame: bytes, at: int) -> core.SyncGroupRequest:
    flexible, end = version >= 4, len(frame)
    group_id, generation_id, member_id, group_instance_id, at = _member(
        frame, at, flexible, instance=version >= 3
    )
    protocol_type = protocol_name = None
    if version >= 5:
        protocol_type, at = _string(frame, at, end, flexible, nullable=True)
        protocol_name, at = _string(frame, at, end, flexible, nullable=True)
    assignments, at = _named_bytes(frame, at, end, flexible, core.SyncGroupRequestAssignment)
    if flexible:
        _tags(frame, at, end)
    return core.SyncGroupRequest(
        group_id,
        generation_id,
        member_id,
        assignments,
        group_instance_id,
        protocol_type,
        protocol_name,
    )


def _named_bytes(
    frame: bytes, at: int, end: int, flexible: bool, make: Callable[[str, bytes], T]
) -> tuple[list[T], int]:
    """An array of (string, bytes) structures, JoinGroup's protocols (name, metadata) or
    SyncGroup's assignments (member id, assignment), each built by ``make``; then the byte
    after it."""
    made: list[T] = []
    count, at = _count(frame, at, end, flexible)
    for _ in range(count):
        name, at = _string(frame, at, end, flexible)
        data, at = _bytes(frame, at, end, flexible)
        if flexible:
            at = at + 1 if frame[at] == 0 else _tags(frame, at, end)
        made.append(make(name, data))  # type: ignore[arg-type]  # not nullable: never None
    return made, at


# api key -> decoder(version, frame, at of the body): the core request in the body.
DECODERS: dict[int, Callable[[int, bytes, int], object]] = {
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.HEARTBEAT: _heartbeat,
    ApiKey.JOIN_GROUP: _join_group,
    ApiKey.SYNC_GROUP: _sync_group,
}


def _string(
    frame: bytes, at: int, end: int, flexible: bool, nullable: bool = False
) -> tuple[str | None, int]:
    """A string (None: null, where ``nullable``) and the byte after it."""
    # The length's read is inline (as in _bytes): four strings are on every commit's path, and
    # a helper call for it cost 0.2 µs a commit (10 % of its decoding).
    if flexible:
        size = frame[at]  # IndexError past the end
        if size < 0x80:  # the usual one-byte length
            at += 1
        else:
            size, at = read_uvarint(frame, at, end)
        size -= 1
    else:
        (size,) = _I16.unpack_from(frame, at)
        at += 2
    if size > 0:
        if size > end - at:
            raise FrameCheckError(f"string of {size} bytes at byte {at}: past the end ({end})")
        return frame[at : at + size].decode(), at + size
    if size == 0:
        return "", at
    if size != -1 or not nullable:
        raise FrameCheckError(f"string of length {size} before byte {at}")
    return None, at


def _bytes(frame: bytes, at: int, end: int, flexible: bool) -> tuple[bytes, int]:
    """A (non-nullable) bytes field and the byte after it."""
    if flexible:
        size = frame[at]  # IndexError past the end
        if size < 0x80:  # the usual one-byte length
            at += 1
        else:
            size, at = read_uvarint(frame, at, end)
        size -= 1
    else:
        (size,) = _I32.unpack_from(frame, at)
        at += 4
    if size < 0 or size > end - at:
        raise FrameCheckError(f"bytes of length {size} at byte {at} ({end - at} left)")
    return frame[at : at + size], at + size


def _count(frame: bytes, at: int, end: int, flexible: bool) -> tuple[int, int]:
    """An array's element count and the byte after its prefix; every element takes at least
    one byte, so a count beyond the bytes left is refused before any is read."""
    if flexible:
        count, at = read_uvarint(frame, at, end)
        count -= 1
    else:
        (count,) = _I32.unpack_from(frame, at)
        at += 4
    if count < 0:
        raise FrameCheckError(f"null or negative array length before byte {at}")
    if count > end - at:
        raise FrameCheckError(f"array of {count} at byte {at}: only {end - at} bytes left")
    return count, at


def _tags(frame: bytes, at: int, end: int) -> int:
    """Skip a tagged-field section (none is defined for these requests): the byte after it."""
    if at < end and frame[at] == 0:
        return at + 1
    count, at = read_uvarint(frame, at, end)
    for _ in range(count):
        _tag, at = read_uvarint(frame, at, end)
        size, at = read_uvarint(frame, at, end)
        if size > end - at:
            raise FrameCheckError(f"tagged field of {size} bytes at byte {at}: past the end")
        at += size
    return at
