"""Kafka's ConsumerProtocol: the binary layout of a consumer's subscription and assignment.

Group members of protocol type ``consumer`` put these bytes in JoinGroup metadata and SyncGroup
assignments. The coordinator itself only needs the subscribed topics (offset expiry and
OffsetDelete, spec §6.2 and §2.12); the client and its assignors use the whole layout.

Layout (big-endian; string = int16 length + UTF-8; nullable string/bytes length -1 = null;
array = int32 count + items). Every message starts with an int16 version; a reader accepts any
version >= 0 and reads the fields it knows, as Kafka does (newer versions only append fields).

    Subscription v0: topics [string], user_data nullable bytes
                 v1: + owned_partitions [(topic string, partitions [int32])]
                 v2: + generation_id int32
                 v3: + rack_id nullable string
    Assignment   v0: assigned_partitions [(topic string, partitions [int32])], user_data bytes

Bytes that do not parse (truncated, negative counts, bad UTF-8) raise ``ValueError``;
``subscribed_topics`` turns that into None, Kafka's "subscription unknown".
"""

from __future__ import annotations

import struct

import msgspec

SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class Subscription(msgspec.Struct, frozen=True):
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[tuple[str, int], ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


class Assignment(msgspec.Struct, frozen=True):
    partitions: tuple[tuple[str, int], ...]
    user_data: bytes | None = None


# -- writing -------------------------------------------------------------------------------------


def _string(out: bytearray, s: str | None) -> None:
    if s is None:
        out += _I16.pack(-1)
        return
    data = s.encode("utf-8")
    out += _I16.pack(len(data))
    out += data


def _bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        out += _I32.pack(-1)
        return
    out += _I32.pack(len(b))
    out += b


def _topic_partitions(out: bytearray, partitions) -> None:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    out += _I32.pack(len(by_topic))
    for topic, numbers in by_topic.items():
        _string(out, topic)
        out += _I32.pack(len(numbers))
        for n in numbers:
            out += _I32.pack(n)


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    out = bytearray(_I16.pack(version))
    out += _I32.pack(len(sub.topics))
    for topic in sub.topics:
        _string(out, topic)
    _bytes(out, sub.user_data)
    if version >= 1:
        _topic_partitions(out, sub.owned_partitions)
    if version >= 2:
        out += _I32.pack(sub.generation_id)
    if version >= 3:
        _string(out, sub.rack_id)
    return bytes(out)


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    out = bytearray(_I16.pack(version))
    _topic_partitions(out, assignment.partitions)
    _bytes(out, assignment.user_data)
    return bytes(out)


# -- reading -------------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise ValueError(f"truncated consumer-protocol data at byte {self.pos}")
        view = self.data[self.pos : end]
        self.pos = end
        return view

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def count(self) -> int:
        n = self.i32()
        if n < 0:
            raise ValueError(f"negative array length at byte {self.pos - 4}")
        return n

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n < 0:
            if nullable:
                return None
            raise ValueError(f"null string at byte {self.pos - 2}")
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"invalid UTF-8 at byte {self.pos - n}") from e

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else bytes(self._take(n))

    def topic_partitions(self) -> tuple[tuple[str, int], ...]:
        result = []
        for _ in range(self.count()):
            topic = self.string()
            for _ in range(self.count()):
                result.append((topic, self.i32()))
        return tuple(result)


def _version(reader: _Reader) -> int:
    version = reader.i16()
    if version < 0:
        raise ValueError(f"unsupported consumer-protocol version {version}")
    return version


def decode_subscription(data: bytes) -> Subscription:
    reader = _Reader(data)
    version = _version(reader)
    topics = tuple(reader.string() for _ in range(reader.count()))
    user_data = reader.nullable_bytes()
    owned, generation_id, rack_id = (), -1, None
    if version >= 1 and not reader.at_end():
        owned = reader.topic_partitions()
    if version >= 2 and not reader.at_end():
        generation_id = reader.i32()
    if version >= 3 and not reader.at_end():
        rack_id = reader.string(nullable=True)
    return Subscription(topics, user_data, owned, generation_id, rack_id)


def decode_assignment(data: bytes) -> Assignment:
    reader = _Reader(data)
    _version(reader)
    if reader.at_end():  # Kafka's empty assignment (a member left out by the leader)
        return Assignment(())
    partitions = reader.topic_partitions()
    user_data = reader.nullable_bytes() if not reader.at_end() else None
    return Assignment(partitions, user_data)


def subscribed_topics(metadata: bytes) -> frozenset[str] | None:
    """The topics a subscription names, or None when the bytes are not a subscription."""
    try:
        reader = _Reader(metadata)
        _version(reader)
        return frozenset(reader.string() for _ in range(reader.count()))
    except (ValueError, struct.error):
        return None
