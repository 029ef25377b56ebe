"""The mirror's plan and its application to a real topic catalog (Ray-free): what each
difference becomes, refusals reported per topic with Kafka's error, requests chunked."""

from __future__ import annotations

import asyncio

import pytest

from groupcoord.actors import catalog_mirror, topic_mirror
from groupcoord.actors.catalog import MAX_PARTITIONS_PER_TOPIC, TopicCatalog
from groupcoord.actors.topic_mirror import apply, plan
from tests.kafka.javakafka import free_ports


def test_the_plan_creates_grows_and_keeps():
    upstream = {"a": 3, "b": 2, "c": 2, "d": 1, "skip": 9}
    rows = plan(upstream, {"b": 1, "c": 2, "d": 4, "e": 5}, "[a-d]")
    assert [(r.topic, r.upstream, r.before, r.action) for r in rows] == [
        ("a", 3, None, "create"),
        ("b", 2, 1, "grow"),
        ("c", 2, 2, "same"),
        ("d", 1, 4, "kept"),
        ("e", None, 5, "kept"),
    ]
    with pytest.raises(ValueError, match="--topic-pattern"):
        plan({}, {}, "(")


def test_refusals_are_reported_per_topic_and_the_rest_applies(tmp_path, monkeypatch):
    catalog = TopicCatalog(str(tmp_path))
    catalog.create("full", MAX_PARTITIONS_PER_TOPIC)
    catalog.create("fuller", MAX_PARTITIONS_PER_TOPIC - 2)  # the catalog has 2 to go
    monkeypatch.setattr(topic_mirror, "MAX_CHANGES_PER_REQUEST", 3)
    sent = []

    def change_topics(changes):
        sent.append([c.name for c in changes])
        return catalog.apply(changes)

    upstream = {"fuller": MAX_PARTITIONS_PER_TOPIC, "x": 1, "y": 1, "z": 1}
    rows = apply(change_topics, plan(upstream, catalog.topics(), None), dry_run=False)
    assert sent == [["fuller", "x", "y"], ["z"]]
    assert [(r.topic, r.action, r.refused) for r in rows] == [
        ("full", "kept", False),
        ("fuller", "grow", False),
        ("x", "create", True),
        ("y", "create", True),
        ("z", "create", True),
    ]
    assert rows[1].result == "done" and rows[2].result.startswith("INVALID_PARTITIONS: ")
    assert catalog.topics() == {
        "full": MAX_PARTITIONS_PER_TOPIC,
        "fuller": MAX_PARTITIONS_PER_TOPIC,
    }
    catalog.delete("full")
    (dry,) = apply(change_topics, plan({"w": 1}, {}, None), dry_run=True)
    assert (dry.result, dry.refused) == ("valid", False) and "w" not in catalog.topics()


def test_the_routers_mirror_reports_an_unreachable_cluster_and_goes_on(tmp_path, monkeypatch):
    # serve --mirror-from: a round that cannot reach the cluster is kept in the state (what
    # `groupcoord status` shows), changes nothing, and the next round tries again.
    monkeypatch.setattr(catalog_mirror, "KAFKA_TIMEOUT_S", 0.5)
    catalog = TopicCatalog(str(tmp_path))
    catalog.create("here", 2)
    (port,) = free_ports(1)

    async def change_topics(changes):
        return catalog.apply(changes)

    mirror = catalog_mirror.CatalogMirror(
        catalog_mirror.MirrorConfig(f"127.0.0.1:{port}", every_s=1), catalog.topics, change_topics
    )

    async def two_rounds():
        await mirror.run_once()
        await mirror.run_once()

    asyncio.run(two_rounds())
    state = mirror.state()
    assert state["rounds"] == 2 and state["from"] == f"kafka:127.0.0.1:{port}"
    assert state["last"]["error"].startswith("ConnectionError: ")
    assert "cluster unreachable" in state["last"]["error"]
    assert catalog.topics() == {"here": 2}
