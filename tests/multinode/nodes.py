"""Nodes of a ``ray.cluster_utils.Cluster``: adding them, finding their processes, losing them."""

from __future__ import annotations

import os
import signal
import time

import ray
from ray._private import ray_constants
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

# A killed raylet fails its health checks at once, a stopped one after the timeout: declared
# dead after 3 failures, about 1.5 s and 4.5 s (Ray's defaults: period 3 s, timeout 10 s,
# threshold 5). A live raylet missing three 1 s checks in a row would be a false alarm; none
# was seen on this loaded 2-core machine.
HEALTH_CHECK_FAST = {
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 1000,
    "health_check_failure_threshold": 3,
    "health_check_initial_delay_ms": 1000,
}
# Coordinator actors ask for no CPU; a small object store keeps three nodes within memory.
# A temp dir of its own: Ray's head records its address in <temp dir>/ray_current_cluster,
# and a plain ray.init() elsewhere on this machine would otherwise try to join this cluster.
NODE_OPTIONS = {"num_cpus": 1, "object_store_memory": 80 * 2**20, "temp_dir": "/tmp/gc-multinode"}


@ray.remote(num_cpus=0)
def _here() -> str:
    return ray.get_runtime_context().get_node_id()


def top_up(cluster, nodes: int):
    """Add worker nodes until ``nodes`` (head included) are alive; returns the cluster once
    Ray's scheduler can place work on each of them (registration alone comes earlier, and a
    soft node affinity to a node the scheduler does not know yet silently goes elsewhere)."""
    while 1 + len(cluster.worker_nodes) < nodes:
        cluster.add_node(**NODE_OPTIONS)
    cluster.wait_for_nodes()
    if ray.is_initialized():
        for node in cluster.worker_nodes:
            pinned = NodeAffinitySchedulingStrategy(node.node_id, soft=False)
            assert ray.get(_here.options(scheduling_strategy=pinned).remote()) == node.node_id
    return cluster


def node_by_id(cluster, node_id: str):
    for node in cluster.worker_nodes:
        if node.node_id == node_id:
            return node
    raise LookupError(f"{node_id} is not a worker node of this cluster")


def alive(node_id: str) -> bool:
    return any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes())


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process (Linux /proc)."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    # "pid (comm) state ppid ...": comm may hold spaces, so split after ")".
                    parents[int(name)] = int(f.read().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):  # it exited meanwhile
                continue
    return parents


def processes_of(node) -> list[int]:
    """Pids of the node's raylet and of every process under it (agents, worker processes)."""
    raylet = node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid
    parents = _parents()
    found, frontier = [raylet], [raylet]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def signal_all(pids: list[int], signum: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            continue


def running(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def wait_dead_in_ray(node_id: str, timeout_s: float = 60.0) -> float:
    """Wait until Ray's GCS declares ``node_id`` dead; returns the seconds it took."""
    started = time.monotonic()
    while alive(node_id):
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"node {node_id} still alive in Ray after {timeout_s}s")
        time.sleep(0.1)
    return time.monotonic() - started


def partitions_on(infos: list[dict], node_id: str) -> list[int]:
    return [i["partition"] for i in infos if i.get("node") == node_id]
