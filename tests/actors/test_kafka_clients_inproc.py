"""Unmodified Kafka clients coordinate through one groupcoord partition's listener (no Ray).

librdkafka (confluent-kafka) and kafka-python consumers subscribe, get partitions, commit, read
their commits back and leave; a second member triggers a rebalance that splits the partitions.
A subscribed librdkafka consumer fetches its partitions (long polls answered empty) and a
librdkafka producer's records are refused.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AIOTopicPartition
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KPTopicPartition
from kafka.structs import OffsetAndMetadata

from ..kafka.members import subscribe_knowing_topic
from .kafka_inproc import WirePartition

TOPICS = {"events": 4}
POLL_LIMIT = 200  # polls of 0.1 s: the most a test waits for an assignment


pytestmark = pytest.mark.usefixtures("free_clients")  # conftest.py


# Every test on both event loops: Ray's actors run on uvloop, whose transports are not
# asyncio's classes (the listener once asserted they were and refused every connection). And
# served by network processes (WireConfig.network_processes), where every group request
# crosses the channel to the partition and topic changes go through it to the catalog.
@pytest.fixture(scope="module", params=["asyncio", "uvloop", "network-processes"])
def bootstrap(tmp_path_factory, request):
    network = request.param == "network-processes"
    served = WirePartition(
        str(tmp_path_factory.mktemp("wire-log")),
        TOPICS,
        loop="uvloop" if network else request.param,
        network_processes=2 if network else 0,
    )
    address = served.start()
    yield address
    served.stop()


def _rdkafka(bootstrap: str, group: str, strategy: str = "range") -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "partition.assignment.strategy": strategy,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )


def _poll_until(consumers, done) -> None:
    for _ in range(POLL_LIMIT):
        for consumer in consumers:
            consumer.poll(0.05)
        if done():
            return
    raise AssertionError("the consumers never reached the expected assignment")


def _owned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_librdkafka_members_split_partitions_commit_and_leave(bootstrap, strategy):
    group = f"rd-{strategy}"
    first = _rdkafka(bootstrap, group, strategy)
    first.subscribe(["events"])
    _poll_until([first], lambda: _owned(first) == {0, 1, 2, 3})

    second = _rdkafka(bootstrap, group, strategy)
    second.subscribe(["events"])
    _poll_until([first, second], lambda: len(_owned(first)) == 2 and len(_owned(second)) == 2)
    assert _owned(first) | _owned(second) == {0, 1, 2, 3}

    mine = [TopicPartition("events", p, 100 + p) for p in sorted(_owned(first))]
    first.commit(offsets=mine, asynchronous=False)
    read = first.committed([TopicPartition("events", p) for p in range(4)], timeout=10)
    by_partition = {tp.partition: tp.offset for tp in read}
    for tp in mine:
        assert by_partition[tp.partition] == tp.offset
    second.close()  # LeaveGroup: the first takes everything back
    _poll_until([first], lambda: _owned(first) == {0, 1, 2, 3})
    first.close()


def test_librdkafka_consumer_fetches_and_its_producer_is_refused(bootstrap):
    # librdkafka fetches only from a broker advertising Produce v3+ (its message-format v2
    # feature); without it, it never fetched and spun in its own threads (a quarter of a core
    # per idle consumer, measured). Its statistics count the requests it sent.
    stats: list[dict] = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "rd-fetch",
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            "stats_cb": lambda text: stats.append(json.loads(text)),
        }
    )
    consumer.subscribe(["events"])

    def fetching() -> bool:
        if not stats:
            return False
        sent = [b["req"] for b in stats[-1]["brokers"].values()]
        states = {
            p["fetch_state"]
            for p in stats[-1]["topics"].get("events", {}).get("partitions", {}).values()
            if p["partition"] >= 0
        }
        return states == {"active"} and sum(r.get("Fetch", 0) for r in sent) >= 2

    _poll_until([consumer], fetching)
    consumer.close()

    delivered: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    try:
        producer.produce(
            "events", b"record", partition=1, on_delivery=lambda e, _: delivered.append(e)
        )
        assert producer.flush(30) == 0
    finally:
        producer.close()  # else it outlives the listener, retrying its address all session
    [error] = delivered
    assert error.code() == KafkaError.INVALID_REQUEST and not error.retriable()


def test_kafka_python_consumer_commits_and_reads_back(bootstrap):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id="kp-group",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    subscribe_knowing_topic(consumer, "events")
    deadline = time.monotonic() + POLL_LIMIT * 0.1
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=100)
    assert {tp.partition for tp in consumer.assignment()} == {0, 1, 2, 3}
    offsets = {
        KPTopicPartition("events", p): OffsetAndMetadata(7 * p + 1, "", -1) for p in range(4)
    }
    consumer.commit(offsets)
    assert {p: consumer.committed(KPTopicPartition("events", p)) for p in range(4)} == {
        p: 7 * p + 1 for p in range(4)
    }
    consumer.close()


def test_aiokafka_consumer_commits_and_reads_back(bootstrap):
    asyncio.run(_aiokafka_round(bootstrap))


async def _aiokafka_round(bootstrap: str) -> None:
    consumer = AIOKafkaConsumer(
        "events",
        bootstrap_servers=bootstrap,
        group_id="aio-group",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    await consumer.start()
    try:
        for _ in range(POLL_LIMIT):
            if consumer.assignment():
                break
            await consumer.getmany(timeout_ms=100)
        assert {tp.partition for tp in consumer.assignment()} == {0, 1, 2, 3}
        await consumer.commit({AIOTopicPartition("events", p): 11 * p + 3 for p in range(4)})
        read = {p: await consumer.committed(AIOTopicPartition("events", p)) for p in range(4)}
        assert read == {p: 11 * p + 3 for p in range(4)}
    finally:
        await consumer.stop()


def test_an_admin_client_sets_the_topic_catalog(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic("made-by-admin", 3), NewTopic("bad name", 1), NewTopic("events", 2)],
        request_timeout=10,
    )
    futures["made-by-admin"].result(10)
    with pytest.raises(KafkaException) as bad:
        futures["bad name"].result(10)
    assert bad.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    with pytest.raises(KafkaException) as exists:
        futures["events"].result(10)
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    admin.create_partitions([NewPartitions("made-by-admin", 5)])["made-by-admin"].result(10)
    with pytest.raises(KafkaException) as shrink:
        admin.create_partitions([NewPartitions("made-by-admin", 2)])["made-by-admin"].result(10)
    assert shrink.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    topics = admin.list_topics(timeout=10).topics
    assert len(topics["made-by-admin"].partitions) == 5
    admin.delete_topics(["made-by-admin"])["made-by-admin"].result(10)
    assert "made-by-admin" not in admin.list_topics(timeout=10).topics
