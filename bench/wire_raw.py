"""Minimal Kafka group members over raw sockets, for bench/wire.py's heartbeat and rejoin rows.

librdkafka heartbeats once per ``heartbeat.interval.ms``, so it cannot measure how many
heartbeats a coordinator answers per second; and its joins wait on its own timers (the
heartbeat that tells a member of a rebalance, the rejoin it schedules), which decide the join
rows more than either coordinator does. These members join by hand (FindCoordinator, JoinGroup
twice: the first answers MEMBER_ID_REQUIRED, SyncGroup with an empty assignment), then either
send Heartbeat back to back on several connections (``heartbeat_rate``) or, many members of
one settled group, rejoin all at once (``rebalance_times``). One request is in flight per
connection (a Kafka client's rule). Requests are kio's entities framed by the wire tests' own
framing helpers; the same bytes go to a Kafka broker and to groupcoord.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import struct
import time
from collections.abc import Awaitable, Callable, Sequence

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from groupcoord.wire import apis
from groupcoord.wire.apis import ApiKey
from tests.wire.frames import request_frame, split_response

# Versions every current broker and groupcoord serve; none is flexible (header v1, response v0).
VERSIONS = {
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 5,
    ApiKey.SYNC_GROUP: 3,
    ApiKey.HEARTBEAT: 3,
    ApiKey.OFFSET_COMMIT: 7,  # bench/wire_cpu.py's commits
}
IO_TIMEOUT_S = 30.0
SESSION_TIMEOUT = datetime.timedelta(seconds=30)
# ConsumerProtocol subscription v0 to no topics, and assignment v0 of no partitions: enough for
# a coordinator that reads them (a null user data is int32 -1).
SUBSCRIPTION = struct.pack(">hii", 0, 0, -1)
ASSIGNMENT = struct.pack(">hii", 0, 0, -1)
FIND_COORDINATOR_TRIES = 100
FIND_COORDINATOR_BACKOFF_S = 0.1
SETTLE_TIMEOUT_S = 60.0  # for a group of raw members to reach one generation holding them all
SETTLE_HEARTBEAT_S = 0.005  # a settled member's heartbeat while the others still join


def subscription(user_data: int) -> bytes:
    """ConsumerProtocol subscription v0 to no topics with 4 bytes of user data: a member that
    rejoins with other metadata makes the coordinator rebalance (a subscription change)."""
    return struct.pack(">hiii", 0, 0, 4, user_data)


class RawConnection:
    """One connection; ``call`` sends a request and waits for its answer (``frame`` then
    ``send``: a request encoded ahead of time)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._ids = itertools.count(1)

    @classmethod
    async def open(cls, host: str, port: int) -> RawConnection:
        return cls(*await asyncio.wait_for(asyncio.open_connection(host, port), IO_TIMEOUT_S))

    async def call(self, api: ApiKey, **values):
        return await self.send(api, self.frame(api, **values))

    def frame(self, api: ApiKey, **values) -> tuple[int, bytes]:
        """A request, encoded, with the correlation id its answer must carry."""
        correlation_id = next(self._ids)
        body = apis.request_class(api, VERSIONS[api])(**values)
        return correlation_id, request_frame(body, correlation_id=correlation_id)

    async def send(self, api: ApiKey, framed: tuple[int, bytes]):
        correlation_id, frame = framed
        version = VERSIONS[api]
        self.writer.write(frame)
        async with asyncio.timeout(IO_TIMEOUT_S):  # one timer a call (wait_for: a task a read)
            size = await self.reader.readexactly(4)
            rest = await self.reader.readexactly(struct.unpack(">i", size)[0])
        got, body = split_response(size + rest, apis.response_class(api, version), header_version=0)
        if got != correlation_id:
            raise RuntimeError(f"answer {got} to request {correlation_id}")
        return body

    def close(self) -> None:
        self.writer.close()


def _nested(api: ApiKey, name: str) -> type:
    """kio's entity ``name`` nested in ``api``'s request at the version this client sends."""
    return apis.nested_class(apis.request_class(api, VERSIONS[api]), name)


class RawMember:
    """One member of ``group`` on a connection of its own to the group's coordinator."""

    def __init__(self, conn: RawConnection, group: str) -> None:
        self.conn, self.group = conn, group
        self.member_id = ""

    def join_frame(self, metadata: bytes = SUBSCRIPTION) -> tuple[int, bytes]:
        protocol_cls = _nested(ApiKey.JOIN_GROUP, "JoinGroupRequestProtocol")
        return self.conn.frame(
            ApiKey.JOIN_GROUP,
            group_id=self.group,
            session_timeout=i32Timedelta.parse(SESSION_TIMEOUT),
            rebalance_timeout=i32Timedelta.parse(SESSION_TIMEOUT),
            member_id=self.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(protocol_cls(name="range", metadata=metadata),),
        )

    async def join(self, metadata: bytes = SUBSCRIPTION, framed: tuple[int, bytes] | None = None):
        """JoinGroup (``framed``: its request, from ``join_frame``); a new member first gets its
        id (MEMBER_ID_REQUIRED, KIP-394), then joins."""
        while True:
            joined = await self.conn.send(ApiKey.JOIN_GROUP, framed or self.join_frame(metadata))
            framed = None
            if joined.error_code == ErrorCode.member_id_required and not self.member_id:
                self.member_id = joined.member_id
                continue
            if joined.error_code != ErrorCode.none:
                raise RuntimeError(f"JoinGroup: {joined.error_code!r}")
            return joined

    def sync_frame(self, generation: int, members: Sequence[str] = ()) -> tuple[int, bytes]:
        """SyncGroup of ``generation``, handing each of ``members`` (the leader's: every
        member) an empty assignment."""
        assignment_cls = _nested(ApiKey.SYNC_GROUP, "SyncGroupRequestAssignment")
        return self.conn.frame(
            ApiKey.SYNC_GROUP,
            group_id=self.group,
            generation_id=generation,
            member_id=self.member_id,
            group_instance_id=None,
            assignments=tuple(assignment_cls(member_id=m, assignment=ASSIGNMENT) for m in members),
        )

    async def sync(self, joined, framed: tuple[int, bytes] | None = None) -> ErrorCode:
        """SyncGroup for the generation ``joined`` (this member's JoinGroup answer); the leader
        hands every member of it an empty assignment. ``framed``: a follower's request of that
        generation (``sync_frame``), used when this member is not the leader. Returns the
        answer's error code."""
        if joined.leader == self.member_id:
            framed = self.sync_frame(joined.generation_id, [m.member_id for m in joined.members])
        framed = framed or self.sync_frame(joined.generation_id)
        return (await self.conn.send(ApiKey.SYNC_GROUP, framed)).error_code

    async def heartbeat(self, generation: int) -> ErrorCode:
        answer = await self.conn.call(
            ApiKey.HEARTBEAT,
            group_id=self.group,
            generation_id=generation,
            member_id=self.member_id,
            group_instance_id=None,
        )
        return answer.error_code


async def find_coordinator(bootstrap: str, group: str) -> tuple[str, int]:
    """The coordinator's address, asked again while it is not available (a Kafka broker's
    answer until it has created its offsets topic), as clients do."""
    host, port = bootstrap.rsplit(":", 1)
    first = await RawConnection.open(host, int(port))
    try:
        for _ in range(FIND_COORDINATOR_TRIES):
            found = await first.call(ApiKey.FIND_COORDINATOR, key=group, key_type=0)
            if found.error_code != ErrorCode.coordinator_not_available:
                break
            await asyncio.sleep(FIND_COORDINATOR_BACKOFF_S)
    finally:
        first.close()
    if found.error_code != ErrorCode.none:
        raise RuntimeError(f"FindCoordinator: {found.error_code!r}")
    return found.host, found.port


async def join_alone(bootstrap: str, group: str) -> tuple[tuple[str, int], str, int]:
    """Join ``group`` as its only member; returns (coordinator address, member id, generation)."""
    coordinator = await find_coordinator(bootstrap, group)
    member = RawMember(await RawConnection.open(*coordinator), group)
    try:
        joined = await member.join()
        error = await member.sync(joined)
        if error != ErrorCode.none:
            raise RuntimeError(f"SyncGroup: {error!r}")
    finally:
        member.conn.close()
    return coordinator, member.member_id, joined.generation_id


async def settle(members: list[RawMember]) -> int:
    """Until one generation holds every member, each synced to it; returns that generation.
    With no initial rebalance delay the first generation holds whoever joined first; the
    others' joins start the next rebalance, which a synced member learns of from its heartbeat,
    as any client does."""
    synced: dict[int, int] = {}  # member index -> the generation it last synced to
    settled = asyncio.Event()

    async def settle(k: int, member: RawMember) -> None:
        while not settled.is_set():
            joined = await member.join()
            error = await member.sync(joined)
            if error == ErrorCode.rebalance_in_progress:
                continue
            if error != ErrorCode.none:
                raise RuntimeError(f"SyncGroup: {error!r}")
            synced[k] = joined.generation_id
            if len(synced) == len(members) and len(set(synced.values())) == 1:
                settled.set()
            while not settled.is_set():
                await asyncio.sleep(SETTLE_HEARTBEAT_S)
                error = await member.heartbeat(joined.generation_id)
                if error == ErrorCode.rebalance_in_progress:
                    break
                if error != ErrorCode.none:
                    raise RuntimeError(f"Heartbeat: {error!r}")

    await asyncio.wait_for(
        asyncio.gather(*(settle(k, m) for k, m in enumerate(members))), SETTLE_TIMEOUT_S
    )
    return synced[0]


async def _rejoin(
    member: RawMember, join: tuple[int, bytes], sync: tuple[int, bytes], generation: int
) -> tuple[int, ErrorCode]:
    """Rejoin with ``join``, then sync with ``sync`` if the new generation is ``generation``."""
    joined = await member.join(framed=join)
    framed = sync if joined.generation_id == generation else None
    return joined.generation_id, await member.sync(joined, framed)


async def rebalance_times(
    bootstrap: str,
    group: str,
    count: int,
    trials: int,
    settled: Callable[[], Awaitable[None]] | None = None,
) -> list[float]:
    """Seconds each of ``trials`` rebalances of a settled group of ``count`` members took: every
    member rejoins at once with new subscription metadata, the join phase ends as the last one
    rejoins (every known member is back: no timer), the leader syncs everyone's assignment,
    and the trial ends when every member has its SyncGroup answer. The members' JoinGroup
    requests, and the followers' SyncGroup requests of the generation expected next, are
    encoded before the clock starts: kio's encoding (~16 µs a JoinGroup here) would otherwise
    be much of a 100-member rejoin's time, for either server alike. ``settled``, when given, is
    awaited once the group has settled, before the first trial (bench/wire_cpu.py measures the
    server from there)."""
    coordinator = await find_coordinator(bootstrap, group)
    members = [RawMember(await RawConnection.open(*coordinator), group) for _ in range(count)]
    try:
        generation = await settle(members)
        if settled is not None:
            await settled()
        times = []
        for trial in range(trials):
            generation += 1
            metadata = subscription(trial)
            framed = [(m.join_frame(metadata), m.sync_frame(generation)) for m in members]
            started = time.perf_counter()
            answers = await asyncio.gather(
                *(
                    _rejoin(m, join, sync, generation)
                    for m, (join, sync) in zip(members, framed, strict=True)
                )
            )
            times.append(time.perf_counter() - started)
            if set(answers) != {(generation, ErrorCode.none)}:
                raise RuntimeError(
                    f"rebalance {trial}: not generation {generation} for all: {answers}"
                )
    finally:
        for m in members:
            m.conn.close()
    return times


async def heartbeat_rate(bootstrap: str, group: str, connections: int, seconds: float) -> float:
    """Heartbeats answered per second (each checked: error NONE) for one member of ``group``,
    sent back to back on ``connections`` connections to its coordinator."""
    coordinator, member_id, generation = await join_alone(bootstrap, group)
    conns = [await RawConnection.open(*coordinator) for _ in range(connections)]
    done = 0
    stop_at = time.perf_counter() + seconds

    async def loop(conn: RawConnection) -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            answer = await conn.call(
                ApiKey.HEARTBEAT,
                group_id=group,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=None,
            )
            if answer.error_code != ErrorCode.none:
                raise RuntimeError(f"Heartbeat: {answer.error_code!r}")
            done += 1

    started = time.perf_counter()
    try:
        await asyncio.gather(*(loop(c) for c in conns))
    finally:
        for c in conns:
            c.close()
    return done / (time.perf_counter() - started)
