"""Benchmark of groupcoord's Kafka listeners against a real Apache Kafka broker, same run.

The same client library (librdkafka, through confluent-kafka) does the same work against:

* ``kafka``: a real Kafka 4.x broker (KRaft, one node; the jars ``make kafka-libs`` fetches),
  whose group coordinator acknowledges a commit once it is in its log, before any fsync;
* ``gc-never``: groupcoord's wire path at the same durability (fsync policy ``never``);
* ``gc-always``: groupcoord's wire path with its default, an fsync before every answer;
* ``gc-ray``: groupcoord's Ray-handle path (``GroupMember`` over actor handles), fsync ``never``.

Rows, each a ratio to the real broker's figure measured minutes apart in this run:

* commits/s of one group with 1, 16 and 64 members, each committing its partitions
  synchronously, back to back, for ``--seconds``;
* join-to-stable: from N members subscribing at once until every partition has an owner.

Run: ``.venv/bin/python bench/wire.py [--quick]``; writes bench/results/wire.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import msgspec
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.actors import GroupMember, WireConfig, start, stop
from groupcoord.actors.bootstrap import ensure_ray, log_config_for
from groupcoord.coordinator import CoordinatorConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tests.kafka.javakafka import KafkaBroker  # noqa: E402 — the tests' broker harness

RESULTS = os.path.join(ROOT, "bench", "results", "wire.json")
CONFIG = CoordinatorConfig(group_initial_rebalance_delay_ms=0)
PARTITIONS = 64
STABLE_TIMEOUT_S = 120.0


def _consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": 30_000,
            "heartbeat.interval.ms": 3_000,
            "partition.assignment.strategy": "range",
        }
    )


def _create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)


class Members:
    """N librdkafka consumers of one group, each polled by its own thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, count: int) -> None:
        self.consumers = [_consumer(bootstrap, group) for _ in range(count)]
        self.stop = threading.Event()
        self.commits = [0] * count
        self.owned: list[list[int]] = [[] for _ in range(count)]  # kept by each member's thread
        self.committing = threading.Event()
        self.started = time.perf_counter()
        for c in self.consumers:
            c.subscribe([topic])
        self.threads = [threading.Thread(target=self._run, args=(i,)) for i in range(count)]
        for t in self.threads:
            t.start()

    def _run(self, index: int) -> None:
        consumer = self.consumers[index]
        offset = 0
        while not self.stop.is_set():
            consumer.poll(0 if self.committing.is_set() else 0.05)
            owned = consumer.assignment()  # librdkafka's handle: this thread only
            self.owned[index] = [tp.partition for tp in owned]
            if not owned or not self.committing.is_set():
                continue
            offset += 1
            try:
                consumer.commit(
                    offsets=[TopicPartition(tp.topic, tp.partition, offset) for tp in owned],
                    asynchronous=False,
                )
                self.commits[index] += 1
            except KafkaException:
                pass  # a rebalance; not counted

    def wait_stable(self) -> float:
        """Seconds from subscribing until every member owns partitions and every partition has
        exactly one owner (the first member alone owning everything is not the end)."""
        deadline = time.monotonic() + STABLE_TIMEOUT_S
        while time.monotonic() < deadline:
            owned = [p for partitions in self.owned for p in partitions]
            if all(self.owned) and len(owned) == PARTITIONS == len(set(owned)):
                return time.perf_counter() - self.started
            time.sleep(0.01)
        raise TimeoutError("the group never covered every partition")

    def commit_rate(self, seconds: float) -> float:
        before = sum(self.commits)
        self.committing.set()
        started = time.perf_counter()
        time.sleep(seconds)
        done = sum(self.commits) - before
        return done / (time.perf_counter() - started)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)
        for c in self.consumers:
            c.close()


def wire_row(bootstrap: str, label: str, count: int, seconds: float) -> dict:
    topic = f"bench-{label}-{count}-{time.monotonic_ns()}"
    _create_topic(bootstrap, topic)
    members = Members(bootstrap, f"g-{topic}", topic, count)
    try:
        join_s = members.wait_stable()
        rate = members.commit_rate(seconds)
    finally:
        members.close()
    return {
        "target": label,
        "members": count,
        "join_to_stable_s": round(join_s, 3),
        "commits_per_s": round(rate, 1),
    }


async def _ray_rate(router, count: int, seconds: float) -> tuple[float, float]:
    group = f"ray-{count}-{time.monotonic_ns()}"
    started = time.perf_counter()
    members = [
        GroupMember(
            router,
            group,
            ["t"],
            topic_partitions={"t": PARTITIONS},
            session_timeout_ms=30_000,
            heartbeat_interval_ms=3_000,
        )
        for _ in range(count)
    ]
    for m in members:
        m.start()
    deadline = time.monotonic() + STABLE_TIMEOUT_S
    while sum(len(m.assignment) for m in members) != PARTITIONS or not all(
        m.stable for m in members
    ):
        if time.monotonic() > deadline:
            raise TimeoutError("Ray-handle group never settled")
        await asyncio.sleep(0.01)
    join_s = time.perf_counter() - started
    done = 0
    stop_at = time.perf_counter() + seconds

    async def commit_loop(m: GroupMember) -> None:
        nonlocal done
        offset = 0
        while time.perf_counter() < stop_at:
            offset += 1
            await m.commit({tp: offset for tp in m.assignment})
            done += 1

    began = time.perf_counter()
    await asyncio.gather(*(commit_loop(m) for m in members))
    rate = done / (time.perf_counter() - began)
    for m in members:
        await m.close()
    return join_s, rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 s per row, fewer members")
    parser.add_argument("--seconds", type=float, default=4.0, help="commit time per row")
    args = parser.parse_args()
    seconds = 1.0 if args.quick else args.seconds
    sizes = [1, 16] if args.quick else [1, 16, 64]
    work = Path(tempfile.mkdtemp(prefix="groupcoord-bench-wire-"))
    broker = KafkaBroker(work / "kafka")
    (work / "kafka").mkdir()
    broker.start()
    ensure_ray(None, "bench-wire", 2)
    # Storage's defaults sized for CONFIG's largest record, acknowledging before any fsync.
    unsynced = msgspec.structs.replace(log_config_for(CONFIG), fsync_policy="never")
    never = start(
        1,
        str(work / "never"),
        namespace="bench-never",
        config=CONFIG,
        log_config=unsynced,
        wire=WireConfig(bootstrap_port=0),
    )
    always = start(
        1,
        str(work / "always"),
        namespace="bench-always",
        config=CONFIG,
        wire=WireConfig(bootstrap_port=0),
    )
    for d in (never, always):
        d.wait_ready(60)
    rows = []
    try:
        for count in sizes:
            for label, bootstrap in (
                ("kafka", broker.bootstrap),
                ("gc-never", never.kafka),
                ("gc-always", always.kafka),
            ):
                rows.append(wire_row(bootstrap, label, count, seconds))
                print(rows[-1], flush=True)
            join_s, rate = asyncio.run(_ray_rate(never.router, count, seconds))
            rows.append(
                {
                    "target": "gc-ray",
                    "members": count,
                    "join_to_stable_s": round(join_s, 3),
                    "commits_per_s": round(rate, 1),
                }
            )
            print(rows[-1], flush=True)
    finally:
        for d in (never, always):
            stop(d)
        broker.stop()
    kafka = {r["members"]: r for r in rows if r["target"] == "kafka"}
    print(
        f"\n{'target':<10} {'members':>7} {'commits/s':>10} {'x kafka':>8} "
        f"{'join s':>7} {'x kafka':>8}"
    )
    for r in rows:
        base = kafka[r["members"]]
        r["commits_vs_kafka"] = round(r["commits_per_s"] / base["commits_per_s"], 2)
        r["join_vs_kafka"] = round(r["join_to_stable_s"] / base["join_to_stable_s"], 2)
        print(
            f"{r['target']:<10} {r['members']:>7} {r['commits_per_s']:>10.0f} "
            f"{r['commits_vs_kafka']:>8.2f} {r['join_to_stable_s']:>7.2f} "
            f"{r['join_vs_kafka']:>8.2f}"
        )
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(
            {
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "machine": f"{platform.machine()} {os.cpu_count()} cpus, "
                f"Python {platform.python_version()}",
                "quick": args.quick,
                "seconds_per_row": seconds,
                "rows": rows,
            },
            f,
            indent=2,
        )


if __name__ == "__main__":
    main()
