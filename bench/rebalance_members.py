"""Raw-wire Kafka group members for bench/rebalance.py, many on one event loop.

1,000 librdkafka consumers do not fit a small machine, so each member here is one asyncio task
and one connection (one request in flight, a Kafka client's rule), speaking the wire protocol
with kio's entities and the wire tests' framing, as bench/wire_raw.py does. They behave as
Kafka's Java consumer does in each protocol:

* ``eager`` (classic, ``range``): on learning of a rebalance (a heartbeat answered
  REBALANCE_IN_PROGRESS) a member revokes everything, then rejoins; it owns its new partitions
  when its SyncGroup is answered. The leader runs the range assignor.
* ``cooperative`` (classic, ``cooperative-sticky``, KIP-429): a member rejoins keeping what it
  owns and says so in its subscription; after SyncGroup it revokes only what it lost and, if it
  lost anything, rejoins at once, so that the second rebalance hands those partitions out.
* ``consumer`` (KIP-848, ConsumerGroupHeartbeat v1, the server's ``uniform`` assignor): a member
  heartbeats at the interval the coordinator sets; given an assignment it revokes what the
  assignment no longer holds, takes what it newly holds, and acknowledges (a heartbeat naming
  what it owns) at once rather than at the next interval, as the Java consumer does.

``Ledger`` records every take and revoke with its time, so the bench can integrate how many
partitions had no owner.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import itertools
import struct
import time
import uuid

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from groupcoord.coordinator.assignors import get_assignor, revocation_plan
from groupcoord.coordinator.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from groupcoord.wire import apis
from groupcoord.wire.apis import ApiKey
from tests.wire.frames import request_frame, split_response

VERSIONS = {
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 5,
    ApiKey.SYNC_GROUP: 3,
    ApiKey.HEARTBEAT: 3,
    ApiKey.LEAVE_GROUP: 3,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: 1,
}
PROTOCOLS = ("eager", "cooperative", "consumer")
CLASSIC_ASSIGNOR = {"eager": "range", "cooperative": "cooperative-sticky"}
SESSION_TIMEOUT_MS = 30_000
REBALANCE_TIMEOUT_MS = 60_000
# A JoinGroup is answered when the whole group has joined: up to the rebalance timeout.
IO_TIMEOUT_S = REBALANCE_TIMEOUT_MS / 1000 + 30
RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms
# Answers a Java client retries after a backoff. There is one coordinator node, so
# NOT_COORDINATOR (a broker still loading its offsets partition) needs no new lookup.
RETRIABLE = {
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
}


def _ms(ms: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))


class Connection:
    """One connection; ``call`` sends a request and waits for its answer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._ids = itertools.count(1)

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        async with asyncio.timeout(IO_TIMEOUT_S):
            return cls(*await asyncio.open_connection(host, port))

    async def call(self, api: ApiKey, **values):
        version = VERSIONS[api]
        cls = apis.request_class(api, version)
        response_cls = apis.response_class(api, version)
        correlation_id = next(self._ids)
        self.writer.write(request_frame(cls(**values), correlation_id=correlation_id))
        # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation
        # that arrives as the answer does, and a member would then never stop.
        async with asyncio.timeout(IO_TIMEOUT_S):
            size = await self.reader.readexactly(4)
            rest = await self.reader.readexactly(struct.unpack(">i", size)[0])
        got, body = split_response(
            size + rest, response_cls, header_version=1 if response_cls.__flexible__ else 0
        )
        if got != correlation_id:
            raise RuntimeError(f"answer {got} to request {correlation_id}")
        return body

    def close(self) -> None:
        self.writer.close()


async def find_coordinator(
    bootstrap: str, group: str, timeout_s: float = IO_TIMEOUT_S
) -> tuple[str, int]:
    """The group's coordinator; retried while the server is still creating its offsets topic
    (Kafka answers COORDINATOR_NOT_AVAILABLE to the first groups), for up to ``timeout_s``."""
    host, port = bootstrap.rsplit(":", 1)
    deadline = time.monotonic() + timeout_s
    conn = await Connection.open(host, int(port))
    try:
        while True:
            found = await conn.call(ApiKey.FIND_COORDINATOR, key=group, key_type=0)
            if found.error_code not in RETRIABLE or time.monotonic() > deadline:
                break
            await asyncio.sleep(RETRY_BACKOFF_S)
    finally:
        conn.close()
    if found.error_code != ErrorCode.none:
        raise RuntimeError(f"FindCoordinator: {found.error_code!r}")
    return found.host, found.port


class Ledger:
    """Who owns which partition of the one topic, and for how long partitions had no owner.

    Counting starts at ``start``: from then on, each partition's seconds with no owner and with
    more than one are summed. ``settled`` is set at the first change after which every
    partition has exactly one owner and each of ``members`` owns a balanced share.
    """

    def __init__(self, partitions: int, clock=time.perf_counter) -> None:
        self.clock = clock
        self.partitions = partitions
        self.owners: list[set[int]] = [set() for _ in range(partitions)]
        self.owned_count: dict[int, int] = {}
        self.unowned = partitions
        self.multi = 0
        self.members: set[int] = set()
        self.settled = asyncio.Event()
        self.settled_at = 0.0
        self.started_at: float | None = None
        self.initial_owner: list[int | None] = []
        self._since = [0.0] * partitions  # when a partition's current owner count began
        self.unowned_s = [0.0] * partitions
        self.multi_owned_s = [0.0] * partitions

    def expect(self, members: set[int]) -> None:
        """The members that must all hold a share for the group to count as settled."""
        self.members = set(members)
        self.settled.clear()
        self._check(self.clock())

    def start(self) -> None:
        now = self.clock()
        self.started_at = now
        self.initial_owner = [next(iter(o)) if len(o) == 1 else None for o in self.owners]
        self._since = [now] * self.partitions
        self.unowned_s = [0.0] * self.partitions
        self.multi_owned_s = [0.0] * self.partitions

    def _account(self, p: int, now: float) -> None:
        if self.started_at is not None:
            owners = len(self.owners[p])
            if owners == 0:
                self.unowned_s[p] += now - self._since[p]
            elif owners > 1:
                self.multi_owned_s[p] += now - self._since[p]
        self._since[p] = now

    def take(self, member: int, partitions) -> None:
        now = self.clock()
        for p in partitions:
            self._account(p, now)
            owners = self.owners[p]
            self.unowned -= not owners
            self.multi += len(owners) == 1
            owners.add(member)
            self.owned_count[member] = self.owned_count.get(member, 0) + 1
        self._check(now)

    def release(self, member: int, partitions) -> None:
        now = self.clock()
        for p in partitions:
            self._account(p, now)
            owners = self.owners[p]
            owners.discard(member)
            self.unowned += not owners
            self.multi -= len(owners) == 1
            self.owned_count[member] -= 1
        self._check(now)

    def _check(self, now: float) -> None:
        if self.settled.is_set() or self.unowned or self.multi or not self.members:
            return
        low = self.partitions // len(self.members)
        high = -(-self.partitions // len(self.members))
        if all(low <= self.owned_count.get(m, 0) <= high for m in self.members):
            self.settled_at = now
            self.settled.set()

    def finish(self) -> dict:
        """Partition-seconds without an owner since ``start``, split by whether the partition
        ended with another owner than it started with ("moved"), and with two or more owners."""
        now = self.clock()
        for p in range(self.partitions):
            self._account(p, now)
        final = [next(iter(o)) if len(o) == 1 else None for o in self.owners]
        moved = [p for p in range(self.partitions) if final[p] != self.initial_owner[p]]
        moved_set = set(moved)
        return {
            "moved_partitions": len(moved),
            "unowned_moved_partition_s": round(sum(self.unowned_s[p] for p in moved), 3),
            "unowned_unaffected_partition_s": round(
                sum(s for p, s in enumerate(self.unowned_s) if p not in moved_set), 3
            ),
            "double_owned_partition_s": round(sum(self.multi_owned_s), 3),
        }


class Member:
    """What both kinds of member share: a connection to the coordinator and owned partitions."""

    def __init__(self, index: int, coordinator: tuple[str, int], group: str, topic: str) -> None:
        self.index, self.coordinator, self.group, self.topic = index, coordinator, group, topic
        self.owned: set[int] = set()
        self.conn: Connection | None = None
        self.ledger: Ledger | None = None
        self.stopped = False  # checked by the loops as well as cancelling them

    def _take(self, partitions) -> None:
        partitions = set(partitions) - self.owned
        self.owned |= partitions
        self.ledger.take(self.index, partitions)

    def _release(self, partitions) -> None:
        partitions = set(partitions) & self.owned
        self.owned -= partitions
        self.ledger.release(self.index, partitions)

    async def run(self, ledger: Ledger, start_delay_s: float) -> None:
        """After ``start_delay_s``, join, then heartbeat and rebalance until cancelled."""
        raise NotImplementedError

    def close(self) -> None:
        self.stopped = True
        if self.conn is not None:
            self.conn.close()


class ClassicMember(Member):
    """A classic-protocol consumer (``eager`` or ``cooperative``), heartbeating every
    ``heartbeat_interval_ms`` while not rebalancing."""

    def __init__(self, *args, protocol: str, heartbeat_interval_ms: int) -> None:
        super().__init__(*args)
        self.protocol = protocol
        self.assignor = get_assignor(CLASSIC_ASSIGNOR[protocol])
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.member_id = ""
        self.generation = -1
        self.rebalances = 0

    async def run(self, ledger: Ledger, start_delay_s: float) -> None:
        self.ledger = ledger
        await asyncio.sleep(start_delay_s)
        self.conn = await Connection.open(*self.coordinator)
        rejoin = True
        next_heartbeat = 0.0
        while not self.stopped:
            if rejoin:
                rejoin = await self._rebalance()
                next_heartbeat = time.perf_counter() + self.heartbeat_interval_s
                continue
            await asyncio.sleep(max(0.0, next_heartbeat - time.perf_counter()))
            answer = await self.conn.call(
                ApiKey.HEARTBEAT,
                group_id=self.group,
                generation_id=self.generation,
                member_id=self.member_id,
                group_instance_id=None,
            )
            next_heartbeat = time.perf_counter() + self.heartbeat_interval_s
            if answer.error_code == ErrorCode.rebalance_in_progress:
                rejoin = True
            elif answer.error_code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
                self._lost(forget_id=answer.error_code == ErrorCode.unknown_member_id)
                rejoin = True
            elif answer.error_code != ErrorCode.none:
                raise RuntimeError(f"Heartbeat: {answer.error_code!r}")

    def _lost(self, forget_id: bool) -> None:
        """Fenced or forgotten: everything owned is lost, as in onPartitionsLost."""
        self._release(set(self.owned))
        if forget_id:
            self.member_id = ""
        self.generation = -1

    async def _rebalance(self) -> bool:
        """One JoinGroup + SyncGroup round; returns whether another round is needed."""
        self.rebalances += 1
        if self.protocol == "eager":
            self._release(set(self.owned))  # onPartitionsRevoked(everything) before joining
        owned = tuple((self.topic, p) for p in sorted(self.owned))
        metadata = encode_subscription(
            Subscription((self.topic,), owned_partitions=owned, generation_id=self.generation)
        )
        protocol_cls = apis.nested_class(
            apis.request_class(ApiKey.JOIN_GROUP, VERSIONS[ApiKey.JOIN_GROUP]),
            "JoinGroupRequestProtocol",
        )
        while True:
            joined = await self.conn.call(
                ApiKey.JOIN_GROUP,
                group_id=self.group,
                session_timeout=_ms(SESSION_TIMEOUT_MS),
                rebalance_timeout=_ms(REBALANCE_TIMEOUT_MS),
                member_id=self.member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=(protocol_cls(name=self.assignor.name, metadata=metadata),),
            )
            if joined.error_code == ErrorCode.member_id_required:
                self.member_id = joined.member_id  # KIP-394: join again with this id
                continue
            if joined.error_code == ErrorCode.unknown_member_id:
                self._lost(forget_id=True)
                return True
            if joined.error_code in RETRIABLE or joined.error_code == (
                ErrorCode.rebalance_in_progress
            ):
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            if joined.error_code != ErrorCode.none:
                raise RuntimeError(f"JoinGroup: {joined.error_code!r}")
            break
        self.member_id = joined.member_id
        assignments = ()
        if joined.leader == self.member_id:
            assignments = self._assign(joined.members)
        synced = await self.conn.call(
            ApiKey.SYNC_GROUP,
            group_id=self.group,
            generation_id=joined.generation_id,
            member_id=self.member_id,
            group_instance_id=None,
            assignments=assignments,
        )
        if synced.error_code in (ErrorCode.rebalance_in_progress, *RETRIABLE):
            return True
        if synced.error_code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
            self._lost(forget_id=synced.error_code == ErrorCode.unknown_member_id)
            return True
        if synced.error_code != ErrorCode.none:
            raise RuntimeError(f"SyncGroup: {synced.error_code!r}")
        self.generation = joined.generation_id
        assigned = {
            p for t, p in decode_assignment(synced.assignment).partitions if t == self.topic
        }
        if self.protocol == "eager":
            self._take(assigned)
            return False
        plan = revocation_plan(
            {(self.topic, p) for p in self.owned}, {(self.topic, p) for p in assigned}
        )
        self._release(p for _, p in plan.revoked)
        self._take(p for _, p in plan.added)
        return plan.rejoin_needed

    def _assign(self, members) -> tuple:
        """The leader's SyncGroup assignments, computed by its client-side assignor."""
        subscriptions = {m.member_id: decode_subscription(m.metadata) for m in members}
        chosen = self.assignor.assign({self.topic: self.ledger.partitions}, subscriptions)
        assignment_cls = apis.nested_class(
            apis.request_class(ApiKey.SYNC_GROUP, VERSIONS[ApiKey.SYNC_GROUP]),
            "SyncGroupRequestAssignment",
        )
        return tuple(
            assignment_cls(member_id=m, assignment=encode_assignment(Assignment(a.partitions)))
            for m, a in chosen.items()
        )


def kafka_member_id() -> str:
    """A member id as a KIP-848 client makes one: a random Uuid in Kafka's text form."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ConsumerMember(Member):
    """A KIP-848 consumer: ConsumerGroupHeartbeat at the coordinator's interval."""

    def __init__(self, *args, topic_ids: dict[str, uuid.UUID]) -> None:
        super().__init__(*args)
        # Shared by the group's members: the topic's id, learnt from the first assignment any
        # of them receives (a heartbeat names owned partitions by topic id).
        self.topic_ids = topic_ids
        self.member_id = kafka_member_id()
        self.epoch = 0
        self.interval_s = 1.0
        self.acknowledge = False  # owned changed since the last heartbeat: say so at once

    async def run(self, ledger: Ledger, start_delay_s: float) -> None:
        self.ledger = ledger
        await asyncio.sleep(start_delay_s)
        self.conn = await Connection.open(*self.coordinator)
        while not self.stopped:
            await self._heartbeat()
            if not self.acknowledge:
                await asyncio.sleep(self.interval_s)

    async def _heartbeat(self) -> None:
        joining = self.epoch == 0
        owned = None
        if joining or self.acknowledge:
            topic_id = self.topic_ids.get(self.topic)
            owned = ()
            if self.owned and topic_id is not None:
                tp_cls = apis.nested_class(
                    apis.request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1), "TopicPartitions"
                )
                owned = (tp_cls(topic_id=topic_id, partitions=tuple(sorted(self.owned))),)
        answer = await self.conn.call(
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=self.epoch,
            rebalance_timeout=_ms(REBALANCE_TIMEOUT_MS if joining else -1),
            subscribed_topic_names=(self.topic,) if joining else None,
            server_assignor="uniform" if joining else None,
            topic_partitions=owned,
        )
        self.acknowledge = False
        if answer.error_code in (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id):
            self._release(set(self.owned))  # onPartitionsLost; join again as a new member
            self.epoch = 0
            return
        if answer.error_code in RETRIABLE:
            await asyncio.sleep(RETRY_BACKOFF_S)
            return
        if answer.error_code != ErrorCode.none:
            raise RuntimeError(f"ConsumerGroupHeartbeat: {answer.error_code!r}")
        self.epoch = answer.member_epoch
        self.interval_s = answer.heartbeat_interval.total_seconds()
        if answer.assignment is None:
            return
        target: set[int] = set()
        for tp in answer.assignment.topic_partitions:
            self.topic_ids.setdefault(self.topic, tp.topic_id)
            if tp.topic_id == self.topic_ids[self.topic]:
                target.update(tp.partitions)
        if target != self.owned:
            self._release(self.owned - target)  # onPartitionsRevoked, then acknowledge
            self._take(target - self.owned)
            self.acknowledge = True


def make_member(
    protocol: str,
    index: int,
    coordinator: tuple[str, int],
    group: str,
    topic: str,
    heartbeat_interval_ms: int,
    topic_ids: dict[str, uuid.UUID],
) -> Member:
    if protocol == "consumer":
        return ConsumerMember(index, coordinator, group, topic, topic_ids=topic_ids)
    return ClassicMember(
        index,
        coordinator,
        group,
        topic,
        protocol=protocol,
        heartbeat_interval_ms=heartbeat_interval_ms,
    )


async def leave(members: list[Member], connections: int = 8) -> None:
    """Take ``members`` (their tasks already cancelled) out of their group, so that the
    coordinator does not keep them until their sessions time out: one batch LeaveGroup (v3,
    KIP-345) for a classic group; a leave heartbeat (epoch -1) each for a consumer group, sent
    over ``connections`` fresh connections."""
    for m in members:
        m.close()
    if not members:
        return
    first = members[0]
    if isinstance(first, ClassicMember):
        identity = apis.nested_class(
            apis.request_class(ApiKey.LEAVE_GROUP, VERSIONS[ApiKey.LEAVE_GROUP]), "MemberIdentity"
        )
        conn = await Connection.open(*first.coordinator)
        try:
            await conn.call(
                ApiKey.LEAVE_GROUP,
                group_id=first.group,
                members=tuple(
                    identity(member_id=m.member_id, group_instance_id=None)
                    for m in members
                    if m.member_id
                ),
            )
        finally:
            conn.close()
        return

    async def leave_some(some: list[Member]) -> None:
        conn = await Connection.open(*first.coordinator)
        try:
            for m in some:
                await conn.call(
                    ApiKey.CONSUMER_GROUP_HEARTBEAT,
                    group_id=m.group,
                    member_id=m.member_id,
                    member_epoch=-1,
                    topic_partitions=None,
                )
        finally:
            conn.close()

    await asyncio.gather(*(leave_some(members[i::connections]) for i in range(connections)))
