"""Any request kio can write, of any supported (api key, version), with random field values,
into a live partition (its real runtime, log, gateway and listener, in process): every request
is answered or its connection closed, none that should be answered at once hangs, nothing is
logged as an error, and the partition answers afterwards.

Bad input must never crash, stall or wedge a partition (README, "Bad input"). This is how the
catalog's 200,000-partition bound and the direct Metadata answer were found: a Metadata for
every topic after a CreatePartitions of millions held the loop for seconds. More examples:
``GC_LIVE_FUZZ_EXAMPLES=20000 .venv/bin/python -m pytest tests/actors/test_live_fuzz.py``.
"""

from __future__ import annotations

import logging
import os
import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.wire import SUPPORTED_VERSIONS, ApiKey, apis
from tests.kafka.rawwire import RawConnection
from tests.wire import kio_strategies  # noqa: F401 (registers strategies)
from tests.wire.frames import request_frame

from .kafka_inproc import WirePartition

EXAMPLES = int(os.environ.get("GC_LIVE_FUZZ_EXAMPLES", "400"))
PAIRS = [
    (key, version)
    for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
    for version in range(low, high + 1)
]
# Answered only after a wait by design: a Fetch's max wait, a JoinGroup's rebalance, a
# SyncGroup waiting for its leader.
WAITS = {ApiKey.FETCH, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP}
WAIT_S, ANSWER_S = 2.0, 10.0


class Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(self.format(record))


@pytest.fixture(scope="module")
def partition(tmp_path_factory):
    served = WirePartition(
        str(tmp_path_factory.mktemp("live-fuzz") / "p0"), {"t": 4, "u": 2}, loop="uvloop"
    )
    address = served.start()
    yield served, address
    served.stop()


@st.composite
def requests(draw):
    key, version = draw(st.sampled_from(PAIRS))
    return draw(st.from_type(apis.request_class(key, version)))


def _exchange(sock: socket.socket, frame: bytes) -> bool:
    """Send one request; True once its whole answer is read, False if the server closed."""
    sock.sendall(frame)
    head = _read(sock, 4)
    if head is None:
        return False
    (size,) = struct.unpack(">i", head)
    return _read(sock, size) is not None


def _read(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(min(n - len(data), 1 << 20))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def test_any_request_leaves_the_partition_answering(partition):
    served, address = partition
    host, port = address.split(":")
    errors = Errors()
    logging.getLogger().addHandler(errors)
    state = {"sock": None, "answered": 0, "closed": 0}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(requests())
    def one(body):
        try:
            frame = request_frame(body)
        except Exception:  # noqa: BLE001 — kio cannot write it (a value out of range)
            return
        if state["sock"] is None:
            state["sock"] = socket.create_connection((host, int(port)), timeout=ANSWER_S)
        sock = state["sock"]
        waits = body.__api_key__ in WAITS
        sock.settimeout(WAIT_S if waits else ANSWER_S)
        try:
            answered = _exchange(sock, frame)
        except TimeoutError:
            assert waits, f"no answer in {ANSWER_S} s to {type(body).__module__}: {body!r:.300}"
            answered = False
        except ConnectionError:
            answered = False
        if answered:
            state["answered"] += 1
        else:  # closed (refused input) or left waiting: the next request reconnects
            state["closed"] += 1
            sock.close()
            state["sock"] = None
        assert not errors.records, f"after {type(body).__module__}: {errors.records}"

    try:
        one()
    finally:
        logging.getLogger().removeHandler(errors)
        if state["sock"] is not None:
            state["sock"].close()
    assert state["answered"] > state["closed"]  # the requests reached it, most were answered
    still = RawConnection(address)
    try:
        versions = still.send(
            ApiKey.API_VERSIONS, 3, client_software_name="fuzz", client_software_version="1"
        )
    finally:
        still.close()
    assert versions.error_code == 0
    assert served.runtime is not None and served.runtime.state == "serving"
