"""One real local Ray per test session, shared by every test folder: started lazily by the
``ray_session`` fixture (Ray-free tests, like tests/core, never start it) and shut down at
session end."""

from __future__ import annotations

import os

import pytest
from xdist.scheduler import LoadFileScheduling

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


# `make test` runs this suite on two pytest-xdist workers (`-n 2 --dist loadfile`): on its own
# it kept one of the machine's two cores busy, waiting the rest of the time on Ray, JVMs and
# subprocesses. A work unit is one test file, so module fixtures are built once, except that all
# of tests/spark is one unit, so that one worker alone starts a SparkSession (`_SuiteScheduling`;
# xdist's own `loadgroup` marks do nothing under pytest 9). Units are handed out in the order
# below, the longest folders first, so the short Ray-free files fill the end of the run.
FOLDER_ORDER = ("spark", "kafka", "actors")


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        folder = os.path.basename(os.path.dirname(str(item.path)))
        return FOLDER_ORDER.index(folder) if folder in FOLDER_ORDER else len(FOLDER_ORDER)

    items.sort(key=rank)  # stable: the order within a file, and of files within a rank, stays


class _SuiteScheduling(LoadFileScheduling):
    """xdist's ``loadfile``, with every file of tests/spark in one unit."""

    def _split_scope(self, nodeid: str) -> str:
        scope = super()._split_scope(nodeid)
        return "tests/spark" if scope.startswith("tests/spark/") else scope


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") == "loadfile":
        return _SuiteScheduling(config, log)
    return None
