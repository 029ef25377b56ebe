"""Benchmark of groupcoord's Kafka listeners against a real Apache Kafka broker, same run.

The same client library (librdkafka, through confluent-kafka) does the same work against:

* ``kafka``: a real Kafka 4.x broker (KRaft, one node; the jars ``make kafka-libs`` fetches),
  whose group coordinator acknowledges a commit once it is in its log, before any fsync;
* ``gc-never``: groupcoord's wire path at the same durability (fsync policy ``never``);
* ``gc-always``: groupcoord's wire path with its default, an fsync before every answer;
* ``gc-net``: ``gc-never`` with the partition's connections served by ``--network-processes``
  processes of its own (``WireConfig.network_processes``; default 3, Kafka's
  ``num.network.threads``), leaving the partition's thread the group and the log;
* ``gc-poll``: ``gc-never`` with the partition's loop polling ``--idle-poll-us`` (default
  1,000) after each turn with work rather than sleeping (``WireConfig.idle_poll_us``);
* ``gc-net-poll``: ``gc-net`` and ``gc-poll`` together (the network processes poll too), for
  machines with cores to spare for polling (on 2 cores the processes' polling takes the
  clients' share);
* ``gc-ray``: groupcoord's Ray-handle path (``GroupMember`` over actor handles), fsync ``never``.

Rows, each a ratio to the real broker's figure measured minutes apart in this run:

* ``commits``: commits/s of one group with 1, 16 and 64 members, each committing its partitions
  synchronously, back to back, for ``--seconds``, the median of ``--commit-trials`` groups
  (default ``TRIALS["commits"]``), each group also set against Kafka's group of the same turn
  (``paired_trials``: the table's ``ahead`` column, how many were at least as fast); with it
  the join-to-stable time, and the CPU the librdkafka clients (bench/wire_members.py's
  processes) use while the group is stable and idle, in cores;
* ``join``: join-to-stable of 10 and 100 members subscribing at once (until every partition
  has exactly one owner), the mean of ``TRIALS["join"]`` groups (``summary_run`` says why);
* ``rejoin``: rejoin-to-stable of a settled group of 10 and 100 raw-wire members
  (bench/wire_raw.py's ``rebalance_times``) that all rejoin at once with new subscription
  metadata, until each has its SyncGroup answer: the coordinator's own join and sync work, with
  no client timer in it (the ``join`` rows wait on librdkafka's: the heartbeat that tells a
  member of a rebalance, the rejoin it schedules, so that either server takes 1.1 s or 3.1 s
  by a race of the members' arrivals). The median of ``REJOINS_PER_GROUP`` rejoins in each of
  ``TRIALS["rejoin"]`` groups; wire targets only;
* ``heartbeats``: heartbeats/s of one member sent back to back on 8 connections by a raw-wire
  client (bench/wire_raw.py; librdkafka heartbeats only once per interval), or, for
  ``gc-ray``, by 8 coroutines through the member's own Ray channel.

Each commit row also records ``cpu_cores`` while it commits: the CPU of this process and of
every process it started (the partition's Ray worker, raylet, GCS, the Kafka JVM), per process
and for each one's busiest threads (bench/proc_cpu.py; from the kernel's tick accounting, so
within a few hundredths of a core), and the time those threads waited for a CPU. The table
shows the server's share: ``srv cpu``, the server process's cores, ``srv wait``, the cores
its busiest threads spent runnable but not running, and ``us/commit``, the server's CPU per
commit (``cpu_us_per_commit``, with its ratio to Kafka's: below 1 favours groupcoord), which
moves less than the rates with how the cores happen to be shared.

The members run in a few processes of their own (bench/wire_members.py), in a session of their
own, as another application's would be. On this machine's two cores they compete with the
server under test, and Linux shares the CPUs fairly between sessions first (autogroup
scheduling, on by default) and only then between threads. ``--one-session`` keeps them in
this process's session, with the servers, where the ~200 client threads and the server's
threads share the cores thread by thread: a server with a dozen busy threads (Kafka's broker)
then gets more of them than one with a single busy thread (groupcoord's partition), which
moves the commit rows more than either server's own cost does. ``--pin`` takes the sharing out
altogether: the servers on half the CPUs, the clients on the other half, as if on a machine
of their own.

Run: ``.venv/bin/python bench/wire.py [--quick] [--pin | --one-session]``; writes
bench/results/wire.json (wire-pinned.json with ``--pin``, wire-one-session.json with
``--one-session``). ``--kinds``, ``--targets`` and ``--members`` run only some rows (e.g.
``--kinds commits --members 16``) and write nothing unless given ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from confluent_kafka.admin import AdminClient, NewTopic

from groupcoord.actors import GroupMember, WireConfig, start, stop
from groupcoord.actors.bootstrap import ensure_ray, log_config_for
from groupcoord.coordinator import CoordinatorConfig, Errors, HeartbeatRequest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.run_info import write_results  # noqa: E402 — needs ROOT on the path
from bench.wire_members import Members  # noqa: E402
from bench.wire_raw import heartbeat_rate, rebalance_times  # noqa: E402
from tests.kafka.javakafka import benchmark_broker  # noqa: E402 — the tests' broker harness

T = TypeVar("T")
RESULTS = os.path.join(ROOT, "bench", "results", "wire.json")
CONFIG = CoordinatorConfig(group_initial_rebalance_delay_ms=0)
PARTITIONS = 64
STABLE_TIMEOUT_S = 120.0
IDLE_CPU_S = 2.0  # how long the clients' idle CPU is measured
HEARTBEAT_CONNECTIONS = 8
WIRE_TARGETS = ("kafka", "gc-never", "gc-always", "gc-net", "gc-poll", "gc-net-poll")
NETWORK_PROCESSES = 3  # gc-net's, as Kafka's num.network.threads default
# gc-poll's. Seastar's --idle-poll-time-us is 200 by default, but a librdkafka member here
# sends its next commit 150-500 µs after the partition's turn that answered the last one (more
# than 200 for 13-15 % of its commits), so at 200 the partition slept before those: 4 of 10
# trials at least Kafka's rate at 1 member, 7 of 10 at 1,000, with Kafka warmed by 16 members
# only (bench/wire-findings.md, "Idle polling long enough for a member's turn-around").
IDLE_POLL_US = 1_000
TRIALS = {"commits": 3, "join": 9, "rejoin": 3}  # groups per target behind a row (summary_run)
REJOINS_PER_GROUP = 10
# The unreported first groups: (members, commit seconds). Kafka's rate climbs while its JIT
# compiles the commit path: 5,052, 6,790 and 8,103/s in three back-to-back 3 s rows of 16
# members here. One member commits 64 partitions a request, a shape of its own: after the
# 16-member group alone, Kafka's 1-member trials still climbed from 1,173 to 2,197/s over ten.
WARMUPS = ((16, 8.0), (1, 4.0))
SUMMARY_OF = {  # kind -> (the figure a row summarises, where its trials are kept)
    "commits": ("commits_per_s", "commit_trials_per_s"),
    "join": ("join_to_stable_s", "join_trials_s"),
    "rejoin": ("rejoin_s", "rejoin_trials_s"),
}
KINDS = ("commits", "join", "rejoin", "heartbeats")
# groupcoord's server processes, as bench/proc_cpu.py labels them: the partition's, and its
# network processes' (gc-net, gc-net-poll)
SERVER = ("ray::PartitionActor", "python:network_process")


def _create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)


CLIENT_CPUS: set[int] | None = None  # --pin: the CPUs the clients run on
CLIENT_SESSION = True  # the member processes in a session of their own (not --one-session)


def as_client(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work``, a client in this process (the raw-wire heartbeats, the Ray-handle
    members), with this thread on the clients' CPUs under --pin."""
    if CLIENT_CPUS is None:
        return asyncio.run(work)
    servers = os.sched_getaffinity(0)
    os.sched_setaffinity(0, CLIENT_CPUS)  # this thread only
    try:
        return asyncio.run(work)
    finally:
        os.sched_setaffinity(0, servers)


def pin_cpus() -> None:
    """--pin: this process and all it starts (the Kafka JVM, Ray and its workers) on the first
    half of this machine's CPUs, the clients on the other half (the member processes, and this
    process's main thread while it is a client: ``as_client``), as if the clients ran on a
    machine of their own: neither side's threads wait behind the other's. Ray's own threads in
    this process stay with the servers."""
    global CLIENT_CPUS
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("--pin needs at least 2 CPUs")
    half = len(cpus) // 2
    os.sched_setaffinity(0, set(cpus[:half]))
    CLIENT_CPUS = set(cpus[half:])


def wire_row(bootstrap: str, label: str, kind: str, count: int, seconds: float) -> dict:
    """One group of ``count`` librdkafka members: join-to-stable, then (``commits`` rows) the
    clients' idle CPU and the commit rate."""
    topic = f"bench-{label}-{count}-{time.monotonic_ns()}"
    _create_topic(bootstrap, topic)
    members = Members(
        bootstrap, f"g-{topic}", topic, count, PARTITIONS, CLIENT_CPUS, CLIENT_SESSION
    )
    row = {"kind": kind, "target": label, "members": count}
    try:
        row["join_to_stable_s"] = round(members.wait_stable(STABLE_TIMEOUT_S), 3)
        if kind == "commits":
            row["idle_client_cpu_cores"] = round(members.idle_cpu_cores(IDLE_CPU_S), 3)
            rate, row["cpu_cores"] = members.commit_rate(seconds)
            row["commits_per_s"] = round(rate, 1)
            row.update(server_cpu(row["cpu_cores"], ("java",) if label == "kafka" else SERVER))
            row["cpu_us_per_commit"] = cpu_per_commit_us(row["server_cores"], rate)
    finally:
        members.close()
    return row


def rejoin_row(bootstrap: str, label: str, count: int) -> dict:
    """One settled group of ``count`` raw-wire members rejoining ``REJOINS_PER_GROUP`` times."""
    group = f"rejoin-{label}-{count}-{time.monotonic_ns()}"
    times = as_client(rebalance_times(bootstrap, group, count, REJOINS_PER_GROUP))
    return {
        "kind": "rejoin",
        "target": label,
        "members": count,
        "rejoin_s": round(statistics.median(times), 5),
        "rejoin_trials_s": [round(t, 5) for t in times],
    }


def server_cpu(cpu_cores: dict, server: tuple[str, ...]) -> dict:
    """The server's CPU while its row committed, in cores: ``server_cores`` for its processes
    (``server``: their labels in bench/proc_cpu.py), ``server_waiting_cores`` for the time
    their busiest threads were runnable but had no CPU (on shared cores, lost to the
    clients)."""
    waiting = [
        cores
        for process, threads in cpu_cores["waiting"].items()
        if process.rsplit("/", 1)[0] in server
        for cores in threads.values()
    ]
    processes = cpu_cores["processes"]
    return {
        "server_cores": round(sum(processes.get(label, 0.0) for label in server), 3),
        "server_waiting_cores": round(sum(waiting), 3),
    }


def cpu_per_commit_us(server_cores: float, commits_per_s: float) -> float | None:
    """The server's CPU per commit in µs (None without commits): on cores the clients share,
    the server that spends less per commit gets more commits out of its share of them."""
    return round(server_cores / commits_per_s * 1e6, 1) if commits_per_s > 0 else None


async def _ray_group(router, count: int) -> tuple[list[GroupMember], float]:
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
    return members, time.perf_counter() - started


async def _ray_row(router, kind: str, count: int, seconds: float) -> dict:
    members, join_s = await _ray_group(router, count)
    row = {"kind": kind, "target": "gc-ray", "members": count, "join_to_stable_s": round(join_s, 3)}
    stop_at = time.perf_counter() + seconds
    done = 0

    async def commit_loop(m: GroupMember) -> None:
        nonlocal done
        offset = 0
        while time.perf_counter() < stop_at:
            offset += 1
            await m.commit({tp: offset for tp in m.assignment})
            done += 1

    async def heartbeat_loop(m: GroupMember) -> None:
        nonlocal done
        request = HeartbeatRequest(m.group_id, m.generation_id, m.member_id)
        while time.perf_counter() < stop_at:
            answer = await m.channel.call(request)
            if answer.error != Errors.NONE:
                raise RuntimeError(f"heartbeat: {answer.error!r}")
            done += 1

    began = time.perf_counter()
    if kind == "commits":
        await asyncio.gather(*(commit_loop(m) for m in members))
        row["commits_per_s"] = round(done / (time.perf_counter() - began), 1)
    elif kind == "heartbeats":
        await asyncio.gather(*(heartbeat_loop(members[0]) for _ in range(HEARTBEAT_CONNECTIONS)))
        row["heartbeats_per_s"] = round(done / (time.perf_counter() - began), 1)
    for m in members:
        await m.close()
    return row


def summary_run(runs: list[dict]) -> dict:
    """One row for a target's trials, with every trial's figure beside it (one sample says
    little). Commits: the trial with the median rate, its CPU figures with it (a rate moves by
    ±15 % with this machine's load). Joins: the mean time, because a join's time is a race
    with two outcomes for either server (members whose JoinGroup lands after a generation
    completed wait about a second for librdkafka's rejoin, or three for the others' next
    heartbeat), and the median of a few trials jumps between them (1.1 s or 3.1 s for the
    same server in two runs); the mean moves with how often each comes. Rejoins: the median of
    every group's rejoins together."""
    if len(runs) == 1:
        return runs[0]
    measure, trials = SUMMARY_OF[runs[0]["kind"]]
    if runs[0]["kind"] == "rejoin":
        times = [t for r in runs for t in r[trials]]
        return runs[0] | {measure: round(statistics.median(times), 5), trials: times}
    figures = [r[measure] for r in runs]
    if runs[0]["kind"] == "join":
        return runs[0] | {measure: round(statistics.fmean(figures), 3), trials: figures}
    ordered = sorted(runs, key=lambda r: r[measure])
    return ordered[len(ordered) // 2] | {trials: figures}


RATIOS = {  # measure -> its ratio's name; time ratios < 1 and rate ratios > 1 favour groupcoord
    "commits_per_s": "commits_vs_kafka",
    "join_to_stable_s": "join_vs_kafka",
    "rejoin_s": "rejoin_vs_kafka",
    "heartbeats_per_s": "heartbeats_vs_kafka",
    "idle_client_cpu_cores": "idle_cpu_vs_kafka",
    "cpu_us_per_commit": "cpu_per_commit_vs_kafka",  # below 1 favours groupcoord
}


def add_ratios(rows: list[dict]) -> None:
    """Each measure as a ratio to Kafka's in the same kind and group size; gc-never commits
    and heartbeats also as a ratio to the Ray-handle path's (wire / Ray). A commit row's
    trials also pair with Kafka's, trial by trial (``paired_trials``)."""
    by_key = {(r["kind"], r["target"], r["members"]): r for r in rows}
    for r in rows:
        kafka = by_key.get((r["kind"], "kafka", r["members"]))
        for measure, ratio in RATIOS.items():
            if kafka and r.get(measure) is not None and kafka.get(measure):
                r[ratio] = round(r[measure] / kafka[measure], 2)
        if kafka and r is not kafka and r["kind"] == "commits":
            r.update(paired_trials(r.get("commit_trials_per_s"), kafka.get("commit_trials_per_s")))
        ray = by_key.get((r["kind"], "gc-ray", r["members"]))
        if r["target"] == "gc-never" and ray:
            for measure in ("commits_per_s", "heartbeats_per_s"):
                if r.get(measure) and ray.get(measure):
                    r["wire_vs_ray"] = round(r[measure] / ray[measure], 2)


def paired_trials(mine: list[float] | None, kafka: list[float] | None) -> dict:
    """Trial i of a target against Kafka's trial i: the targets take turns trial by trial, so
    the two ran seconds apart, and the load that drifts over a run moves both. Each pair's
    ratio (``commit_trials_vs_kafka``), and in how many the target was at least as fast
    (``trials_ahead``): the median trial alone says which server was ahead in the middle
    trial, not how often either was. Empty unless both ran the same number of trials."""
    if not mine or not kafka or len(mine) != len(kafka) or not all(kafka):
        return {}
    ratios = [round(m / k, 2) for m, k in zip(mine, kafka, strict=True)]
    return {
        "commit_trials_vs_kafka": ratios,
        "trials_ahead": sum(m >= k for m, k in zip(mine, kafka, strict=True)),
    }


def print_table(rows: list[dict]) -> None:
    print(
        f"\n{'kind':<10} {'target':<11} {'members':>7} {'rate/s':>9} {'x kafka':>8} "
        f"{'time s':>7} {'x kafka':>8} {'idle cpu':>8} {'wire/ray':>8} {'srv cpu':>8} "
        f"{'srv wait':>8} {'us/commit':>9} {'x kafka':>8} {'ahead':>6}"
    )
    for r in rows:
        rate = r.get("commits_per_s", r.get("heartbeats_per_s"))
        rate_ratio = r.get("commits_vs_kafka", r.get("heartbeats_vs_kafka"))
        time_s = r.get("join_to_stable_s", r.get("rejoin_s"))
        time_ratio = r.get("join_vs_kafka", r.get("rejoin_vs_kafka"))
        cells = [
            f"{rate:>9.0f}" if rate is not None else f"{'':>9}",
            f"{rate_ratio:>8.2f}" if rate_ratio is not None else f"{'':>8}",
            f"{time_s:>7.{2 if time_s >= 0.1 else 4}f}" if time_s is not None else f"{'':>7}",
            f"{time_ratio:>8.2f}" if time_ratio is not None else f"{'':>8}",
            f"{r['idle_client_cpu_cores']:>8.3f}" if "idle_client_cpu_cores" in r else f"{'':>8}",
            f"{r['wire_vs_ray']:>8.2f}" if "wire_vs_ray" in r else f"{'':>8}",
            f"{r['server_cores']:>8.2f}" if "server_cores" in r else f"{'':>8}",
            f"{r['server_waiting_cores']:>8.2f}" if "server_waiting_cores" in r else f"{'':>8}",
            f"{r['cpu_us_per_commit']:>9.1f}" if r.get("cpu_us_per_commit") else f"{'':>9}",
            f"{r['cpu_per_commit_vs_kafka']:>8.2f}"
            if "cpu_per_commit_vs_kafka" in r
            else f"{'':>8}",
            f"{r['trials_ahead']:>3}/{len(r['commit_trials_vs_kafka']):<2}"
            if "trials_ahead" in r
            else f"{'':>6}",
        ]
        print(f"{r['kind']:<10} {r['target']:<11} {r['members']:>7} " + " ".join(cells))
    paired = [r for r in rows if "commit_trials_vs_kafka" in r]
    if paired:
        print("\ncommit trials ÷ Kafka's trial beside each (ahead: at least as fast):")
    for r in paired:
        ratios = " ".join(f"{x:.2f}" for x in r["commit_trials_vs_kafka"])
        print(f"  {r['target']:<11} {r['members']:>3} members: {ratios}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="1 s per row, one trial each, fewer members"
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="commit time per row")
    parser.add_argument(
        "--kinds",
        default=",".join(KINDS),
        help=f"comma-separated rows to run ({', '.join(KINDS)}); not all: nothing written",
    )
    parser.add_argument(
        "--targets",
        default=",".join((*WIRE_TARGETS, "gc-ray")),
        help="comma-separated targets (kafka, gc-never, gc-always, gc-net, gc-poll, "
        "gc-net-poll, gc-ray); "
        "not all: nothing written",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="servers on half the CPUs, clients on the other half (writes wire-pinned.json)",
    )
    parser.add_argument(
        "--one-session",
        action="store_true",
        help="the member processes in this process's session, with the servers (writes "
        "wire-one-session.json)",
    )
    parser.add_argument(
        "--network-processes",
        type=int,
        default=NETWORK_PROCESSES,
        help=f"gc-net's and gc-net-poll's network processes (default {NETWORK_PROCESSES})",
    )
    parser.add_argument(
        "--idle-poll-us",
        type=int,
        default=IDLE_POLL_US,
        help=f"gc-poll's and gc-net-poll's WireConfig.idle_poll_us (default {IDLE_POLL_US})",
    )
    parser.add_argument(
        "--commit-trials",
        type=int,
        default=TRIALS["commits"],
        help=f"groups per target behind each commit row (default {TRIALS['commits']}); each "
        "is also compared with Kafka's group beside it",
    )
    parser.add_argument(
        "--out", help="write the results here (a run of only some rows writes only with it)"
    )
    parser.add_argument(
        "--members", help="comma-separated group sizes of the commit rows (then nothing written)"
    )
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    targets = args.targets.split(",")
    if not set(kinds) <= set(KINDS) or not set(targets) <= {
        *WIRE_TARGETS,
        "gc-ray",
    }:
        parser.error("unknown kind or target")
    partial = (
        len(set(kinds)) < len(KINDS)
        or len(set(targets)) < len(WIRE_TARGETS) + 1
        or bool(args.members)
    )
    wire_targets = [t for t in WIRE_TARGETS if t in targets]
    seconds = 1.0 if args.quick else args.seconds
    commit_sizes = [1, 16] if args.quick else [1, 16, 64]
    if args.members:
        commit_sizes = [int(n) for n in args.members.split(",")]
    join_sizes = [10] if args.quick else [10, 100]
    if args.commit_trials < 1:
        parser.error("--commit-trials must be at least 1")
    if args.pin and args.one_session:
        parser.error("--pin and --one-session are different runs: choose one")
    if "gc-ray" in targets and "gc-never" not in wire_targets:
        parser.error("gc-ray runs on gc-never's deployment: name both")
    if args.pin:
        pin_cpus()
    global CLIENT_SESSION
    CLIENT_SESSION = not args.one_session
    work = Path(tempfile.mkdtemp(prefix="groupcoord-bench-wire-"))
    broker = benchmark_broker(work / "kafka")
    (work / "kafka").mkdir()
    broker.start()
    ensure_ray(None, "bench-wire", 2)
    # Storage's defaults sized for CONFIG's largest record, acknowledging before any fsync.
    unsynced = msgspec.structs.replace(log_config_for(CONFIG), fsync_policy="never")
    setups = {  # target -> (its log's config, its listeners' config)
        "gc-never": (unsynced, WireConfig(bootstrap_port=0)),
        "gc-always": (None, WireConfig(bootstrap_port=0)),
        "gc-net": (
            unsynced,
            WireConfig(bootstrap_port=0, network_processes=args.network_processes),
        ),
        "gc-poll": (unsynced, WireConfig(bootstrap_port=0, idle_poll_us=args.idle_poll_us)),
        "gc-net-poll": (
            unsynced,
            WireConfig(
                bootstrap_port=0,
                network_processes=args.network_processes,
                idle_poll_us=args.idle_poll_us,
            ),
        ),
    }
    deployments = {
        label: start(
            1,
            str(work / label),
            namespace=f"bench-{label}",
            config=CONFIG,
            log_config=setups[label][0],
            wire=setups[label][1],
        )
        for label in wire_targets
        if label != "kafka"
    }
    for d in deployments.values():
        d.wait_ready(60)
    bootstraps = {label: d.kafka for label, d in deployments.items()}
    bootstraps["kafka"] = broker.bootstrap
    plan = [("commits", n) for n in commit_sizes if "commits" in kinds]
    plan += [("join", n) for n in join_sizes if "join" in kinds]
    plan += [("rejoin", n) for n in join_sizes if "rejoin" in kinds]
    ray = "gc-ray" in targets
    rows = []
    try:
        # A group of each first, not reported: Kafka creates its offsets topic on the first
        # group request and its JIT compiles the commit path (a broker in service has), and
        # every target loads its code paths.
        for label in wire_targets:
            for members, warmup_s in WARMUPS:
                wire_row(bootstraps[label], label, "commits", members, warmup_s)
            if "rejoin" in kinds:
                rejoin_row(bootstraps[label], label, 10)
        if ray:
            as_client(_ray_row(deployments["gc-never"].router, "commits", 1, 0.2))
        for kind, count in plan:
            # The targets take turns, trial by trial, so load drift hits them alike.
            runs: dict[str, list[dict]] = {label: [] for label in (*wire_targets, "gc-ray")}
            trials = args.commit_trials if kind == "commits" else TRIALS[kind]
            for _ in range(1 if args.quick else trials):
                for label in wire_targets:
                    if kind == "rejoin":
                        runs[label].append(rejoin_row(bootstraps[label], label, count))
                    else:
                        runs[label].append(wire_row(bootstraps[label], label, kind, count, seconds))
                if ray and kind != "rejoin":
                    ray_row = _ray_row(deployments["gc-never"].router, kind, count, seconds)
                    runs["gc-ray"].append(as_client(ray_row))
            for label_runs in runs.values():
                if label_runs:
                    rows.append(summary_run(label_runs))
                    print(rows[-1], flush=True)
        for label in wire_targets if "heartbeats" in kinds else ():
            group = f"hb-{label}-{time.monotonic_ns()}"
            rate = as_client(
                heartbeat_rate(bootstraps[label], group, HEARTBEAT_CONNECTIONS, seconds)
            )
            rows.append(
                {"kind": "heartbeats", "target": label, "members": 1, "heartbeats_per_s": rate}
            )
            print(rows[-1], flush=True)
        if ray and "heartbeats" in kinds:
            ray_row = _ray_row(deployments["gc-never"].router, "heartbeats", 1, seconds)
            rows.append(as_client(ray_row))
            print(rows[-1], flush=True)
    finally:
        for d in deployments.values():
            stop(d)
        broker.stop()
    for r in rows:
        if "heartbeats_per_s" in r:
            r["heartbeats_per_s"] = round(r["heartbeats_per_s"], 1)
    add_ratios(rows)
    print_table(rows)
    if partial and not args.out:
        return
    results = RESULTS
    if args.pin or args.one_session:
        results = RESULTS.replace(".json", "-pinned.json" if args.pin else "-one-session.json")
    results = args.out or results
    write_results(
        results,
        {
            "load_average_at_end": os.getloadavg()[0],
            "quick": args.quick,
            "pinned": args.pin,
            "clients_in_own_session": CLIENT_SESSION,
            "seconds_per_row": seconds,
            "network_processes": args.network_processes,
            "idle_poll_us": args.idle_poll_us,
            "commit_trials": args.commit_trials,
            "kafka_jvm": " ".join(broker.jvm),
            "rows": rows,
        },
    )


if __name__ == "__main__":
    main()
