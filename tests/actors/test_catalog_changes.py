"""A topic-catalog change reaches partitions as its changes alone (actors/catalog_changes.py),
without Ray: the router's catalog keeps its latest versions' changes; changes over a version
bring any catalog held between it and theirs exactly to theirs, and none held before it; a
partition listener applies them in place to its own copy, its network processes' view and its
shard's, and takes only the addresses from changes it cannot apply."""

from __future__ import annotations

import asyncio
import random
import uuid

import msgspec
import pytest

from groupcoord.actors import catalog_changes
from groupcoord.actors.catalog import TopicCatalog
from groupcoord.actors.catalog_changes import CatalogChanges, ChangeHistory, apply_changes
from groupcoord.actors.network_pool import NetworkPool
from groupcoord.actors.runtime import PartitionRuntime
from groupcoord.actors.wire_config import WireConfig
from groupcoord.actors.wire_service import PartitionListener, WireDirectory
from groupcoord.coordinator import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    CoordinatorConfig,
    Errors,
)
from groupcoord.coordinator.group_config import DELETE, SET, GroupConfigOp
from groupcoord.wire import Node
from groupcoord.wire.topics import TopicChange

from .fakes import MemoryLog
from .test_runtime import serving

NODE = Node(0, "127.0.0.1", 9)
SESSION = "consumer.session.timeout.ms"


def change(base: int, topics: dict, groups: dict | None = None) -> CatalogChanges:
    ids = {name: None if count is None else uuid.uuid4() for name, count in topics.items()}
    return CatalogChanges(base, base + 1, topics, ids, groups or {})


def held(catalog: TopicCatalog) -> tuple[dict, dict, dict]:
    return catalog.topics(), catalog.topic_ids(), catalog.group_configs()


def test_the_history_merges_consecutive_changes_and_forgets_the_oldest(monkeypatch):
    history = ChangeHistory()
    assert history.since(0) is None  # nothing held
    history.record(change(0, {"a": 1}))
    history.record(change(1, {"b": 2, "a": None}, {"g": {SESSION: 50_000}}))
    history.record(change(2, {"b": 3}, {"g": None}))
    over_0 = history.since(0)
    assert (over_0.base_version, over_0.catalog_version) == (0, 3)
    assert over_0.topics == {"a": None, "b": 3} and over_0.group_configs == {"g": None}
    assert over_0.topic_ids["a"] is None and over_0.topic_ids["b"] is not None
    assert history.since(2).topics == {"b": 3}
    assert history.since(3) is None and history.since(-1) is None  # newest, or before all

    # A gap (a version's changes never recorded) forgets what came before it.
    history.record(change(7, {"c": 1}))
    assert history.since(2) is None and history.since(7).topics == {"c": 1}

    # Bounded by versions and by names, oldest out first.
    monkeypatch.setattr(catalog_changes, "MAX_HELD_VERSIONS", 3)
    monkeypatch.setattr(catalog_changes, "MAX_CHANGED_NAMES", 5)
    bounded = ChangeHistory()
    for base in range(5):
        bounded.record(change(base, {f"t{base}": 1}))
    assert bounded.since(1) is None and bounded.since(2).topics == {"t2": 1, "t3": 1, "t4": 1}
    bounded.record(change(5, {"x": 1, "y": 1, "z": 1}))
    assert bounded.since(2) is None and bounded.since(3).catalog_version == 6  # 5 names
    bounded.record(change(6, {f"n{i}": 1 for i in range(6)}))  # more names than all allowed
    assert bounded.since(6) is None


def test_changes_over_a_version_bring_every_later_catalog_to_the_newest(tmp_path):
    # Seeded: creates, grows, deletes and groups' settings, one version each or several in
    # one apply. For every held h in [b, newest), changes_since(b) applied to the catalog as
    # it was at h gives the catalog as it is now; for h < b they do not apply.
    rng = random.Random(7)
    catalog = TopicCatalog(str(tmp_path))
    states = {catalog.version: held(catalog)}
    for _ in range(40):
        names = sorted(catalog.topics())
        batch = []
        for _ in range(rng.choice((1, 1, 3))):
            roll = rng.random()
            if names and roll < 0.3:
                name = rng.choice(names)
                batch.append(TopicChange("grow", name, catalog.topics()[name] + 1))
            elif names and roll < 0.45:
                batch.append(TopicChange("delete", rng.choice(names)))
            else:
                batch.append(TopicChange("create", f"t{rng.randrange(12)}", rng.randint(1, 4)))
        catalog.apply(batch)
        if rng.random() < 0.3:
            value = rng.choice((None, "45000", "50000"))
            op = GroupConfigOp(SESSION, SET if value else DELETE, value)
            catalog.configure_group(f"g{rng.randrange(3)}", [op], replace=False)
        states[catalog.version] = held(catalog)
    newest = held(catalog)
    versions = sorted(states)
    assert len(versions) > 30
    for base in versions[:-1]:
        changes = catalog.changes_since(base)
        assert changes is not None and changes.catalog_version == catalog.version
        for version in versions:
            assert changes.applies_to(version) == (base <= version < catalog.version)
            if changes.applies_to(version):
                topics, ids, groups = (dict(m) for m in states[version])
                apply_changes(changes, topics, ids, groups)
                assert (topics, ids, groups) == newest, (base, version)
    # A router that starts again holds no changes: a listener is handed the whole catalog.
    assert TopicCatalog(str(tmp_path)).changes_since(versions[-2]) is None


def listener_with(partition: PartitionRuntime) -> PartitionListener:
    return PartitionListener(0, 2, WireConfig(bootstrap_port=0), partition, None, "unused")


def test_a_listener_applies_changes_to_its_own_copy_and_the_shards():
    async def scenario():
        partition = PartitionRuntime(0, 1, CoordinatorConfig(), lambda: MemoryLog([]))
        listener = listener_with(partition)
        whole = WireDirectory({0: NODE}, {"a": 1, "b": 2}, 4, {}, {"g": {SESSION: 50_000}})
        assert listener.adopt(whole) == 4
        changes = CatalogChanges(3, 5, {"a": None, "c": 3}, {"a": None, "c": uuid.uuid4()}, {})
        assert listener.adopt(WireDirectory({0: NODE}, {}, -1, changes=changes)) == 5
        directory = listener.directory
        assert (directory.catalog_version, directory.topics) == (5, {"b": 2, "c": 3})
        assert directory.topic_ids == {"c": changes.topic_ids["c"]}
        assert whole.topics == {"a": 1, "b": 2}  # the sender's directory is left as it was
        assert (partition.catalog_version, partition._catalog) == (5, {"b": 2, "c": 3})

        # Changes over a version newer than the one held: the addresses only. The next
        # refresh asks for the changes over the version held.
        moved = Node(1, "127.0.0.1", 10)
        later = CatalogChanges(6, 7, {"d": 1}, {"d": uuid.uuid4()}, {"g": None})
        assert listener.adopt(WireDirectory({0: NODE, 1: moved}, {}, -1, changes=later)) == 5
        assert listener.directory.nodes[1] == moved and "d" not in listener.directory.topics
        # Changes the listener holds already change nothing.
        assert listener.adopt(WireDirectory({0: NODE}, {}, -1, changes=changes)) == 5
        assert listener.directory.topics == {"b": 2, "c": 3}

    asyncio.run(scenario())


def test_a_shard_at_another_version_is_handed_the_whole_catalog():
    async def scenario():
        partition = PartitionRuntime(0, 1, CoordinatorConfig(), lambda: MemoryLog([]))
        listener = listener_with(partition)
        listener.adopt(WireDirectory({0: NODE}, {"a": 1}, 4))
        assert partition.update_topics(2, {}) is False  # older: ignored
        partition.catalog_version = 2  # as if the shard had been handed an older one since
        changes = CatalogChanges(4, 5, {"b": 2}, {"b": uuid.uuid4()}, {})
        assert not partition.apply_catalog_changes(changes)  # not over the version it holds
        listener.adopt(WireDirectory({0: NODE}, {}, -1, changes=changes))
        assert (partition.catalog_version, partition._catalog) == (5, {"a": 1, "b": 2})

    asyncio.run(scenario())


def test_a_serving_shard_takes_changes_as_a_metadata_change_rebalance():
    async def scenario():
        store: list = []
        partition = PartitionRuntime(0, 1, CoordinatorConfig(), lambda: MemoryLog(store))
        await serving(partition)
        assert partition.update_topics(1, {"t": 2, "other": 1})
        joined = await partition.handle(
            ConsumerGroupHeartbeatRequest(
                "g", "m1", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="t.*",
                topic_partitions=[],
            )
        )  # fmt: skip
        assert joined.error_code == Errors.NONE

        async def epoch() -> int:
            (group,) = (await partition.handle(ConsumerGroupDescribeRequest(["g"]))).groups
            return group.group_epoch

        before, written = await epoch(), len(store)
        unrelated = CatalogChanges(1, 2, {"other": 4}, {"other": uuid.uuid4()}, {})
        assert partition.apply_catalog_changes(unrelated)
        assert (await epoch(), len(store)) == (before, written)  # no group subscribes to it
        created = CatalogChanges(2, 3, {"t2": 1}, {"t2": uuid.uuid4()}, {"g": {SESSION: 50_000}})
        assert partition.apply_catalog_changes(created)  # the regex matches the new topic
        assert await epoch() == before + 1 and len(store) > written
        assert partition._group_configs == {"g": {SESSION: 50_000}}

        bad = CatalogChanges(3, 4, {"t": 0}, {"t": uuid.uuid4()}, {})
        with pytest.raises(ValueError):
            partition.apply_catalog_changes(bad)
        assert partition.catalog_version == 3 and partition._catalog["t"] == 2
        await partition.close()

    asyncio.run(scenario())


def test_network_processes_are_sent_the_changes_or_else_the_whole_view():
    async def scenario():
        partition = PartitionRuntime(0, 1, CoordinatorConfig(), lambda: MemoryLog([]))
        listener = listener_with(partition)
        listener.node = NODE
        config = WireConfig(bootstrap_port=0, network_processes=1)
        pool = listener._pool = NetworkPool(config, 0, 2, partition, None)  # not started
        listener.adopt(WireDirectory({0: NODE}, {"a": 1}, 4))
        assert (pool._view.catalog_version, pool._view.topics) == (4, {"a": 1})
        grown = CatalogChanges(4, 5, {"b": 2}, {"b": uuid.uuid4()}, {})
        listener.adopt(WireDirectory({0: NODE}, {}, -1, changes=grown))
        assert (pool._view.catalog_version, pool._view.topics) == (5, {"a": 1, "b": 2})
        # A view at a version the changes are not over is not changed: the whole is sent.
        created = CatalogChanges(5, 6, {"c": 1}, {"c": uuid.uuid4()}, {})
        pool._view = msgspec.structs.replace(pool._view, catalog_version=2)
        assert not pool.publish_changes(created) and pool._view.catalog_version == 2
        listener.adopt(WireDirectory({0: NODE}, {}, -1, changes=created))
        assert (pool._view.catalog_version, pool._view.topics) == (6, {"a": 1, "b": 2, "c": 1})
        assert pool._view.topic_ids == listener.directory.topic_ids

    asyncio.run(scenario())


@pytest.mark.parametrize("how", ["whole", "changes"])
def test_a_shard_that_breaks_taking_the_catalog_fails_the_partition(how):
    # A core bug (not a refused catalog) may leave the shard's memory half-changed: the
    # partition fails, and its on_fatal hands it over to a fresh process.
    async def scenario():
        fatal: list = []
        partition = PartitionRuntime(
            0, 1, CoordinatorConfig(), lambda: MemoryLog([]), on_fatal=fatal.append
        )
        await serving(partition)
        assert partition.update_topics(1, {"t": 1})

        def broken(*args):
            raise RuntimeError("a core bug")

        partition._shard.update_topics = partition._shard.change_topics = broken
        if how == "whole":
            assert not partition.update_topics(2, {"t": 2})
        else:
            grown = CatalogChanges(1, 2, {"t": 2}, {"t": uuid.uuid4()}, {})
            assert not partition.apply_catalog_changes(grown)
        assert partition.state == "failed" and "a core bug" in partition.fatal_error
        assert partition.catalog_version == 1 and len(fatal) == 1
        await partition.close()

    asyncio.run(scenario())
