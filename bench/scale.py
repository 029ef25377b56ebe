"""Benchmark of groupcoord on a multi-node Ray cluster (``ray.cluster_utils.Cluster``: real
raylets, object stores and worker processes, all on this machine).

* **Throughput against partitions and nodes**: commits/s (simple-group OffsetCommits) and
  heartbeats/s (members of joined groups) from concurrent clients spread evenly over the
  partitions, with 1, 2, 4, 8 partitions, on 1 node and on 3 nodes; each figure as a ratio to
  one partition on the same cluster, measured in the same run. The deployments of every
  partition count run at once and are measured in turns, best of 3 rounds, so that the
  machine's changing load hits them alike.
* **Node-loss-to-serving**: a worker node is killed (raylet and workers at once); the time
  until Ray declares it dead and until its partition serves again from a survivor, for an idle
  partition and for one holding ``--groups`` groups x 100 offsets, each the only partition on
  its node, with Ray's default node health check and with the tuned one the tests use
  (tests/multinode/nodes.py); the difference is Ray's failure detection.

Run: ``.venv/bin/python bench/scale.py [--quick]`` (``--help`` for the partial runs). Rows
are merged into bench/results/scale.json by key (nodes and partitions; health check, groups and
offsets): a run replaces the rows it measured and keeps the others. Each row records its run's
start time and the machine's 1-minute load average (each round's; a node-loss row's before and
after it), and each throughput row the 1-partition baseline of its own run that its ratios
divide by.
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

from groupcoord.actors import GroupMember, identity, start, stop
from groupcoord.actors.cli_common import OneLineParser, UsageError
from groupcoord.coordinator import HeartbeatRequest, partition_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.actors import CONFIG, _populate, _print, _rate, commit_request  # noqa: E402
from tests.multinode.nodes import (  # noqa: E402
    HEALTH_CHECK_FAST,
    NODE_OPTIONS,
    alive,
    node_by_id,
    top_up,
)

RESULTS = os.path.join(ROOT, "bench", "results", "scale.json")
CLIENTS = 32
MAX_STARTS = 10


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


def _load_1m() -> float:
    return round(os.getloadavg()[0], 1)


def _commit_call(deployment):
    handles = deployment.partitions()
    requests = [
        (handles[n], commit_request(g, 1, 1)) for n, g in enumerate(groups_for(len(handles), "c"))
    ]
    turn = itertools.count()

    async def commit():
        handle, request = requests[next(turn) % len(requests)]
        response = await handle.handle.remote(request)
        assert response.partitions[0].error == 0, response

    return commit


async def _heartbeat_call(deployment, members: list[GroupMember]):
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

    return beat


async def _measure(deployments: dict, seconds: float, rounds: int) -> dict[int, dict]:
    """Every deployment's commits/s and heartbeats/s, ``rounds`` times in turn (so that the
    machine's load, which other jobs change by several times within minutes, hits every
    partition count alike); each rate measured for ``seconds`` per round."""
    members = {
        p: [
            GroupMember(d.router, g, ["t"], topic_partitions={"t": 4}, session_timeout_ms=30_000)
            for g in groups_for(p, "h")
        ]
        for p, d in deployments.items()
    }
    for m in itertools.chain(*members.values()):
        m.start()
    calls = {
        p: {
            "commits": _commit_call(d),
            "heartbeats": await _heartbeat_call(d, members[p]),
        }
        for p, d in deployments.items()
    }
    for p in deployments:  # warm up
        await _rate(calls[p]["commits"], CLIENTS, 1.0)
    rates: dict[int, dict] = {p: {"commits": [], "heartbeats": [], "load": []} for p in calls}
    for _ in range(rounds):
        for p, kinds in calls.items():
            rates[p]["load"].append(_load_1m())
            for kind, call in kinds.items():
                rates[p][kind].append(round(await _rate(call, CLIENTS, seconds)))
    for m in itertools.chain(*members.values()):
        await m.close()
    return rates


def bench_throughput(
    nodes: int, partitions_list: list[int], seconds: float, rounds: int
) -> list[dict]:
    cluster = cluster_of(nodes)
    log_dir = tempfile.mkdtemp(prefix="groupcoord-scale-")
    deployments: dict = {}
    try:
        for p in partitions_list:  # all running at once, measured in turns
            deployments[p] = start(
                p, os.path.join(log_dir, str(p)), namespace=f"scale-{p}", config=CONFIG
            )
        used = {p: len({i["node"] for i in d.wait_ready(300)}) for p, d in deployments.items()}
        rates = asyncio.run(_measure(deployments, seconds, rounds))
    finally:
        for d in deployments.values():
            stop(d)
        close(cluster)
        shutil.rmtree(log_dir, ignore_errors=True)
    one = rates[1]  # partitions_list starts with 1 (main checks)
    return [
        {
            "nodes": nodes,
            "partitions": p,
            "nodes_used": used[p],
            "rounds": rounds,
            # The best round of each: the one the machine's other load disturbed least.
            "commits_per_s": max(r["commits"]),
            "heartbeats_per_s": max(r["heartbeats"]),
            "commits_per_s_rounds": r["commits"],
            "heartbeats_per_s_rounds": r["heartbeats"],
            "load_1m_rounds": r["load"],
            "baseline_commits_per_s": max(one["commits"]),
            "baseline_heartbeats_per_s": max(one["heartbeats"]),
            "commits_ratio_to_1": round(max(r["commits"]) / max(one["commits"]), 2),
            "heartbeats_ratio_to_1": round(max(r["heartbeats"]) / max(one["heartbeats"]), 2),
        }
        for p, r in rates.items()
    ]


def _node_loss_to_serving(cluster, deployment, partition: int) -> tuple[float, float, float]:
    """Kill the node of ``partition``; seconds until Ray declared it dead, seconds until the
    partition served again (both from the kill), and the new incarnation's load time."""
    infos = deployment.infos()
    node_id, epoch = infos[partition]["node"], infos[partition]["epoch"]
    node = node_by_id(cluster, node_id)
    handle = deployment.partitions()[partition]
    started = time.perf_counter()
    cluster.remove_node(node, allow_graceful=False)
    while alive(node_id):  # Ray restarts the node's actors only once it is declared dead
        time.sleep(0.05)
    dead_s = time.perf_counter() - started
    while True:
        try:
            info = ray.get(handle.info.remote(), timeout=5)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            continue
        if info["state"] == "serving" and info["epoch"] > epoch:
            return dead_s, time.perf_counter() - started, info["load_seconds"]
        time.sleep(0.01)


def _start_alone(cluster, log_dir: str, candidates: set[int]) -> tuple:
    """A 3-partition deployment on 3 nodes in which one of ``candidates`` is the only
    partition on a worker node, so that losing that node restarts exactly that partition;
    returns the deployment, that partition and the starts it took. The affinity is soft and
    Ray often places elsewhere: start again, up to ``MAX_STARTS`` times."""
    top_up(cluster, 3)
    workers = {n.node_id for n in cluster.worker_nodes}
    for attempt in range(1, MAX_STARTS + 1):
        deployment = start(3, log_dir, namespace="scale-loss", config=CONFIG)
        nodes = [i["node"] for i in deployment.wait_ready(300)]
        for n in sorted(candidates):
            if nodes[n] in workers and nodes.count(nodes[n]) == 1:
                return deployment, n, attempt
        stop(deployment)
    raise RuntimeError(
        f"none of partitions {sorted(candidates)} alone on a worker node after {MAX_STARTS} "
        f"starts (last placement: {nodes})"
    )


def bench_node_loss(health_check: str, groups: int, offsets_per_group: int) -> dict:
    load_before = _load_1m()
    cluster = cluster_of(3, HEALTH_CHECK_FAST if health_check == "tuned" else None)
    log_dir = tempfile.mkdtemp(prefix="groupcoord-scale-")
    try:
        # Partition n is asked for on the n-th node in id order (actors/placement.py): load the
        # one meant for the first worker node. Each loss is measured on a deployment started
        # for it (the first loss's replacement may share a node with another partition).
        ids = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
        workers = {n.node_id for n in cluster.worker_nodes}
        loaded = min(n for n, node_id in enumerate(ids) if node_id in workers)
        # Recorded first: one partition's log alone would read as a 1-partition deployment's.
        identity.claim(log_dir, 3, "scale-loss")
        _populate(log_dir, loaded, 3, groups, offsets_per_group)
        deployment, _, starts = _start_alone(cluster, log_dir, {loaded})
        loaded_dead_s, loaded_s, loaded_load_s = _node_loss_to_serving(cluster, deployment, loaded)
        stop(deployment)
        deployment, idle, more = _start_alone(cluster, log_dir, {0, 1, 2} - {loaded})
        idle_dead_s, idle_s, idle_load_s = _node_loss_to_serving(cluster, deployment, idle)
        stop(deployment)
    finally:
        close(cluster)
        shutil.rmtree(log_dir, ignore_errors=True)
    return {
        "health_check": health_check,
        "groups": groups,
        "offsets": groups * offsets_per_group,
        "starts": starts + more,
        "idle_declared_dead_s": round(idle_dead_s, 2),
        "idle_node_loss_to_serving_s": round(idle_s, 2),
        "idle_load_s": round(idle_load_s, 3),
        "loaded_declared_dead_s": round(loaded_dead_s, 2),
        "loaded_node_loss_to_serving_s": round(loaded_s, 2),
        "loaded_load_s": round(loaded_load_s, 3),
        "extra_s": round(loaded_s - idle_s, 2),
        "load_1m_before": load_before,
        "load_1m_after": _load_1m(),
    }


# The fields that name a row: a later run's row with the same values replaces it.
KEYS = {
    "throughput": ("nodes", "partitions"),
    "node_loss": ("health_check", "groups", "offsets"),
}


def merge_rows(old: list[dict], new: list[dict], key: tuple[str, ...]) -> list[dict]:
    """``old`` with each row that has a ``new`` row's key replaced by that row, plus the new
    keys, sorted by key (a key's fields have one type each: the tuples compare)."""
    merged = {tuple(r[k] for k in key): r for r in old}
    merged.update({tuple(r[k] for k in key): r for r in new})
    return [merged[k] for k in sorted(merged)]


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}"
        ) from None
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"every value must be at least 1: {text!r}")
    return values


def _health_checks(text: str) -> list[str]:
    values = text.split(",")
    if not set(values) <= {"tuned", "default"}:
        raise argparse.ArgumentTypeError(f"health checks are 'tuned' and/or 'default': {text!r}")
    return values


def main() -> None:
    try:
        _main()
    except UsageError as exc:
        print(exc, file=sys.stderr)
        sys.exit(2)


def _main() -> None:
    parser = OneLineParser(
        description=__doc__.split("\n\n")[0],
        epilog="Rows are merged into bench/results/scale.json by key; a partial run (e.g. "
        "--node-loss-only --groups 10000 --health-checks tuned) replaces only its own rows.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="defaults of 1,2,4 partitions, 1,000 groups, 2 rounds of 1 s rates (else 3 of 2 s)",
    )
    parser.add_argument(
        "--partitions",
        type=_ints,
        default=None,
        help="throughput partition counts, starting with 1 (the ratios' baseline); default 1,2,4,8",
    )
    parser.add_argument(
        "--nodes", type=_ints, default=[1, 3], help="throughput cluster sizes (default 1,3)"
    )
    parser.add_argument(
        "--groups", type=int, default=None, help="groups (x100 offsets) of the loaded partition"
    )
    parser.add_argument(
        "--health-checks",
        type=_health_checks,
        default=["tuned", "default"],
        help="node-loss rows: tuned and/or default (default both)",
    )
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--node-loss-only", action="store_true", help="skip the throughput rows")
    only.add_argument("--throughput-only", action="store_true", help="skip the node-loss rows")
    args = parser.parse_args()
    partitions_list = args.partitions or ([1, 2, 4] if args.quick else [1, 2, 4, 8])
    if partitions_list[0] != 1:
        parser.error("--partitions must start with 1: the ratios are to 1 partition")
    if args.groups is not None and args.groups < 1:
        parser.error("--groups must be at least 1")
    seconds, rounds = (1.0, 2) if args.quick else (2.0, 3)
    groups = args.groups or (1_000 if args.quick else 10_000)
    run = {"run": datetime.now(UTC).isoformat(timespec="seconds"), "quick": args.quick}
    new: dict[str, list[dict]] = {}
    if not args.node_loss_only:
        new["throughput"] = [
            {**run, **row}
            for nodes in args.nodes
            for row in bench_throughput(nodes, partitions_list, seconds, rounds)
        ]
        _print(f"throughput, {CLIENTS} clients (ratios to 1 partition)", new["throughput"])
    if not args.throughput_only:
        new["node_loss"] = [{**run, **bench_node_loss(h, groups, 100)} for h in args.health_checks]
        _print("node loss to serving (a worker node killed)", new["node_loss"])
    results: dict = {}
    if os.path.exists(RESULTS):
        with open(RESULTS) as f:
            results = json.load(f)
    results["machine"] = (
        f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}"
    )
    for part, rows in new.items():
        results[part] = merge_rows(results.get(part, []), rows, KEYS[part])
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(results, f, indent=2)
    print(f"merged {sum(map(len, new.values()))} rows into {RESULTS}")


if __name__ == "__main__":
    main()
