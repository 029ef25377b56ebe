"""Benchmark of the Ray runtime: commit throughput, rebalance time, kill-to-serving time.

Every figure is reported as a ratio to a baseline measured in the same run (the machine is
noisy):

* commits/s through one partition actor, several concurrent clients, against no-op calls
  (``ping``, echoing the same request) to the same actor: the Ray ceiling (goal >= 0.8);
* offsets/s with 100-partition commits, against no-op calls carrying the same request;
* rebalance time of groups of 10, 100, 1,000 members (coroutines in this process), as the time
  for every member to be Stable again after one more member joins, against one round of
  concurrent no-op calls by the same number of members;
* kill-to-serving time of a partition holding 10,000 groups / 1,000,000 offsets, against an
  idle partition's (goal: within 1 s more).

Run: ``.venv/bin/python bench/actors.py [--quick]``; writes bench/results/actors.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time

import ray

from groupcoord.actors import GroupMember, start, stop
from groupcoord.actors.bootstrap import ensure_ray
from groupcoord.coordinator import (
    CoordinatorConfig,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    Shard,
    partition_for,
)
from groupcoord.coordinator.records import OffsetCommitKey, OffsetCommitValue, Record
from groupcoord.storage import LogConfig, open_partition_log

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "actors.json")
CONFIG = CoordinatorConfig(group_min_session_timeout_ms=100, group_initial_rebalance_delay_ms=300)


async def _rate(call, clients: int, seconds: float) -> float:
    """Calls per second completed by ``clients`` coroutines calling back to back."""
    done = 0
    stop_at = time.perf_counter() + seconds

    async def client() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            await call()
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return done / (time.perf_counter() - started)


def commit_request(group: str, partitions: int, offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group, -1, "", [OffsetCommitRequestPartition("t", p, offset) for p in range(partitions)]
    )


def bench_commits(deployment, clients: int, seconds: float) -> list[dict]:
    (handle,) = deployment.partitions()
    rows = []
    for partitions in (1, 100):
        request = commit_request("bench-commits", partitions, 1)

        async def commit(request=request):
            response = await handle.handle.remote(request)
            assert response.partitions[0].error == 0, response

        async def noop(request=request):
            await handle.ping.remote(request)

        asyncio.run(_rate(noop, clients, 1.0))  # warm up
        # Alternate the two, best of three each, so drift in machine load hits both alike.
        ceiling = commits = 0.0
        for _ in range(3):
            ceiling = max(ceiling, asyncio.run(_rate(noop, clients, seconds / 3)))
            commits = max(commits, asyncio.run(_rate(commit, clients, seconds / 3)))
        rows.append(
            {
                "case": f"commit {partitions} partition(s), {clients} clients",
                "baseline_calls_per_s": round(ceiling),
                "commits_per_s": round(commits),
                "offsets_per_s": round(commits * partitions),
                "ratio_to_noop": round(commits / ceiling, 3),
            }
        )
    return rows


async def _rebalance(router, handle, members: int) -> dict:
    group = f"bench-rebalance-{members}"
    # Members learn of a rebalance from their next heartbeat (as in Kafka), so the interval
    # bounds the rebalance time; it grows with the group to keep heartbeats ~1,000/s at most.
    heartbeat_ms = max(250, members)
    options = dict(
        topic_partitions={"t": 64},
        session_timeout_ms=60_000,
        heartbeat_interval_ms=heartbeat_ms,
        rebalance_timeout_ms=120_000,
        request_timeout_ms=300_000,
    )
    crowd = [GroupMember(router, group, ["t"], **options) for _ in range(members)]
    for m in crowd:
        m.start()
    started = time.perf_counter()
    await asyncio.gather(*(m.wait_assigned(600) for m in crowd))
    first_s = time.perf_counter() - started
    generation = crowd[0].generation_id
    newcomer = GroupMember(router, group, ["t"], **options)
    started = time.perf_counter()
    newcomer.start()
    everyone = crowd + [newcomer]
    while not all(m.stable and m.generation_id > generation for m in everyone):
        await asyncio.sleep(0.01)
    rebalance_s = time.perf_counter() - started
    started = time.perf_counter()
    await asyncio.gather(*(handle.ping.remote(None) for _ in everyone))
    baseline_s = time.perf_counter() - started
    await asyncio.gather(*(m.close() for m in everyone))
    return {
        "members": members,
        "heartbeat_ms": heartbeat_ms,
        "first_join_s": round(first_s, 3),
        "rebalance_s": round(rebalance_s, 3),
        "baseline_round_s": round(baseline_s, 4),
        "ratio_to_one_round": round(rebalance_s / baseline_s, 1),
    }


def _populate(
    log_dir: str, partition: int, num_partitions: int, groups: int, offsets_per_group: int
) -> None:
    ids, n = [], 0
    while len(ids) < groups:  # group ids that hash to this partition
        if partition_for(f"g{n}", num_partitions) == partition:
            ids.append(f"g{n}")
        n += 1
    log = open_partition_log(os.path.join(log_dir, f"partition-{partition}"), LogConfig())
    log.load_into(Shard(partition, num_partitions, CONFIG))  # the log tracks state from here
    now = int(time.time() * 1000)
    value = OffsetCommitValue(42, -1, "", now, None)
    batch: list = []
    for group in ids:
        for p in range(offsets_per_group):
            batch.append(Record(OffsetCommitKey(group, "t", p), value))
        if len(batch) >= 50_000:
            log.append(batch)
            batch = []
    if batch:
        log.append(batch)
    log.snapshot()  # what a long-running partition would have
    log.close()


def _kill_to_serving(deployment, partition: int) -> float:
    handle = deployment.partitions()[partition]
    epoch = ray.get(handle.info.remote())["epoch"]
    started = time.perf_counter()
    ray.kill(handle, no_restart=False)
    while True:
        try:
            info = ray.get(handle.info.remote(), timeout=10)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            continue
        if info["state"] == "serving" and info["epoch"] > epoch:
            return time.perf_counter() - started
        time.sleep(0.01)


def bench_failover(groups: int, offsets_per_group: int, repeats: int) -> dict:
    log_dir = tempfile.mkdtemp(prefix="groupcoord-bench-")
    try:
        _populate(log_dir, 1, 2, groups, offsets_per_group)  # partition 0 stays idle
        deployment = start(2, log_dir, namespace="bench-failover", config=CONFIG)
        deployment.wait_ready(300)
        idle = min(_kill_to_serving(deployment, 0) for _ in range(repeats))
        loaded = min(_kill_to_serving(deployment, 1) for _ in range(repeats))
        infos = deployment.infos()
        stop(deployment)
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    return {
        "groups": groups,
        "offsets": groups * offsets_per_group,
        "idle_kill_to_serving_s": round(idle, 3),
        "loaded_kill_to_serving_s": round(loaded, 3),
        "extra_s": round(loaded - idle, 3),
        "ratio_to_idle": round(loaded / idle, 2),
        "loaded_partition_load_s": round(infos[1]["load_seconds"], 3),
        "goal_within_1s": loaded - idle <= 1.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, shorter runs")
    args = parser.parse_args()
    seconds = 2.0 if args.quick else 5.0
    sizes = (10, 100) if args.quick else (10, 100, 1000)
    ensure_ray(None, "groupcoord-bench", num_cpus=2)
    log_dir = tempfile.mkdtemp(prefix="groupcoord-bench-")
    results: dict = {"quick": args.quick}
    try:
        deployment = start(1, log_dir, namespace="bench", config=CONFIG)
        deployment.wait_ready(60)
        results["commits"] = [
            row for clients in (16, 64) for row in bench_commits(deployment, clients, seconds)
        ]
        _print("commit throughput (ratio to no-op calls to the same actor)", results["commits"])
        (handle,) = deployment.partitions()
        results["rebalance"] = [
            asyncio.run(_rebalance(deployment.router, handle, n)) for n in sizes
        ]
        _print(
            "rebalance after one more member joins (ratio to one round of no-op calls)",
            results["rebalance"],
        )
        stop(deployment)
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    groups, per_group = (1_000, 100) if args.quick else (10_000, 100)
    results["failover"] = bench_failover(groups, per_group, repeats=2 if args.quick else 3)
    _print("kill-to-serving (loaded partition vs idle partition)", [results["failover"]])
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {RESULTS}")
    ray.shutdown()


def _print(title: str, rows: list[dict]) -> None:
    columns = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in columns]
    print(f"\n{title}")
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(r[c]).ljust(w) for c, w in zip(columns, widths, strict=True)))


if __name__ == "__main__":
    main()
