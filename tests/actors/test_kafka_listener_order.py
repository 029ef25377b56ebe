"""Requests a client sends back to back, in one write, are answered one at a time and in order.

A listener answers one request of a connection at a time (Kafka clients match answers by
order): the rest wait in the connection's buffer and are released by the answer before them.
Commits make the first answer wait for the log, so the requests behind it are still buffered
when it is written.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from groupcoord.wire import apis
from groupcoord.wire.apis import ApiKey
from tests.wire.frames import split_response

from .kafka_inproc import WirePartition
from .raw_frames import COMMIT_VERSION, frame, read_frame, simple_commit

TOPICS = {"events": 2}
IO_TIMEOUT_S = 10
HOLD_LOOP_S = 0.3  # long enough for both connections' requests to arrive
# OffsetFetch answers of ~20 KB each, three a connection: a turn's ~60 KB, under MAX_QUEUED_BYTES.
WIDE_FETCH_PARTITIONS = 1000
WIDE_FETCHES = 3
LATER_FETCHES = 30  # sent while the socket's earlier answers still wait in its transport
FETCH_VERSION = 7


@pytest.fixture(scope="module", params=["asyncio", "uvloop"])
def port(tmp_path_factory, request):
    partition = WirePartition(
        str(tmp_path_factory.mktemp("wire-order")), TOPICS, loop=request.param
    )
    address = partition.start()
    yield int(address.rsplit(":", 1)[1])
    partition.stop()


def _commit(correlation_id: int, offset: int) -> bytes:
    return simple_commit(correlation_id, "ordered", "events", offset)


def _fetch(correlation_id: int) -> bytes:
    return frame(
        ApiKey.OFFSET_FETCH,
        FETCH_VERSION,
        correlation_id,
        group_id="ordered",
        topics=[{"name": "events", "partition_indexes": [0]}],
        require_stable=False,
    )


def test_requests_in_one_write_are_answered_in_order(port):
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S) as sock:
        sock.settimeout(IO_TIMEOUT_S)
        sock.sendall(_commit(1, 10) + _commit(2, 20) + _fetch(3) + _commit(4, 30))
        commit_cls = apis.response_class(ApiKey.OFFSET_COMMIT, COMMIT_VERSION)
        fetch_cls = apis.response_class(ApiKey.OFFSET_FETCH, FETCH_VERSION)
        answers = [
            split_response(read_frame(sock), commit_cls, header_version=1),
            split_response(read_frame(sock), commit_cls, header_version=1),
            split_response(read_frame(sock), fetch_cls, header_version=1),
            split_response(read_frame(sock), commit_cls, header_version=1),
        ]
    assert [correlation_id for correlation_id, _ in answers] == [1, 2, 3, 4]
    for _, commit in (answers[0], answers[1], answers[3]):
        assert [p.error_code for t in commit.topics for p in t.partitions] == [0]
    # The fetch, answered after the second commit and before the third, reads the second.
    fetched = answers[2][1]
    assert fetched.error_code == 0
    assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [20]


class _CountingSender:
    """The listener's batch sender, counting what goes through it."""

    def __init__(self, sender) -> None:
        self.sender = sender
        self.batches: list[int] = []
        self.short = 0  # sends that took less than their data (the transport got the rest)

    def send(self, items):
        self.batches.append(len(items))
        results = self.sender.send(items)
        self.short += sum(
            taken < len(data) for (_, data), taken in zip(items, results, strict=True)
        )
        return results

    def close(self) -> None:
        self.sender.close()


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A partition on uvloop (the actors' loop) with a topic wide enough that an OffsetFetch
    answer of every partition is large."""
    partition = WirePartition(
        str(tmp_path_factory.mktemp("wire-batch")), {"events": 2, "wide": 2000}, loop="uvloop"
    )
    partition.start()
    yield partition
    partition.stop()


def _port(partition: WirePartition) -> int:
    return partition.listener.port


def _hold_loop(partition: WirePartition) -> None:
    """Keep the partition's loop busy for ``HOLD_LOOP_S`` from now, so that what arrives
    meanwhile is read in one turn."""
    held = threading.Event()
    partition.loop.call_soon_threadsafe(lambda: (held.set(), time.sleep(HOLD_LOOP_S)))
    assert held.wait(IO_TIMEOUT_S)


def test_answers_to_many_connections_go_out_through_batched_sends(wide):
    counting = _CountingSender(wide.listener.sends._sender)
    wide.listener.sends._sender = counting
    try:
        socks = [
            socket.create_connection(("127.0.0.1", _port(wide)), timeout=IO_TIMEOUT_S)
            for _ in range(16)
        ]
        commit_cls = apis.response_class(ApiKey.OFFSET_COMMIT, COMMIT_VERSION)
        for round_ in range(5):
            if round_ == 0:  # one round's commits surely read in one turn: the loop held
                _hold_loop(wide)
            for i, sock in enumerate(socks):
                sock.sendall(_commit(100 * round_ + i, round_))
            for i, sock in enumerate(socks):
                correlation_id, commit = split_response(
                    read_frame(sock), commit_cls, header_version=1
                )
                assert correlation_id == 100 * round_ + i
                assert [p.error_code for t in commit.topics for p in t.partitions] == [0]
        for sock in socks:
            sock.close()
    finally:
        wide.listener.sends._sender = counting.sender
    # Turns that answered several sockets sent them in one call, one socket per item (a turn
    # that answered one socket wrote through its transport instead).
    assert sum(counting.batches) <= 80
    assert max(counting.batches, default=0) > 1


def test_a_socket_that_takes_part_of_its_answers_gets_the_rest_in_order(wide):
    fetch_cls = apis.response_class(ApiKey.OFFSET_FETCH, FETCH_VERSION)
    wide_fetch = [
        frame(
            ApiKey.OFFSET_FETCH,
            FETCH_VERSION,
            correlation_id,
            group_id="wide-readers",
            topics=[{"name": "wide", "partition_indexes": list(range(WIDE_FETCH_PARTITIONS))}],
            require_stable=False,
        )
        for correlation_id in range(1 + WIDE_FETCHES + LATER_FETCHES)
    ]
    counting = _CountingSender(wide.listener.sends._sender)
    wide.listener.sends._sender = counting
    socks = []
    try:
        for _ in range(2):
            sock = socket.socket()
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(IO_TIMEOUT_S)
            sock.connect(("127.0.0.1", _port(wide)))
            sock.sendall(wide_fetch[0])  # answered: the listener has the connection now
            got, _ = split_response(read_frame(sock), fetch_cls, header_version=1)
            assert got == 0
            # And a small send buffer on the listener's side of it.
            [client] = [
                c
                for c in list(wide.listener._clients)
                if c.transport.get_extra_info("peername") == sock.getsockname()
            ]
            server_side = client.transport.get_extra_info("socket")
            server_side.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        # Both connections' fetches read in one turn (the loop is held while they arrive), so
        # their answers (~60 KB each, under MAX_QUEUED_BYTES) go out in one batched send (a
        # turn that answered one connection writes through its transport), and neither
        # socket takes all of its own.
        _hold_loop(wide)
        for sock in socks:
            sock.sendall(b"".join(wide_fetch[1 : 1 + WIDE_FETCHES]))
        for sock in socks:
            got, _ = split_response(read_frame(sock), fetch_cls, header_version=1)
            assert got == 1
        # More while the rest waits in the transports: answered after it, through them.
        for sock in socks:
            sock.sendall(b"".join(wide_fetch[1 + WIDE_FETCHES :]))
        for sock in socks:
            for correlation_id in range(2, len(wide_fetch)):
                got, fetched = split_response(read_frame(sock), fetch_cls, header_version=1)
                assert got == correlation_id
                assert len(fetched.topics[0].partitions) == WIDE_FETCH_PARTITIONS
    finally:
        wide.listener.sends._sender = counting.sender
        for sock in socks:
            sock.close()
    assert counting.short  # the case under test happened


def test_answers_before_a_bad_frame_are_sent_before_the_close(wide):
    commit_cls = apis.response_class(ApiKey.OFFSET_COMMIT, COMMIT_VERSION)
    garbage = struct.pack(">i", 6) + struct.pack(">hhh", 999, 0, 0)  # an unknown api key
    with socket.create_connection(("127.0.0.1", _port(wide)), timeout=IO_TIMEOUT_S) as sock:
        sock.settimeout(IO_TIMEOUT_S)
        sock.sendall(_commit(7, 70) + garbage)
        correlation_id, commit = split_response(read_frame(sock), commit_cls, header_version=1)
        assert correlation_id == 7
        assert [p.error_code for t in commit.topics for p in t.partitions] == [0]
        assert sock.recv(1) == b""  # then closed
