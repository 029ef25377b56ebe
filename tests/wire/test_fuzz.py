"""Hostile bytes into ``Connection.receive_data``: garbage, truncated and corrupted frames, bodies
of random bytes behind valid headers for every supported (api key, version), oversized and
negative sizes. Always a request or a clean ProtocolError (the last item, after which the
connection is closed); never an exception; never more buffered than the limit, and memory
bounded by the frame limit, not by what a size prefix claims."""

import struct
import subprocess
import sys
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.wire import (
    SUPPORTED_VERSIONS,
    Connection,
    ProtocolError,
    WireRequest,
    apis,
    request_to_core,
)

from .frames import request_frame

MAX_FRAME_BYTES = 4096
PAIRS = [
    (key, version)
    for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
    for version in range(low, high + 1)
]
FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def feed(chunks: list[bytes]) -> list:
    conn = Connection(max_frame_bytes=MAX_FRAME_BYTES, max_in_flight_requests=10_000)
    out = []
    for chunk in chunks:
        items = conn.receive_data(chunk)
        assert conn.buffered_bytes <= conn.max_buffered_bytes
        out += items
    for i, item in enumerate(out):
        assert isinstance(item, WireRequest | ProtocolError)
        if isinstance(item, ProtocolError):
            assert i == len(out) - 1 and conn.closed and conn.buffered_bytes == 0
    return out


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


@FUZZ
@given(st.binary(max_size=2000), st.lists(st.integers(0, 2000), max_size=8))
def test_garbage_in_any_chunking(data, cuts):
    feed(chunked(data, cuts))


@FUZZ
@given(
    pair=st.sampled_from(PAIRS),
    flexible_header=st.booleans(),
    body=st.binary(max_size=300),
    client_id=st.binary(max_size=10),
)
def test_random_bodies_behind_valid_headers(pair, flexible_header, body, client_id):
    key, version = pair
    header = struct.pack(">hhih", key, version, 1, len(client_id)) + client_id
    if flexible_header:
        header += b"\x00"
    payload = header + body
    feed([struct.pack(">i", len(payload)) + payload])


@st.composite
def valid_frames(draw):
    key, version = draw(st.sampled_from(PAIRS))
    body = draw(st.from_type(apis.request_class(key, version)))
    return request_frame(body)


@FUZZ
@given(
    frame=valid_frames(),
    cut=st.integers(0, 10_000),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=3),
)
def test_truncated_and_corrupted_real_frames(frame, cut, flips):
    damaged = bytearray(frame)
    for at, mask in flips:
        damaged[at % len(damaged)] ^= mask
    prefix = cut % (len(damaged) + 1)
    out = feed([bytes(damaged[:prefix])])
    if not flips:
        if len(frame) - 4 > MAX_FRAME_BYTES and prefix >= 4:
            # A real request over the frame limit is refused once its size has been read.
            assert len(out) == 1 and isinstance(out[0], ProtocolError)
            return
        # A clean prefix is never an error: it is either the whole request or still pending.
        assert all(isinstance(item, WireRequest) for item in out)
        assert len(out) == (1 if prefix == len(frame) else 0)


@FUZZ
@given(
    size=st.one_of(st.integers(-(2**31), -1), st.integers(MAX_FRAME_BYTES + 1, 2**31 - 1)),
    tail=st.binary(max_size=100),
)
def test_negative_and_oversized_sizes_close_at_once(size, tail):
    out = feed([struct.pack(">i", size) + tail])
    assert len(out) == 1 and isinstance(out[0], ProtocolError)


def test_memory_is_bounded_by_the_frame_limit_not_by_claimed_sizes():
    # A frame claiming 2**31 elements in its arrays, and one claiming a 4 KiB string with no
    # bytes behind it: lengths are checked against the bytes there (wire/frame_check.py, and
    # kio for some), so nothing big is allocated.
    claims = [
        struct.pack(">hhih", 9, 1, 1, -1) + b"\x00\x01g" + b"\x7f\xff\xff\xff",  # OffsetFetch v1
        struct.pack(">hhih", 11, 9, 1, -1) + b"\x00" + b"\xff\xff\xff\xff\x0f",  # JoinGroup v9
        struct.pack(">hhih", 15, 0, 1, -1) + b"\x00\x00\x00\x01" + b"\x7f\xff",  # DescribeGroups
    ]
    tracemalloc.start()
    try:
        for payload in claims:
            out = feed([struct.pack(">i", len(payload)) + payload])
            assert isinstance(out[-1], ProtocolError)
        # Half a frame of 4 KiB, then a frame size prefix alone: held, bounded by the frame.
        conn = Connection(max_frame_bytes=MAX_FRAME_BYTES)
        assert conn.receive_data(struct.pack(">i", MAX_FRAME_BYTES) + b"x" * 2048) == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024


# Bodies whose array lengths no frame could hold, behind valid headers; kio 0.6.5's native
# reader reserved room for them and aborted the process when that failed (found by fuzzing with
# uniform random bytes: OffsetFetch v8's groups, a nested partitions array, a legacy array).
HUGE_ARRAY_PAYLOADS = [
    struct.pack(">hhih", 9, 8, 1, -1) + b"\x00" + bytes.fromhex("9aeae09027705aed"),
    struct.pack(">hhih", 9, 8, 1, -1) + b"\x00" + b"\xff\xff\xff\xff\x07\x00\x00",
    # OffsetCommit v8: group "g", generation 1, member "m", no instance, one topic "t" whose
    # partitions array claims 2^31 - 2 elements.
    struct.pack(">hhih", 8, 8, 1, -1)
    + b"\x00\x02g\x00\x00\x00\x01\x02m\x00\x02\x02t"
    + b"\xff\xff\xff\xff\x07\x00\x00",
    # OffsetCommit v2 (legacy): the same claim as a 4-byte array length.
    struct.pack(">hhih", 8, 2, 1, -1)
    + b"\x00\x01g\x00\x00\x00\x01\x00\x01m"
    + struct.pack(">q", -1)
    + b"\x00\x00\x00\x01\x00\x01t\x7f\xff\xff\xff",
]
_REFUSE_IN_CHILD = """
import struct, sys
from groupcoord.wire import Connection, ProtocolError
for payload in map(bytes.fromhex, sys.argv[1:]):
    out = Connection().receive_data(struct.pack(">i", len(payload)) + payload)
    print(type(out[-1]).__name__, "undecodable" in str(out[-1]))
"""


def test_an_array_no_frame_can_hold_is_refused_and_the_process_lives():
    # In a child process: before the check, the first of these aborted the interpreter.
    done = subprocess.run(
        [sys.executable, "-c", _REFUSE_IN_CHILD, *(p.hex() for p in HUGE_ARRAY_PAYLOADS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:-1] == ["ProtocolError True"] * len(HUGE_ARRAY_PAYLOADS)


def test_decoded_memory_is_a_bounded_multiple_of_the_frame():
    # The worst case found: JoinGroup v0 packed with empty protocols (6 bytes each on the wire,
    # a Python object each once decoded, another once translated for the core).
    frame_limit = 1024 * 1024
    count = (frame_limit - 64) // 6
    body = (
        b"\x00\x01g"
        + struct.pack(">i", 10_000)
        + b"\x00\x00"
        + b"\x00\x01c"
        + struct.pack(">i", count)
        + b"\x00\x00\x00\x00\x00\x00" * count
    )
    payload = struct.pack(">hhih", 11, 0, 1, -1) + body
    conn = Connection(max_frame_bytes=frame_limit)
    tracemalloc.start()
    try:
        (request,) = conn.receive_data(struct.pack(">i", len(payload)) + payload)
        core_request = request_to_core(request)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(core_request.protocols) == count
    assert peak < 25 * frame_limit
