"""The partition ↔ network process channel's frames (actors/network_frames.py), without I/O."""

from __future__ import annotations

import struct
import uuid

import pytest

from groupcoord.actors.kafka_listener import ListenerCounters
from groupcoord.actors.network_frames import (
    COUNTERS,
    FAILED,
    MESSAGE_TYPES,
    REPLY,
    REQUEST,
    TOPIC_RESULTS,
    TOPICS,
    VIEW,
    ChannelError,
    FrameReader,
    FrameWriter,
    NetworkView,
    frame,
    max_channel_frame_bytes,
)
from groupcoord.coordinator import (
    CoordinatorConfig,
    Errors,
    HeartbeatResponse,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
)
from groupcoord.coordinator.messages import REQUEST_TYPES
from groupcoord.wire import Node
from groupcoord.wire.topics import TopicChange, TopicResult

COMMIT = OffsetCommitRequest("g", 3, "m-1", [OffsetCommitRequestPartition("t", 0, 42, 5, "meta")])
NODE = Node(0, "127.0.0.1", 9093)
VIEW_BODY = NetworkView(
    NODE, {0: NODE}, [NODE], {"t": 4}, {"t": uuid.uuid4()}, CoordinatorConfig(group_max_size=7)
)


def test_every_kind_reads_back_as_it_was_written_across_any_split():
    sent = [
        (REQUEST, 7, COMMIT),
        (REPLY, 7, HeartbeatResponse(Errors.REBALANCE_IN_PROGRESS)),
        (TOPICS, 8, [TopicChange("create", "u", 3)]),
        (TOPIC_RESULTS, 8, [TopicResult(Errors.NONE, None, 3, uuid.uuid4())]),
        (FAILED, 9, "router unavailable"),
        (VIEW, 0, VIEW_BODY),
        (COUNTERS, 0, ListenerCounters(3, 1, 2, 5)),
    ]
    data = b"".join(frame(*one) for one in sent)
    for step in (1, 5, 11, len(data)):  # byte by byte, and in odd chunks
        reader = FrameReader(1 << 20)
        got = []
        for at in range(0, len(data), step):
            got += reader.feed(data[at : at + step])
        assert got == sent


def test_every_core_request_type_has_a_place_in_the_table():
    assert set(REQUEST_TYPES) <= set(MESSAGE_TYPES)
    assert len(set(MESSAGE_TYPES)) == len(MESSAGE_TYPES)


def test_an_oversized_frame_is_refused_from_its_header_before_its_body_arrives():
    reader = FrameReader(1024)
    header = struct.pack(">IBHI", 10_000, REQUEST, 0, 1)
    with pytest.raises(ChannelError, match="10000 bytes"):
        reader.feed(header)  # nothing of the body was needed to refuse it


def test_a_frame_too_short_for_its_own_header_is_refused():
    with pytest.raises(ChannelError):
        FrameReader(1024).feed(struct.pack(">IBHI", 3, REQUEST, 0, 1))


@pytest.mark.parametrize(
    "bad",
    [
        struct.pack(">IBHI", 8, 99, 0, 1) + b"\x01",  # unknown kind
        struct.pack(">IBHI", 8, REQUEST, 999, 1) + b"\x01",  # unknown message type
        frame(REQUEST, 1, COMMIT)[:11] + b"\xc1" * (len(frame(REQUEST, 1, COMMIT)) - 11),
        # a Heartbeat's body read as a commit: its fields do not fit
        frame(REPLY, 1, HeartbeatResponse(Errors.NONE))[:5]
        + struct.pack(">H", MESSAGE_TYPES.index(OffsetCommitRequest))
        + frame(REPLY, 1, HeartbeatResponse(Errors.NONE))[7:],
    ],
)
def test_an_unreadable_frame_is_a_channel_error(bad):
    with pytest.raises(ChannelError):
        FrameReader(1 << 20).feed(bad)


def test_the_frames_before_a_partial_one_are_returned_and_the_rest_waits():
    one, two = frame(REQUEST, 1, COMMIT), frame(REQUEST, 2, COMMIT)
    reader = FrameReader(1 << 20)
    assert reader.feed(one + two[:-1]) == [(REQUEST, 1, COMMIT)]
    assert reader.feed(two[-1:]) == [(REQUEST, 2, COMMIT)]
    assert reader.feed(b"") == []


def test_a_turns_frames_go_out_in_one_write_scheduled_once():
    writes, scheduled = [], []
    writer = FrameWriter(writes.append, scheduled.append)
    writer.send(REPLY, 1, HeartbeatResponse(Errors.NONE))
    writer.send(REPLY, 2, HeartbeatResponse(Errors.NONE))
    assert writes == [] and len(scheduled) == 1
    scheduled.pop()()
    assert len(writes) == 1
    assert [f[1] for f in FrameReader(1 << 20).feed(writes[0])] == [1, 2]
    writer.flush()  # nothing queued: nothing written
    assert len(writes) == 1


def test_the_channel_allows_twice_a_kafka_frame_and_at_least_64_mib():
    assert max_channel_frame_bytes(100 * 1024 * 1024) == 200 * 1024 * 1024
    assert max_channel_frame_bytes(1024) == 64 * 1024 * 1024
