"""``batch_send``: many sockets' sends in one io_uring submission, on real socket pairs.

This machine's kernel (and CI's, the same) has io_uring; the listener falls back to each
transport's own write where it does not, which the network processes' listeners (no batching)
and the TLS listeners exercise.
"""

from __future__ import annotations

import errno
import socket

import pytest

from groupcoord.actors.batch_send import MAX_BATCH, MAX_QUEUED_BYTES, TurnSends, open_batch_sender


@pytest.fixture
def sender():
    opened = open_batch_sender(64)
    assert opened is not None, "io_uring is not usable here (kernel.io_uring_disabled?)"
    yield opened
    opened.close()


@pytest.fixture
def pairs():
    made = [socket.socketpair() for _ in range(4)]
    for ours, _ in made:
        ours.setblocking(False)
    yield made
    for ours, theirs in made:
        ours.close()
        theirs.close()


def test_every_socket_gets_its_bytes(sender, pairs):
    items = [
        (ours.fileno(), f"answer {i};".encode() * (i + 1)) for i, (ours, _) in enumerate(pairs)
    ]
    assert sender.send(items) == [len(data) for _, data in items]
    for (_, theirs), (_, data) in zip(pairs, items, strict=True):
        assert theirs.recv(1024) == data


def test_a_full_socket_takes_part_then_nothing_and_never_blocks(sender, pairs):
    ours, theirs = pairs[0]
    big = b"x" * 8 * 1024 * 1024
    [taken] = sender.send([(ours.fileno(), big)])
    assert 0 < taken < len(big)
    assert sender.send([(ours.fileno(), b"y")]) == [-errno.EAGAIN]
    received = bytearray()
    while len(received) < taken:
        received += theirs.recv(1 << 20)
    assert bytes(received) == big[:taken]


def test_a_failed_send_is_reported_and_the_others_go_on(sender, pairs):
    (gone, peer), (fine, theirs) = pairs[0], pairs[1]
    peer.close()
    # A closed peer: EPIPE, and no SIGPIPE (which would kill the process).
    closed_fd = socket.socket()
    bad = closed_fd.fileno()
    closed_fd.close()
    results = sender.send([(gone.fileno(), b"a"), (bad, b"b"), (fine.fileno(), b"c")])
    assert results[0] in (-errno.EPIPE, -errno.ECONNRESET)
    assert results[1] == -errno.EBADF
    assert results[2] == 1
    assert theirs.recv(16) == b"c"


def test_the_rings_wrap_around(sender, pairs):
    ours, theirs = pairs[0]
    for round_ in range(500):  # well past the ring's 64 entries
        data = round_.to_bytes(4, "big")
        assert sender.send([(ours.fileno(), data)]) == [4]
        assert theirs.recv(8) == data


def test_a_batch_is_bounded(pairs):
    opened = open_batch_sender(MAX_BATCH)
    assert opened is not None
    try:
        ours = pairs[0][0].fileno()
        with pytest.raises(ValueError, match="at most"):
            opened.send([(ours, b"z")] * (MAX_BATCH + 1))
        assert opened.send([]) == []
    finally:
        opened.close()


class _Connection:
    """A ``TurnSends.Writer`` over a real socket; what would go to its transport is kept."""

    def __init__(self, sock: socket.socket) -> None:
        self.fd = sock.fileno()
        self.open = True
        self.to_transport: list[bytes] = []

    def sendable(self) -> bool:
        return self.open

    def transport_write(self, data: bytes) -> None:
        self.to_transport.append(data)


@pytest.fixture
def turn():
    ends: list = []  # the turn-end callbacks TurnSends registered
    sends = TurnSends.open(ends.append)
    assert sends is not None
    yield sends, ends
    sends.close()


def test_a_turns_answers_go_out_at_its_end_in_order(turn, pairs):
    sends, ends = turn
    (ours, theirs), (other, other_peer) = pairs[0], pairs[1]
    first, second = _Connection(ours), _Connection(other)
    sends.queue(first, b"a1;")
    sends.queue(second, b"b1;")
    sends.queue(first, b"a2;")
    assert ends == [sends.flush]  # one callback a turn
    theirs.setblocking(False)
    with pytest.raises(BlockingIOError):
        theirs.recv(16)  # nothing before the turn's end
    sends.flush()
    assert theirs.recv(16) == b"a1;a2;"
    assert other_peer.recv(16) == b"b1;"
    assert first.to_transport == second.to_transport == []


def test_a_connection_closed_before_the_turn_ends_is_not_sent_to(turn):
    sends, _ = turn
    ours, theirs = socket.socketpair()
    gone = _Connection(ours)
    sends.queue(gone, b"for the old connection")
    ours.close()
    theirs.close()
    gone.open = False
    reused, peer = socket.socketpair()  # the lowest free numbers: the closed one among them
    try:
        sends.flush()
        peer.setblocking(False)
        with pytest.raises(BlockingIOError):
            peer.recv(64)
        assert gone.to_transport == []
    finally:
        reused.close()
        peer.close()


def test_a_turn_with_one_connections_answers_writes_them_through_its_transport(turn, pairs):
    # One send gains nothing from the ring, and a transport's write costs less than its call.
    sends, ends = turn
    ours, theirs = pairs[0]
    connection = _Connection(ours)
    sends.queue(connection, b"a1;")
    sends.queue(connection, b"a2;")
    assert connection.to_transport == []  # held until the turn's end
    ends.pop()()
    assert connection.to_transport == [b"a1;a2;"]  # one write, in order
    theirs.setblocking(False)
    with pytest.raises(BlockingIOError):
        theirs.recv(16)  # not sent through the ring as well


def test_what_a_socket_does_not_take_goes_to_the_transport(turn, pairs):
    sends, _ = turn
    (ours, theirs), (other, other_peer) = pairs[0], pairs[1]
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    connection, bystander = _Connection(ours), _Connection(other)
    frames = [bytes([i]) * 4096 for i in range(MAX_QUEUED_BYTES // 4096)]
    for frame in frames:
        sends.queue(connection, frame)
    sends.queue(bystander, b"b;")  # two connections: the turn's sends go through the ring
    sends.flush()
    assert other_peer.recv(16) == b"b;" and bystander.to_transport == []
    [rest] = connection.to_transport
    whole = b"".join(frames)
    assert 0 < len(rest) < len(whole) and whole.endswith(rest)
    received = bytearray()
    while len(received) < len(whole) - len(rest):
        received += theirs.recv(1 << 16)
    assert bytes(received) + rest == whole


def test_past_its_bound_a_connection_writes_through_its_transport(turn, pairs):
    sends, ends = turn
    ours, theirs = pairs[0]
    theirs.setblocking(False)
    connection = _Connection(ours)

    def nothing_left_queued():
        written = list(connection.to_transport)
        sends.flush()
        assert connection.to_transport == written
        with pytest.raises(BlockingIOError):
            theirs.recv(16)

    sends.queue(connection, b"x" * (MAX_QUEUED_BYTES - 1))
    sends.queue(connection, b"yz")  # over the bound: both go to the transport, in order
    assert connection.to_transport == [b"x" * (MAX_QUEUED_BYTES - 1) + b"yz"]
    nothing_left_queued()
    big = b"w" * (MAX_QUEUED_BYTES + 1)
    sends.queue(connection, big)  # too big to queue at all
    assert connection.to_transport[-1] == big
    nothing_left_queued()
