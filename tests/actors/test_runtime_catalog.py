"""PartitionRuntime hands the Shard the topic catalog (KIP-848 consumer groups need it), without
Ray: before the first catalog a consumer heartbeat is answered COORDINATOR_LOAD_IN_PROGRESS; a
catalog that arrives while loading is applied once loaded; a change that grows a subscribed
topic bumps the group epoch through durable records; older versions and bad catalogs change
nothing; a restarted partition replays the group from its log and serves it again."""

from __future__ import annotations

import asyncio

import pytest

from groupcoord.actors.runtime import PartitionRuntime
from groupcoord.coordinator import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    CoordinatorConfig,
    Errors,
)

from .fakes import MemoryLog
from .test_runtime import serving

CONFIG = CoordinatorConfig()


def make(store: list) -> PartitionRuntime:
    return PartitionRuntime(0, 1, CONFIG, lambda: MemoryLog(store))


def join(member_id: str) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        "g", member_id, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"],
        topic_partitions=[],
    )  # fmt: skip


async def group_epoch(runtime: PartitionRuntime) -> int:
    (group,) = (await runtime.handle(ConsumerGroupDescribeRequest(["g"]))).groups
    assert group.error_code == Errors.NONE, group
    return group.group_epoch


def test_heartbeats_wait_for_the_catalog_then_a_growing_topic_bumps_the_epoch():
    async def scenario():
        store: list = []
        runtime = make(store)
        await serving(runtime)
        early = await runtime.handle(join("m1"))
        assert early.error_code == Errors.COORDINATOR_LOAD_IN_PROGRESS

        assert runtime.update_topics(1, {"t": 2})
        joined = await runtime.handle(join("m1"))
        assert joined.error_code == Errors.NONE
        assert sorted(joined.assignment.topic_partitions[0].partitions) == [0, 1]
        assert await group_epoch(runtime) == 2

        written = len(store)
        assert not runtime.update_topics(1, {"t": 8})  # not newer: ignored
        assert runtime.update_topics(2, {"t": 3})
        assert await group_epoch(runtime) == 3  # the describe waited for the records
        assert len(store) > written

        with pytest.raises(ValueError):
            runtime.update_topics(3, {"t": 0})
        assert runtime.catalog_version == 2
        await runtime.close()

        # A new incarnation: the group comes back from the log; the catalog, handed in while
        # it loads, is applied once it is loaded.
        again = make(store)
        again.start()
        assert again.update_topics(2, {"t": 3})
        await serving(again)
        assert await group_epoch(again) == 3
        grown = await again.handle(
            ConsumerGroupHeartbeatRequest("g", "m1", 2, topic_partitions=None)
        )
        assert grown.error_code == Errors.NONE
        assert grown.member_epoch == 3
        assert sorted(grown.assignment.topic_partitions[0].partitions) == [0, 1, 2]
        await again.close()

    asyncio.run(scenario())


def test_groups_settings_come_with_the_catalog_and_reach_a_reloaded_shard():
    interval = "consumer.heartbeat.interval.ms"

    async def scenario():
        store: list = []
        runtime = make(store)
        await serving(runtime)
        assert runtime.update_topics(1, {"t": 2}, {"g": {interval: 6_000}})
        assert (await runtime.handle(join("m1"))).heartbeat_interval_ms == 6_000
        with pytest.raises(ValueError):  # a bad set changes nothing, the catalog included
            runtime.update_topics(2, {"t": 2}, {"g": {interval: "7000"}})
        assert runtime.catalog_version == 1
        assert runtime.update_topics(2, {"t": 2})  # none: the deployment's again
        beat = ConsumerGroupHeartbeatRequest("g", "m1", 2, topic_partitions=None)
        assert (await runtime.handle(beat)).heartbeat_interval_ms == 5_000
        await runtime.close()

        # Handed in while the next incarnation loads: in force once it serves.
        again = make(store)
        again.start()
        assert again.update_topics(3, {"t": 2}, {"g": {interval: 7_000}})
        await serving(again)
        assert (await again.handle(beat)).heartbeat_interval_ms == 7_000
        await again.close()

    asyncio.run(scenario())
