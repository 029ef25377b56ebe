"""Hostile bytes on a listener: the connection is closed, the partition keeps serving.

Each case opens a raw socket, sends something no Kafka client would, and checks that the
listener closed that connection (EOF) without answering it, while a well-behaved request on a
fresh connection is still answered and the partition's groups are untouched.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from groupcoord.actors.kafka_listener import KafkaListener
from groupcoord.actors.security import ListenerSecurity, check_host
from groupcoord.coordinator import CoordinatorConfig
from groupcoord.wire import apis
from groupcoord.wire.apis import ApiKey
from tests.kafka.rawwire import make
from tests.wire.frames import request_frame

from .kafka_inproc import WirePartition

TOPICS = {"events": 2}
IO_TIMEOUT_S = 10


# Both event loops: flow control and closing are the transport's (uvloop under Ray).
@pytest.fixture(scope="module", params=["asyncio", "uvloop"])
def served(tmp_path_factory, request):
    partition = WirePartition(str(tmp_path_factory.mktemp("wire-bad")), TOPICS, loop=request.param)
    address = partition.start()
    yield partition, int(address.rsplit(":", 1)[1])
    partition.stop()


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S)
    sock.settimeout(IO_TIMEOUT_S)
    return sock


def _api_versions_v0(correlation_id: int) -> bytes:
    body = struct.pack(">hhi", 18, 0, correlation_id) + struct.pack(">h", 4) + b"test"
    return struct.pack(">i", len(body)) + body


def _closed_without_answer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1 << 16) == b""
    except ConnectionResetError:
        return True


def _answers_api_versions(port: int) -> bool:
    with _connect(port) as sock:
        sock.sendall(_api_versions_v0(77))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        frame = sock.recv(size, socket.MSG_WAITALL)
        correlation_id, error_code = struct.unpack(">ih", frame[:6])
        return correlation_id == 77 and error_code == 0


HOSTILE = {
    "a 100 MB frame": struct.pack(">i", 100 * 1024 * 1024) + b"\0" * 64,
    "a negative size": struct.pack(">i", -5),
    "an unknown api key": struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1),
    "an unsupported JoinGroup version": struct.pack(">i", 10) + struct.pack(">hhih", 11, 99, 1, -1),
    "a truncated header": struct.pack(">i", 3) + b"\0\x12\0",
    "a whole frame of noise": struct.pack(">i", 1024) + bytes(range(256)) * 4,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_bytes_close_the_connection_and_nothing_else(served, name):
    _, port = served
    with _connect(port) as sock:
        sock.sendall(HOSTILE[name])
        assert _closed_without_answer(sock)
    assert _answers_api_versions(port)


def test_a_produce_without_acks_is_refused_by_closing_the_connection(served):
    # Produce v3: null transactional id, acks 0, a 1 s timeout, no topics. The client expects
    # no answer, so the refusal is the close (Kafka's answer to a failed acks=0 request).
    header = struct.pack(">hhih", 0, 3, 1, -1)
    body = struct.pack(">hhii", -1, 0, 1000, 0)
    _, port = served
    with _connect(port) as sock:
        sock.sendall(struct.pack(">i", len(header + body)) + header + body)
        assert _closed_without_answer(sock)
    assert _answers_api_versions(port)


def test_a_client_that_hangs_up_mid_frame_costs_nothing(served):
    partition, port = served
    for _ in range(20):
        with _connect(port) as sock:
            sock.sendall(struct.pack(">i", 1000) + b"\0" * 10)
    assert _answers_api_versions(port)
    assert partition.runtime.state == "serving"


def test_connections_beyond_the_limit_are_closed_at_once(tmp_path):
    partition = WirePartition(str(tmp_path), TOPICS)
    partition.start()
    try:
        listener = partition.listener
        listener.max_connections = 3  # the limit of a small listener
        held = [_connect(listener.port) for _ in range(3)]
        for sock in held:  # each is accepted and answered
            sock.sendall(_api_versions_v0(1))
            assert sock.recv(4, socket.MSG_WAITALL)
        with _connect(listener.port) as extra:
            assert _closed_without_answer(extra)
        assert listener.refused_connections == 1
        for sock in held:
            sock.close()
    finally:
        partition.stop()


def test_an_idle_connection_is_closed(served):
    partition, port = served
    listener = partition.listener
    kept = listener.connection_max_idle_ms
    listener.connection_max_idle_ms = 200  # read by each connection as it is accepted
    try:
        with _connect(port) as sock:
            sock.sendall(_api_versions_v0(5))
            size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
            assert len(sock.recv(size, socket.MSG_WAITALL)) == size  # answered: not idle yet
            assert _closed_without_answer(sock)  # then silence: closed (within IO_TIMEOUT_S)
    finally:
        listener.connection_max_idle_ms = kept
    assert _answers_api_versions(port)


def test_partial_frames_are_bounded_across_connections(tmp_path):
    partition = WirePartition(str(tmp_path), TOPICS)
    partition.start()
    try:
        listener = partition.listener
        listener.max_buffered_bytes = 64 * 1024
        first = _connect(listener.port)
        first.sendall(struct.pack(">i", 1 << 20) + b"\0" * 40_000)  # a partial frame, held
        for _ in range(1000):  # until the listener has read all of it
            if listener.buffered_bytes >= 40_004:
                break
            time.sleep(0.01)
        assert listener.buffered_bytes == 40_004
        with _connect(listener.port) as second:
            second.sendall(struct.pack(">i", 1 << 20) + b"\0" * 40_000)
            assert _closed_without_answer(second)
        assert listener.buffered_bytes == 40_004  # the refused bytes were never held
        first.close()
        assert _answers_api_versions(listener.port)
    finally:
        partition.stop()


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "example.org"])
@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL"])
def test_only_loopback_listeners_without_authentication(host, protocol):
    security = ListenerSecurity(protocol, ssl_certfile="cert.pem" if protocol == "SSL" else None)
    with pytest.raises(ValueError, match="not a loopback address.*needs authentication"):
        check_host(host, security)
    with pytest.raises(ValueError, match="needs authentication"):
        KafkaListener(lambda request, peer, principal: None, host=host, security=security)
    sasl = ListenerSecurity("SASL_PLAINTEXT", users_file="users.json")
    check_host(host, sasl)  # SASL authenticates: any address may be bound
    certificates = ListenerSecurity("SSL", ssl_certfile="cert.pem", ssl_cafile="ca.pem")
    check_host(host, certificates)  # so do required client certificates
    for loopback in ("127.0.0.1", "::1", "localhost"):
        check_host(loopback, security)


def test_a_client_that_never_reads_its_answers_is_closed_when_idle(tmp_path):
    # Metadata requests for a wide topic sent back to back, the answers (~0.5 MB each) never
    # read: once the kernel's buffers and the listener's write buffer are full, the listener
    # stops reading, and after connection_max_idle_ms of that it drops the connection.
    partition = WirePartition(str(tmp_path), {"wide": 20_000})
    partition.start()
    body = struct.pack(">hhih", 3, 0, 1, -1) + struct.pack(">i", 0)  # Metadata v0, all topics
    request = struct.pack(">i", len(body)) + body
    dropped = False
    try:
        listener = partition.listener
        listener.connection_max_idle_ms = 200
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", listener.port))
            sock.setblocking(False)
            deadline = time.monotonic() + IO_TIMEOUT_S
            while time.monotonic() < deadline and not dropped:
                try:
                    sock.send(request)
                except BlockingIOError:
                    time.sleep(0.01)  # both sides' buffers are full
                except ConnectionError:
                    dropped = True
        assert dropped
        assert listener.connections == 0
        assert _answers_api_versions(listener.port)
    finally:
        partition.stop()


def test_a_request_sent_before_a_half_close_is_still_answered(served):
    # Fetch v4 for no topics waits max_wait (200 ms) before its empty answer; the client shuts
    # its side down right after sending it, and still gets the answer, then EOF.
    _, port = served
    header = struct.pack(">hhih", 1, 4, 31, -1)
    body = struct.pack(">iiiibi", -1, 200, 1, 1 << 20, 0, 0)
    with _connect(port) as sock:
        sock.sendall(struct.pack(">i", len(header + body)) + header + body)
        sock.shutdown(socket.SHUT_WR)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        frame = sock.recv(size, socket.MSG_WAITALL)
        assert len(frame) == size and struct.unpack(">i", frame[:4])[0] == 31
        assert _closed_without_answer(sock)


def test_a_client_that_hangs_up_while_its_request_waits_costs_nothing(served, caplog):
    # The Fetch waits (on a future of the loop, with no task) when the client closes: the
    # waiting answer is dropped with the connection, nothing is written or logged later, and
    # the listener goes on serving.
    partition, port = served
    header = struct.pack(">hhih", 1, 4, 32, -1)
    body = struct.pack(">iiiibi", -1, 300, 1, 1 << 20, 0, 0)
    with caplog.at_level("ERROR", logger="groupcoord"):
        sock = _connect(port)
        sock.sendall(struct.pack(">i", len(header + body)) + header + body)
        deadline = time.monotonic() + IO_TIMEOUT_S
        while partition.listener.connections == 0:  # accepted and read
            assert time.monotonic() < deadline
            time.sleep(0.01)
        sock.close()
        while partition.listener.connections != 0:
            assert time.monotonic() < deadline, "the listener kept the closed connection"
            time.sleep(0.01)
        time.sleep(0.5)  # past the Fetch's wait: nothing may wake up for the closed connection
        assert _answers_api_versions(port)
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


def test_a_client_that_hangs_up_while_its_join_is_parked_costs_nothing(tmp_path, caplog):
    # A JoinGroup waits in the partition (the initial rebalance delay) when its client resets
    # the connection (a FIN alone would be a half-close: the answer is still written): the
    # partition's reply, when the delay ends, finds the connection gone and writes and logs
    # nothing; the listener goes on serving, joins included.
    partition = WirePartition(
        str(tmp_path / "wire-parked"),
        TOPICS,
        config=CoordinatorConfig(group_initial_rebalance_delay_ms=1_500),
    )
    port = int(partition.start().rsplit(":", 1)[1])
    try:
        with caplog.at_level("ERROR", logger="groupcoord"):
            sock = _connect(port)
            sock.sendall(_join_v3("left", 41))
            deadline = time.monotonic() + IO_TIMEOUT_S
            while partition.runtime.info()["parked_requests"] == 0:
                assert time.monotonic() < deadline, "the join was never parked"
                time.sleep(0.01)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()  # with a zero linger time: a reset
            while partition.listener.connections != 0:
                assert time.monotonic() < deadline, "the listener kept the reset connection"
                time.sleep(0.01)
            assert partition.runtime.info()["parked_requests"] == 1
            while partition.runtime.info()["parked_requests"] != 0:  # the delay ends
                assert time.monotonic() < deadline, "the join was never answered"
                time.sleep(0.01)
            with _connect(port) as again:
                again.sendall(_join_v3("next", 42))
                size = struct.unpack(">i", again.recv(4, socket.MSG_WAITALL))[0]
                frame = again.recv(size, socket.MSG_WAITALL)
            correlation_id, _throttle_ms, error_code = struct.unpack(">iih", frame[:10])
            assert (correlation_id, error_code) == (42, 0)
        assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    finally:
        partition.stop()


def _join_v3(group_id: str, correlation_id: int) -> bytes:
    return request_frame(
        make(
            apis.request_class(ApiKey.JOIN_GROUP, 3),
            {
                "group_id": group_id,
                "session_timeout": 10_000,
                "rebalance_timeout": 10_000,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
        ),
        correlation_id=correlation_id,
    )


@pytest.mark.parametrize("path", ["respond", "submit"])
def test_a_request_whose_answer_fails_at_once_closes_that_connection_alone(served, caplog, path):
    # A bug in an answer's first step (run outside any task: the gateway's coroutine, or a
    # group request submitted to the runtime) is handled as in its later steps: logged by the
    # listener with the client, the connection closed. Before, the exception left
    # data_received and the event loop's transport logged it ("Fatal error").
    partition, port = served
    listener = partition.listener
    respond, submit = listener._respond, listener._submit

    async def failing_respond(item, client_host, principal):
        if item.api_key == ApiKey.LIST_GROUPS:
            raise RuntimeError("a bug in an answer")
        return await respond(item, client_host, principal)

    def failing_submit(item, client_host, principal, reply):
        if item.api_key == ApiKey.LIST_GROUPS:
            raise RuntimeError("a bug in an answer")
        return submit(item, client_host, principal, reply)

    if path == "respond":
        listener._respond = failing_respond
    else:
        listener._submit = failing_submit
    try:
        with caplog.at_level("ERROR"), _connect(port) as sock:
            body = make(apis.request_class(ApiKey.LIST_GROUPS, 4), {"states_filter": ()})
            sock.sendall(request_frame(body))
            assert _closed_without_answer(sock)
        assert _answers_api_versions(port)
    finally:
        listener._respond, listener._submit = respond, submit
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert [r.getMessage() for r in errors] == ["closing connection from 127.0.0.1"]
    assert "a bug in an answer" in caplog.text
