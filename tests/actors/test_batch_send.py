"""``batch_send``: many sockets' sends in one io_uring submission, on real socket pairs.

This machine's kernel (and CI's, the same) has io_uring; the listener falls back to each
transport's own write where it does not, which the network processes' listeners (no batching)
and the TLS listeners exercise.
"""

from __future__ import annotations

import errno
import socket

import pytest

from groupcoord.actors.batch_send import MAX_BATCH, open_batch_sender


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
