"""KIP-848 consumer groups through real actor handles on a real local Ray (no Kafka listeners):
the router's topic catalog reaches the partition's shard when a topic is created and when it
grows (a rebalance onto the new partitions), and a restarted partition asks the router for it
once loaded, so its consumer group is served again. The admin client describes the group with
its type, epochs and members' current and target assignments."""

from __future__ import annotations

import asyncio
import time

import pytest
import ray
from ray.exceptions import RayError

from groupcoord.actors import AdminClient, stop
from groupcoord.actors.channel import CoordinatorChannel
from groupcoord.actors.groups_output import described_rows
from groupcoord.coordinator import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatTopicPartitions,
    Errors,
    partition_for,
)

from .helpers import start_deployment, wait_restarted

TOPIC = "kip848-ray"
GROUP = "kip848-ray-group"
NUM_PARTITIONS = 2


@pytest.fixture(scope="module")
def deployment(ray_session, tmp_path_factory):
    d = start_deployment(tmp_path_factory.mktemp("logs-kip848"), "gc-kip848", NUM_PARTITIONS)
    yield d
    stop(d)


def wait_serving(deployment) -> None:
    """Until every partition answers and has loaded; a handle's first call after its actor
    restarted may raise (and so would the module's ``stop``)."""
    for _ in range(600):
        try:
            if all(i["state"] == "serving" for i in deployment.infos()):
                return
        except RayError:
            pass
        time.sleep(0.1)
    raise AssertionError("partitions not serving again")


def owned(response) -> list[int]:
    return sorted(p for tp in response.assignment.topic_partitions for p in tp.partitions)


def test_catalog_changes_and_restarts_reach_the_consumer_group(deployment):
    ray.get(deployment.router.create_topic.remote(TOPIC, 4))

    async def scenario():
        channel = CoordinatorChannel(deployment.router, GROUP, timeout_ms=60_000)
        joined = await channel.call(
            ConsumerGroupHeartbeatRequest(
                GROUP,
                "m1",
                0,
                rebalance_timeout_ms=30_000,
                subscribed_topic_names=[TOPIC],
                topic_partitions=[],
            )
        )
        assert joined.error_code == Errors.NONE, joined
        assert (joined.member_epoch, owned(joined)) == (2, [0, 1, 2, 3])

        # The admin client describes it as Kafka's does: through ConsumerGroupDescribe.
        (described,) = await AdminClient(deployment.router).describe_groups(
            [GROUP], with_offsets=True
        )
        assert (described.group_type, described.state, described.protocol) == (
            "consumer",
            "Stable",
            "uniform",
        )
        assert (described.generation_id, described.assignment_epoch) == (2, 2)
        (m1,) = described.members
        everything = tuple((TOPIC, p) for p in range(4))
        assert (m1.member_id, m1.member_epoch) == ("m1", 2)
        assert m1.assignment == m1.target_assignment == everything
        assert [(o.topic, o.partition, o.owner) for o in described.offsets] == [
            (t, p, "m1") for t, p in everything
        ]
        rows = described_rows(described, 0)
        assert (rows[0]["group_type"], rows[1][0]["member_epoch"]) == ("consumer", 2)

        def steady(epoch: int, partitions: list[int]) -> ConsumerGroupHeartbeatRequest:
            return ConsumerGroupHeartbeatRequest(
                GROUP,
                "m1",
                epoch,
                topic_partitions=[ConsumerGroupHeartbeatTopicPartitions(TOPIC, partitions)],
            )

        # The router pushes the grown catalog to every partition: a metadata-change rebalance.
        await asyncio.to_thread(ray.get, deployment.router.alter_topic.remote(TOPIC, 6))
        grown = await channel.call(steady(2, [0, 1, 2, 3]))
        assert grown.error_code == Errors.NONE, grown
        assert (grown.member_epoch, owned(grown)) == (3, [0, 1, 2, 3, 4, 5])

        # A restarted partition reloads the group from its log and fetches the catalog.
        handle = deployment.partitions()[partition_for(GROUP, NUM_PARTITIONS)]
        pid = (await asyncio.to_thread(ray.get, handle.info.remote()))["pid"]
        ray.kill(handle, no_restart=False)
        # The channel retries while the actor restarts, then while the shard answers
        # COORDINATOR_LOAD_IN_PROGRESS (loading, then waiting for the catalog); m1's session
        # (45 s) outlives the restart.
        again = await channel.call(steady(3, [0, 1, 2, 3, 4, 5]))
        assert again.error_code == Errors.NONE, again
        assert again.member_epoch == 3
        # Ray's kill is asynchronous: that answer may have come from the old process. The
        # new one must give the same answer from what it reloaded.
        await asyncio.to_thread(wait_restarted, lambda: ray.get(handle.info.remote()), pid)
        again = await channel.call(steady(3, [0, 1, 2, 3, 4, 5]))
        assert (again.error_code, again.member_epoch) == (Errors.NONE, 3), again

    asyncio.run(scenario())
    wait_serving(deployment)
