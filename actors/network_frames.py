"""The channel between a partition and its network processes: frames, sans-IO.

A partition with network processes (``network_pool``) keeps the group state and the log in its
own process and leaves the Kafka connections to them (``network_process``): they read, frame,
decode, authenticate and authorize, and hand the partition core requests. Each network process
talks to its partition over one Unix socket pair, in frames:

    u32 length of the rest | u8 kind | u16 message type | u32 request id | msgpack body

==============  =====  =====================================================================
kind            way    body
==============  =====  =====================================================================
REQUEST         N → P  a core request (type: its index in ``MESSAGE_TYPES``); one REPLY
REPLY           P → N  the core response to the REQUEST with the same id
TOPICS          N → P  a list of ``TopicChange`` for the router; one TOPIC_RESULTS or FAILED
TOPIC_RESULTS   P → N  the list of ``TopicResult``
FAILED          P → N  why a TOPICS call failed (a string)
VIEW            P → N  a ``NetworkView``: what Metadata and FindCoordinator answer from
COUNTERS        N → P  the process's ``ListenerCounters``, when they changed (at most 1/s)
CHANGES         P → N  ``CatalogChanges`` over the VIEW's catalog (``catalog_changes``)
==============  =====  =====================================================================

Why one frame per message rather than batches: each frame's size is known before it is
written, so the reader can refuse an oversized one before holding it, and writers still
coalesce a loop turn's frames into one write (``FrameWriter``). The body is decoded with the
message's own type, which checks every field as ``coordinator.messages.validate`` does: a
REQUEST needs no second check in the partition. A frame the reader cannot take (too long, an
unknown kind or type, a body that does not decode) raises ``ChannelError``: the channel is
closed, never half-read.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

import msgspec

from groupcoord.coordinator import CoordinatorConfig
from groupcoord.coordinator import consumer_messages as cm
from groupcoord.coordinator import messages as m
from groupcoord.wire import Node
from groupcoord.wire.topics import TopicChange, TopicResult

from .catalog_changes import CatalogChanges
from .kafka_listener import ListenerCounters

REQUEST, REPLY, TOPICS, TOPIC_RESULTS, FAILED, VIEW, COUNTERS, CHANGES = range(1, 9)

_HEADER = struct.Struct(">IBHI")  # length of the rest, kind, message type, request id
HEADER_BYTES = _HEADER.size
_AFTER_LENGTH = HEADER_BYTES - 4
MAX_REQUEST_ID = 2**32 - 1

# Every core message that crosses the channel, by index (append only: both ends are one build,
# but a stable table keeps frames readable in a capture).
MESSAGE_TYPES: tuple[type, ...] = (
    *m.REQUEST_TYPES,
    m.JoinGroupResponse,
    m.SyncGroupResponse,
    m.HeartbeatResponse,
    m.LeaveGroupResponse,
    m.OffsetCommitResponse,
    m.OffsetFetchResponse,
    m.OffsetDeleteResponse,
    m.DescribeGroupsResponse,
    m.ListGroupsResponse,
    m.DeleteGroupsResponse,
    cm.ConsumerGroupHeartbeatResponse,
    cm.ConsumerGroupDescribeResponse,
)
TYPE_INDEX = {kind: index for index, kind in enumerate(MESSAGE_TYPES)}


class NetworkView(msgspec.Struct, frozen=True):
    """What a network process answers Metadata, FindCoordinator and DescribeConfigs from: its
    partition's listener (``node``), every partition's (``nodes``), the brokers Metadata names,
    the topic catalog (with groups' own settings) and the deployment's ``CoordinatorConfig``.
    Sent at start and whenever the partition adopts a new directory."""

    node: Node
    nodes: dict[int, Node]
    brokers: list[Node]
    topics: dict[str, int]
    topic_ids: dict[str, uuid.UUID]
    coordinator_config: CoordinatorConfig
    group_configs: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)
    # The catalog's number, which kept Metadata answers are checked by (-1: not numbered)
    catalog_version: int = -1


class ChannelError(Exception):
    """A frame the reader cannot take: the channel must be closed."""


def max_channel_frame_bytes(max_frame_bytes: int) -> int:
    """The longest frame either end accepts: a core message is about the size of the Kafka
    request it came from (or of the answer to one), so twice a Kafka frame, and at least 64 MiB
    for answers naming many groups or members."""
    return max(2 * max_frame_bytes, 64 * 1024 * 1024)


_ENCODER = msgspec.msgpack.Encoder()
_BODY_DECODERS: dict[int, Callable[[Any], Any]] = {
    TOPICS: msgspec.msgpack.Decoder(list[TopicChange]).decode,
    TOPIC_RESULTS: msgspec.msgpack.Decoder(list[TopicResult]).decode,
    FAILED: msgspec.msgpack.Decoder(str).decode,
    VIEW: msgspec.msgpack.Decoder(NetworkView).decode,
    COUNTERS: msgspec.msgpack.Decoder(ListenerCounters).decode,
    CHANGES: msgspec.msgpack.Decoder(CatalogChanges).decode,
}
_MESSAGE_DECODERS = [msgspec.msgpack.Decoder(kind).decode for kind in MESSAGE_TYPES]


def frame(kind: int, request_id: int, body: Any) -> bytes:
    """One frame. For REQUEST and REPLY ``body`` is a core message of ``MESSAGE_TYPES``."""
    message_type = TYPE_INDEX[type(body)] if kind in (REQUEST, REPLY) else 0
    payload = _ENCODER.encode(body)
    return _HEADER.pack(_AFTER_LENGTH + len(payload), kind, message_type, request_id) + payload


class FrameReader:
    """Bytes in, ``(kind, request id, body)`` out, in order. Holds at most one partial frame
    (whose declared length it checks before waiting for the rest)."""

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, int, Any]]:
        """The frames ``data`` completes; ``ChannelError`` for one that cannot be taken (the
        reader is then unusable)."""
        buffer = self._buffer
        buffer += data
        frames = []
        start, end = 0, len(buffer)
        while end - start >= HEADER_BYTES:
            length, kind, message_type, request_id = _HEADER.unpack_from(buffer, start)
            if not _AFTER_LENGTH <= length <= self.max_frame_bytes:
                raise ChannelError(f"a frame of {length} bytes (at most {self.max_frame_bytes})")
            if end - start < 4 + length:
                break
            body = memoryview(buffer)[start + HEADER_BYTES : start + 4 + length]
            try:
                frames.append((kind, request_id, _decode(kind, message_type, body)))
            except (msgspec.DecodeError, msgspec.ValidationError, IndexError, KeyError) as exc:
                raise ChannelError(f"an unreadable frame (kind {kind}): {exc}") from None
            finally:
                body.release()
            start += 4 + length
        del buffer[:start]
        return frames


def _decode(kind: int, message_type: int, body: memoryview) -> Any:
    if kind in (REQUEST, REPLY):
        return _MESSAGE_DECODERS[message_type](body)
    return _BODY_DECODERS[kind](body)


class FrameWriter:
    """Frames queued during a loop turn go out as one write at its end: ``write`` is called
    once per turn that queued anything (``schedule`` runs the flush after the turn's other
    callbacks, e.g. the loop's ``call_soon``)."""

    def __init__(self, write: Callable[[bytes], None], schedule: Callable[..., Any]) -> None:
        self._write = write
        self._schedule = schedule
        self._queued: list[bytes] = []

    def send(self, kind: int, request_id: int, body: Any) -> None:
        if not self._queued:
            self._schedule(self.flush)
        self._queued.append(frame(kind, request_id, body))

    def flush(self) -> None:
        queued, self._queued = self._queued, []
        if queued:
            self._write(b"".join(queued))
