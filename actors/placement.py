"""Where the actors run on a multi-node Ray cluster.

Partition *n* is asked for on the *n*-th alive node in turn (``partition_strategy``: a soft
node affinity), so the partitions start spread over the nodes alive at that moment; soft means
Ray may place one elsewhere, and on a loaded machine it sometimes did. Ray's own ``SPREAD``
strategy was tried first and put all three partitions of a test on one node of three. When a
partition's node dies, Ray restarts it on a surviving node (the affinity is soft: Ray then
chooses). A running partition is never moved when a node joins: moving it is a failover (its
clients get NOT_COORDINATOR and wait for a reload); a new node receives partitions when one is
restarted after a failure or the deployment is started again.

The router goes where the operator says (``router_node``): ``"head"`` (the default) is the node
holding Ray's GCS, which a cluster cannot lose anyway, so that pin is hard (a soft one was
seen to land elsewhere on a loaded machine); ``"any"`` lets Ray choose; a node id (hex, as
``ray list nodes`` and ``groupcoord status`` show it) asks for that node, softly: when that node
is gone, Ray restarts the router on another one.
"""

from __future__ import annotations

from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

# Ray gives the head node this resource (and only it).
HEAD_RESOURCE = "node:__internal_head__"


def alive_nodes() -> list[dict]:
    """Ray's description of every alive node."""
    return [n for n in ray.nodes() if n.get("Alive")]


def head_node_id() -> str | None:
    """The id of the alive head node, or None (a cluster whose head is not known to Ray)."""
    for node in alive_nodes():
        if HEAD_RESOURCE in node.get("Resources", {}):
            return node["NodeID"]
    return None


def partition_strategy(partition: int, node_ids: list[str]) -> Any:
    """Partition ``partition``'s place among ``node_ids`` (taken once, sorted, so every
    partition sees the same list): round robin, soft."""
    if not node_ids:
        return "DEFAULT"
    return NodeAffinitySchedulingStrategy(node_ids[partition % len(node_ids)], soft=True)


def router_strategy(router_node: str) -> Any:
    """Ray's scheduling strategy for the router (module docstring). ValueError for a node that
    is not alive in this cluster, or a value that is neither ``head``, ``any`` nor a node id."""
    if not isinstance(router_node, str) or not router_node:
        raise ValueError("router_node must be 'head', 'any' or a node id")
    if router_node == "any":
        return "DEFAULT"
    if router_node == "head":
        node_id = head_node_id()
        return "DEFAULT" if node_id is None else NodeAffinitySchedulingStrategy(node_id, soft=False)
    alive = {n["NodeID"] for n in alive_nodes()}
    if router_node not in alive:
        raise ValueError(
            f"router_node {router_node!r} is not an alive node of this Ray cluster "
            f"(alive: {', '.join(sorted(alive))})"
        )
    return NodeAffinitySchedulingStrategy(router_node, soft=True)


__all__ = [
    "HEAD_RESOURCE",
    "alive_nodes",
    "head_node_id",
    "partition_strategy",
    "router_strategy",
]
