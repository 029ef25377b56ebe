"""A partition's network processes without Ray (``tests.actors.kafka_inproc.WirePartition`` with
``network_processes``): what the partition does with a channel that sends what it cannot take."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from groupcoord.actors.batch_send import MAX_BATCH
from groupcoord.actors.kafka_listener import ListenerCounters
from groupcoord.actors.network_frames import REQUEST, frame
from groupcoord.coordinator import Errors, HeartbeatResponse
from groupcoord.wire import apis
from groupcoord.wire.apis import ApiKey
from tests.wire.frames import split_response

from .helpers import wait_for
from .kafka_inproc import WirePartition
from .raw_frames import COMMIT_VERSION, read_frame, simple_commit

TOPICS = {"events": 2}
RESTART_WAIT_S = 10.0
COUNTED_WITHIN_S = 5.0  # a network process reports its counters every second
RAW_ROUNDS = 50  # of commits from 8 connections at once, at most


@pytest.fixture
def served(tmp_path):
    partition = WirePartition(str(tmp_path / "log"), TOPICS, network_processes=1)
    address = partition.start()
    yield partition, address
    partition.stop()


def _on_loop(partition: WirePartition, fn):
    async def call():
        return fn()

    return asyncio.run_coroutine_threadsafe(call(), partition.loop).result(10)


def _commit_and_read_back(address: str, group: str, offset: int) -> None:
    consumer = Consumer(
        {"bootstrap.servers": address, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(offsets=[TopicPartition("events", 0, offset)], asynchronous=False)
        (read,) = consumer.committed([TopicPartition("events", 0)], timeout=10)
        assert read.offset == offset
    finally:
        consumer.close()


def _wait_replaced(partition: WirePartition, old: list[int]) -> list[int]:
    deadline = time.monotonic() + RESTART_WAIT_S
    while time.monotonic() < deadline:
        pids = _on_loop(partition, lambda: partition.pool.pids)
        if pids and not set(pids) & set(old):
            return pids
        time.sleep(0.05)
    raise AssertionError(f"network process {old} was not replaced")


@pytest.mark.parametrize(
    "bad",
    [
        b"\x00\x00\x00\x07\x63\x00\x00\x00\x00\x00\x00",  # an unknown kind
        struct.pack(">IBHI", 2**32 - 1, REQUEST, 0, 1),  # longer than the channel allows
        # A core response where a request belongs: the partition takes requests only.
        frame(REQUEST, 1, HeartbeatResponse(Errors.NONE)),
    ],
    ids=["unknown-kind", "oversized", "response-as-request"],
)
def test_a_channel_that_sends_what_the_partition_cannot_take_is_closed_and_replaced(served, bad):
    partition, address = served
    _commit_and_read_back(address, "before", 5)
    old = _on_loop(partition, lambda: partition.pool.pids)
    assert len(old) == 1
    channel = _on_loop(partition, lambda: partition.pool._slots[0].channel)
    # As if the network process had written it: the partition reads it from the channel.
    _on_loop(partition, lambda: channel.data_received(bad))
    new = _wait_replaced(partition, old)
    assert _on_loop(partition, lambda: partition.pool.restarts) == 1
    assert partition.runtime.state == "serving"  # the partition itself never noticed
    # The old process saw its channel close and exited (reaped by the pool).
    deadline = time.monotonic() + RESTART_WAIT_S
    while os.path.exists(f"/proc/{old[0]}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{old[0]}")
    _commit_and_read_back(address, "after", 7)  # served by the new process
    assert len(new) == 1


def test_a_network_process_serves_without_loading_ray(served):
    # Ray is the partition's, not the network processes': a process that loaded it would take
    # about 0.25 s more to start (to replace one that died) and 40 MB more memory.
    partition, address = served
    _commit_and_read_back(address, "served", 3)  # the process answered: its imports are done
    [pid] = _on_loop(partition, lambda: partition.pool.pids)
    with open(f"/proc/{pid}/maps") as maps:
        mapped = maps.read()
    assert "msgspec" in mapped  # the check sees the process's extension modules
    assert "_raylet" not in mapped


def test_counters_sum_the_processes_and_keep_what_an_ended_one_counted(served):
    partition, address = served
    port = int(address.rsplit(":", 1)[1])
    idle = socket.create_connection(("127.0.0.1", port), timeout=5)
    bad = socket.create_connection(("127.0.0.1", port), timeout=5)
    bad.sendall(struct.pack(">i", 2**31 - 1))  # a frame longer than any allowed: closed
    counted = wait_for(
        lambda: (c := partition.counters()).protocol_errors == 1 and c.connections == 1 and c,
        COUNTED_WITHIN_S,
        "the process to report a protocol error and the idle connection",
    )
    assert counted == ListenerCounters(connections=1, protocol_errors=1)
    old = _on_loop(partition, lambda: partition.pool.pids)
    channel = _on_loop(partition, lambda: partition.pool._slots[0].channel)
    _on_loop(partition, lambda: channel.data_received(b"\x00\x00\x00\x07\x63" + bytes(6)))
    _wait_replaced(partition, old)
    # The ended process's connection closed with it; its protocol error stays counted.
    assert partition.counters() == ListenerCounters(connections=0, protocol_errors=1)
    idle.close()
    bad.close()


def _ring_sends(pid: int) -> int | None:
    """Sends a process has submitted through its batched sends' io_uring (the ring's
    submission tail, from the kernel's fdinfo), or None when it has no such ring. Theirs is
    the ring of ``MAX_BATCH`` entries: libuv keeps one of its own, smaller, for file work."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:[io_uring]":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                fields = dict(line.split(":", 1) for line in info if ":" in line)
        except FileNotFoundError:  # closed meanwhile
            continue
        if int(fields["SqMask"], 16) + 1 == MAX_BATCH:
            return int(fields["SqTail"])
    return None


def test_a_network_process_sends_a_turns_answers_together(served):
    # As a partition's own listener does (actors/batch_send.py): the replies one read of the
    # channel settles are answered in one turn, and several connections' answers in one
    # batched send. Commits from several connections at once, until the ring has sent some
    # (a turn that answers one connection writes through its transport).
    partition, address = served
    [pid] = _on_loop(partition, lambda: partition.pool.pids)
    port = int(address.rsplit(":", 1)[1])
    socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(8)]
    answer_cls = apis.response_class(ApiKey.OFFSET_COMMIT, COMMIT_VERSION)
    try:
        for round_ in range(RAW_ROUNDS):
            for i, sock in enumerate(socks):
                sock.sendall(simple_commit(100 * round_ + i, "batched", "events", round_))
            for i, sock in enumerate(socks):
                correlation_id, answer = split_response(
                    read_frame(sock), answer_cls, header_version=1
                )
                assert correlation_id == 100 * round_ + i
                assert [p.error_code for t in answer.topics for p in t.partitions] == [0]
            if (_ring_sends(pid) or 0) > 1:
                break
        else:
            raise AssertionError(f"no batched send in {RAW_ROUNDS} rounds: {_ring_sends(pid)}")
    finally:
        for sock in socks:
            sock.close()
