"""A minimal Kafka group member over raw sockets, for bench/wire.py's heartbeat row.

librdkafka heartbeats once per ``heartbeat.interval.ms``, so it cannot measure how many
heartbeats a coordinator answers per second. This member joins a group by hand (FindCoordinator,
JoinGroup twice: the first answers MEMBER_ID_REQUIRED, SyncGroup with an empty assignment) and
then sends Heartbeat back to back on several connections, one request in flight on each (a
Kafka client's rule). Requests are kio's entities framed by the wire tests' own framing helpers;
the same bytes go to a Kafka broker and to groupcoord.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import struct
import time

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


class RawConnection:
    """One connection; ``call`` sends a request and waits for its answer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._ids = itertools.count(1)

    @classmethod
    async def open(cls, host: str, port: int) -> RawConnection:
        return cls(*await asyncio.wait_for(asyncio.open_connection(host, port), IO_TIMEOUT_S))

    async def call(self, api: ApiKey, **values):
        version = VERSIONS[api]
        cls = apis.request_class(api, version)
        correlation_id = next(self._ids)
        self.writer.write(request_frame(cls(**values), correlation_id=correlation_id))
        size = await asyncio.wait_for(self.reader.readexactly(4), IO_TIMEOUT_S)
        rest = await asyncio.wait_for(
            self.reader.readexactly(struct.unpack(">i", size)[0]), IO_TIMEOUT_S
        )
        got, body = split_response(size + rest, apis.response_class(api, version), header_version=0)
        if got != correlation_id:
            raise RuntimeError(f"answer {got} to request {correlation_id}")
        return body

    def close(self) -> None:
        self.writer.close()


async def join_alone(bootstrap: str, group: str) -> tuple[tuple[str, int], str, int]:
    """Join ``group`` as its only member; returns (coordinator address, member id, generation)."""
    host, port = bootstrap.rsplit(":", 1)
    first = await RawConnection.open(host, int(port))
    try:
        found = await first.call(ApiKey.FIND_COORDINATOR, key=group, key_type=0)
    finally:
        first.close()
    if found.error_code != ErrorCode.none:
        raise RuntimeError(f"FindCoordinator: {found.error_code!r}")
    coordinator = (found.host, found.port)
    conn = await RawConnection.open(*coordinator)
    try:
        member_id, joined = "", None
        for _ in range(2):  # the first JoinGroup hands out the member id (KIP-394)
            protocol_cls = apis.nested_class(
                apis.request_class(ApiKey.JOIN_GROUP, VERSIONS[ApiKey.JOIN_GROUP]),
                "JoinGroupRequestProtocol",
            )
            joined = await conn.call(
                ApiKey.JOIN_GROUP,
                group_id=group,
                session_timeout=i32Timedelta.parse(SESSION_TIMEOUT),
                rebalance_timeout=i32Timedelta.parse(SESSION_TIMEOUT),
                member_id=member_id,
                group_instance_id=None,
                protocol_type="consumer",
                protocols=(protocol_cls(name="range", metadata=SUBSCRIPTION),),
            )
            member_id = joined.member_id
            if joined.error_code == ErrorCode.none:
                break
            if joined.error_code != ErrorCode.member_id_required:
                raise RuntimeError(f"JoinGroup: {joined.error_code!r}")
        assignment_cls = apis.nested_class(
            apis.request_class(ApiKey.SYNC_GROUP, VERSIONS[ApiKey.SYNC_GROUP]),
            "SyncGroupRequestAssignment",
        )
        synced = await conn.call(
            ApiKey.SYNC_GROUP,
            group_id=group,
            generation_id=joined.generation_id,
            member_id=member_id,
            group_instance_id=None,
            assignments=(assignment_cls(member_id=member_id, assignment=ASSIGNMENT),),
        )
        if synced.error_code != ErrorCode.none:
            raise RuntimeError(f"SyncGroup: {synced.error_code!r}")
    finally:
        conn.close()
    return coordinator, member_id, joined.generation_id


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
