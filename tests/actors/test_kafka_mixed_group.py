"""A Ray-handle ``GroupMember`` and a librdkafka consumer in one group: one generation, one
leader, and an assignment that gives every partition exactly one owner, whichever of the two
leads (both run Kafka's range assignor over Kafka's ConsumerProtocol metadata)."""

from __future__ import annotations

import asyncio
import threading

import pytest
import ray
from confluent_kafka import Consumer

from groupcoord.actors import AdminClient, GroupMember, WireConfig, start, stop

from .helpers import TEST_CONFIG

TOPIC, PARTITIONS = "mixed", 6
WAIT_S = 60.0


@pytest.fixture(scope="module")
def deployment(ray_session, tmp_path_factory):
    d = start(
        1,
        str(tmp_path_factory.mktemp("logs-mixed")),
        namespace="gc-mixed",
        config=TEST_CONFIG,
        wire=WireConfig(bootstrap_port=0),
    )
    d.wait_ready(60)
    ray.get(d.router.create_topic.remote(TOPIC, PARTITIONS))
    yield d
    stop(d)


class PolledConsumer:
    """A librdkafka consumer polled by its own thread (its handle is used there only)."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
                "partition.assignment.strategy": "range",
            }
        )
        self.consumer.subscribe([TOPIC])
        self.owned: frozenset[int] = frozenset()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(0.05)
            self.owned = frozenset(tp.partition for tp in self.consumer.assignment())
        self.consumer.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)


@pytest.mark.parametrize("first", ["ray", "librdkafka"])
def test_a_ray_member_and_a_librdkafka_consumer_share_one_group(deployment, first):
    group = f"mixed-{first}-first"

    async def scenario() -> None:
        member = GroupMember(
            deployment.router,
            group,
            [TOPIC],
            topic_partitions={TOPIC: PARTITIONS},
            assignors=("range",),
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
        )
        consumer = None
        if first == "librdkafka":
            consumer = PolledConsumer(deployment.kafka, group)
            await _until(lambda: len(consumer.owned) == PARTITIONS)
        member.start()
        if consumer is None:
            await member.wait_assigned(WAIT_S)
            consumer = PolledConsumer(deployment.kafka, group)
        try:

            def split() -> bool:
                mine = {p for _, p in member.assignment}
                return (
                    member.stable
                    and mine
                    and consumer.owned
                    and not mine & consumer.owned
                    and mine | consumer.owned == set(range(PARTITIONS))
                )

            await _until(split)
            [described] = await AdminClient(deployment.router).describe_groups([group])
            assert described.state == "Stable" and len(described.members) == 2
            assert described.generation_id == member.generation_id
            leaders = {m.member_id for m in described.members} & {described.leader}
            assert len(leaders) == 1  # one of the two leads
            assert (member.member_id == described.leader) == (first == "ray")
        finally:
            consumer.close()
            await member.close()

    asyncio.run(scenario())


async def _until(predicate) -> None:
    for _ in range(int(WAIT_S / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the mixed group never reached the expected assignment")
