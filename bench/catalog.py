"""What one topic-catalog change costs the router, against the catalog's size, in one run.

A CreateTopics of one topic (or a CreatePartitions, a group's settings) changes a few names;
the router's loop makes it durable and hands the catalog to every partition before it answers.
Two costs grow with the catalog, each timed here against the way it was done before, measured
in the same run:

* **durable**: ``TopicCatalog.create`` of one more topic, which appends the change's line to
  ``topics.json.changes`` and fsyncs (``actors.catalog_file``), against rewriting the whole
  catalog file (``CatalogFiles.rewrite``: what every change did before, and what a compaction
  still does now and then). Wall time, fsyncs included.
* **to Ray**: the ``WireDirectory`` written for Ray (``pickle.dumps``, which now writes msgpack
  through its ``__reduce__``), against pickle's object graph of the same fields (how Ray wrote
  it before), once per publish now (``ray.put``) where it was once per partition. CPU time.
* **read back**: what each partition's process spends reading it (``pickle.loads``), against
  reading the object graph: still the catalog's size, where a partition is handed the whole
  catalog (its first, or one the router holds no changes for); a change is handed as its
  changes alone (the "change" row).
* **refresh**: what a partition listener with network processes spends on its refresh each
  second when nothing changed (``PartitionListener.adopt`` of the router's addresses-only
  answer), against what that refresh did before: rebuild the network processes' view and
  compare it with the one they hold (``NetworkPool.publish``), and copy the catalog for the
  shard, which kept its own. CPU time, on the partition's loop.
* **metadata**: a Metadata answer naming one topic, from a listener's cache of answers
  (``wire.answer_cache``), checked by the catalog's number as the listeners check it, against
  comparing the whole catalog with the one the answer was built from (as every answer did
  before, and as a caller that does not number its catalogs still does). CPU time.
* **change**: what a partition spends taking one created topic (reading what Ray hands it,
  and ``PartitionListener.adopt``: its own copy, its network processes' view, its serving
  shard's), handed the change alone (``catalog_changes``), against handed the whole catalog,
  as every change was before (and as a partition the router holds no changes for still
  is). CPU time.
* **regex join**: a KIP-848 member subscribed by regex joining a group of 7 others subscribed
  alike: with the shard's resolutions of each regex kept (``coordinator.regex_topics``),
  against resolving every member's regex against the whole catalog again, twice a join (as
  before). CPU time of that join.
* **groups** (a table of its own, by the shard's consumer groups: 1,000 / 20,000 / 100,000 of
  one member each): a change of a topic no group subscribes to, the groups it concerns
  found through the shard's index (``coordinator.topic_watchers``), against asking every
  group (as before). CPU time.
* **bootstrap**: what the router's bootstrap listener reads the catalog with for each request
  (``TopicCatalog.snapshot``, copied once per version), against the copies of its topics and
  their ids it made for every request before (``topics()``, ``topic_ids()``). CPU time.

Catalogs of 1,000 / 10,000 / 90,000 topics of one partition each (``MAX_TOPICS`` is 100,000);
each figure the least of ``--trials``; ratio = before ÷ now.

Run: ``.venv/bin/python bench/catalog.py [--trials N]``; writes bench/results/catalog.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.large_answers import wire_request  # noqa: E402 — ROOT on the path
from bench.run_info import write_results  # noqa: E402
from groupcoord.actors.catalog import TopicCatalog  # noqa: E402
from groupcoord.actors.catalog_changes import CatalogChanges  # noqa: E402
from groupcoord.actors.catalog_file import CatalogFiles, read_catalog  # noqa: E402
from groupcoord.actors.network_pool import NetworkPool  # noqa: E402
from groupcoord.actors.runtime import PartitionRuntime  # noqa: E402
from groupcoord.actors.wire_config import WireConfig  # noqa: E402
from groupcoord.actors.wire_service import PartitionListener, WireDirectory  # noqa: E402
from groupcoord.coordinator import (  # noqa: E402
    ConsumerGroupHeartbeatRequest,
    CoordinatorConfig,
    Errors,
    SequentialIds,
    Shard,
)
from groupcoord.coordinator.regex_topics import RegexTopics  # noqa: E402
from groupcoord.coordinator.topic_regex import compile_regex  # noqa: E402
from groupcoord.wire import ApiKey, Node  # noqa: E402
from groupcoord.wire.answer_cache import MetadataAnswers  # noqa: E402
from groupcoord.wire.builders import ZERO_TOPIC_ID  # noqa: E402
from groupcoord.wire.topics import TopicChange  # noqa: E402
from tests.actors.fakes import MemoryLog  # noqa: E402
from tests.actors.test_runtime import serving  # noqa: E402

RESULTS = os.path.join(ROOT, "bench", "results", "catalog.json")
SIZES = (1_000, 10_000, 90_000)


def least_s(run, trials: int, clock) -> float:
    best = float("inf")
    for trial in range(trials):
        started = clock()
        run(trial)
        best = min(best, clock() - started)
    return best


def row(what: str, topics: int, now_s: float, before_s: float) -> dict:
    result = {
        "cost": what,
        "topics": topics,
        "now_ms": round(now_s * 1000, 3),
        "before_ms": round(before_s * 1000, 3),
        "before_over_now": round(before_s / now_s, 1),
    }
    print(
        f"{what:>10} {topics:>8,} {result['now_ms']:>10.3f} {result['before_ms']:>10.3f} "
        f"{result['before_over_now']:>12.1f}×",
        flush=True,
    )
    return result


def catalog_rows(topics: int, trials: int) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="bench-catalog-") as directory:
        catalog = TopicCatalog(directory)
        for start in range(0, topics, 10_000):
            end = min(topics, start + 10_000)
            catalog.apply([TopicChange("create", f"topic-{n:06d}", 1) for n in range(start, end)])
        catalog.create("warm", 1)  # the first write after opening rewrites: past it

        def create(trial: int) -> None:
            catalog.create(f"more-{trial}", 1)

        state = read_catalog(catalog.path)
        files = CatalogFiles(os.path.join(directory, "rewrite-copy.json"))
        durable = row(
            "durable",
            topics,
            least_s(create, trials, time.perf_counter),
            least_s(lambda _: files.rewrite(state), trials, time.perf_counter),
        )
        files.close()
        directory_now = WireDirectory(
            {0: Node(0, "localhost", 9092)},
            catalog.topics(),
            catalog.version,
            catalog.topic_ids(),
            catalog.group_configs(),
        )
        fields = (
            directory_now.nodes,
            directory_now.topics,
            directory_now.catalog_version,
            directory_now.topic_ids,
            directory_now.group_configs,
        )
        to_ray = row(
            "to Ray",
            topics,
            least_s(lambda _: pickle.dumps(directory_now), trials, time.thread_time),
            least_s(lambda _: pickle.dumps(fields), trials, time.thread_time),
        )
        written_now, written_before = pickle.dumps(directory_now), pickle.dumps(fields)
        read_back = row(
            "read back",
            topics,
            least_s(lambda _: pickle.loads(written_now), trials, time.thread_time),
            least_s(lambda _: pickle.loads(written_before), trials, time.thread_time),
        )

        def copies(_: int) -> None:
            catalog.topics(), catalog.topic_ids()

        return [
            durable,
            to_ray,
            read_back,
            refresh_row(directory_now, trials),
            metadata_row(directory_now, trials),
            change_row(directory_now, trials),
            regex_join_row(directory_now, trials),
            row(
                "bootstrap",
                len(directory_now.topics),
                least_s(lambda _: catalog.snapshot(), trials, time.thread_time),
                least_s(copies, trials, time.thread_time),
            ),
        ]


def metadata_row(directory: WireDirectory, trials: int) -> dict:
    """The ``metadata`` row: the same request answered from the cache again and again."""
    request = wire_request(
        ApiKey.METADATA,
        12,
        {
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
            "topics": [{"name": next(iter(directory.topics)), "topic_id": ZERO_TOPIC_ID}],
        },
    )
    view = dict(
        brokers=list(directory.nodes.values()),
        leader_id=0,
        partitions=directory.topics,
        cluster_id="bench",
        topic_ids=directory.topic_ids,
        operations=(0, 0),
    )
    numbered, compared = MetadataAnswers(), MetadataAnswers()
    version = directory.catalog_version
    numbered.answer(request, **view, catalog_version=version)
    compared.answer(request, **view)
    return row(
        "metadata",
        len(directory.topics),
        least_s(
            lambda _: numbered.answer(request, **view, catalog_version=version),
            trials,
            time.thread_time,
        ),
        least_s(lambda _: compared.answer(request, **view), trials, time.thread_time),
    )


def refresh_row(directory: WireDirectory, trials: int) -> dict:
    """The ``refresh`` row: a listener with network processes (a real ``NetworkPool``, its
    processes not started) holding ``directory``, and a runtime (not started) holding its
    catalog, on an event loop as in a partition actor."""
    return asyncio.run(_refresh_row(directory, trials))


async def _refresh_row(directory: WireDirectory, trials: int) -> dict:
    runtime = PartitionRuntime(0, 1, CoordinatorConfig(), lambda: None)
    config = WireConfig(bootstrap_port=0, network_processes=1)
    listener = PartitionListener(0, 1, config, runtime, None, "bench")
    listener.node = directory.nodes[0]
    listener._pool = pool = NetworkPool(config, 0, 1, runtime, None)
    listener.adopt(directory)
    addresses_only = WireDirectory(dict(directory.nodes), {}, -1)

    def before(_: int) -> None:
        held = listener.directory
        pool.publish(listener._view())
        runtime.update_topics(held.catalog_version, dict(held.topics), held.group_configs)

    return row(
        "refresh",
        len(directory.topics),
        least_s(lambda _: listener.adopt(addresses_only), trials, time.thread_time),
        least_s(before, trials, time.thread_time),
    )


def change_row(directory: WireDirectory, trials: int) -> dict:
    """The ``change`` row: what a partition spends taking one created topic (reading what
    Ray hands it, then ``PartitionListener.adopt``: its own copy, its network processes'
    view, its serving shard's), handed its changes (``catalog_changes``), against handed the
    whole catalog (as every change was before, and as a partition the router holds no
    changes for still is). The network processes are not started: what they are sent and
    read is left out of both."""
    return asyncio.run(_change_row(directory, trials))


async def _change_row(directory: WireDirectory, trials: int) -> dict:
    nodes, version = directory.nodes, directory.catalog_version
    as_changes, as_whole = [], []
    topics, topic_ids = dict(directory.topics), dict(directory.topic_ids)
    for trial in range(trials):
        name, topic_id = f"created-{trial}", uuid.uuid4()
        topics[name], topic_ids[name] = 1, topic_id
        changes = CatalogChanges(
            version + trial, version + trial + 1, {name: 1}, {name: topic_id}, {}
        )
        as_changes.append(pickle.dumps(WireDirectory(dict(nodes), {}, -1, changes=changes)))
        whole = WireDirectory(
            dict(nodes), topics, version + trial + 1, topic_ids, directory.group_configs
        )
        as_whole.append(pickle.dumps(whole))
    listeners = [await _serving_listener(directory) for _ in range(2)]
    now = least_s(
        lambda trial: listeners[0].adopt(pickle.loads(as_changes[trial])),
        trials,
        time.thread_time,
    )
    before = least_s(
        lambda trial: listeners[1].adopt(pickle.loads(as_whole[trial])), trials, time.thread_time
    )
    for listener in listeners:
        assert listener.directory.topics == topics and listener._runtime.catalog_version == (
            version + trials
        )
        await listener._runtime.close()
    return row("change", len(directory.topics), now, before)


async def _serving_listener(directory: WireDirectory) -> PartitionListener:
    """A partition listener with a network pool (its processes not started) and a serving
    runtime (an in-memory log), holding ``directory``."""
    runtime = PartitionRuntime(0, 1, CoordinatorConfig(), lambda: MemoryLog([]))
    await serving(runtime)
    config = WireConfig(bootstrap_port=0, network_processes=1)
    listener = PartitionListener(0, 1, config, runtime, None, "bench")
    listener.node = directory.nodes[0]
    listener._pool = NetworkPool(config, 0, 1, runtime, None)
    listener.adopt(directory)
    return listener


REGEX_MEMBERS = 8  # the "regex join" row's group


class _Unkept(RegexTopics):
    """Resolves every regex afresh each time asked, as the shard did before it kept them."""

    def matching(self, regex: str, catalog) -> frozenset[str]:
        pattern = compile_regex(regex)
        return frozenset(topic for topic in catalog if pattern.fullmatch(topic))


def regex_join_row(directory: WireDirectory, trials: int) -> dict:
    """The ``regex join`` row: a KIP-848 member subscribed by regex joining a group of
    ``REGEX_MEMBERS`` - 1 others subscribed alike, in a shard holding the catalog: with the
    shard's kept resolutions (``coordinator.regex_topics``), against resolving each member's
    regex against the whole catalog again (as it did before, twice a join: the group's
    partition metadata, then the assignment). CPU time of that join; the kept resolution is
    made by the group's first join, untimed. "Before" is the least of at most two trials
    (at 90,000 topics a trial's joins take seconds)."""
    catalog = dict(directory.topics)

    def last_join_s(shard: Shard, group: str) -> float:
        def join(member: int) -> None:
            request = ConsumerGroupHeartbeatRequest(
                group, f"m{member}", 0, rebalance_timeout_ms=30_000,
                subscribed_topic_regex="topic-00000.*", topic_partitions=[],
            )  # fmt: skip
            (reply,) = shard.handle(1_000, member, request).replies
            assert reply[1].error_code == Errors.NONE, reply

        for member in range(REGEX_MEMBERS - 1):
            join(member)
        started = time.thread_time()
        join(REGEX_MEMBERS - 1)
        return time.thread_time() - started

    def least_s_of(kept: bool, runs: int) -> float:
        shard = Shard(0, 1, config=CoordinatorConfig(), ids=SequentialIds())
        shard.on_loaded(0)
        shard.update_topics(0, catalog)
        if not kept:
            shard._regex_topics = _Unkept()
        return min(last_join_s(shard, f"g{trial}") for trial in range(runs))

    return row(
        "regex join", len(catalog), least_s_of(True, trials), least_s_of(False, min(trials, 2))
    )


GROUP_COUNTS = (1_000, 20_000, 100_000)


def groups_row(groups: int, trials: int) -> dict:
    """The ``groups`` row: a shard holding ``groups`` consumer groups of one member each,
    subscribed by name to topics of a 1,000-topic catalog, takes a change of a topic none
    subscribes to (``Shard.change_topics``): finding the groups it concerns through the
    shard's index (``coordinator.topic_watchers``; re-reading every group after they all
    joined is its first change, untimed), against asking every group, as it did before. CPU
    time of the change."""
    shard = Shard(0, 1, config=CoordinatorConfig(), ids=SequentialIds())
    shard.on_loaded(0)
    shard.update_topics(0, {f"topic-{n:04d}": 2 for n in range(1_000)})
    for n in range(groups):
        request = ConsumerGroupHeartbeatRequest(
            f"group-{n}", "m", 0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=[f"topic-{n % 1_000:04d}"], topic_partitions=[],
        )  # fmt: skip
        shard.handle(1_000, n, request)
    shard.change_topics(2_000, {"first": 1})

    def asking_every_group(trial: int) -> None:
        names = frozenset({f"unwatched-{trial}"})
        for group in shard.consumer_groups():
            topics, by_regex = group.watched_topics()
            if not names.isdisjoint(topics) or by_regex and group.regex_matches_any(names):
                raise AssertionError("no group watches it")

    now = least_s(
        lambda trial: shard.change_topics(2_000, {f"new-{trial}": 1}), trials, time.thread_time
    )
    return row("groups", groups, now, least_s(asking_every_group, trials, time.thread_time))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5, help="runs per cell (default 5)")
    args = parser.parse_args()
    header = ("cost", "topics", "now ms", "before ms", "before ÷ now")
    print("{:>10} {:>8} {:>10} {:>10} {:>13}".format(*header))
    rows = [r for topics in SIZES for r in catalog_rows(topics, args.trials)]
    print("\ngroups: consumer groups in the shard (the topics column)")
    rows += [groups_row(groups, args.trials) for groups in GROUP_COUNTS]
    write_results(RESULTS, {"bench": "catalog", "trials": args.trials, "rows": rows})


if __name__ == "__main__":
    main()
