"""One real local Ray per test session, shared by every test folder: started lazily by the
``ray_session`` fixture (Ray-free tests, like tests/core, never start it) and shut down at
session end."""

from __future__ import annotations

import os

import pytest

NAMESPACE = "groupcoord-tests"


@pytest.fixture(scope="session")
def ray_session():
    # Lazy: the Ray-free folders (tests/core, tests/storage, tests/wire) must not load Ray.
    import ray  # noqa: PLC0415

    started = False
    if not ray.is_initialized():
        # Workers must import tests.actors.* (fakes, listeners): put the repo root on their path.
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (root, os.environ.get("PYTHONPATH")) if p
        )
        ray.init(
            # Always a fresh cluster of the tests' own: without "local", ray.init joins any Ray
            # already running on this host (an operator's `groupcoord serve`, another checkout's
            # tests) and the _system_config below is refused.
            address="local",
            num_cpus=4,
            include_dashboard=False,
            namespace=NAMESPACE,
            log_to_driver=False,
            configure_logging=False,
            # Export metrics every second (default 10 s) so test_metrics can read them.
            _system_config={"metrics_report_interval_ms": 1000},
        )
        started = True
    yield ray
    if started:
        ray.shutdown()


MULTINODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "multinode")


def pytest_ignore_collect(collection_path, config):
    """tests/multinode runs its own multi-node Ray cluster (ray.cluster_utils.Cluster), which
    cannot share a driver process with ``ray_session``: it is collected only when named on the
    command line (``make test`` runs it as a second pytest invocation)."""
    if str(collection_path) != MULTINODE_DIR:
        return None
    named = (os.path.abspath(str(arg).split("::")[0]) for arg in config.args)
    return not any(a == MULTINODE_DIR or a.startswith(MULTINODE_DIR + os.sep) for a in named)


# `make test` runs this suite on two pytest-xdist workers (`-n 2 --dist loadgroup`): the suite
# keeps one of the machine's two cores busy on average, waiting the rest of the time on Ray, JVMs
# and subprocesses. A work unit is one test file, so module fixtures are built once. The Spark
# folder is one unit, so one worker alone starts a SparkSession. Units are handed out in the
# order below, the longest first, so that the short Ray-free files fill the end of the run.
SPARK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spark")
FOLDER_ORDER = ("spark", "kafka", "actors")


def pytest_collection_modifyitems(config, items):
    def folder(item) -> str:
        return os.path.basename(os.path.dirname(str(item.path)))

    def rank(item) -> int:
        name = folder(item)
        return FOLDER_ORDER.index(name) if name in FOLDER_ORDER else len(FOLDER_ORDER)

    items.sort(key=rank)  # stable: the order within a file, and of files within a rank, stays
    for item in items:
        unit = (
            "spark" if str(item.path).startswith(SPARK_DIR + os.sep) else item.nodeid.split("::")[0]
        )
        item.add_marker(pytest.mark.xdist_group(unit))
