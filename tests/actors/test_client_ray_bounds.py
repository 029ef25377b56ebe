"""A call through real Ray to a partition actor that never answers ends at its deadline: the
awaited ObjectRef is abandoned and the handle forgotten, so the next call asks the router
again. So do the bootstrap listener's forwarded requests and the router's ListGroups."""

from __future__ import annotations

import asyncio

import pytest
import ray

from groupcoord.actors import AdminClient, CoordinatorChannel, CoordinatorUnavailable, wire_service
from groupcoord.actors.bounded import gathered_within
from groupcoord.actors.router import merge_list_groups
from groupcoord.actors.wire_config import WireConfig
from groupcoord.actors.wire_service import BootstrapListener
from groupcoord.coordinator import (
    CoordinatorConfig,
    DescribeGroupsRequest,
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
)


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


@ray.remote(num_cpus=0, max_restarts=0)
class ListingPartition:
    async def handle(self, request):
        return ListGroupsResponse(Errors.NONE, [ListedGroup("answered", "consumer", "Stable")])


def test_the_bootstrap_listener_answers_for_a_stuck_partition_at_its_bound(
    ray_session, monkeypatch
):
    # Before: a request the bootstrap listener forwards awaited the partition without a bound.
    monkeypatch.setattr(wire_service, "FORWARD_TIMEOUT_S", 0.5)
    partition = StuckPartition.remote()
    bootstrap = BootstrapListener(
        WireConfig(bootstrap_port=0),
        1,
        lambda n: partition,
        None,
        {},
        dict,
        None,
        dict,
        dict,
        "unused",
        CoordinatorConfig(),
    )

    async def forward(request):
        async with asyncio.timeout(60):
            return await bootstrap._route("g", request)

    try:
        answer = asyncio.run(forward(DescribeGroupsRequest(["g"])))
        assert answer.groups[0].error == Errors.COORDINATOR_NOT_AVAILABLE
        # A JoinGroup may be held for its rebalance: its bound is that and FORWARD_TIMEOUT_S.
        protocols = [JoinGroupRequestProtocol("range", b"")]
        join = JoinGroupRequest("g", "", "consumer", protocols, 10_000, 1_000)
        assert wire_service.forward_timeout_s(join) == 1.5
        assert asyncio.run(forward(join)).error == Errors.COORDINATOR_NOT_AVAILABLE
        assert ray.get(partition.call_count.remote()) == 2
    finally:
        ray.kill(partition)


def test_list_groups_keeps_the_answers_that_came_when_one_partition_is_stuck(ray_session):
    # The router's ListGroups gathers every partition's answer within LIST_GROUPS_TIMEOUT_S.
    stuck, answering = StuckPartition.remote(), ListingPartition.remote()
    request = ListGroupsRequest([])

    async def listed():
        refs = (p.handle.remote(request) for p in (stuck, answering))
        return merge_list_groups(await gathered_within(refs, 5.0))

    try:
        # Both actors up first (a worker process each), so that only the stuck one is late.
        assert ray.get(stuck.call_count.remote()) == 0
        assert ray.get(answering.handle.remote(request)).groups
        merged = asyncio.run(listed())
        assert merged.error == Errors.COORDINATOR_NOT_AVAILABLE
        assert [g.group_id for g in merged.groups] == ["answered"]
    finally:
        ray.kill(stuck)
        ray.kill(answering)
