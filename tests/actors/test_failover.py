"""Failover by killing actors while members commit continuously.

Every commit that was acknowledged must be fetched back afterwards, no two members may own the
same partition in one generation, and every member must return to Stable on its own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random

import pytest
import ray

from groupcoord.actors import AdminClient, CoordinatorChannel, stop
from groupcoord.actors.catalog import CATALOG_FILE, TopicCatalog
from groupcoord.coordinator import OffsetCommitRequest, OffsetCommitRequestPartition, partition_for

from .helpers import (
    committer,
    member,
    no_double_ownership,
    settled,
    start_deployment,
    wait_until,
)

PARTITIONS = 6
GROUPS = ("fo-a", "fo-b")  # land on different partitions of 2 (checked below)
KILLS = 4


@pytest.fixture(scope="module")
def deployment(ray_session, tmp_path_factory):
    d = start_deployment(tmp_path_factory.mktemp("logs-failover"), "gc-failover")
    yield d
    stop(d)


def test_kill_partitions_and_router_while_committing(deployment):
    assert {partition_for(g, 2) for g in GROUPS} == {0, 1}

    async def scenario():
        router = deployment.router
        members = {
            g: [member(router, g, topics={"t": PARTITIONS}) for _ in range(2)] for g in GROUPS
        }
        for g, ms in members.items():
            await wait_until(lambda ms=ms: settled(ms, PARTITIONS), what=f"{g} settled")
        counter = itertools.count(1)
        attempted = {g: {} for g in GROUPS}
        acked = {g: {} for g in GROUPS}
        stop_event = asyncio.Event()
        tasks = [
            asyncio.create_task(committer(m, counter, attempted[g], acked[g], stop_event))
            for g, ms in members.items()
            for m in ms
        ]
        rng = random.Random(7)
        handles = deployment.partitions()
        epochs = [info["epoch"] for info in deployment.infos()]
        for kill in range(KILLS):
            await asyncio.sleep(rng.uniform(0.5, 1.0))
            victim = kill % 2  # both partitions, twice each
            ray.kill(handles[victim], no_restart=False)
            if kill == 1:
                ray.kill(router, no_restart=False)  # the router, once
        await asyncio.sleep(1.0)
        stop_event.set()
        await asyncio.gather(*tasks)

        everyone = [m for ms in members.values() for m in ms]
        for g, ms in members.items():
            await wait_until(
                lambda ms=ms: settled(ms, PARTITIONS), timeout_s=60, what=f"{g} back to Stable"
            )
        no_double_ownership(everyone)
        # The kills were felt: calls failed over (retried) and members rebalanced.
        assert sum(m.channel.retries for m in everyone) > 0
        new_epochs = [info["epoch"] for info in deployment.infos()]
        raised = [new > old for new, old in zip(new_epochs, epochs, strict=True)]
        assert all(raised), (epochs, new_epochs)

        admin = AdminClient(router)
        for g in GROUPS:
            assert acked[g], f"no commit of {g} was ever acknowledged"
            fetched = await admin.fetch_offsets(g)
            for tp, offset in acked[g].items():
                # Unacknowledged commits may have landed too, but never an offset nobody sent.
                assert fetched[tp] >= offset, (g, tp, fetched[tp], offset)
                assert fetched[tp] in attempted[g][tp]
            (desc,) = await admin.describe_groups([g])
            assert desc.state == "Stable" and len(desc.members) == 2
        for m in everyone:
            await m.close()

    asyncio.run(scenario())


def test_admin_rides_out_a_router_restart(deployment):
    # A call that reaches the router while Ray restarts it fails with ActorUnavailableError;
    # the admin client retries (as the member's channel does) instead of failing.
    async def scenario():
        simple = "fo-simple"  # a simple (offsets-only) group to list
        response = await CoordinatorChannel(deployment.router, simple).call(
            OffsetCommitRequest(simple, -1, "", [OffsetCommitRequestPartition("t", 0, 1)])
        )
        assert response.partitions[0].error == 0
        admin = AdminClient(deployment.router)
        for _ in range(2):
            ray.kill(deployment.router, no_restart=False)
            groups = await admin.list_groups()
            assert simple in {g.group_id for g in groups}

    asyncio.run(scenario())


def test_a_router_whose_catalog_a_newer_one_claimed_exits_and_ray_restarts_it(deployment):
    # A router Ray started elsewhere while this one was cut off claims the topic catalog; the
    # cut-off one then changes nothing more and exits by itself. Here the newer claim comes
    # from this process, so the router Ray restarts in its place claims the catalog back.
    described = ray.get(deployment.router.describe.remote())
    log_dir, pid = described["log_dir"], described["pid"]
    TopicCatalog(log_dir)  # the newer owner

    def restarted() -> bool:
        try:
            return ray.get(deployment.router.describe.remote(), timeout=2)["pid"] != pid
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return False

    asyncio.run(wait_until(restarted, what="the replaced router to exit and be restarted"))
    ray.get(deployment.router.create_topic.remote("after-the-claim", 2))  # it owns it again
    with open(os.path.join(log_dir, CATALOG_FILE)) as f:
        assert json.load(f)["topics"]["after-the-claim"] == 2
