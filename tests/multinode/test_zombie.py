"""A node that is cut off but not dead: its raylet and workers are stopped (SIGSTOP) while Ray
declares it dead and restarts its partition elsewhere, then resumed (SIGCONT).

On a local file system the stopped incarnation still holds its ``flock`` (the kernel drops it
only when the holder dies), so the new incarnation waits: it answers LOAD_IN_PROGRESS and
never serves beside the zombie. On NFS/EFS the lock is a lease that a stalled client loses; the
test stands in for that expiry by removing ``writer.lock``, so the new incarnation takes the log
over (next epoch) while the zombie is frozen. Once resumed, the zombie must acknowledge
nothing (the epoch check fences its appends) and go away by itself; every acknowledged commit
is read back and the log loads without a single refused batch.
"""

from __future__ import annotations

import asyncio
import glob
import os
import signal
import time

import pytest
import ray

from groupcoord.actors import stop
from groupcoord.coordinator import Shard
from groupcoord.storage import load, read_log
from tests.actors.helpers import TEST_CONFIG, wait_for

from .nodes import alive, node_by_id, processes_of, running, signal_all, wait_dead_in_ray
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
LOCK_HELD_S = 2.0  # how long the new incarnation is watched waiting for the zombie's lock


@pytest.fixture
def log_dir(tmp_path):
    return str(tmp_path / "shared-logs")


def test_stopped_nodes_never_acknowledge_after_the_takeover(three_nodes, log_dir):
    cluster = three_nodes
    head = cluster.head_node.node_id
    deployment, infos = start_placed(
        log_dir,
        "mn-zombie",
        # Two partitions off the head, on one worker or on both: Ray's soft affinity does not
        # always spread them on a loaded machine, and the scenario needs only two frozen logs.
        lambda _, infos: sum(i["node"] != head for i in infos) >= 2,
        config=TEST_CONFIG,
    )
    on_workers = [i for i in infos if i["node"] != head]
    try:
        assert len(on_workers) >= 2, f"fewer than two partitions on the workers: {infos}"
        # Log a keeps its lock (a local file system); log b loses it (an NFS lease).
        (kept, lost) = sorted(on_workers, key=lambda i: i["partition"])[:2]
        frozen_nodes = {kept["node"], lost["node"]}
        nodes = [node_by_id(cluster, i["node"]) for i in (kept, lost)]
        handles = deployment.partitions()
        dirs = {i["partition"]: os.path.join(log_dir, f"partition-{i['partition']}") for i in infos}
        seen: dict = {}

        def new_incarnation(frozen: dict) -> dict | None:
            try:
                info = asyncio.run(
                    asyncio.wait_for(handles[frozen["partition"]].info.remote(), 2.0)
                )
            except Exception:  # still routed to the frozen one, or restarting
                return None
            return info if info["pid"] != frozen["pid"] else None

        def locked_out(frozen: dict) -> dict | None:
            info = new_incarnation(frozen)
            return info if info and info["load_failure"] == "locked" else None

        def freeze_take_over_resume():
            pids = [processes_of(node) for node in nodes]
            assert kept["pid"] in pids[0] and lost["pid"] in pids[1]
            for group in pids:
                signal_all(group, signal.SIGSTOP)
            try:
                seen["declared_dead_s"] = [wait_dead_in_ray(n.node_id) for n in nodes]
                # The frozen processes keep their locks: the new incarnations, restarted on
                # a survivor, wait for them instead of serving.
                for frozen in (kept, lost):
                    waiting = wait_for(lambda f=frozen: locked_out(f), 60, "a locked-out restart")
                    assert waiting["node"] not in frozen_nodes and waiting["state"] == "loading"
                # NFS/EFS: b's stalled client loses its lease; here, its lock file goes.
                os.remove(os.path.join(dirs[lost["partition"]], "writer.lock"))
                wait_serving_one(deployment, lost["partition"], lost["epoch"])
                time.sleep(LOCK_HELD_S)  # members commit to b's new incarnation meanwhile
                assert new_incarnation(kept)["state"] == "loading"  # a's lock still holds
            finally:
                for group in pids:
                    signal_all(group, signal.SIGCONT)
            # Resumed, each zombie sees the newer claim (or is fenced on its next append)
            # and exits by itself; a's lock goes with it and its new incarnation loads.
            for frozen in (kept, lost):
                wait_for(lambda f=frozen: not running(f["pid"]), 60, "a zombie to exit by itself")
            seen["infos"] = wait_serving(
                deployment,
                lambda now: all(now[f["partition"]]["epoch"] > f["epoch"] for f in (kept, lost)),
            )

        groups = groups_covering(PARTITIONS, "mn-zombie")
        asyncio.run(commit_through(deployment, groups, freeze_take_over_resume))
        logs = ray._private.worker._global_node.get_logs_dir_path()
        for frozen in (kept, lost):
            p = frozen["partition"]
            assert seen["infos"][p]["node"] not in frozen_nodes
            # It gave up by itself, and says why: a newer claim, or the epoch fence.
            (err,) = glob.glob(os.path.join(logs, f"worker-*-{frozen['pid']}.err"))
            with open(err) as f:
                said = f.read()
            assert "owns it now" in said or "LogFencedError" in said, said[-2000:]
            # The log reads back and the whole state loads (a zombie's append that landed after
            # the takeover is passed over by epoch: storage.segments).
            assert list(read_log(dirs[p]))
            load(dirs[p], Shard(p, PARTITIONS, TEST_CONFIG))
        assert deployment.infos() and all(
            now["epoch"] == before["epoch"]
            for now, before in zip(deployment.infos(), seen["infos"], strict=True)
        )  # nothing took over again
        print(f"nodes declared dead after {seen['declared_dead_s']} s (tuned health check)")
    finally:
        stop(deployment)
        for node in list(cluster.worker_nodes):  # what Ray declared dead: kill what is left
            if not alive(node.node_id):
                cluster.remove_node(node, allow_graceful=False)


def wait_serving_one(deployment, partition: int, old_epoch: int) -> None:
    wait_for(
        lambda: (
            (i := _info(deployment, partition))
            and i["state"] == "serving"
            and i["epoch"] > old_epoch
        ),
        60,
        f"partition {partition} to serve again",
    )


def _info(deployment, partition: int) -> dict | None:
    try:
        return asyncio.run(asyncio.wait_for(deployment.partitions()[partition].info.remote(), 2.0))
    except Exception:
        return None
