"""Benchmark: one member joins a stable group, on groupcoord and on a real Kafka broker, same run.

A group of N members (N = 10, 100, 1,000; one topic of 10 x N partitions) is formed and left
to settle; then one more member joins. Measured, per protocol and server:

* ``rebalance_s``: from the newcomer's first request (its connection included) until every
  partition has exactly one owner and every member, the newcomer too, owns its balanced share
  (⌊P/(N+1)⌋ or ⌈P/(N+1)⌉ partitions) -- the new stable assignment;
* partition-seconds without an owner in that time, split into ``moved`` partitions (whose owner
  at the end differs from the one at the start) and ``unaffected`` ones (same owner before and
  after: any second without an owner there is needless), and partition-seconds with two owners
  (a safety check: must be 0).

Protocols, each by raw-wire members that behave as Kafka's Java consumer (bench/
rebalance_members.py): ``eager`` (classic, range assignor run by the leader), ``cooperative``
(classic, cooperative-sticky, KIP-429's two rebalances) and ``consumer`` (KIP-848's
ConsumerGroupHeartbeat, the server's uniform assignor). Classic members heartbeat every
``--heartbeat-interval-ms`` (session 30 s, rebalance timeout 60 s); KIP-848 members at the
interval the coordinator names in each answer, which is the same value on both servers
(``consumer_group_heartbeat_interval_ms`` / ``group.consumer.heartbeat.interval.ms``) but while
a groupcoord member waits for partitions others must release
(``consumer_group_unreleased_heartbeat_interval_ms``, left at its default).

Servers: ``kafka`` (Kafka 4.3.1, one KRaft node, the tests' harness) and ``gc`` (groupcoord's
Kafka listener, one partition, fsync ``never``: like the broker, it answers before any fsync).
Ratios, same run: ``vs_eager`` (the time over classic eager's on the same server and size) and
``vs_kafka`` (groupcoord's time over the broker's, same protocol and size). Each row is the
median of ``--repeats`` trials (1 for groups of 1,000 members or more); the servers take turns.

Run: ``.venv/bin/python bench/rebalance.py [--quick] [--members 10,100]``;
writes bench/results/rebalance.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import msgspec
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from groupcoord.actors import WireConfig, start, stop
from groupcoord.actors.bootstrap import ensure_ray, log_config_for
from groupcoord.coordinator import CoordinatorConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.rebalance_members import (  # noqa: E402 — needs ROOT on the path
    PROTOCOLS,
    Ledger,
    find_coordinator,
    leave,
    make_member,
)
from bench.run_info import stamp  # noqa: E402
from tests.kafka.javakafka import benchmark_broker  # noqa: E402 — the tests' broker harness

RESULTS = os.path.join(ROOT, "bench", "results", "rebalance.json")
SERVERS = ("kafka", "gc")
PARTITIONS_PER_MEMBER = 10
FULL_SIZES = (10, 100, 1_000)
QUICK_SIZES = (10, 100)
LARGE_GROUP = 1_000  # groups this large are measured once
FORM_TIMEOUT_S = 600.0  # forming the group of N
REBALANCE_TIMEOUT_S = 180.0  # the newcomer's rebalance
TOPIC_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 10.0  # members stop within this, their connections closed after
TOPIC_STEP_PARTITIONS = 5_000
TOPIC_CATALOG_WAIT_S = 3.0  # groupcoord's listeners learn new topics every second


class BenchError(Exception):
    """A bad command line: one line on stderr, exit 2."""


def parse_sizes(text: str) -> tuple[int, ...]:
    """``"10,100"`` -> (10, 100); ValueError unless each is an int in [1, 2000]."""
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ValueError(f"--members must be comma-separated integers, got {text!r}") from None
    if not sizes or any(not 1 <= n <= 2_000 for n in sizes):
        raise ValueError(f"--members must each be in [1, 2000], got {text!r}")
    return sizes


async def _settled(ledger: Ledger, tasks: list[asyncio.Task], timeout_s: float, what: str) -> None:
    """Wait until ``ledger`` is settled; a member's failure or the timeout raises."""
    waiter = asyncio.create_task(ledger.settled.wait())
    done, _ = await asyncio.wait(
        [waiter, *tasks], timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED
    )
    if waiter in done:
        return
    waiter.cancel()
    for task in done:
        task.result()  # a member's own error
    raise TimeoutError(f"{what}: not settled after {timeout_s:.0f} s")


async def trial(bootstrap: str, topic: str, protocol: str, count: int, interval_ms: int) -> dict:
    """Form a group of ``count`` members, let it settle, add one: the rebalance's figures."""
    partitions = PARTITIONS_PER_MEMBER * count
    group = f"rebalance-{protocol}-{count}-{time.monotonic_ns()}"
    coordinator = await find_coordinator(bootstrap, group)
    ledger = Ledger(partitions)
    topic_ids: dict = {}
    members = [
        make_member(protocol, i, coordinator, group, topic, interval_ms, topic_ids)
        for i in range(count + 1)
    ]
    interval_s = interval_ms / 1000
    ledger.expect(set(range(count)))
    # Classic members join at once (one rebalance forms the group); KIP-848 members start
    # spread over an interval, so that their heartbeats are too.
    tasks = [
        asyncio.create_task(m.run(ledger, 0.0 if protocol != "consumer" else random.random()))
        for m in members[:count]
    ]
    try:
        began = time.perf_counter()
        await _settled(ledger, tasks, FORM_TIMEOUT_S, f"forming {count} {protocol} members")
        formed_s = time.perf_counter() - began
        # Let the coordinator finish (epochs, heartbeats), then join at a random phase of the
        # members' heartbeats.
        await asyncio.sleep(2 * interval_s + random.random() * interval_s)
        for task in tasks:
            if task.done():
                task.result()
        ledger.expect(set(range(count + 1)))
        ledger.start()
        began = time.perf_counter()
        tasks.append(asyncio.create_task(members[count].run(ledger, 0.0)))
        await _settled(ledger, tasks, REBALANCE_TIMEOUT_S, f"{protocol} newcomer to {count}")
        row = {"rebalance_s": round(ledger.settled_at - began, 3), "formed_s": round(formed_s, 3)}
        row |= ledger.finish()
        if protocol != "consumer":
            row["newcomer_joins"] = members[count].rebalances
        return row
    finally:
        for m in members:
            m.stopped = True
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=STOP_TIMEOUT_S)
        await leave([m for m in members if m.conn is not None])


MEASURES = (
    "rebalance_s",
    "formed_s",
    "moved_partitions",
    "unowned_moved_partition_s",
    "unowned_unaffected_partition_s",
    "double_owned_partition_s",
)


def median_row(server: str, protocol: str, count: int, trials: list[dict]) -> dict:
    """Each measure's median over ``trials``, with every trial's time beside it."""
    row = {"server": server, "protocol": protocol, "members": count}
    for measure in MEASURES:
        row[measure] = round(statistics.median(t[measure] for t in trials), 3)
    if "newcomer_joins" in trials[0]:
        row["newcomer_joins"] = max(t["newcomer_joins"] for t in trials)
    row["trials_rebalance_s"] = [t["rebalance_s"] for t in trials]
    return row


def add_ratios(rows: list[dict]) -> None:
    """``vs_eager``: the time over classic eager's (same server and size); ``vs_kafka``:
    groupcoord's time over the broker's (same protocol and size)."""
    by_key = {(r["server"], r["protocol"], r["members"]): r for r in rows}
    for r in rows:
        eager = by_key.get((r["server"], "eager", r["members"]))
        if eager and eager["rebalance_s"]:
            r["vs_eager"] = round(r["rebalance_s"] / eager["rebalance_s"], 3)
        kafka = by_key.get(("kafka", r["protocol"], r["members"]))
        if r["server"] == "gc" and kafka and kafka["rebalance_s"]:
            r["vs_kafka"] = round(r["rebalance_s"] / kafka["rebalance_s"], 3)


def goals(rows: list[dict]) -> dict | None:
    """Issue #11's goals, checked at the largest size measured: groupcoord's KIP-848 under a
    fifth of its classic eager time, with no unaffected partition ever without an owner, and
    no slower than the broker's KIP-848."""
    by_key = {(r["server"], r["protocol"], r["members"]): r for r in rows}
    size = max(r["members"] for r in rows)
    gc = by_key.get(("gc", "consumer", size))
    if gc is None or "vs_eager" not in gc or "vs_kafka" not in gc:
        return None
    return {
        "members": size,
        "consumer_under_fifth_of_eager": gc["vs_eager"] < 0.2,
        "consumer_no_unaffected_unowned": gc["unowned_unaffected_partition_s"] == 0,
        "consumer_not_slower_than_kafka": gc["vs_kafka"] <= 1.0,
    }


def print_table(rows: list[dict]) -> None:
    print(
        f"\n{'server':<6} {'protocol':<12} {'members':>7} {'rebalance s':>11} {'x eager':>8} "
        f"{'x kafka':>8} {'moved':>6} {'unowned moved p·s':>17} {'unaffected p·s':>14} "
        f"{'double p·s':>10} {'form s':>7}"
    )
    for r in rows:
        vs_kafka = f"{r['vs_kafka']:>8.2f}" if "vs_kafka" in r else f"{'':>8}"
        print(
            f"{r['server']:<6} {r['protocol']:<12} {r['members']:>7} {r['rebalance_s']:>11.3f} "
            f"{r.get('vs_eager', 0):>8.2f} {vs_kafka} {r['moved_partitions']:>6} "
            f"{r['unowned_moved_partition_s']:>17.2f} "
            f"{r['unowned_unaffected_partition_s']:>14.2f} "
            f"{r['double_owned_partition_s']:>10.2f} {r['formed_s']:>7.1f}"
        )


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """One topic of ``partitions``, created and then grown TOPIC_STEP_PARTITIONS at a time:
    Kafka's controller refuses an operation of more than 10,000 records (POLICY_VIOLATION
    "excessively large batch"), and a 10,000-partition topic is one record more."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    size = min(partitions, TOPIC_STEP_PARTITIONS)
    admin.create_topics([NewTopic(name, size, 1)], request_timeout=TOPIC_TIMEOUT_S)[name].result(
        TOPIC_TIMEOUT_S
    )
    while size < partitions:
        size = min(partitions, size + TOPIC_STEP_PARTITIONS)
        grown = admin.create_partitions(
            [NewPartitions(name, size)], request_timeout=TOPIC_TIMEOUT_S
        )
        grown[name].result(TOPIC_TIMEOUT_S)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/rebalance.py",
        description="Time for one member joining a group of N to reach a new stable "
        "assignment, and the partition-seconds without an owner meanwhile, for classic eager, "
        "classic cooperative-sticky and KIP-848, on groupcoord and a real Kafka broker. "
        "Writes bench/results/rebalance.json.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="groups of 10 and 100 members only (1,000 too else)"
    )
    parser.add_argument(
        "--members", metavar="N[,N...]", help="group sizes, e.g. 10,100 (overrides --quick)"
    )
    parser.add_argument(
        "--protocols",
        default=",".join(PROTOCOLS),
        help=f"comma-separated, of {', '.join(PROTOCOLS)} (default: all)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help=f"trials per row, medians reported (groups of {LARGE_GROUP:,}+ members: 1)",
    )
    parser.add_argument(
        "--heartbeat-interval-ms",
        type=int,
        default=1_000,
        help="classic members' heartbeat.interval.ms and both servers' KIP-848 interval",
    )
    parser.add_argument(
        "--assignment-interval-ms",
        type=int,
        default=1_000,
        help="both servers' least time between KIP-848 target assignments "
        "(group.consumer.assignment.interval.ms; default: Kafka 4.3's 1000)",
    )
    parser.add_argument(
        "--output", default=RESULTS, help=f"where the results go (default: {RESULTS})"
    )
    args = parser.parse_args(argv)
    if args.members is not None:
        args.sizes = parse_sizes(args.members)
    else:
        args.sizes = QUICK_SIZES if args.quick else FULL_SIZES
    args.protocols = tuple(args.protocols.split(","))
    if not args.protocols or any(p not in PROTOCOLS for p in args.protocols):
        raise BenchError(f"--protocols must name some of {', '.join(PROTOCOLS)}")
    if not 1 <= args.repeats <= 20:
        raise BenchError(f"--repeats must be in [1, 20], got {args.repeats}")
    if not 500 <= args.heartbeat_interval_ms <= 5_000:
        raise BenchError("--heartbeat-interval-ms must be in [500, 5000]")
    if not 0 <= args.assignment_interval_ms <= 60_000:
        raise BenchError("--assignment-interval-ms must be in [0, 60000]")
    return args


def run(args: argparse.Namespace) -> dict:
    interval_ms = args.heartbeat_interval_ms
    work = Path(tempfile.mkdtemp(prefix="groupcoord-bench-rebalance-"))
    (work / "kafka").mkdir()
    broker = benchmark_broker(
        work / "kafka",
        overrides={
            "group.consumer.heartbeat.interval.ms": str(interval_ms),
            "group.consumer.min.heartbeat.interval.ms": str(min(500, interval_ms)),
            # The tests' broker assigns in the changing heartbeat; here both servers batch alike
            # (Kafka also runs its assignor on a background thread: its default, kept).
            "group.consumer.assignment.interval.ms": str(args.assignment_interval_ms),
            "group.consumer.assignor.offload.enable": "true",
        },
    )
    broker.start()
    ensure_ray(None, "bench-rebalance", 2)
    config = CoordinatorConfig(
        group_initial_rebalance_delay_ms=0,
        consumer_group_heartbeat_interval_ms=interval_ms,
        consumer_group_assignment_interval_ms=args.assignment_interval_ms,
    )
    deployment = start(
        1,
        str(work / "gc"),
        namespace="bench-rebalance",
        config=config,
        log_config=msgspec.structs.replace(log_config_for(config), fsync_policy="never"),
        wire=WireConfig(bootstrap_port=0, max_connections=4 * max(args.sizes) + 100),
    )
    rows = []
    try:
        deployment.wait_ready(60)
        bootstraps = {"kafka": broker.bootstrap, "gc": deployment.kafka}
        topics = {}
        for count in args.sizes:
            for server in SERVERS:
                topics[server, count] = f"rebalance-{count}"
                create_topic(bootstraps[server], topics[server, count], 10 * count)
        time.sleep(TOPIC_CATALOG_WAIT_S)
        for bootstrap in bootstraps.values():
            # Kafka creates its offsets topic on the first FindCoordinator: slow after thousands
            # of partitions were just created, so before any clock runs.
            asyncio.run(find_coordinator(bootstrap, "rebalance-warm-up", TOPIC_TIMEOUT_S))
        for count in args.sizes:
            repeats = 1 if count >= LARGE_GROUP else args.repeats
            for protocol in args.protocols:
                trials: dict[str, list[dict]] = {s: [] for s in SERVERS}
                for _ in range(repeats):
                    for server in SERVERS:  # the servers take turns, so drift hits both
                        got = asyncio.run(
                            trial(
                                bootstraps[server],
                                topics[server, count],
                                protocol,
                                count,
                                interval_ms,
                            )
                        )
                        trials[server].append(got)
                        print(server, protocol, count, got, flush=True)
                rows += [median_row(s, protocol, count, trials[s]) for s in SERVERS]
    finally:
        stop(deployment)
        broker.stop()
    add_ratios(rows)
    return stamp() | {
        "load_average_at_end": os.getloadavg()[0],
        "heartbeat_interval_ms": interval_ms,
        "assignment_interval_ms": args.assignment_interval_ms,
        "partitions_per_member": PARTITIONS_PER_MEMBER,
        "repeats": args.repeats,
        "rows": rows,
        "goals": goals(rows),
    }


def main(argv: list[str] | None = None) -> None:
    try:
        args = parse_args(argv)
    except (BenchError, ValueError) as e:
        print(f"bench/rebalance.py: {e}", file=sys.stderr)
        sys.exit(2)
    result = run(args)
    print_table(result["rows"])
    print(f"goals: {result['goals']}; load average at end: {result['load_average_at_end']:.2f}")
    os.makedirs(os.path.dirname(args.output) or ".", exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
