"""A real three-node Ray cluster on this machine (``ray.cluster_utils.Cluster``: each node has
its own raylet, object store and worker processes), shared by this folder's tests.

This folder runs in its own pytest invocation (tests/conftest.py keeps it out of the default
collection): a driver can belong to one Ray cluster only, and the main session's is
``ray_session``'s single node. Ray's node health check is tuned here so that a lost node is
declared dead in seconds (bench/scale.py measures the defaults too).
"""

from __future__ import annotations

import pytest
import ray
from ray.cluster_utils import Cluster

from .nodes import HEALTH_CHECK_FAST, NODE_OPTIONS, top_up

NAMESPACE = "groupcoord-multinode"


@pytest.fixture(scope="session")
def cluster():
    c = Cluster(
        initialize_head=True,
        head_node_args={
            **NODE_OPTIONS,
            "include_dashboard": False,
            "_system_config": HEALTH_CHECK_FAST,
        },
    )
    top_up(c, 3)
    ray.init(address=c.address, namespace=NAMESPACE, log_to_driver=False, configure_logging=False)
    yield c
    ray.shutdown()
    c.shutdown()


@pytest.fixture
def three_nodes(cluster):
    """The cluster with three alive nodes (a previous test may have removed some)."""
    return top_up(cluster, 3)
