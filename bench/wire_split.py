"""What a partition's thread spends per commit when network processes do its wire work.

With ``WireConfig.network_processes`` (actors/network_pool.py) the partition's thread keeps the
core's share of a commit: reading its channels' frames, ``PartitionRuntime.submit`` (the
Shard, the log's append, metrics) and writing the reply frames. On 16 cores that thread is
what limits one group's commit rate (bench/wire-findings.md, "Network processes"). This bench
times it alone, saturated: a real ``PartitionRuntime`` (fsync policy ``never``, no Ray) on a
uvloop thread (``tests.actors.kafka_inproc.WirePartition``), a member joined over raw Kafka wire,
then one network-pool channel over a socket pair whose other end is a blaster process standing
for the network processes: it keeps ``--window`` commits in flight (as many members committing
back to back), each of ``--offsets`` partitions, and checks every reply.

Measured over exactly the blasted commits: ``loop_us``, the loop thread's CPU per commit
(``time.thread_time`` on that thread, system time included), and ``process_us``, the serving
process's (the loop plus the log's and snapshot's threads). Baseline, same run: the same
commits through ``Shard.handle`` alone (bench/core.py's stable shard), the core's own cost.
Each figure is the least of ``--trials`` runs (other load only adds to it). ``--ray`` measures
every row again with the partition inside a Ray actor's process (a local Ray of its own), where
a partition actor runs beside Ray's own threads: ``x here`` is its loop thread's CPU a commit
over this process's, in the same run, and ``rate x here`` its commits/s over this process's.
``--idle-poll-us N`` measures every row again with the partition's loop polling N µs after each
turn with work (``WireConfig.idle_poll_us``), likewise compared. The rows with 1 and 4 commits
in flight are not saturated: there the loop sleeps between most turns, which is what polling
changes (bench/wire-findings.md, "Idle polling").

Run: ``.venv/bin/python bench/wire_split.py [--quick] [--ray] [--idle-poll-us N]``; prints a
table and writes bench/results/wire_split.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.core import stable_shard  # noqa: E402 — needs ROOT on the path
from bench.run_info import write_results  # noqa: E402
from bench.wire_raw import (  # noqa: E402
    RawConnection,
    RawMember,
    find_coordinator,
    join_alone,
    settle,
)
from groupcoord.actors.network_frames import REPLY, REQUEST, FrameReader, frame  # noqa: E402
from groupcoord.actors.network_pool import NetworkPool  # noqa: E402
from groupcoord.actors.wire_config import WireConfig  # noqa: E402
from groupcoord.coordinator import (  # noqa: E402
    Errors,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
)
from tests.actors.kafka_inproc import WirePartition  # noqa: E402

RESULTS = os.path.join(ROOT, "bench", "results", "wire_split.json")
TOPIC, PARTITIONS = "split", 64
# (commits in flight, partitions per commit, channels): bench/wire.py's 64- and 16-member
# commit rows and a commit of 64 partitions, over one channel; the 64-member row over 4
# (gc-net's network processes on 16 cores), the window split between them; 16 in flight
# over 4, fewer commits a turn of the partition's loop, which shows what a turn costs; and 1
# and 4 in flight, where the loop sleeps between most turns (what --idle-poll-us changes).
ROWS = ((64, 1, 1), (64, 1, 4), (16, 1, 4), (16, 4, 1), (16, 64, 1), (1, 1, 1), (4, 1, 1))
BLAST_TIMEOUT_S = 120


def commit(group: str, member: str, generation: int, n: int, offsets: int) -> OffsetCommitRequest:
    """The ``n``-th commit: ``offsets`` consecutive partitions from ``n``, offset ``n``."""
    return OffsetCommitRequest(
        group,
        generation,
        member,
        [OffsetCommitRequestPartition(TOPIC, (n + k) % PARTITIONS, n) for k in range(offsets)],
    )


def blast(args) -> None:
    """The blaster process: ``args.commits`` commits over the channel, ``args.window`` in
    flight; prints ``{"commits": n}`` (the parent times the blasters together)."""
    sock = socket.socket(fileno=args.blast)
    group, members, generation = args.group, args.member.split(","), args.generation
    frames = [
        frame(REQUEST, n, commit(group, members[n % len(members)], generation, n, args.offsets))
        for n in range(args.commits)
    ]
    reader = FrameReader(1 << 26)
    print("ready", flush=True)
    sys.stdin.readline()  # go
    sock.sendall(b"".join(frames[: args.window]))
    sent, answered = args.window, 0
    while answered < args.commits:
        data = sock.recv(1 << 20)
        if not data:
            raise SystemExit("the partition closed the channel")
        replies = reader.feed(data)
        for kind, _, response in replies:
            bad = [p.error for p in response.partitions if p.error is not Errors.NONE]
            if kind != REPLY or bad:
                raise SystemExit(f"commit failed: {kind} {bad[:1]}")
        answered += len(replies)
        more = frames[sent : sent + len(replies)]
        sent += len(more)
        if more:
            sock.sendall(b"".join(more))
    print(json.dumps({"commits": answered}))


def _on_loop(loop, fn):
    async def call():
        return fn()

    return asyncio.run_coroutine_threadsafe(call(), loop).result(30)


async def _attach(pool: NetworkPool, sock: socket.socket) -> None:
    pool.attach(sock)


def measure(partition: WirePartition, member: tuple, row: tuple, commits: int):
    """(loop thread CPU s, process CPU s, commits, seconds, appends) of one blast: ``row``'s window
    and commits split between its channels, each with a blaster of its own. ``member``:
    (group, its members' ids, generation)."""
    window, offsets, channels = row
    config = WireConfig(network_processes=channels)
    pool = NetworkPool(config, 0, 1, partition.runtime, change_topics=None)
    loop = partition.loop
    blasters = []
    lines = []
    try:
        for _ in range(channels):
            blasters.append(
                _blaster(pool, loop, member, window // channels, offsets, commits // channels)
            )
        if any(blaster.stdout.readline().strip() != "ready" for blaster in blasters):
            raise RuntimeError("a blaster did not start")
        loop_cpu = _on_loop(loop, time.thread_time)
        appends = partition.runtime.appends
        before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        for blaster in blasters:
            blaster.stdin.write("go\n")
            blaster.stdin.flush()
        lines = [blaster.stdout.readline() for blaster in blasters]
        seconds = time.perf_counter() - started
        loop_cpu = _on_loop(loop, time.thread_time) - loop_cpu
        appends = partition.runtime.appends - appends
        after = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        for blaster in blasters:
            blaster.wait(BLAST_TIMEOUT_S)
        asyncio.run_coroutine_threadsafe(pool.close(), loop).result(30)
    if any(b.returncode != 0 for b in blasters) or not all(lines):
        raise RuntimeError(f"a blaster failed (exit status {[b.returncode for b in blasters]})")
    results = [json.loads(line) for line in lines]
    process_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    done = sum(r["commits"] for r in results)
    return loop_cpu, process_cpu, done, seconds, appends


def _blaster(pool, loop, member: tuple, window: int, offsets: int, commits: int):
    """A blaster process at the other end of a new channel of ``pool``, waiting for a go."""
    mine, theirs = socket.socketpair()
    group, member_ids, generation = member
    blaster = subprocess.Popen(
        [
            sys.executable,
            os.path.abspath(__file__),
            f"--blast={theirs.fileno()}",
            f"--group={group}",
            f"--member={','.join(member_ids)}",
            f"--generation={generation}",
            f"--window={window}",
            f"--offsets={offsets}",
            f"--commits={commits}",
        ],
        pass_fds=(theirs.fileno(),),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    theirs.close()
    asyncio.run_coroutine_threadsafe(_attach(pool, mine), loop).result(30)
    return blaster


def shard_alone_us(window: int, offsets: int, commits: int) -> float:
    """µs per commit through ``Shard.handle`` alone: ``window`` members of a stable group,
    each committing ``offsets`` partitions in turn."""
    shard, members, now_ms = stable_shard(1, window)
    requests = [
        commit(group, member, generation, n, offsets)
        for n, (group, member, generation) in zip(
            range(commits), members * (commits // window + 1), strict=False
        )
    ]
    handle = shard.handle
    started = time.perf_counter()
    for n, request in enumerate(requests):
        handle(now_ms, n, request)
    return 1e6 * (time.perf_counter() - started) / commits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer commits and one trial")
    parser.add_argument("--trials", type=int, default=3, help="runs per row (default 3)")
    parser.add_argument(
        "--members",
        type=int,
        default=1,
        help="members of the group, committing in turn (default 1; 64: bench/wire.py's group)",
    )
    parser.add_argument(
        "--idle-poll-us",
        type=int,
        default=0,
        help="also measure every row with the partition's loop polling this long after each "
        "turn with work (WireConfig.idle_poll_us; x here: its figures over the sleeping loop's)",
    )
    parser.add_argument(
        "--ray",
        action="store_true",
        help="also measure every row with the partition inside a Ray actor (x here: its loop "
        "thread's CPU a commit over this process's)",
    )
    for name in ("blast", "generation", "window", "offsets", "commits"):  # the blaster's
        parser.add_argument(f"--{name}", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--member", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.blast is not None:
        blast(args)
        return
    trials = 1 if args.quick else args.trials
    if trials < 1 or not 1 <= args.members <= 1000:
        parser.error("--trials must be >= 1 and --members in [1, 1000]")
    commits = 5_000 if args.quick else 30_000
    print(
        f"{'where':<10} {'in flight':>9} {'partitions':>10} {'channels':>8} {'loop µs':>8} "
        f"{'process µs':>10} {'commits/s':>10} {'/append':>7} {'shard µs':>8} {'x shard':>8} "
        f"{'x here':>7} {'rate x here':>11}"
    )
    rows = run_rows(trials, commits, "here", args.members)
    for row in rows:
        row["shard_us"] = round(
            min(
                shard_alone_us(row["in_flight"], row["partitions_per_commit"], commits)
                for _ in range(trials)
            ),
            2,
        )
        row["loop_vs_shard"] = round(row["loop_us"] / row["shard_us"], 2)
        _print(row)
    others = []
    if args.idle_poll_us:
        where = f"poll {args.idle_poll_us}"
        others += run_rows(trials, commits, where, args.members, args.idle_poll_us)
    if args.ray:
        others += in_ray_actor(trials, commits, args.members)
    for row in others:
        here = next(r for r in rows if r["where"] == "here" and _key(r) == _key(row))
        row["loop_vs_here"] = round(row["loop_us"] / here["loop_us"], 2)
        row["rate_vs_here"] = round(row["commits_per_s"] / here["commits_per_s"], 2)
        rows.append(row)
        _print(row)
    write_results(
        RESULTS,
        {
            "commits_per_row": commits,
            "trials": trials,
            "load_average_1m": os.getloadavg()[0],
            "rows": rows,
        },
    )


async def _join(bootstrap: str, group: str, members: int) -> tuple[list[str], int]:
    """``members`` raw-wire members of ``group`` in one generation: (their ids, generation).
    Their commits keep their sessions (30 s) alive."""
    if members == 1:
        _, member_id, generation = await join_alone(bootstrap, group)
        return [member_id], generation
    coordinator = await find_coordinator(bootstrap, group)
    raw = [RawMember(await RawConnection.open(*coordinator), group) for _ in range(members)]
    try:
        generation = await settle(raw)
    finally:
        for one in raw:
            one.conn.close()
    return [one.member_id for one in raw], generation


def run_rows(
    trials: int, commits: int, where: str, members: int = 1, idle_poll_us: int = 0
) -> list[dict]:
    """Every row of ``ROWS``, with the partition in this process and ``members`` members
    committing in turn; ``where`` names it. ``idle_poll_us``: the partition's loop polls that
    long after each turn with work (``WireConfig.idle_poll_us``)."""
    rows = []
    with tempfile.TemporaryDirectory() as work:
        partition = WirePartition(
            os.path.join(work, "p0"), {TOPIC: PARTITIONS}, loop="uvloop", idle_poll_us=idle_poll_us
        )
        bootstrap = partition.start()
        try:
            group = f"split-{time.monotonic_ns()}"
            member_ids, generation = asyncio.run(_join(bootstrap, group, members))
            member = (group, member_ids, generation)
            for window, offsets, channels in ROWS:
                runs = [
                    measure(partition, member, (window, offsets, channels), commits)
                    for _ in range(trials)
                ]
                rows.append(
                    {
                        "where": where,
                        "members": members,
                        "in_flight": window,
                        "partitions_per_commit": offsets,
                        "channels": channels,
                        "loop_us": round(min(1e6 * r[0] / r[2] for r in runs), 2),
                        "process_us": round(min(1e6 * r[1] / r[2] for r in runs), 2),
                        "commits_per_s": round(sorted(r[2] / r[3] for r in runs)[len(runs) // 2]),
                        "commits_per_append": round(
                            sum(r[2] for r in runs) / sum(r[4] for r in runs), 1
                        ),
                    }
                )
        finally:
            partition.stop()
    return rows


def in_ray_actor(trials: int, commits: int, members: int) -> list[dict]:
    """``run_rows`` inside a Ray actor's process (a local Ray of its own): the partition has
    Ray's own threads beside it there, as a partition actor does."""
    import ray  # noqa: PLC0415 — only for --ray

    from groupcoord.actors.bootstrap import ensure_ray  # noqa: PLC0415

    ensure_ray(None, "bench-wire-split", 2)
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    remote = ray.remote(num_cpus=0, runtime_env={"env_vars": {"PYTHONPATH": path}})(_InActor)
    actor = remote.remote()  # type: ignore[attr-defined]
    try:
        return ray.get(actor.run.remote(trials, commits, members))
    finally:
        ray.shutdown()


class _InActor:
    def run(self, trials: int, commits: int, members: int) -> list[dict]:
        return run_rows(trials, commits, "ray actor", members)


def _key(row: dict) -> tuple:
    return row["in_flight"], row["partitions_per_commit"], row["channels"]


def _print(row: dict) -> None:
    shard = f"{row['shard_us']:>8.1f} {row['loop_vs_shard']:>7.2f}x" if "shard_us" in row else ""
    versus = f"{row['loop_vs_here']:>6.2f}x" if "loop_vs_here" in row else ""
    rate = f"{row['rate_vs_here']:>10.2f}x" if "rate_vs_here" in row else ""
    print(
        f"{row['where']:<10} {row['in_flight']:>9} {row['partitions_per_commit']:>10} "
        f"{row['channels']:>8} {row['loop_us']:>8.1f} {row['process_us']:>10.1f} "
        f"{row['commits_per_s']:>10,} {row['commits_per_append']:>7.1f} {shard or ' ' * 17} "
        f"{versus:>7} {rate}",
        flush=True,
    )


if __name__ == "__main__":
    main()
