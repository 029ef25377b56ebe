"""Shared pieces of the Ray tests: a deployment per test module, member factories, waiting."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Callable

from confluent_kafka import Consumer
from ray.exceptions import RayError

from groupcoord.actors import (
    CommitFailedError,
    CoordinatorUnavailable,
    GroupMember,
    RebalanceListener,
    start,
)
from groupcoord.coordinator import CoordinatorConfig

# Small timeouts keep the Ray tests short on 2 cores.
TEST_CONFIG = CoordinatorConfig(
    group_min_session_timeout_ms=100, group_initial_rebalance_delay_ms=0
)
SESSION_MS, HEARTBEAT_MS, REBALANCE_MS = 2_000, 200, 4_000


def start_deployment(tmp_dir, namespace: str, num_partitions: int = 2):
    deployment = start(num_partitions, str(tmp_dir), namespace=namespace, config=TEST_CONFIG)
    deployment.wait_ready(60)
    return deployment


class Tracker(RebalanceListener):
    """Records every listener call, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset]] = []

    def on_partitions_revoked(self, partitions):
        self.calls.append(("revoked", partitions))

    def on_partitions_assigned(self, partitions):
        self.calls.append(("assigned", partitions))

    def on_partitions_lost(self, partitions):
        self.calls.append(("lost", partitions))


def member(router, group: str, topics=None, **kwargs) -> GroupMember:
    topics = topics or {"t": 6}
    options = dict(
        topic_partitions=topics,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        rebalance_timeout_ms=REBALANCE_MS,
        listener=Tracker(),
    )
    options.update(kwargs)
    m = GroupMember(router, group, list(topics), **options)
    m.start()
    return m


async def wait_until(predicate, timeout_s: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def settled(members, partitions: int) -> bool:
    """Every member stable in one generation, owning disjoint partitions covering them all."""
    if not all(m.stable for m in members):
        return False
    if len({m.generation_id for m in members}) != 1:
        return False
    owned = [tp for m in members for tp in m.assignment]
    return len(owned) == len(set(owned)) == partitions


def no_double_ownership(members) -> None:
    """No two members ever held the same partition in the same generation."""
    seen: dict[tuple[str, int, tuple[str, int]], int] = {}
    for m in members:
        for generation, assignment in m.history:
            for tp in assignment:
                owner = seen.setdefault((m.group_id, generation, tp), id(m))
                assert owner == id(m), f"{tp} owned by two members in generation {generation}"


async def committer(m, counter, attempted, acked, stop_event) -> None:
    """Commit ever-growing offsets for whatever the member owns, recording what was attempted
    and what was acknowledged."""
    while not stop_event.is_set():
        owned = sorted(m.assignment)
        if owned:
            offsets = {tp: next(counter) for tp in owned}
            for tp, offset in offsets.items():
                attempted.setdefault(tp, set()).add(offset)
            try:
                await m.commit(offsets)
            except (CommitFailedError, CoordinatorUnavailable):
                pass
            else:
                for tp, offset in offsets.items():
                    acked[tp] = max(acked.get(tp, -1), offset)
        await asyncio.sleep(0.02)


def wait_restarted(info: Callable[[], dict], pid_before: int, timeout_s: float = 60.0) -> dict:
    """The first ``info()`` answered by another process than ``pid_before``: Ray's kill is
    asynchronous, so calls made right after it may still reach the old incarnation (and calls
    made while it restarts raise)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            answer = info()
            if answer["pid"] != pid_before:
                return answer
        except RayError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"not restarted in {timeout_s:.0f} s")


def wait_for(predicate, timeout_s: float, what: str, interval_s: float = 0.05):
    """``predicate()``'s first truthy value, polled every ``interval_s``; AssertionError naming
    ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(interval_s)


def wire_consumer(bootstrap: str, group: str) -> Consumer:
    """A librdkafka consumer that notices a restarted coordinator quickly (short metadata
    refresh and reconnect backoffs), committing by hand."""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "topic.metadata.refresh.interval.ms": 500,
            "reconnect.backoff.max.ms": 500,
            "retry.backoff.max.ms": 500,
        }
    )


def wait_assigned(consumer: Consumer, count: int, polls: int = 300) -> set[int]:
    """Poll (0.1 s at a time, ``polls`` times at most) until ``consumer`` holds ``count``
    partitions; their numbers."""
    for _ in range(polls):
        consumer.poll(0.1)
        if len(consumer.assignment()) == count:
            return {tp.partition for tp in consumer.assignment()}
    raise AssertionError(f"no assignment of {count} partitions")


def errors_until_refused(
    consumer: Consumer, topic: str, reported: list | None = None, polls: int = 200
) -> list:
    """Subscribe to ``topic`` and poll (``polls`` times 0.05 s) until the client reports an
    error (through its ``error_cb``, appending to ``reported``, or on a polled message); close
    it; the errors."""
    errors = [] if reported is None else reported
    consumer.subscribe([topic])
    for _ in range(polls):
        message = consumer.poll(0.05)
        if message is not None and message.error():
            errors.append(message.error())
        if errors:
            break
    consumer.close()
    return errors


def scrape_metrics(ray) -> str:
    """Ray's metrics agent's Prometheus page, on this session's first node."""
    port = ray.nodes()[0]["MetricsExportPort"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def metric_value(text: str, name: str, **labels) -> float:
    """Sum of the samples of ``name`` (Ray's ``ray_`` prefix added) whose labels include
    ``labels``."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(f"ray_{name}{{"):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total
