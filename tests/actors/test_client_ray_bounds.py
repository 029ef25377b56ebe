"""A call through real Ray to a partition actor that never answers ends at its deadline: the
awaited ObjectRef is abandoned and the handle forgotten, so the next call asks the router
again."""

from __future__ import annotations

import asyncio

import pytest
import ray

from groupcoord.actors import AdminClient, CoordinatorChannel, CoordinatorUnavailable
from groupcoord.coordinator import HeartbeatRequest


@ray.remote(num_cpus=0, max_restarts=0)
class StuckPartition:
    """Answers nothing while stuck, as a partition whose event loop or disk hangs."""

    def __init__(self) -> None:
        self.calls = 0

    async def handle(self, request):
        self.calls += 1
        await asyncio.Event().wait()

    async def call_count(self) -> int:
        return self.calls


@ray.remote(num_cpus=0, max_restarts=0)
class StubRouter:
    def __init__(self, partition) -> None:
        self.partition = partition
        self.lookups = 0

    async def find_coordinator(self, group_id: str):
        self.lookups += 1
        return 0, self.partition

    async def lookup_count(self) -> int:
        return self.lookups


def test_calls_to_a_stuck_partition_actor_end_at_their_deadline(ray_session):
    async def scenario():
        partition = StuckPartition.remote()
        router = StubRouter.remote(partition)
        try:
            # Both actors up first, so that each call's discovery gets through in its time.
            assert await router.lookup_count.remote() == await partition.call_count.remote() == 0
            channel = CoordinatorChannel(router, "g", timeout_ms=2_000)
            with pytest.raises(CoordinatorUnavailable):
                await asyncio.wait_for(channel.call(HeartbeatRequest("g", 1, "m")), 60)
            with pytest.raises(CoordinatorUnavailable):
                await asyncio.wait_for(channel.call(HeartbeatRequest("g", 1, "m")), 60)
            # each call reached the partition and got stuck there; the stuck handle was
            # forgotten, so the second call found the partition afresh
            assert await partition.call_count.remote() == 2
            assert channel.discoveries == await router.lookup_count.remote() == 2
            admin = AdminClient(router, timeout_ms=500)
            with pytest.raises(CoordinatorUnavailable):
                await asyncio.wait_for(admin.describe_groups(["g"]), 60)
        finally:
            ray.kill(partition)
            ray.kill(router)

    asyncio.run(scenario())
