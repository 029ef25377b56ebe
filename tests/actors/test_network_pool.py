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

from groupcoord.actors.kafka_listener import ListenerCounters
from groupcoord.actors.network_frames import REQUEST, frame
from groupcoord.coordinator import Errors, HeartbeatResponse

from .helpers import wait_for
from .kafka_inproc import WirePartition

TOPICS = {"events": 2}
RESTART_WAIT_S = 10.0
COUNTED_WITHIN_S = 5.0  # a network process reports its counters every second


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
