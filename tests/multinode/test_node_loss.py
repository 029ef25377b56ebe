"""Partitions spread over real Ray nodes; losing nodes (raylet and workers killed together)
under load: the partitions restart on the survivors and reload from the shared log directory,
every acknowledged commit is read back, members recover by themselves."""

from __future__ import annotations

import asyncio
import json

import pytest
import ray

from groupcoord.actors import AdminClient, stop
from groupcoord.actors.cli import main as cli_main
from tests.actors.helpers import TEST_CONFIG

from .nodes import partitions_on, wait_dead_in_ray
from .scenario import (
    PARTITIONS_DEFAULT,
    commit_through,
    groups_covering,
    start_placed,
    wait_serving,
)

# A lost node must never hang the suite: each scenario has a few minutes at most.
pytestmark = pytest.mark.timeout(300)

PARTITIONS = PARTITIONS_DEFAULT


@pytest.fixture
def log_dir(tmp_path):
    return str(tmp_path / "shared-logs")  # every node of this machine sees it, as with EFS


def test_spread_status_and_worker_node_loss(three_nodes, log_dir, capsys):
    cluster = three_nodes
    head = cluster.head_node.node_id
    # Spread over the nodes by a soft affinity (placement.py), which Ray did not always
    # honour on this loaded machine: start_placed starts again until it is.
    deployment, infos = start_placed(
        log_dir,
        "mn-loss",
        lambda d, infos: (
            len({i["node"] for i in infos}) >= 2 and any(i["node"] != head for i in infos)
        ),
        config=TEST_CONFIG,
    )
    try:
        assert len({i["node"] for i in infos}) >= 2, f"partitions not spread: {infos}"
        assert cluster_router_node(deployment) == head  # the default: the router on the head

        # The admin client and `groupcoord status` show each partition's node and state.
        statuses = asyncio.run(AdminClient(deployment.router).partitions())
        assert [(s.partition, s.node_id, s.epoch) for s in statuses] == [
            (i["partition"], i["node"], i["epoch"]) for i in infos
        ]
        assert all(s.state == "serving" and s.load_seconds is not None for s in statuses)
        assert all(s.loaded_at_ms is not None for s in statuses)
        capsys.readouterr()
        assert cli_main(["status", "--namespace", "mn-loss", "--json"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert shown["router_node"] == head
        assert [(r["partition"], r["node"]) for r in shown["partitions"]] == [
            (i["partition"], i["node"][:12]) for i in infos
        ]
        assert all(r["loaded_at"].endswith("Z") and r["load_s"] for r in shown["partitions"])

        # The worker node holding the most partitions dies: raylet and workers at once.
        workers = {n.node_id: n for n in cluster.worker_nodes}
        victim_id = max(workers, key=lambda n: len(partitions_on(infos, n)))
        victims = partitions_on(infos, victim_id)
        assert victims, f"no partition on a worker node: {infos}"
        epochs = {i["partition"]: i["epoch"] for i in infos}
        seen: dict = {}

        def lose_node():
            cluster.remove_node(workers[victim_id], allow_graceful=False)
            seen["declared_dead_s"] = wait_dead_in_ray(victim_id)
            seen["infos"] = wait_serving(
                deployment,
                lambda now: all(
                    now[p]["node"] != victim_id and now[p]["epoch"] > epochs[p] for p in victims
                ),
            )

        groups = groups_covering(PARTITIONS, "mn-loss")
        asyncio.run(commit_through(deployment, groups, lose_node))
        after = seen["infos"]
        survivors = {head} | (set(workers) - {victim_id})
        assert {i["node"] for i in after} <= survivors
        for p in range(PARTITIONS):  # untouched partitions kept their incarnation
            if p not in victims:
                assert after[p]["epoch"] == epochs[p] and after[p]["node"] == infos[p]["node"]
        print(f"node declared dead after {seen['declared_dead_s']:.1f}s (tuned health check)")
    finally:
        stop(deployment)


def test_router_and_a_node_lost_at_once(three_nodes, log_dir):
    cluster = three_nodes
    workers = sorted(cluster.worker_nodes, key=lambda n: n.node_id)
    # The operator asks for the router on a worker node; that node and the other worker die
    # together. The pin is soft and Ray did not always honour it on this loaded machine: the
    # router process is then killed at the same moment instead, so it is lost all the same.
    head = cluster.head_node.node_id
    lost = {w.node_id for w in workers}
    deployment, infos = start_placed(
        log_dir,
        "mn-router",
        lambda d, infos: any(i["node"] in lost for i in infos),
        config=TEST_CONFIG,
        router_node=workers[0].node_id,
    )
    try:
        router_node = cluster_router_node(deployment)
        victims = [i["partition"] for i in infos if i["node"] in lost]
        assert victims, f"every partition on the head: {infos}"
        epochs = {i["partition"]: i["epoch"] for i in infos}

        def lose_router_and_two_nodes():
            if router_node not in lost:
                ray.kill(deployment.router, no_restart=False)
            for worker in workers:
                cluster.remove_node(worker, allow_graceful=False)
            for node_id in lost:
                wait_dead_in_ray(node_id)
            wait_serving(
                deployment,
                lambda now: (
                    all(now[p]["epoch"] > epochs[p] for p in victims)
                    and all(i["node"] == head for i in now)
                ),
            )

        groups = groups_covering(PARTITIONS, "mn-router")
        asyncio.run(commit_through(deployment, groups, lose_router_and_two_nodes))
        assert cluster_router_node(deployment) == head  # Ray restarted it on the survivor
        print(f"router was on {'a lost worker' if router_node in lost else 'the head'}")
    finally:
        stop(deployment)


def cluster_router_node(deployment) -> str:
    return ray.get(deployment.router.describe.remote())["node"]
