"""Framing, headers and ApiVersions negotiation through ``Connection``, without sockets.

Some frames are written out byte by byte from Kafka's protocol guide (int16 api key, int16
version, int32 correlation id, int16-length client id; flexible headers and bodies add tagged
field counts and use unsigned-varint length+1 compact strings and arrays)."""

import struct

import pytest
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3Request
from kio.schema.api_versions.v3.response import ApiVersionsResponse as ApiVersionsV3
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v0.response import HeartbeatResponse as HeartbeatResponseV0
from kio.schema.heartbeat.v4.request import HeartbeatRequest as HeartbeatV4
from kio.schema.heartbeat.v4.response import HeartbeatResponse as HeartbeatResponseV4

from groupcoord.coordinator import messages as core
from groupcoord.wire import (
    SUPPORTED_VERSIONS,
    ApiKey,
    Connection,
    ProtocolError,
    WireRequest,
    api_versions_response,
)
from groupcoord.wire.apis import ZERO_MS, api_versions_ranges

from .frames import request_frame, split_response


def sized(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def only_request(conn: Connection, data: bytes) -> WireRequest:
    out = conn.receive_data(data)
    assert len(out) == 1 and isinstance(out[0], WireRequest), out
    return out[0]


def supported_ranges(response) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def test_api_versions_v0_frame_by_hand_is_answered_with_every_supported_range():
    frame = sized(b"\x00\x12\x00\x00\x00\x00\x00\x2a\x00\x03abc")
    conn = Connection()
    request = only_request(conn, frame)
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (
        18,
        0,
        42,
        "abc",
    )
    out = conn.send_response(request, api_versions_response(request))
    correlation_id, body = split_response(out, ApiVersionsV0, header_version=0)
    assert correlation_id == 42
    assert body.error_code == ErrorCode.none
    assert supported_ranges(body) == {int(k): v for k, v in SUPPORTED_VERSIONS.items()}


def test_api_versions_v3_flexible_frame_by_hand_gets_a_v0_response_header():
    frame = sized(
        b"\x00\x12"
        b"\x00\x03"
        b"\x00\x00\x00\x05"
        b"\x00\x07rdkafka"  # header v2: legacy id
        b"\x00"  # header tagged fields
        b"\x0blibrdkafka"
        b"\x062.3.0"  # compact strings
        b"\x00"
    )  # body tagged fields
    conn = Connection()
    request = only_request(conn, frame)
    assert request.body.client_software_name == "librdkafka"
    assert request.body.client_software_version == "2.3.0"
    out = conn.send_response(request, api_versions_response(request))
    # KIP-511: the ApiVersions response header is v0 (no tagged fields) even for v3.
    correlation_id, body = split_response(out, ApiVersionsV3, header_version=0)
    assert correlation_id == 5 and body.error_code == ErrorCode.none
    assert supported_ranges(body)[ApiKey.JOIN_GROUP] == (0, 9)


@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_v3_on_names_the_features(version):
    # group.version 1: KIP-848's consumer protocol. v3 leaves out supported ranges from 0, as
    # Kafka answers it; the finalized level is at every version from 3.
    response = api_versions_ranges(version)
    supported = [(f.name, f.min_version, f.max_version) for f in response.supported_features]
    assert supported == ([("group.version", 0, 1)] if version >= 4 else [])
    finalized = [
        (f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features
    ]
    assert finalized == [("group.version", 1, 1)]
    assert response.finalized_features_epoch == 0


def test_api_versions_above_our_range_is_answered_in_v0_with_unsupported_version():
    # v9 with a body we cannot know: Kafka does not parse it and answers in v0.
    frame = sized(b"\x00\x12\x00\x09\x00\x00\x00\x63\xff\xff\x00future body bytes")
    conn = Connection()
    request = only_request(conn, frame)
    assert request.unsupported_api_versions and request.body_version == 0
    out = conn.send_response(request, api_versions_response(request))
    correlation_id, body = split_response(out, ApiVersionsV0, header_version=0)
    assert correlation_id == 0x63
    assert body.error_code == ErrorCode.unsupported_version
    assert supported_ranges(body) == {18: SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]}


def test_flexible_join_group_frame_by_hand():
    frame = sized(
        b"\x00\x0b"
        b"\x00\x09"
        b"\x00\x00\x00\x01"
        b"\xff\xff"  # JoinGroup v9, null client id
        b"\x00"  # header tagged fields
        b"\x02g"  # group_id "g"
        b"\x00\x00\x27\x10"
        b"\x00\x00\x75\x30"  # session 10 s, rebalance 30 s
        b"\x01"  # member_id ""
        b"\x00"  # group_instance_id null
        b"\x09consumer"  # protocol_type
        b"\x02"
        b"\x06range"
        b"\x03\x00\x01"
        b"\x00"  # 1 protocol: name, bytes, tags
        b"\x07rejoin"  # reason
        b"\x00"
    )  # body tagged fields
    request = only_request(Connection(), frame)
    body = request.body
    assert request.client_id is None
    assert (body.group_id, body.member_id, body.group_instance_id, body.protocol_type) == (
        "g",
        "",
        None,
        "consumer",
    )
    assert (body.session_timeout_ms, body.rebalance_timeout_ms) == (10_000, 30_000)
    assert [(p.name, p.metadata) for p in body.protocols] == [("range", b"\x00\x01")]
    assert body.reason == "rejoin"
    assert body.require_known_member_id  # v4+


@pytest.mark.parametrize(
    "name, version, error",
    [
        ("apache-kafka-java", "3.7.0", ErrorCode.none),
        ("librdkafka", "v2.3.0-RC1", ErrorCode.none),
        ("", "1.0", ErrorCode.invalid_request),
        ("my client", "1.0", ErrorCode.invalid_request),
        ("client", "1.0-", ErrorCode.invalid_request),
    ],
)
def test_api_versions_v3_checks_client_software_fields_as_kafka_does(name, version, error):
    conn = Connection()
    request = only_request(
        conn,
        request_frame(
            ApiVersionsV3Request(client_software_name=name, client_software_version=version)
        ),
    )
    _, body = split_response(
        conn.send_response(request, api_versions_response(request)), ApiVersionsV3, header_version=0
    )
    assert body.error_code == error
    assert (body.api_keys != ()) == (error == ErrorCode.none)


def test_unknown_header_tagged_fields_are_skipped():
    frame = sized(
        b"\x00\x12"
        b"\x00\x03"
        b"\x00\x00\x00\x05"
        b"\x00\x01x"
        b"\x01"
        b"\x07\x02hi"  # one unknown header tag, 2 bytes
        b"\x01"
        b"\x01"
        b"\x00"
    )
    request = only_request(Connection(), frame)
    assert request.body.client_software_name == ""


@pytest.mark.parametrize(
    "payload, reason",
    [
        (b"\x00\x63\x00\x00\x00\x00\x00\x01\x00\x00", "api key 99 version 0 is not supported"),
        (b"\x00\x0b\x00\x0a\x00\x00\x00\x01\x00\x00", "api key 11 version 10 is not supported"),
        (b"\x00\x08\x00\x01\x00\x00\x00\x01\x00\x00", "api key 8 version 1 is not supported"),
        (b"\x00\x0c\x00", "unreadable request header"),
        (b"", "unreadable request header"),
        # client ids: a negative size other than -1 (null), one past the frame, not UTF-8
        (b"\x00\x0c\x00\x00\x00\x00\x00\x01\xff\xfe", "unreadable request header"),
        (b"\x00\x0c\x00\x00\x00\x00\x00\x01\x00\x05ab", "unreadable request header"),
        (b"\x00\x0c\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe", "unreadable request header"),
        (b"\x00\x0c\x00\x00\x00\x00\x00\x01\x00\x00\x00\x01g", "undecodable api key 12"),
    ],
)
@pytest.mark.parametrize("alone", [True, False], ids=["alone", "with-a-frame-after"])
def test_requests_kafka_cannot_answer_close_the_connection(payload, reason, alone):
    # Alone: the one-whole-frame read that skips the buffer; else the buffered path.
    conn = Connection()
    after = HeartbeatV4(group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    out = conn.receive_data(sized(payload) + (b"" if alone else request_frame(after)))
    assert len(out) == 1 and isinstance(out[0], ProtocolError)
    assert reason in out[0].reason
    assert conn.closed and not conn.wants_data
    assert conn.receive_data(b"more") == []


def test_bytes_after_a_decoded_body_are_ignored_as_kafka_does():
    # librdkafka's admin client sends 3 bytes after a Metadata v12 body; Kafka answers it.
    conn = Connection()
    metadata_v12 = b"\x00\x03\x00\x0c\x00\x00\x00\x03\x00\x07rdkafka\x00" + bytes.fromhex(
        "00000000010000"
    )
    (request,) = conn.receive_data(sized(metadata_v12))
    assert (request.api_key, request.api_version, request.correlation_id) == (3, 12, 3)
    assert request.body.topics is None and not conn.closed


@pytest.mark.parametrize("size", [-1, -(2**31), 1025])
def test_negative_and_oversized_frame_sizes_close_before_buffering(size):
    conn = Connection(max_frame_bytes=1024)
    out = conn.receive_data(struct.pack(">i", size))
    assert isinstance(out[0], ProtocolError) and f"frame size {size}" in out[0].reason
    assert conn.buffered_bytes == 0


def test_a_frame_split_byte_by_byte_is_reassembled():
    frame = request_frame(
        HeartbeatV4(group_id="g", generation_id=3, member_id="m", group_instance_id="i"),
        correlation_id=11,
    )
    conn = Connection()
    out = []
    for i in range(len(frame)):
        out += conn.receive_data(frame[i : i + 1])
    assert len(out) == 1 and out[0].correlation_id == 11
    assert out[0].body.group_instance_id == "i"


def test_in_flight_limit_holds_requests_back_and_responses_leave_in_request_order():
    frames = b"".join(
        request_frame(
            HeartbeatV4(group_id="g", generation_id=1, member_id="m", group_instance_id=None),
            correlation_id=c,
        )
        for c in (1, 2, 3)
    )
    conn = Connection(max_in_flight_requests=2)
    first, second = conn.receive_data(frames)
    assert not conn.wants_data and conn.buffered_bytes > 0
    assert conn.receive_data(b"") == []
    answer = HeartbeatResponseV4(throttle_time=ZERO_MS, error_code=ErrorCode.none)
    # The second is answered first: its bytes wait for the first's.
    assert conn.send_response(second, answer) == b""
    out = conn.send_response(first, answer)
    ids = []
    while out:
        (size,) = struct.unpack_from(">i", out)
        ids.append(split_response(out[: 4 + size], HeartbeatResponseV4, header_version=1)[0])
        out = out[4 + size :]
    assert ids == [1, 2]
    (third,) = conn.receive_data(b"")
    assert third.correlation_id == 3 and conn.buffered_bytes == 0


def test_send_response_rejects_wrong_type_and_unknown_or_repeated_requests():
    conn = Connection()
    request = only_request(
        conn,
        request_frame(
            HeartbeatV4(group_id="g", generation_id=1, member_id="m", group_instance_id=None)
        ),
    )
    with pytest.raises(ValueError, match="expected a"):
        conn.send_response(request, HeartbeatResponseV0(error_code=ErrorCode.none))
    answer = HeartbeatResponseV4(throttle_time=ZERO_MS, error_code=ErrorCode.none)
    assert conn.send_response(request, answer)
    with pytest.raises(ValueError, match="not awaiting"):
        conn.send_response(request, answer)


def test_buffer_limit_closes_a_connection_that_keeps_sending_while_held():
    conn = Connection(max_frame_bytes=64, max_buffered_bytes=100)
    frame = request_frame(
        HeartbeatV4(group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    )
    assert len(conn.receive_data(frame)) == 1
    while True:
        out = conn.receive_data(frame)
        if out:
            break
    assert isinstance(out[0], ProtocolError) and "buffered" in out[0].reason
    assert conn.buffered_bytes == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(max_frame_bytes=9),
        dict(max_in_flight_requests=0),
        dict(max_frame_bytes=100, max_buffered_bytes=100),
    ],
)
def test_bad_limits_are_refused(kwargs):
    with pytest.raises(ValueError):
        Connection(**kwargs)


# -- kio's limits, and that they end in a clean close ----------------------------------------


def test_an_unknown_tagged_field_in_a_body_kio_reads_closes_the_connection():
    # Kafka would skip tag 5; kio 0.6.5 raises KeyError on it, which must not escape.
    frame = sized(
        b"\x00\x0d"  # LeaveGroup
        b"\x00\x04"  # v4, flexible
        b"\x00\x00\x00\x01"
        b"\x00\x01x"
        b"\x00"  # the header's tagged fields
        b"\x02g"
        b"\x01"  # no members
        b"\x01"
        b"\x05\x03abc"
    )
    conn = Connection()
    (error,) = conn.receive_data(frame)
    assert isinstance(error, ProtocolError) and "Unknown tagged field tag: 5" in error.reason


def test_an_unknown_tagged_field_in_a_heartbeat_is_skipped_as_kafka_skips_it():
    # Heartbeat and OffsetCommit are read by fast_requests, which skips what it does not know.
    frame = sized(
        b"\x00\x0c"  # Heartbeat
        b"\x00\x04"  # v4, flexible
        b"\x00\x00\x00\x01"
        b"\x00\x01x"
        b"\x00"
        b"\x02g"
        b"\x00\x00\x00\x01"
        b"\x02m"
        b"\x00"  # a null group instance id
        b"\x01"
        b"\x05\x03abc"
    )
    (request,) = Connection().receive_data(frame)
    assert request.body == core.HeartbeatRequest("g", 1, "m", None)


def test_a_retention_time_beyond_a_timedelta_is_read_as_kafka_reads_it():
    # OffsetCommit v2: group "", generation -1, member "", retention 2**62 ms, no topics. kio
    # reads a retention time as a timedelta, which cannot hold it; Kafka's int64 can.
    body = b"\x00\x00\xff\xff\xff\xff\x00\x00" + struct.pack(">q", 2**62) + b"\x00" * 4
    frame = sized(b"\x00\x08\x00\x02\x00\x00\x00\x01\x00\x00" + body)
    (request,) = Connection().receive_data(frame)
    assert request.body == core.OffsetCommitRequest("", -1, "", [], None, 2**62)
