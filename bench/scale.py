"""Benchmark of groupcoord on a multi-node Ray cluster (``ray.cluster_utils.Cluster``: real
raylets, object stores and worker processes, all on this machine).

* **Throughput against partitions and nodes**: commits/s (simple-group OffsetCommits) and
  heartbeats/s (members of joined groups) from concurrent clients spread evenly over the
  partitions, with 1, 2, 4, 8 partitions, on 1 node and on 3 nodes; each figure as a ratio to
  one partition on the same cluster, measured in the same run.
* **Node-loss-to-serving**: a worker node is killed (raylet and workers at once); the time
  until its partition serves again from a survivor, for an idle partition and for one holding
  ``--groups`` groups x 100 offsets, with Ray's default node health check and with the tuned one
  the tests use (tests/multinode/nodes.py); the difference is Ray's failure detection.

Run: ``.venv/bin/python bench/scale.py [--quick]``; writes bench/results/scale.json.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime

import ray
from ray.cluster_utils import Cluster

from groupcoord.actors import GroupMember, start, stop
from groupcoord.coordinator import HeartbeatRequest, partition_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.actors import CONFIG, _populate, _print, _rate, commit_request  # noqa: E402
from tests.multinode.nodes import HEALTH_CHECK_FAST, NODE_OPTIONS, top_up  # noqa: E402

RESULTS = os.path.join(ROOT, "bench", "results", "scale.json")
CLIENTS = 32


def cluster_of(nodes: int, system_config: dict | None = None) -> Cluster:
    head = {**NODE_OPTIONS, "include_dashboard": False, "num_cpus": 2}
    if system_config:
        head["_system_config"] = system_config
    try:
        cluster = Cluster(initialize_head=True, head_node_args=head)
    except Exception as exc:  # Ray waits 30 s for a node to register: a loaded machine misses it
        print(f"cluster start failed ({exc}); trying once more", file=sys.stderr)
        cluster = Cluster(initialize_head=True, head_node_args=head)
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    top_up(cluster, nodes)
    return cluster


def close(cluster: Cluster) -> None:
    ray.shutdown()
    cluster.shutdown()


def groups_for(num_partitions: int, prefix: str) -> list[str]:
    chosen: dict[int, str] = {}
    for i in itertools.count():
        chosen.setdefault(partition_for(f"{prefix}{i}", num_partitions), f"{prefix}{i}")
        if len(chosen) == num_partitions:
            return [chosen[p] for p in range(num_partitions)]
    raise AssertionError("unreachable")


async def _heartbeat_rate(deployment, groups: list[str], seconds: float) -> float:
    members = [
        GroupMember(
            deployment.router, g, ["t"], topic_partitions={"t": 4}, session_timeout_ms=30_000
        )
        for g in groups
    ]
    for m in members:
        m.start()
    await asyncio.gather(*(m.wait_assigned(timeout_s=120) for m in members))
    handles = deployment.partitions()
    calls = [
        (handles[n], HeartbeatRequest(m.group_id, m.generation_id, m.member_id))
        for n, m in enumerate(members)
    ]
    turn = itertools.count()

    async def beat():
        handle, request = calls[next(turn) % len(calls)]
        response = await handle.handle.remote(request)
        assert response.error == 0, response

    rate = await _rate(beat, CLIENTS, seconds)
    for m in members:
        await m.close()
    return rate


def bench_throughput(nodes: int, partitions_list: list[int], seconds: float) -> list[dict]:
    cluster = cluster_of(nodes)
    rows = []
    try:
        for partitions in partitions_list:
            log_dir = tempfile.mkdtemp(prefix="groupcoord-scale-")
            deployment = start(partitions, log_dir, namespace=f"scale-{partitions}", config=CONFIG)
            infos = deployment.wait_ready(300)
            handles = deployment.partitions()
            requests = [
                (handles[n], commit_request(g, 1, 1))
                for n, g in enumerate(groups_for(partitions, "c"))
            ]
            turn = itertools.count()

            async def commit(requests=requests, turn=turn):
                handle, request = requests[next(turn) % len(requests)]
                response = await handle.handle.remote(request)
                assert response.partitions[0].error == 0, response

            asyncio.run(_rate(commit, CLIENTS, 1.0))  # warm up
            commits = asyncio.run(_rate(commit, CLIENTS, seconds))
            beats = asyncio.run(_heartbeat_rate(deployment, groups_for(partitions, "h"), seconds))
            rows.append(
                {
                    "nodes": nodes,
                    "partitions": partitions,
                    "nodes_used": len({i["node"] for i in infos}),
                    "commits_per_s": round(commits),
                    "heartbeats_per_s": round(beats),
                }
            )
            stop(deployment)
            shutil.rmtree(log_dir, ignore_errors=True)
    finally:
        close(cluster)
    one = rows[0]
    for row in rows:
        row["commits_ratio_to_1"] = round(row["commits_per_s"] / one["commits_per_s"], 2)
        row["heartbeats_ratio_to_1"] = round(row["heartbeats_per_s"] / one["heartbeats_per_s"], 2)
    return rows


def _node_loss_to_serving(cluster, deployment, partition: int) -> float:
    infos = deployment.infos()
    node_id, epoch = infos[partition]["node"], infos[partition]["epoch"]
    (node,) = [n for n in cluster.worker_nodes if n.node_id == node_id]
    handle = deployment.partitions()[partition]
    started = time.perf_counter()
    cluster.remove_node(node, allow_graceful=False)
    while True:
        try:
            info = ray.get(handle.info.remote(), timeout=5)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            continue
        if info["state"] == "serving" and info["epoch"] > epoch:
            return time.perf_counter() - started
        time.sleep(0.01)


def bench_node_loss(health_check: str, groups: int, offsets_per_group: int) -> dict:
    cluster = cluster_of(3, HEALTH_CHECK_FAST if health_check == "tuned" else None)
    log_dir = tempfile.mkdtemp(prefix="groupcoord-scale-")
    try:
        # Partition n is asked for on the n-th node in id order (actors/placement.py): load
        # one partition meant for a worker node and leave another idle. The affinity is soft
        # and Ray sometimes places elsewhere: start again until both are on worker nodes.
        ids = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
        workers = {n.node_id for n in cluster.worker_nodes}
        idle, loaded = [n for n, node_id in enumerate(ids) if node_id in workers]
        _populate(log_dir, loaded, 3, groups, offsets_per_group)
        for attempt in itertools.count(1):
            deployment = start(3, log_dir, namespace="scale-loss", config=CONFIG)
            infos = deployment.wait_ready(300)
            if infos[idle]["node"] in workers and infos[loaded]["node"] in workers:
                break
            stop(deployment)
            if attempt == 5:
                raise RuntimeError(f"partitions not on worker nodes after 5 starts: {infos}")
        idle_s = _node_loss_to_serving(cluster, deployment, idle)
        loaded_s = _node_loss_to_serving(cluster, deployment, loaded)
        load_s = deployment.infos()[loaded]["load_seconds"]
        stop(deployment)
    finally:
        close(cluster)
        shutil.rmtree(log_dir, ignore_errors=True)
    return {
        "health_check": health_check,
        "groups": groups,
        "offsets": groups * offsets_per_group,
        "starts": attempt,
        "idle_node_loss_to_serving_s": round(idle_s, 2),
        "loaded_node_loss_to_serving_s": round(loaded_s, 2),
        "extra_s": round(loaded_s - idle_s, 2),
        "loaded_load_s": round(load_s, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer cases, less data")
    parser.add_argument("--groups", type=int, default=None, help="groups of the loaded partition")
    parser.add_argument("--node-loss-only", action="store_true", help="skip the throughput")
    args = parser.parse_args()
    seconds = 2.0 if args.quick else 4.0
    groups = args.groups or (1_000 if args.quick else 10_000)
    results: dict = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, "
        f"Python {platform.python_version()}",
        "quick": args.quick,
    }
    partitions_list = [1, 2, 4] if args.quick else [1, 2, 4, 8]
    if not args.node_loss_only:
        results["throughput"] = [
            row for nodes in (1, 3) for row in bench_throughput(nodes, partitions_list, seconds)
        ]
        _print(f"throughput, {CLIENTS} clients (ratios to 1 partition)", results["throughput"])
    results["node_loss"] = [bench_node_loss(h, groups, 100) for h in ("tuned", "default")]
    _print("node loss to serving (a worker node killed)", results["node_loss"])
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
