"""Partition listeners served by network processes (``WireConfig.network_processes``) on a real
Ray: librdkafka groups and AdminClient topic changes through them, the processes being the
partition actor's children, one killed and replaced while a consumer commits, the partition
actor killed (its processes exit by themselves, the restarted actor has new ones) and a
stopped deployment leaving none behind."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid

import pytest
import ray
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from groupcoord.actors import WireConfig, start, stop
from groupcoord.actors.catalog_changes import CatalogChanges
from groupcoord.actors.wire_service import WireDirectory
from groupcoord.coordinator import partition_for
from groupcoord.wire import Node

from .helpers import TEST_CONFIG, wait_assigned, wait_for, wait_restarted, wire_consumer

NUM_PARTITIONS = 2
PROCESSES = 2
TOPIC, TOPIC_PARTITIONS = "np-events", 4
POLLS = 300  # of 0.1 s at most, waiting for an assignment
EXIT_S = 5.0  # how soon processes must be gone once their partition is
MODULE = "groupcoord.actors.network_process"


def _wire() -> WireConfig:
    return WireConfig(bootstrap_port=0, metadata_refresh_ms=200, network_processes=PROCESSES)


@pytest.fixture(scope="module")
def deployment(ray_session, tmp_path_factory):
    d = start(
        NUM_PARTITIONS,
        str(tmp_path_factory.mktemp("logs-netproc")),
        namespace="gc-netproc",
        config=TEST_CONFIG,
        wire=_wire(),
    )
    d.wait_ready(60)
    ray.get(d.router.create_topic.remote(TOPIC, TOPIC_PARTITIONS))
    yield d
    stop(d)


# -- processes ---------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int] | None:
    """``(state, parent pid)`` of ``pid`` from /proc, None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = data[data.rindex(")") + 2 :].split()  # the command name may hold spaces
    return fields[0], int(fields[1])


def _is_network_process(pid: int) -> bool:
    """``pid`` runs (neither gone nor a zombie) and is a network process (not a reused pid)."""
    stat = _stat(pid)
    if stat is None or stat[0] == "Z":
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return False
    return MODULE.encode() in argv


def _children(parent: int) -> list[int]:
    """The running network processes whose parent is ``parent``, from a scan of /proc."""
    pids = (int(name) for name in os.listdir("/proc") if name.isdigit())
    return sorted(
        pid for pid in pids if _is_network_process(pid) and (_stat(pid) or ("", 0))[1] == parent
    )


def _info(deployment, partition: int) -> dict:
    return ray.get(deployment.partitions()[partition].info.remote(), timeout=10)


def _check_processes(info: dict) -> list[int]:
    """The partition's network processes: PROCESSES of them, running, its own children."""
    pids = info["network_processes"]["pids"]
    assert len(pids) == len(set(pids)) == PROCESSES, info["network_processes"]
    for pid in pids:
        assert _is_network_process(pid), pid
        assert _stat(pid)[1] == info["pid"], f"{pid} is not the partition actor's child"
    assert _children(info["pid"]) == sorted(pids)  # no other network process of it runs
    return pids


def _wait_serving(deployment) -> list[dict]:
    """Until every partition actor answers, has loaded, and runs all its network processes."""

    def ready():
        try:
            infos = deployment.infos()
        except ray.exceptions.RayError:  # restarting
            return None
        if all(
            i["state"] == "serving"
            and i["network_processes"] is not None
            and len(i["network_processes"]["pids"]) == PROCESSES
            for i in infos
        ):
            return infos
        return None

    return wait_for(ready, 60, "partitions serving with their network processes")


# -- clients -----------------------------------------------------------------------------------


def _group_on(partition: int, prefix: str) -> str:
    """A group id whose coordinator is ``partition``."""
    return next(
        f"{prefix}-{n}"
        for n in range(100)
        if partition_for(f"{prefix}-{n}", NUM_PARTITIONS) == partition
    )


def _read_back(deployment, group: str) -> list[int]:
    reader = wire_consumer(deployment.kafka, group)
    try:
        read = reader.committed(
            [TopicPartition(TOPIC, p) for p in range(TOPIC_PARTITIONS)], timeout=20
        )
    finally:
        reader.close()
    return [tp.offset for tp in read]


def _commit_and_read_back(deployment, group: str, base: int) -> None:
    consumer = wire_consumer(deployment.kafka, group)
    try:
        consumer.subscribe([TOPIC])
        assert wait_assigned(consumer, TOPIC_PARTITIONS) == set(range(TOPIC_PARTITIONS))
        offsets = [TopicPartition(TOPIC, p, base + p) for p in range(TOPIC_PARTITIONS)]
        answered = consumer.commit(offsets=offsets, asynchronous=False)
        assert all(tp.error is None for tp in answered)
    finally:
        consumer.close()
    assert _read_back(deployment, group) == [base + p for p in range(TOPIC_PARTITIONS)]


class Committer:
    """A librdkafka consumer committing ever-growing offsets in a thread, recording what was
    acknowledged; a failed commit (its connection cut) is retried with the next offset. It
    stops only after an acknowledged commit, so that the last offset acknowledged is the last
    one sent."""

    def __init__(self, deployment, group: str) -> None:
        self.deployment, self.group = deployment, group
        self.acked: dict[int, int] = {}
        self.acks = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def __enter__(self) -> Committer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the committer did not stop"

    def _run(self) -> None:
        consumer = wire_consumer(self.deployment.kafka, self.group)
        consumer.subscribe([TOPIC])
        offset, last_ok = 1_000, False
        deadline = None
        try:
            while not (self._stop.is_set() and last_ok):
                if self._stop.is_set():
                    deadline = deadline or time.monotonic() + 30
                    if time.monotonic() > deadline:
                        break
                consumer.poll(0.05)
                owned = [tp.partition for tp in consumer.assignment()]
                if not owned:
                    continue
                offset += 1
                try:
                    answered = consumer.commit(
                        offsets=[TopicPartition(TOPIC, p, offset) for p in owned],
                        asynchronous=False,
                    )
                except KafkaException:
                    last_ok = False  # it may or may not have been applied: commit again
                    continue
                last_ok = all(tp.error is None for tp in answered)
                for tp in answered:
                    if tp.error is None:
                        self.acked[tp.partition] = tp.offset
                self.acks += 1
        except BaseException as exc:  # noqa: BLE001 — reported by the test
            self.errors.append(exc)
        finally:
            consumer.close()

    def wait_acks(self, more_than: int, timeout_s: float = 30.0) -> None:
        wait_for(lambda: self.acks > more_than or self.errors, timeout_s, "a commit")
        assert not self.errors, self.errors


# -- tests -------------------------------------------------------------------------------------


def test_network_processes_are_the_partition_actors_children(deployment):
    infos = _wait_serving(deployment)
    seen: set[int] = set()
    for info in infos:
        assert info["kafka"]
        assert info["network_processes"]["restarts"] == 0
        pids = _check_processes(info)
        assert info["pid"] not in pids
        seen.update(pids)
    assert len(seen) == NUM_PARTITIONS * PROCESSES  # no process shared between partitions


def test_a_librdkafka_group_rebalances_through_network_processes(deployment):
    group = "np-group"
    first = wire_consumer(deployment.kafka, group)
    second = wire_consumer(deployment.kafka, group)
    try:
        first.subscribe([TOPIC])
        assert wait_assigned(first, TOPIC_PARTITIONS) == set(range(TOPIC_PARTITIONS))
        offsets = [TopicPartition(TOPIC, p, 100 + p) for p in range(TOPIC_PARTITIONS)]
        answered = first.commit(offsets=offsets, asynchronous=False)
        assert all(tp.error is None for tp in answered)
        read = first.committed([TopicPartition(TOPIC, p) for p in range(4)], timeout=20)
        assert [tp.offset for tp in read] == [100, 101, 102, 103]

        second.subscribe([TOPIC])
        for _ in range(POLLS):
            first.poll(0.05)
            second.poll(0.05)
            a = {tp.partition for tp in first.assignment()}
            b = {tp.partition for tp in second.assignment()}
            if a and b and not a & b and a | b == set(range(TOPIC_PARTITIONS)):
                break
        else:
            raise AssertionError(f"no rebalance onto both consumers: {a} and {b}")
    finally:
        first.close()
        second.close()
    assert _read_back(deployment, group) == [100, 101, 102, 103]


@pytest.mark.parametrize("where", ["bootstrap", "partition"])
def test_admin_client_creates_topics_through_network_processes(deployment, where):
    # From the bootstrap listener, librdkafka sends CreateTopics to the controller Metadata
    # names (partition 0's listener); from a partition's own listener, to that one. Both are
    # network processes, which hand the change to their partition in a TOPICS frame.
    address = deployment.kafka if where == "bootstrap" else _info(deployment, 1)["kafka"]
    name = f"np-created-{where}"
    admin = AdminClient({"bootstrap.servers": address})
    futures = admin.create_topics([NewTopic(name, 3)], request_timeout=20)
    assert futures[name].result(timeout=30) is None
    version, catalog, _ = ray.get(deployment.router.topic_catalog.remote())
    assert catalog.get(name) == 3
    # A listener's refresh gets the catalog only when it holds an older one: the changes
    # over the version it holds (catalog_changes), or the whole catalog when it holds none.
    router = deployment.router
    host, port = _info(deployment, 1)["kafka"].rsplit(":", 1)
    node = Node(1, host, int(port))  # partition 1's listener, as it registers itself
    changed = ray.get(router.exchange.remote(1, node, version - 1))
    assert (changed.catalog_version, changed.topics) == (-1, {})
    changes = changed.changes
    assert (changes.base_version, changes.catalog_version) == (version - 1, version)
    assert changes.topics == {name: 3} and list(changes.topic_ids) == [name]
    full = ray.get(router.exchange.remote(1, node, -1))
    assert (full.catalog_version, full.topics.get(name), full.changes) == (version, 3, None)
    same = ray.get(router.exchange.remote(1, node, version))
    assert (same.catalog_version, same.topics, same.nodes) == (-1, {}, full.nodes)

    def listed():
        topics = admin.list_topics(timeout=10).topics
        return name in topics and len(topics[name].partitions) == 3

    wait_for(listed, 10, f"{name} in Metadata")


def test_a_topic_change_reaches_every_partition_as_its_changes(deployment):
    # The router publishes a change as its changes alone (actors/catalog_changes.py): each
    # partition's shard and network processes take them at their size, not the catalog's.
    router = deployment.router
    before = deployment.infos()
    ray.get(router.create_topic.remote("np-changed", 2))
    version = ray.get(router.topic_catalog.remote())[0]
    after = deployment.infos()  # the create is answered once every partition took it
    assert [info["catalog_version"] for info in after] == [version] * NUM_PARTITIONS
    for old, new in zip(before, after, strict=True):
        assert new["catalog_changes_taken"] == old["catalog_changes_taken"] + 1
        assert new["catalogs_taken"] == old["catalogs_taken"]
    # Partition 1's network processes name it in their Metadata.
    admin = AdminClient({"bootstrap.servers": _info(deployment, 1)["kafka"]})
    listed = admin.list_topics(timeout=10).topics
    assert len(listed["np-changed"].partitions) == 2
    # Changes over a version a partition does not hold: it keeps its own, and says which, so
    # that the router sends the changes over that one (or the whole catalog).
    ahead = CatalogChanges(version + 1, version + 2, {"never": 1}, {"never": uuid.uuid4()}, {})
    first = deployment.partitions()[0]
    held = ray.get(first.wire_directory.remote(WireDirectory({}, {}, -1, changes=ahead)))
    assert held == version and _info(deployment, 0)["catalog_version"] == version
    # Changes made at once, whose pushes may cross: once all are answered, every partition
    # holds the newest catalog, and none needed the whole of it.
    ray.get([router.create_topic.remote(f"np-at-once-{n}", 1) for n in range(6)])
    newest = ray.get(router.topic_catalog.remote())
    infos = deployment.infos()
    assert [info["catalog_version"] for info in infos] == [newest[0]] * NUM_PARTITIONS
    assert [info["catalogs_taken"] for info in infos] == [i["catalogs_taken"] for i in after]
    admin = AdminClient({"bootstrap.servers": _info(deployment, 0)["kafka"]})
    assert {f"np-at-once-{n}" for n in range(6)} <= set(admin.list_topics(timeout=10).topics)


def test_a_groups_settings_are_set_and_read_through_network_processes(deployment):
    # librdkafka's admin client sends a group's IncrementalAlterConfigs to a listener (a
    # network process hands it to the partition, which asks the router); the router publishes
    # the change, and every partition's network processes answer DescribeConfigs with it.
    group = "np-configured"
    admin = AdminClient({"bootstrap.servers": _info(deployment, 1)["kafka"]})
    resource = ConfigResource(
        ConfigResource.Type.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "consumer.heartbeat.interval.ms",
                "6000",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    futures = admin.incremental_alter_configs([resource], request_timeout=20)
    assert futures[resource].result(timeout=30) is None
    _, _, group_configs = ray.get(deployment.router.topic_catalog.remote())
    assert group_configs == {group: {"consumer.heartbeat.interval.ms": 6000}}

    def described(partition: int) -> str:
        asked = ConfigResource(ConfigResource.Type.GROUP, group)
        other = AdminClient({"bootstrap.servers": _info(deployment, partition)["kafka"]})
        (future,) = other.describe_configs([asked], request_timeout=20).values()
        return future.result(timeout=30)["consumer.heartbeat.interval.ms"].value

    for partition in (0, 1):
        wait_for(lambda p=partition: described(p) == "6000", 10, f"the setting on {partition}")


def test_a_killed_network_process_is_replaced_while_a_consumer_commits(deployment):
    partition = 0
    group = _group_on(partition, "np-kill-process")
    with Committer(deployment, group) as committer:
        committer.wait_acks(0, timeout_s=40)
        before = _info(deployment, partition)
        originals = _check_processes(before)
        restarts = before["network_processes"]["restarts"]
        # Both, one after the other: whichever serves the consumer's coordinator connection
        # is cut once.
        for n, victim in enumerate(originals, start=1):
            os.kill(victim, signal.SIGKILL)

            def replaced(victim=victim, n=n):
                info = _info(deployment, partition)
                network = info["network_processes"]
                if len(network["pids"]) != PROCESSES or victim in network["pids"]:
                    return None
                return info if network["restarts"] == restarts + n else None

            info = wait_for(replaced, 5, f"network process {victim} replaced")
            assert info["pid"] == before["pid"]  # the partition actor itself lives on
            assert not _is_network_process(victim)
            _check_processes(info)
            acks = committer.acks
            committer.wait_acks(acks, timeout_s=30)  # commits go on after the replacement
    assert not committer.errors, committer.errors
    assert committer.acked
    read = _read_back(deployment, group)
    for partition_index, offset in committer.acked.items():
        assert read[partition_index] == offset, (partition_index, read, committer.acked)


@pytest.mark.parametrize("how", ["ray_kill", "sigkill"])
def test_a_killed_partition_actors_network_processes_exit_by_themselves(deployment, how):
    # ray.kill lets the actor's core worker end its children itself; a SIGKILL of the actor's
    # process leaves them to notice their channel closed, and exit on their own.
    partition = 1
    handle = deployment.partitions()[partition]
    before = _wait_serving(deployment)[partition]
    old = _check_processes(before)
    if how == "ray_kill":
        ray.kill(handle, no_restart=False)
    else:
        os.kill(before["pid"], signal.SIGKILL)
    wait_for(
        lambda: not any(_is_network_process(pid) for pid in old),
        EXIT_S if how == "sigkill" else EXIT_S + 5,  # Ray's kill is asynchronous
        f"the killed partition's network processes {old} to exit",
    )
    restarted = wait_restarted(lambda: ray.get(handle.info.remote(), timeout=10), before["pid"])
    info = _wait_serving(deployment)[partition]
    assert info["pid"] == restarted["pid"] != before["pid"]
    assert info["kafka"] == before["kafka"]  # the remembered port
    new = _check_processes(info)
    assert not set(new) & set(old)
    _commit_and_read_back(deployment, _group_on(partition, "np-after-kill"), 500)


def test_stop_leaves_no_network_process(ray_session, tmp_path):
    d = start(
        1, str(tmp_path / "logs"), namespace="gc-netproc-stop", config=TEST_CONFIG, wire=_wire()
    )
    try:
        d.wait_ready(60)
        ray.get(d.router.create_topic.remote(TOPIC, TOPIC_PARTITIONS))
        info = wait_for(lambda: _ready_info(d), 30, "network processes")
        pids = _check_processes(info)
        _commit_and_read_back(d, "np-stop", 7)
        # Closing the partition ends its processes before it returns (no Ray kill involved).
        ray.get(d.partitions()[0].close.remote(), timeout=30)
        assert not any(_is_network_process(pid) for pid in pids)
        assert _children(info["pid"]) == []
        assert _info(d, 0)["network_processes"]["pids"] == []
    finally:
        stop(d)
    assert not any(_is_network_process(pid) for pid in pids)


def _ready_info(d) -> dict | None:
    info = _info(d, 0)
    network = info["network_processes"]
    return info if network and len(network["pids"]) == PROCESSES else None
