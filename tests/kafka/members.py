"""Consumers of the real Python Kafka clients as group members a test can drive side by side.

Every client runs its group membership (JoinGroup, SyncGroup, Heartbeat) inside or alongside its
poll call, so each `Member` polls in a thread of its own while the test waits on the other
members; the test's own calls (commit, committed, close) run on that same thread between polls,
because none of these consumers may be used from two threads. Each client sits behind one small
adapter with the same methods (poll, assignment, commit, committed, close; aiokafka's are
coroutines, run on an event loop owned by the member's thread) and a record of the assignments
its client's rebalance callbacks made (`Held`): a client can change its assignment several times
within one poll (revoke, then take back), which the assignment read after the poll misses.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future

import aiokafka
import kafka
from aiokafka.coordinator.assignors.range import RangePartitionAssignor as AioRange
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as AioRoundRobin
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

# Kafka's smallest allowed session (group.min.session.timeout.ms) and a short heartbeat, so a
# member learns of a rebalance within half a second.
SESSION_TIMEOUT_MS = 6_000
HEARTBEAT_INTERVAL_MS = 500
POLL_TIMEOUT_MS = 100
CALL_TIMEOUT_S = 30.0

# The assignors each client has, by the protocol name it sends in JoinGroup.
KAFKA_PYTHON_ASSIGNORS = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}
AIOKAFKA_ASSIGNORS = {"range": AioRange, "roundrobin": AioRoundRobin}


class Held:
    """The partitions of one topic a consumer holds, as its rebalance callbacks change them
    (incrementally with a cooperative assignor; with an eager one, all revoked and then the
    whole new assignment added), and every state in between, in order."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.partitions: frozenset[int] = frozenset()
        self.changes: list[frozenset[int]] = []

    def added(self, partitions) -> None:
        self._set(self.partitions | self._ours(partitions))

    def removed(self, partitions) -> None:
        self._set(self.partitions - self._ours(partitions))

    def take_changes(self) -> list[frozenset[int]]:
        """The states since the last call, oldest first."""
        changes, self.changes = self.changes, []
        return changes

    def _ours(self, partitions) -> frozenset[int]:
        return frozenset(tp.partition for tp in partitions if tp.topic == self.topic)

    def _set(self, partitions: frozenset[int]) -> None:
        self.partitions = partitions
        self.changes.append(partitions)


class ConfluentMember:
    """confluent-kafka (librdkafka); cooperative-sticky assigns incrementally by itself. Its
    rebalance callbacks run inside poll(); the binding applies each change after its callback."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        assignor: str,
        poll_timeout_ms: int = POLL_TIMEOUT_MS,
    ) -> None:
        self.topic = topic
        self.poll_timeout_ms = poll_timeout_ms
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "partition.assignment.strategy": assignor,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            }
        )
        self._subscribe()

    def _subscribe(self) -> None:
        self.held = Held(self.topic)
        self.consumer.subscribe(
            [self.topic],
            on_assign=lambda _, partitions: self.held.added(partitions),
            on_revoke=lambda _, partitions: self.held.removed(partitions),
            on_lost=lambda _, partitions: self.held.removed(partitions),
        )

    def poll(self) -> None:
        message = self.consumer.poll(self.poll_timeout_ms / 1000)
        if message is not None and message.error():
            raise KafkaException(message.error())

    def assignment(self) -> frozenset[int]:
        return frozenset(
            tp.partition for tp in self.consumer.assignment() if tp.topic == self.topic
        )

    def commit(self, offsets: dict[int, int]) -> None:
        results = self.consumer.commit(
            offsets=[ConfluentTopicPartition(self.topic, p, o) for p, o in offsets.items()],
            asynchronous=False,
        )
        errors = [tp.error for tp in results if tp.error is not None]
        assert not errors, errors

    def committed(self, partitions: set[int]) -> dict[int, int]:
        found = self.consumer.committed(
            [ConfluentTopicPartition(self.topic, p) for p in partitions], timeout=CALL_TIMEOUT_S
        )
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}

    def close(self) -> None:
        self.consumer.close()


class ConfluentConsumerProtocolMember(ConfluentMember):
    """confluent-kafka (librdkafka) with KIP-848's protocol (`group.protocol=consumer`): the
    coordinator assigns (`assignor` names its server-side assignor); the session and the
    heartbeat interval are the coordinator's, so the classic settings are left out."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str) -> None:
        self.topic = topic
        self.poll_timeout_ms = POLL_TIMEOUT_MS
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "group.remote.assignor": assignor,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        self._subscribe()


def listener(base: type, held: Held):
    """A rebalance listener of kafka-python's or aiokafka's ``base`` class that keeps ``held``
    (a lost partition counts as revoked, both libraries' default)."""

    class Listener(base):
        def on_partitions_revoked(self, revoked) -> None:
            held.removed(revoked)

        def on_partitions_assigned(self, assigned) -> None:
            held.added(assigned)

    return Listener()


def subscribe_knowing_topic(
    consumer: kafka.KafkaConsumer, topic: str, held: Held | None = None
) -> None:
    """Subscribe a kafka-python consumer once its metadata names ``topic``, and return once its
    group coordinator has taken that metadata in, as a consumer of an existing topic would
    have it. kafka-python 3.0.12's coordinator keeps its own metadata snapshot, refreshed only
    by metadata responses that arrive after the subscription. A leader that assigns before one
    arrives records an empty snapshot as what it assigned from, and rejoins when the response
    arrives: a second join at once. Two faults of the client follow such double joins, both
    inside it. Without the topic in its metadata at all, the leader assigns nothing and keeps
    nothing (seen under CPU load). And in a few of them the member never finishes its second
    join: in its own debug log groupcoord answers the SyncGroup (error 0) within milliseconds,
    and then it never enables its heartbeats again or calls its rebalance listener, its poll
    thread waiting forever in ``NetworkSelector.run`` on a task of its IO thread, which sits
    idle in select(); the coordinator, hearing nothing, expires it after the session timeout
    while it still believes it owns its partitions (a lost wakeup). With ``held``, a listener
    keeps it as the consumer's rebalances change its partitions."""
    deadline = time.monotonic() + CALL_TIMEOUT_S
    _wait_until(
        lambda: consumer.partitions_for_topic(topic),
        deadline,
        f"kafka-python never saw topic {topic} in its metadata",
    )
    if held is None:
        consumer.subscribe([topic])
    else:
        consumer.subscribe([topic], listener=listener(kafka.ConsumerRebalanceListener, held))
    # The subscription's metadata request is sent and answered by the client's IO thread, no
    # poll needed; its answer reaches the coordinator's snapshot (a private attribute: the
    # client has no public way to say so).
    _wait_until(
        lambda: consumer._coordinator._metadata_snapshot.get(topic),
        deadline,
        f"kafka-python's coordinator never took in topic {topic}",
    )


def _wait_until(condition: Callable[[], object], deadline: float, failure: str) -> None:
    """Poll ``condition`` without polling the client (its IO thread does the work) until it is
    true; ``TimeoutError(failure)`` past ``deadline`` (``time.monotonic``)."""
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(failure)
        time.sleep(POLL_TIMEOUT_MS / 1000)


class KafkaPythonMember:
    """kafka-python: its coordinator runs JoinGroup/SyncGroup inside poll()."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str) -> None:
        self.topic = topic
        self.consumer = kafka.KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            partition_assignment_strategy=[KAFKA_PYTHON_ASSIGNORS[assignor]],
        )
        self.held = Held(topic)
        subscribe_knowing_topic(self.consumer, topic, self.held)

    def poll(self) -> None:
        self.consumer.poll(timeout_ms=POLL_TIMEOUT_MS)

    def assignment(self) -> frozenset[int]:
        return frozenset(
            tp.partition for tp in self.consumer.assignment() if tp.topic == self.topic
        )

    def commit(self, offsets: dict[int, int]) -> None:
        self.consumer.commit(
            {
                kafka.TopicPartition(self.topic, p): kafka.OffsetAndMetadata(o, "", -1)
                for p, o in offsets.items()
            }
        )

    def committed(self, partitions: set[int]) -> dict[int, int]:
        found = {
            p: self.consumer.committed(kafka.TopicPartition(self.topic, p)) for p in partitions
        }
        return {p: o for p, o in found.items() if o is not None}

    def close(self) -> None:
        self.consumer.close()


class AioKafkaMember:
    """aiokafka: the group runs in the consumer's own tasks; getmany() is the poll."""

    def __init__(self, bootstrap: str, group: str, topic: str, assignor: str) -> None:
        self.topic = topic
        self.consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            partition_assignment_strategy=(AIOKAFKA_ASSIGNORS[assignor],),
        )
        self.held = Held(topic)
        self.consumer.subscribe(
            [topic], listener=listener(aiokafka.ConsumerRebalanceListener, self.held)
        )

    async def start(self) -> None:
        await self.consumer.start()

    async def poll(self) -> None:
        await self.consumer.getmany(timeout_ms=POLL_TIMEOUT_MS)

    def assignment(self) -> frozenset[int]:
        return frozenset(
            tp.partition for tp in self.consumer.assignment() if tp.topic == self.topic
        )

    async def commit(self, offsets: dict[int, int]) -> None:
        await self.consumer.commit(
            {aiokafka.TopicPartition(self.topic, p): o for p, o in offsets.items()}
        )

    async def committed(self, partitions: set[int]) -> dict[int, int]:
        found = {
            p: await self.consumer.committed(aiokafka.TopicPartition(self.topic, p))
            for p in partitions
        }
        return {p: o for p, o in found.items() if o is not None}

    async def close(self) -> None:
        await self.consumer.stop()


CLIENTS = {
    "confluent-kafka": ConfluentMember,
    "kafka-python": KafkaPythonMember,
    "aiokafka": AioKafkaMember,
    "confluent-kafka-consumer-protocol": ConfluentConsumerProtocolMember,
}


class Member:
    """One consumer in its own polling thread; `assignments` records each distinct assignment
    it held, in order: those its rebalance callbacks made during a poll, then the one it reports
    after the poll."""

    def __init__(self, open_consumer: Callable[[], object]) -> None:
        self._open = open_consumer
        self._calls: queue.SimpleQueue[tuple[str, tuple, bool, Future]] = queue.SimpleQueue()
        self._error: BaseException | None = None
        self.assignments: list[frozenset[int]] = []
        # Daemon: a client hung in a native call must not keep the test process alive.
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def assignment(self) -> frozenset[int]:
        """The latest assignment seen; raises what stopped the member, if anything did."""
        if self._error is not None:
            raise RuntimeError("member stopped") from self._error
        return self.assignments[-1] if self.assignments else frozenset()

    def call(self, method: str, *args, timeout_s: float = CALL_TIMEOUT_S):
        """Run the adapter's `method` on the member's thread and return its result."""
        return self._submit(method, args, last=False).result(timeout_s)

    def commit(self, offsets: dict[int, int]) -> None:
        self.call("commit", offsets)

    def committed(self, partitions: set[int]) -> dict[int, int]:
        return self.call("committed", partitions)

    def close(self, timeout_s: float = CALL_TIMEOUT_S) -> None:
        """Leave the group (the client's close sends LeaveGroup); the thread ends with it."""
        if self._thread.is_alive():
            self._submit("close", (), last=True).result(timeout_s)
            self._thread.join(timeout_s)

    def _submit(self, method: str, args: tuple, last: bool) -> Future:
        if self._error is not None:
            raise RuntimeError("member stopped") from self._error
        future: Future = Future()
        self._calls.put((method, args, last, future))
        return future

    def _run(self) -> None:
        try:
            if inspect.iscoroutinefunction(self._open):
                asyncio.run(self._loop_async())
            else:
                self._loop_sync()
        except BaseException as exc:  # reported to the test through assignment() and call()
            self._error = exc
            while not self._calls.empty():
                self._calls.get()[-1].set_exception(exc)

    def _loop_sync(self) -> None:
        consumer = self._open()
        while True:
            consumer.poll()
            self._observe_poll(consumer)
            while not self._calls.empty():
                method, args, last, future = self._calls.get()
                try:
                    future.set_result(getattr(consumer, method)(*args))
                except Exception as exc:
                    future.set_exception(exc)
                if last:
                    return

    async def _loop_async(self) -> None:
        consumer = await self._open()
        while True:
            await consumer.poll()
            self._observe_poll(consumer)
            while not self._calls.empty():
                method, args, last, future = self._calls.get()
                try:
                    future.set_result(await getattr(consumer, method)(*args))
                except Exception as exc:
                    future.set_exception(exc)
                if last:
                    return

    def _observe_poll(self, consumer) -> None:
        for held in consumer.held.take_changes():
            self._observe(held)
        self._observe(consumer.assignment())

    def _observe(self, assignment: frozenset[int]) -> None:
        if not self.assignments or self.assignments[-1] != assignment:
            self.assignments.append(assignment)


def open_member(
    client: str, bootstrap: str, group: str, topic: str, assignor: str, **options
) -> Member:
    """Start one consumer of `client` subscribed to `topic` in `group`, polling already;
    `options` go to its adapter (confluent-kafka's: `poll_timeout_ms`)."""
    adapter = CLIENTS[client]
    if hasattr(adapter, "start"):

        async def open_async():
            consumer = adapter(bootstrap, group, topic, assignor, **options)
            await consumer.start()
            return consumer

        return Member(open_async)
    return Member(lambda: adapter(bootstrap, group, topic, assignor, **options))


# Where the Kafka client libraries written in Python live.
_CLIENT_PACKAGES = tuple(os.path.dirname(m.__file__) for m in (kafka, aiokafka))


def client_threads(frames_per_thread: int = 10) -> str:
    """The newest frames of each thread of this process that is running a Kafka client's
    code: for a failure that may be a client hung inside itself."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    stacks = []
    for ident, frame in sys._current_frames().items():
        stack = traceback.extract_stack(frame)
        if any(f.filename.startswith(_CLIENT_PACKAGES) for f in stack):
            text = "".join(traceback.format_list(stack[-frames_per_thread:]))
            stacks.append(f"thread {names.get(ident, ident)}:\n{text}")
    return "\n".join(stacks)


def wait_until(
    condition: Callable[[], bool],
    timeout_s: float,
    what: str,
    status: Callable[[], object] = lambda: None,
) -> None:
    """Poll `condition` until true; fail naming `what` and the last `status` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout_s:.0f} s; {status()}")
        time.sleep(0.05)
