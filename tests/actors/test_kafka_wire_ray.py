"""Real Kafka clients against a Ray deployment's listeners: bootstrap, FindCoordinator to the
partition actors, commits, the topic catalog, and partition actors killed while librdkafka
consumers commit (every acknowledged commit is read back; the clients recover by themselves)."""

from __future__ import annotations

import threading
import time

import pytest
import ray
from confluent_kafka import KafkaException, TopicPartition
from ray.exceptions import RayError

from groupcoord.actors import WireConfig, start, stop
from groupcoord.coordinator import partition_for
from tests.kafka.rawwire import RawConnection, plain

from .helpers import TEST_CONFIG, wait_assigned, wait_restarted, wire_consumer

RESUME_TIMEOUT_S = 60.0

NUM_PARTITIONS = 2
GROUPS = ("wire-a", "wire-b")  # one on each partition (checked below)
TOPIC, TOPIC_PARTITIONS = "events", 4
METADATA_ALL_TOPICS = {
    "topics": None,
    "allow_auto_topic_creation": False,
    "include_topic_authorized_operations": False,
}


@pytest.fixture(scope="module")
def deployment(ray_session, tmp_path_factory):
    d = start(
        NUM_PARTITIONS,
        str(tmp_path_factory.mktemp("logs-wire")),
        namespace="gc-wire",
        config=TEST_CONFIG,
        wire=WireConfig(bootstrap_port=0, metadata_refresh_ms=200),
    )
    d.wait_ready(60)
    ray.get(d.router.create_topic.remote(TOPIC, TOPIC_PARTITIONS))
    yield d
    stop(d)


def _resumed(acked: dict, before: dict) -> bool:
    """Every group has acknowledged a commit past what it had before."""
    moved = {key[0] for key, offset in list(acked.items()) if offset > before.get(key, -1)}
    return moved == set(GROUPS)


def _wait_serving(deployment) -> None:
    """Until every partition actor answers and has loaded (a restarting one raises)."""
    for _ in range(600):
        try:
            if all(i["state"] == "serving" for i in deployment.infos()):
                return
        except RayError:
            pass
        time.sleep(0.1)
    raise AssertionError("partitions not serving again")


def test_bootstrap_finds_each_groups_partition_listener(deployment):
    assert {partition_for(g, NUM_PARTITIONS) for g in GROUPS} == {0, 1}
    infos = deployment.infos()
    assert all(info["kafka"] for info in infos)
    # Ray starts workers niced (15); a coordinator must not be starved by busy neighbours.
    assert [info["niceness"] for info in infos] == [0] * NUM_PARTITIONS
    for group in GROUPS:
        consumer = wire_consumer(deployment.kafka, group)
        consumer.subscribe([TOPIC])
        assert wait_assigned(consumer, TOPIC_PARTITIONS) == set(range(TOPIC_PARTITIONS))
        consumer.commit(
            offsets=[TopicPartition(TOPIC, p, 10 + p) for p in range(4)], asynchronous=False
        )
        consumer.close()
    # Read back by a fresh client of each group, through the bootstrap listener again.
    for group in GROUPS:
        reader = wire_consumer(deployment.kafka, group)
        read = reader.committed([TopicPartition(TOPIC, p) for p in range(4)], timeout=20)
        assert [tp.offset for tp in read] == [10, 11, 12, 13]
        reader.close()


def test_a_grown_topic_is_rebalanced_onto(deployment):
    ray.get(deployment.router.create_topic.remote("grows", 2))
    consumer = wire_consumer(deployment.kafka, "wire-grow")
    consumer.subscribe(["grows"])
    assert wait_assigned(consumer, 2) == {0, 1}
    ray.get(deployment.router.alter_topic.remote("grows", 5))
    assert wait_assigned(consumer, 5) == {0, 1, 2, 3, 4}
    consumer.close()


def test_topics_are_created_through_the_bootstrap_and_every_partition_listener(deployment):
    # Both answer CreateTopics through a coroutine the listener steps outside a task; before
    # ab5f921 the bounded wait inside (the router's publishing, a partition's ask) raised
    # there and the listener closed the connection instead of answering.
    addresses = [deployment.kafka, *(info["kafka"] for info in deployment.infos())]
    for n, address in enumerate(addresses):
        name = f"created-over-the-wire-{n}"
        connection = RawConnection(address, client_id="topics-test")
        try:
            answer = plain(
                connection.send(
                    19,  # CreateTopics
                    7,
                    topics=[
                        {
                            "name": name,
                            "num_partitions": 3,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [],
                        }
                    ],
                    timeout=10_000,
                    validate_only=False,
                )
            )
        finally:
            connection.close()
        assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [(name, "none")]
        assert ray.get(deployment.router.topics.remote())[name] == 3


def test_restarted_listeners_keep_their_addresses(deployment):
    """As a restarted Kafka broker does. The router's directory names a dead partition's last
    address until the restarted one registers, and librdkafka re-bootstraps only once when all
    its brokers are down: had the new incarnation taken another port, a client re-bootstrapped
    in that window would try the dead addresses for minutes (seen in CI)."""
    handles = deployment.partitions()  # before the router is killed: it answers this
    before = deployment.infos()
    bootstrap = ray.get(deployment.router.kafka_address.remote())
    router_pid = ray.get(deployment.router.describe.remote())["pid"]
    ray.kill(deployment.router, no_restart=False)
    for handle in handles:
        ray.kill(handle, no_restart=False)
    wait_restarted(lambda: ray.get(deployment.router.describe.remote(), timeout=10), router_pid)
    for handle, info in zip(handles, before, strict=True):
        wait_restarted(lambda h=handle: ray.get(h.info.remote(), timeout=10), info["pid"])
    _wait_serving(deployment)
    assert [info["kafka"] for info in deployment.infos()] == [info["kafka"] for info in before]
    assert ray.get(deployment.router.kafka_address.remote()) == bootstrap


def test_a_listener_is_ready_once_it_holds_the_catalog(deployment):
    # A listener the router told the others about may still await its own first exchange:
    # until it is answered its Metadata lists no topics (and, had the router restarted
    # meanwhile, its first registration with the new one is pushed to all: seen in CI).
    infos = deployment.wait_ready(60)
    version = ray.get(deployment.router.topic_catalog.remote())[0]
    assert [info["listener_catalog_version"] for info in infos] == [version] * NUM_PARTITIONS
    assert deployment._listeners_ready(infos)
    infos[1] = {**infos[1], "listener_catalog_version": -1}
    assert not deployment._listeners_ready(infos)


def test_a_restarted_router_tells_no_listener_what_it_knows_already(deployment):
    # Before: every partition's first registration with a restarted router was pushed to all
    # the others (n - 1 calls each: a million at 1,000 partitions), though each knew them all.
    # First every listener registers with the current router: a partition restarted by an
    # earlier test whose first registration the kill interrupts is rightly pushed, as new.
    deployment.wait_ready(60)
    time.sleep(1.0)  # five refreshes (200 ms)
    router_pid = ray.get(deployment.router.describe.remote())["pid"]
    ray.kill(deployment.router, no_restart=False)
    wait_restarted(lambda: ray.get(deployment.router.describe.remote(), timeout=10), router_pid)
    deadline = time.monotonic() + RESUME_TIMEOUT_S
    while len(ray.get(deployment.router.kafka_listeners.remote())) < NUM_PARTITIONS:
        assert time.monotonic() < deadline, "the partitions did not register again"
        time.sleep(0.1)
    time.sleep(1.0)  # five refreshes (200 ms): every partition has registered again
    assert ray.get(deployment.router.describe.remote())["listener_pushes"] == 0
    # A partition that restarts is still told to the others at once.
    (first,) = deployment.partitions()[:1]
    pid = ray.get(first.info.remote())["pid"]
    ray.kill(first, no_restart=False)
    wait_restarted(lambda: ray.get(first.info.remote(), timeout=10), pid)
    while ray.get(deployment.router.describe.remote())["listener_pushes"] < 1:
        assert time.monotonic() < deadline + RESUME_TIMEOUT_S, "the restart was not pushed"
        time.sleep(0.1)


# Which partition actors each round kills, 2 s apart. Killing every partition at once leaves
# the clients no live broker to learn a moved listener's address from.
KILL_ROUNDS = {"one_at_a_time": [(0,), (1,), (0,)], "all_at_once": [(0, 1), (0, 1)]}


@pytest.mark.parametrize("rounds", list(KILL_ROUNDS))
def test_kill_partition_actors_while_librdkafka_commits(deployment, rounds):
    acked: dict[tuple[str, int], int] = {}
    stop_event = threading.Event()
    errors: list[BaseException] = []

    def commit_forever(group: str) -> None:
        consumer = wire_consumer(deployment.kafka, group)
        consumer.subscribe([TOPIC])
        offset = 1_000
        try:
            while not stop_event.is_set():
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
                    continue  # not acknowledged: the coordinator was away
                for tp in answered:
                    if tp.error is None:  # acknowledged for this partition
                        acked[(group, tp.partition)] = tp.offset
        except BaseException as exc:  # noqa: BLE001 — reported by the test below
            errors.append(exc)
        finally:
            consumer.close()

    threads = [threading.Thread(target=commit_forever, args=(g,)) for g in GROUPS]
    for thread in threads:
        thread.start()
    try:
        for killed in KILL_ROUNDS[rounds]:
            time.sleep(2)
            for partition in killed:  # Ray restarts each; it reloads its log
                ray.kill(deployment.partitions()[partition], no_restart=False)
        _wait_serving(deployment)
        before = dict(acked)
        # The clients resume committing by themselves: librdkafka finds the restarted
        # partitions' listeners again (it took over 3 s once in a loaded CI run).
        deadline = time.monotonic() + RESUME_TIMEOUT_S
        while time.monotonic() < deadline and not _resumed(acked, before):
            time.sleep(0.1)
    finally:
        stop_event.set()
        for thread in threads:
            thread.join(60)
    assert not errors
    assert {g for g, _ in acked} == set(GROUPS)
    assert _resumed(acked, before), f"no commit in {RESUME_TIMEOUT_S:.0f} s after the kills"
    for group in GROUPS:
        reader = wire_consumer(deployment.kafka, group)
        read = reader.committed([TopicPartition(TOPIC, p) for p in range(4)], timeout=20)
        reader.close()
        for tp in read:
            assert tp.offset == acked[(group, tp.partition)], (group, tp.partition)


def test_every_listener_names_every_broker_once_ready_and_after_a_router_restart(
    ray_session, tmp_path
):
    # Before: wait_ready returned once every listener had registered with the router, but each
    # learned the others only at its next poll: right after start partition 0's Metadata named
    # itself alone, and a librdkafka admin client that asked it dropped broker 1 with the
    # CreateTopics it had sent there (_DESTROY_BROKER). A poll a minute apart shows that the
    # router tells them, rather than the poll catching up.
    d = start(
        3,
        str(tmp_path),
        namespace="gc-wire-brokers",
        config=TEST_CONFIG,
        wire=WireConfig(bootstrap_port=0, metadata_refresh_ms=60_000),
    )
    try:
        d.wait_ready(60)
        listeners = [info["kafka"] for info in d.infos()]
        for address in [d.kafka, *listeners]:
            assert _brokers_named(address) == sorted(listeners), address
        # A restarted router asks the partitions where they listen. Before, it learned each
        # address at that partition's next poll (here a minute away): meanwhile its bootstrap
        # listener named no broker and answered every FindCoordinator COORDINATOR_NOT_AVAILABLE.
        router_pid = ray.get(d.router.describe.remote())["pid"]
        ray.kill(d.router, no_restart=False)
        wait_restarted(lambda: ray.get(d.router.describe.remote(), timeout=10), router_pid)
        deadline = time.monotonic() + ROUTER_RELEARN_TIMEOUT_S
        while _brokers_named(d.kafka) != sorted(listeners):
            assert time.monotonic() < deadline, _brokers_named(d.kafka)
            time.sleep(0.1)
        groups = {partition_for(f"relearn-{n}", 3): f"relearn-{n}" for n in range(100)}
        assert sorted(groups) == [0, 1, 2]  # a group of every partition
        connection = RawConnection(d.kafka)
        try:
            for partition, group in sorted(groups.items()):
                found = plain(connection.send(10, 4, key_type=0, coordinator_keys=[group]))
                (coordinator,) = found["coordinators"]
                assert coordinator["error_code"] == "none", coordinator
                address = f"{coordinator['host']}:{coordinator['port']}"
                assert address == listeners[partition], group
        finally:
            connection.close()
    finally:
        stop(d)


# Far below the test's poll interval (60 s): what a restarted router's own asking takes.
ROUTER_RELEARN_TIMEOUT_S = 20.0


def _brokers_named(address: str) -> list[str]:
    """host:port of every broker in the Metadata the listener at ``address`` answers."""
    connection = RawConnection(address)
    try:
        metadata = plain(connection.send(3, 12, **METADATA_ALL_TOPICS))
    finally:
        connection.close()
    return sorted(f"{b['host']}:{b['port']}" for b in metadata["brokers"])
