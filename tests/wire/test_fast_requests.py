"""fast_requests reads OffsetCommit, Heartbeat, JoinGroup and SyncGroup bodies as kio's reader
does, at every supported version: the same bodies accepted (valid, truncated, overwritten,
grown), the same core request built (``frames.core_request_of``, the translation from kio's
entities), except for the two differences its docstring gives, where Kafka's readers accept
what kio refuses."""

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.coordinator import messages as core
from groupcoord.wire import SUPPORTED_VERSIONS, ApiKey, apis
from groupcoord.wire.fast_requests import DECODERS
from groupcoord.wire.frame_check import FrameCheckError, check_body

from .frames import core_request_of, request_frame

PAIRS = [
    (key, v)
    for key in DECODERS
    for v in range(SUPPORTED_VERSIONS[key][0], SUPPORTED_VERSIONS[key][1] + 1)
]
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _split(frame: bytes) -> tuple[bytes, int]:
    """The frame without its size, and where its body starts (after a v1 or v2 header)."""
    frame = frame[4:]
    api_key, version, _, id_bytes = struct.unpack_from(">hhih", frame)
    at = 10 + max(id_bytes, 0)
    return frame, at + (1 if apis.request_is_flexible(api_key, version) else 0)


def _kio(key: int, version: int, frame: bytes, at: int):
    cls = apis.request_class(key, version)
    check_body(cls, frame, at)
    body, _ = apis.reader(cls)(frame, at)
    return core_request_of(key, body)


def _outcome(read, *args):
    try:
        return "read", read(*args)
    except Exception as exc:  # noqa: BLE001 — any refusal counts as one
        return "refused", exc


def _kio_refuses_what_kafka_reads(refusal: Exception) -> bool:
    text = repr(refusal)
    return "timedelta" in text or "Unknown tagged field" in text


@pytest.mark.parametrize("key, version", PAIRS, ids=[f"{k.name}-v{v}" for k, v in PAIRS])
@SETTINGS
@given(data=st.data())
def test_the_same_bodies_are_read_and_refused_as_kio_reads_them(key, version, data):
    body = data.draw(st.from_type(apis.request_class(key, version)))
    frame, at = _split(request_frame(body))
    assert DECODERS[key](version, frame, at) == core_request_of(key, body)
    variants = []
    for _ in range(8):
        damaged = bytearray(frame)
        how = data.draw(st.sampled_from(("cut", "overwrite", "insert")))
        where = data.draw(st.integers(at, len(frame)))
        if how == "cut":
            del damaged[where:]
        elif how == "overwrite" and where < len(frame):
            damaged[where] = data.draw(st.sampled_from((0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)))
        else:
            damaged[where:where] = data.draw(st.binary(min_size=1, max_size=4))
        variants.append(bytes(damaged))
    for variant in variants:
        expected = _outcome(_kio, key, version, variant, at)
        got = _outcome(DECODERS[key], version, variant, at)
        if expected[0] == "refused" and _kio_refuses_what_kafka_reads(expected[1]):
            continue  # kio stopped early: no reference for the rest (the tests below)
        assert got[0] == expected[0], (variant.hex(), expected, got)
        if got[0] == "read":
            assert got[1] == expected[1]


def test_a_huge_count_is_refused_before_anything_is_read():
    # OffsetCommit v8: group "g", generation 1, member "m", null instance id, then a topics
    # count of 2^32 - 2 in a body of a few bytes.
    body = b"\x02g" + struct.pack(">i", 1) + b"\x02m" + b"\x00" + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(FrameCheckError, match="array of"):
        DECODERS[ApiKey.OFFSET_COMMIT](8, body, 0)
    legacy = b"\x00\x01g" + struct.pack(">i", 1) + b"\x00\x01m" + struct.pack(">i", 2**31 - 1)
    with pytest.raises(FrameCheckError, match="array of"):
        DECODERS[ApiKey.OFFSET_COMMIT](6, legacy, 0)


@pytest.mark.parametrize("retention_ms", [2**63 - 1, -(2**63), 2**62])
def test_any_int64_retention_is_read(retention_ms):
    body = b"\x00\x01g" + struct.pack(">i", -1) + b"\x00\x00" + struct.pack(">q", retention_ms)
    got = DECODERS[ApiKey.OFFSET_COMMIT](2, body + struct.pack(">i", 0), 0)
    assert got == core.OffsetCommitRequest("g", -1, "", [], None, retention_ms)


def test_an_unknown_tagged_field_inside_a_partition_is_skipped():
    body = (
        b"\x02g" + struct.pack(">i", 3) + b"\x02m\x00"  # group, generation, member, no instance
        b"\x02\x02t\x02"  # one topic "t", one partition
        + struct.pack(">iqi", 0, 5, -1)
        + b"\x01"  # metadata ""
        + b"\x01\x07\x02hi"  # tag 7, two bytes: unknown to both Kafka and groupcoord
        + b"\x00\x00"  # the topic's and the request's tagged fields
    )
    got = DECODERS[ApiKey.OFFSET_COMMIT](9, body, 0)
    partition = core.OffsetCommitRequestPartition("t", 0, 5, -1, "")
    assert got == core.OffsetCommitRequest("g", 3, "m", [partition], None, -1)
