"""A partition listener never takes back an older topic catalog than it holds, and keeps its own
when the router sends none (Ray-free).

The race, as it happened in CI: a listener's periodic refresh is answered by the router just
before a CreateTopics; the router then publishes the new catalog to the listener and answers the
client; the refresh's (older) answer arrives last. The client's next Metadata must still list
the topic it created, or clients that resolve their subscription once (kafka-python) never
join with it.
"""

from __future__ import annotations

import asyncio

import pytest
from ray.exceptions import ActorDiedError

from groupcoord.actors import wire_service
from groupcoord.actors.runtime import PartitionRuntime
from groupcoord.actors.wire_config import WireConfig
from groupcoord.actors.wire_service import PartitionListener, WireDirectory
from groupcoord.coordinator import CoordinatorConfig, Errors
from groupcoord.wire import Node
from groupcoord.wire.topics import TopicChange

from .fakes import MemoryLog

NODE = Node(0, "127.0.0.1", 9)
BEFORE = WireDirectory({0: NODE}, {}, 1)
AFTER = WireDirectory({0: NODE}, {"created": 4}, 2)


def runtime() -> PartitionRuntime:
    """A partition that is not started (still loading): it keeps the catalog it is handed."""
    return PartitionRuntime(0, 1, CoordinatorConfig(), lambda: MemoryLog([]))


class SlowRouter:
    """``exchange`` answers with the catalog as it was when asked, once released."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.release = asyncio.Event()
        self.exchange = self

    def remote(self, partition, node, held_version):
        async def answer():
            self.asked.set()
            await self.release.wait()
            return BEFORE

        return answer()


def test_a_refresh_answered_before_a_publish_does_not_undo_it():
    async def scenario() -> None:
        router = SlowRouter()
        partition = runtime()
        config = WireConfig(bootstrap_port=0)
        listener = PartitionListener(0, 1, config, partition, router, "unused")
        listener.node = NODE
        refresh = asyncio.get_running_loop().create_task(listener._refresh_forever())
        await router.asked.wait()  # the refresh is under way with the old catalog
        listener.adopt(AFTER)  # the router publishes the change
        router.release.set()  # then the old answer arrives
        await asyncio.sleep(0.05)
        refresh.cancel()
        assert listener.directory.topics == {"created": 4}
        assert listener.directory.catalog_version == 2
        assert partition.catalog_version == 2  # the shard's copy, for consumer groups

    asyncio.run(scenario())


def test_addresses_are_always_taken_and_newer_catalogs_replace_older():
    async def scenario():  # the runtime lives on an event loop (it aims its timer there)
        partition = runtime()
        listener = PartitionListener(0, 2, WireConfig(bootstrap_port=0), partition, None, "unused")
        listener.adopt(AFTER)
        moved = Node(1, "127.0.0.1", 10)
        listener.adopt(WireDirectory({0: NODE, 1: moved}, {}, 1))
        assert listener.directory.nodes[1] == moved
        assert listener.directory.topics == {"created": 4}
        listener.adopt(WireDirectory({0: NODE}, {"created": 4, "other": 1}, 3))
        assert listener.directory.topics == {"created": 4, "other": 1}
        assert partition.catalog_version == 3

    asyncio.run(scenario())


def test_a_directory_without_the_catalog_keeps_the_one_held():
    # The router's answer to a listener that already holds its version: addresses only.
    async def scenario():
        partition = runtime()
        listener = PartitionListener(0, 2, WireConfig(bootstrap_port=0), partition, None, "unused")
        configs = {"g": {"consumer.session.timeout.ms": 50_000}}
        listener.adopt(WireDirectory({0: NODE}, {"created": 4}, 2, {}, configs))
        moved = Node(1, "127.0.0.1", 11)
        listener.adopt(WireDirectory({0: NODE, 1: moved}, {}, -1))
        assert listener.directory.nodes[1] == moved
        assert listener.directory.topics == {"created": 4}
        assert listener.directory.group_configs == configs
        assert listener.directory.catalog_version == 2
        assert partition.catalog_version == 2

    asyncio.run(scenario())


def test_a_directory_naming_fewer_listeners_drops_none():
    # A router that has just restarted knows only the partitions that registered again (or
    # answered its asking) so far. Before: a listener took its answer whole and named only
    # those brokers until its next refresh, and a client that read that Metadata dropped the
    # others, failing what it had sent them.
    async def scenario():
        partition = runtime()
        listener = PartitionListener(0, 3, WireConfig(bootstrap_port=0), partition, None, "unused")
        listener.node = NODE
        others = {1: Node(1, "127.0.0.1", 10), 2: Node(2, "127.0.0.1", 11)}
        listener.adopt(WireDirectory({0: NODE, **others}, {"t": 1}, 2))
        moved = Node(2, "127.0.0.1", 12)
        listener.adopt(WireDirectory({0: NODE, 2: moved}, {}, -1))  # partition 1 not yet known
        assert listener.directory.nodes == {0: NODE, 1: others[1], 2: moved}
        assert [b.node_id for b in listener._brokers()] == [0, 1, 2]
        listener.adopt(WireDirectory({0: NODE}, {"t": 1, "u": 2}, 3))  # a newer catalog too
        assert listener.directory.nodes == {0: NODE, 1: others[1], 2: moved}
        assert listener.directory.topics == {"t": 1, "u": 2}

    asyncio.run(scenario())


class CountingPool:
    """A partition's network processes, as the listener sees them: the views it publishes."""

    def __init__(self) -> None:
        self.views: list = []

    def publish(self, view) -> None:
        self.views.append(view)


def test_an_unchanged_refresh_copies_and_publishes_nothing(monkeypatch):
    # Each second a listener's refresh brings addresses only (the router's answer when the
    # listener holds the current catalog). Before, every one of them rebuilt the network
    # processes' view, which copies and compares the whole catalog (8 ms of the partition's
    # loop at 90,000 topics), and copied the catalog for the shard, which ignored it.
    async def scenario():
        partition = runtime()
        handed: list = []
        take = partition.update_topics
        monkeypatch.setattr(partition, "update_topics", lambda *a: handed.append(a[0]) or take(*a))
        config = WireConfig(bootstrap_port=0, network_processes=1)
        listener = PartitionListener(0, 2, config, partition, None, "unused")
        pool = CountingPool()
        listener.node, listener._pool = NODE, pool
        listener.adopt(WireDirectory({0: NODE}, {"t": 1}, 2))
        assert (len(pool.views), handed) == (1, [2])
        for _ in range(3):
            listener.adopt(WireDirectory({0: NODE}, {}, -1))  # nothing new
            listener.adopt(WireDirectory({0: NODE}, {"t": 1}, 2))  # the held version again
        assert (len(pool.views), handed) == (1, [2])
        moved = Node(1, "127.0.0.1", 11)
        listener.adopt(WireDirectory({0: NODE, 1: moved}, {}, -1))  # a listener moved
        assert (len(pool.views), handed) == (2, [2])
        assert pool.views[-1].nodes[1] == moved and pool.views[-1].topics == {"t": 1}
        listener.adopt(WireDirectory({0: NODE, 1: moved}, {"t": 1, "u": 2}, 3))  # a change
        assert (len(pool.views), handed) == (3, [2, 3])
        assert listener.directory.topics == partition._catalog == {"t": 1, "u": 2}

    asyncio.run(scenario())


class StalledOnceRouter:
    """``exchange`` never answers the first call (a router alive but stalled), then answers."""

    def __init__(self) -> None:
        self.calls = 0
        self.exchange = self

    def remote(self, partition, node, held_version):
        self.calls += 1
        stalled = self.calls == 1

        async def answer():
            if stalled:
                await asyncio.Event().wait()  # forever
            return AFTER

        return answer()


def test_a_stalled_router_does_not_stop_the_refreshes(monkeypatch):
    # Before: the refresh awaited the router's answer without a bound, so a router that was
    # alive but stuck (no RayActorError ever came) ended this listener's refreshes for good.
    monkeypatch.setattr(wire_service, "EXCHANGE_TIMEOUT_S", 0.2)

    async def scenario():
        router = StalledOnceRouter()
        config = WireConfig(bootstrap_port=0, metadata_refresh_ms=10)
        listener = PartitionListener(0, 1, config, runtime(), router, "unused")
        listener.node = NODE
        refresh = asyncio.get_running_loop().create_task(listener._refresh_forever())
        try:
            async with asyncio.timeout(10):
                while listener.directory.catalog_version != AFTER.catalog_version:
                    await asyncio.sleep(0.01)
        finally:
            refresh.cancel()
        assert router.calls >= 2 and listener.directory.topics == {"created": 4}

    asyncio.run(scenario())


class ChangeRouter:
    """``change_topics`` never answers (a router alive but stalled), or fails as a dead
    router's call does."""

    def __init__(self, dead: bool) -> None:
        self.dead = dead
        self.change_topics = self

    async def remote(self, changes):
        if self.dead:
            raise ActorDiedError()
        await asyncio.Event().wait()


@pytest.mark.parametrize(
    ("dead", "says"),
    [(False, "did not answer within 0.2 s"), (True, "unavailable (its actor is restarting)")],
)
def test_a_stalled_or_dead_router_answers_topic_changes_request_timed_out(monkeypatch, dead, says):
    # Before: CreateTopics on a partition's listener awaited the router without a bound, so
    # the client's request (and its connection's later ones) hung as long as the router did.
    monkeypatch.setattr(wire_service, "CHANGE_TOPICS_TIMEOUT_S", 0.2)
    changes = [TopicChange("create", "a", partitions=1), TopicChange("create", "b", partitions=2)]

    async def scenario():
        config = WireConfig(bootstrap_port=0)
        listener = PartitionListener(0, 1, config, runtime(), ChangeRouter(dead), "unused")
        async with asyncio.timeout(10):
            return await listener._change_topics(changes)

    results = asyncio.run(scenario())
    assert [r.error for r in results] == [Errors.REQUEST_TIMED_OUT] * 2
    assert says in results[0].message
