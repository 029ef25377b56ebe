"""What every consumer-group member of the client library shares, whatever its protocol.

``GroupMember(router, group_id, topics, group_protocol=...)`` makes a member of the named
rebalance protocol, as Kafka's ``group.protocol`` does:

* ``"classic"`` (the default): JoinGroup / SyncGroup / Heartbeat, the leader runs the
  client-side assignors (client.py);
* ``"consumer"``: KIP-848's ConsumerGroupHeartbeat, the coordinator assigns (server-side
  assignors) and the member reconciles (consumer_member.py).

Both have the same surface: ``start``, ``wait_assigned``, ``assignment``, ``stable``, the
``RebalanceListener`` callbacks, ``commit`` / ``commit_async`` / ``committed`` and ``close``.
Options of one protocol given to the other are a ``ValueError`` (as Kafka's consumer refuses
``session.timeout.ms`` or ``partition.assignment.strategy`` with ``group.protocol=consumer``),
raised before anything is sent. ``SyncGroupMember`` is either behind blocking methods (its own
event loop in a thread).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from groupcoord.coordinator import (
    Errors,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetFetchRequest,
    TopicPartition,
)

from .assignment import Partitions, RebalanceListener, call_listener
from .bounded import bounded
from .channel import CoordinatorChannel, CoordinatorUnavailable, RouterHandle
from .offsets import checked_metadata, checked_offsets, checked_partitions

log = logging.getLogger("groupcoord.client")

HISTORY_MAX = 1_000  # (generation or member epoch, assignment) pairs kept for inspection
# How long SyncGroupMember.close waits beyond its timeout_ms for GroupMember.close to return.
CLOSE_GRACE_S = 5.0
CLOSE_TIMEOUT_MS = 30_000  # Kafka's default for close()
LEAVE_TIMEOUT_MS = 5_000  # past it, the session timeout removes the member instead
# The options that belong to one protocol only (each protocol class names those it takes).
PROTOCOL_OPTIONS = (
    "topic_partitions",
    "assignors",
    "session_timeout_ms",
    "heartbeat_interval_ms",
    "metadata_max_age_ms",
    "topic_regex",
    "server_assignor",
)


class _Default:
    def __repr__(self) -> str:
        return "<the protocol's default>"


# The default of every protocol option: "not given", so that giving one to the other protocol
# is refused even when its value is None.
DEFAULT: Any = _Default()


class GroupMemberError(RuntimeError):
    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(f"{error.name}: {message}")
        self.error = error


class CommitFailedError(GroupMemberError):
    """Kafka's CommitFailedException / RebalanceInProgressException: the member is not (or no
    longer) in a stable generation, or its member epoch moved on; commit again after the
    rebalance."""


def _protocols() -> dict[str, type[GroupMember]]:
    """Every protocol's member class. Each registers when its module is imported (client.py,
    consumer_member.py, which import this one), so they are imported here: a ``GroupMember``
    imported from this module alone knows both."""
    from . import client, consumer_member  # noqa: F401, PLC0415 — they import this module

    return GroupMember.PROTOCOLS


class GroupMember:
    """A consumer-group member over the router's Ray handle; ``group_protocol`` picks the
    implementation (module docstring). Every option but those of ``PROTOCOL_OPTIONS`` applies
    to both protocols; of those, ``topic_partitions`` (required), ``assignors``,
    ``session_timeout_ms``, ``heartbeat_interval_ms`` and ``metadata_max_age_ms`` are classic
    ones, ``topic_regex`` and ``server_assignor`` consumer ones."""

    PROTOCOLS: ClassVar[dict[str, type[GroupMember]]] = {}
    GROUP_PROTOCOL: ClassVar[str] = ""
    OPTIONS: ClassVar[tuple[str, ...]] = ()  # the PROTOCOL_OPTIONS this protocol takes

    def __init_subclass__(cls, *, group_protocol: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.GROUP_PROTOCOL = group_protocol
        GroupMember.PROTOCOLS[group_protocol] = cls

    def __new__(
        cls,
        router: RouterHandle,
        group_id: str,
        topics: Iterable[str] = (),
        *,
        group_protocol: str = "classic",
        **options: Any,
    ) -> GroupMember:
        implementation = (
            _protocols().get(group_protocol) if isinstance(group_protocol, str) else None
        )
        if implementation is None or (cls is not GroupMember and cls is not implementation):
            raise ValueError(
                f"group_protocol must be one of {', '.join(sorted(GroupMember.PROTOCOLS))}, "
                f"got {group_protocol!r}"
            )
        return super().__new__(implementation)

    def __init__(
        self,
        router: RouterHandle,
        group_id: str,
        topics: Iterable[str] = (),
        *,
        group_protocol: str = "classic",
        topic_partitions: Mapping[str, int] | Callable[[str], int] = DEFAULT,
        assignors: Iterable[Any] = DEFAULT,
        session_timeout_ms: int = DEFAULT,
        heartbeat_interval_ms: int = DEFAULT,
        metadata_max_age_ms: int = DEFAULT,
        topic_regex: str | None = DEFAULT,
        server_assignor: str | None = DEFAULT,
        group_instance_id: str | None = None,
        client_id: str = "groupcoord-consumer",
        client_host: str = "",
        rebalance_timeout_ms: int = 30_000,
        listener: RebalanceListener | None = None,
        retry_backoff_ms: int = 50,
        request_timeout_ms: int = 60_000,
    ) -> None:
        if not isinstance(group_id, str) or not group_id:
            raise ValueError("group_id must be a non-empty str")
        if type(rebalance_timeout_ms) is not int or rebalance_timeout_ms < 1:
            raise ValueError(
                f"rebalance_timeout_ms must be an int >= 1, got {rebalance_timeout_ms!r}"
            )
        if group_instance_id is not None and (
            not isinstance(group_instance_id, str) or not group_instance_id
        ):
            raise ValueError("group_instance_id must be None or a non-empty str")
        given = {
            "topic_partitions": topic_partitions,
            "assignors": assignors,
            "session_timeout_ms": session_timeout_ms,
            "heartbeat_interval_ms": heartbeat_interval_ms,
            "metadata_max_age_ms": metadata_max_age_ms,
            "topic_regex": topic_regex,
            "server_assignor": server_assignor,
        }
        foreign = sorted(n for n, v in given.items() if v is not DEFAULT and n not in self.OPTIONS)
        if foreign:
            raise ValueError(
                f"{', '.join(foreign)}: not an option of group_protocol="
                f"{self.GROUP_PROTOCOL!r} (it takes {', '.join(self.OPTIONS)})"
            )
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.listener = listener or RebalanceListener()
        self.channel = CoordinatorChannel(
            router, group_id, retry_backoff_ms=retry_backoff_ms, timeout_ms=request_timeout_ms
        )
        self.member_id = ""
        self.assignment: Partitions = frozenset()
        self.history: deque[tuple[int, Partitions]] = deque(maxlen=HISTORY_MAX)
        self.rebalances = 0
        self._assigned = asyncio.Event()
        # One commit in flight at a time, in call order (asyncio.Lock is FIFO): Ray's async
        # actors and failover retries do not keep a caller's order, and an older offset landing
        # after a newer acknowledged one would undo it.
        self._commit_lock = asyncio.Lock()
        self._async_commits: set[asyncio.Task] = set()  # close() waits for these
        self._fatal: GroupMemberError | None = None
        self._task: asyncio.Task | None = None
        self._configure(topics, **{n: v for n, v in given.items() if v is not DEFAULT})

    # -- what each protocol provides -----------------------------------------------------------

    def _configure(self, topics: Iterable[str], **options: Any) -> None:
        raise NotImplementedError

    async def _coordinate(self) -> None:
        """Keep the member in the group until cancelled; GroupMemberError when it must stop."""
        raise NotImplementedError

    async def _commit(self, offsets: dict[tuple[str, int], int], metadata: str) -> None:
        raise NotImplementedError

    async def _send_commit(
        self, generation: int, offsets: dict[tuple[str, int], int], metadata: str
    ) -> dict[tuple[str, int], Errors]:
        """Commit ``offsets`` as this member at ``generation`` (a classic generation or a
        member epoch); returns the partitions refused, with their errors."""
        response = await self.channel.call(
            OffsetCommitRequest(
                self.group_id,
                generation,
                self.member_id,
                [
                    OffsetCommitRequestPartition(t, p, o, -1, metadata)
                    for (t, p), o in offsets.items()
                ],
                self.group_instance_id,
            )
        )
        return {
            (p.topic, p.partition): p.error for p in response.partitions if p.error != Errors.NONE
        }

    def _loses_on_close(self) -> bool:
        """Whether ``close`` gives the partitions up as lost rather than revoked."""
        raise NotImplementedError

    async def _leave(self, timeout_ms: int) -> None:
        """Leave the group (a request bounded by ``timeout_ms``), as ``close(leave=True)``."""
        raise NotImplementedError

    def _closed(self) -> None:
        """Forget the membership: a closed member commits nothing more."""
        raise NotImplementedError

    @property
    def stable(self) -> bool:
        """Holding the assignment it was given, and not about to rebalance."""
        raise NotImplementedError

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start keeping this member in the group, in a background task."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def wait_assigned(self, timeout_s: float | None = None) -> Partitions:
        """Wait until the member has applied an assignment and no rebalance is under way or
        announced for it, then return what it owns (protocol details: client.py,
        consumer_member.py). An empty result means the group gave this member nothing.
        ``timeout_s`` bounds the whole wait (``TimeoutError``); a member that stopped on a
        fatal error raises it (``GroupMemberError``)."""
        await bounded(self._assigned.wait(), timeout_s)
        if self._fatal is not None:
            raise self._fatal
        return self.assignment

    async def close(self, leave: bool = True, timeout_ms: int = CLOSE_TIMEOUT_MS) -> None:
        """Wait for pending ``commit_async`` calls, stop heartbeating, give up what we own, and
        leave the group at once (unless ``leave`` is False); all within ``timeout_ms``.

        Async commits still pending at the timeout are cancelled: their callbacks get
        ``CoordinatorUnavailable`` (such a commit may or may not have landed). As in Kafka's
        onLeavePrepare, the partitions are *lost* rather than revoked when the member is in the
        middle of a rebalance or no longer in the group: it may be handing them on. A classic
        static member never sends LeaveGroup (as in Kafka): its session timeout removes it, and
        a restart within it takes its place without a rebalance; a consumer-protocol static
        member leaves with epoch -2, which keeps its partitions for its instance id."""
        if type(timeout_ms) is not int or timeout_ms < 0:
            raise ValueError(f"the close timeout_ms must be an int >= 0, got {timeout_ms!r}")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        if self._async_commits:
            # The member keeps heartbeating meanwhile, so the commits keep their generation.
            _, late = await asyncio.wait(
                set(self._async_commits), timeout=max(deadline - loop.time(), 0)
            )
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self.assignment:
            dropped, self.assignment = self.assignment, frozenset()
            if self._loses_on_close():
                await call_listener(self.listener.on_partitions_lost, dropped)
            else:
                await call_listener(self.listener.on_partitions_revoked, dropped)
        leave_ms = min(LEAVE_TIMEOUT_MS, int((deadline - loop.time()) * 1000))
        if leave and leave_ms > 0:
            try:
                await self._leave(leave_ms)
            except CoordinatorUnavailable:
                pass  # the session timeout will remove us instead
        self._closed()

    async def _run(self) -> None:
        try:
            await self._coordinate()
        except GroupMemberError as exc:
            self._stop(exc)
        except Exception as exc:
            # The assignor refused its input, a listener raised, ...: stop visibly (wait_assigned
            # raises, ``stable`` turns False) rather than let the task die unobserved while the
            # member still looks Stable and its heartbeats have stopped.
            stopped = GroupMemberError(Errors.UNKNOWN_SERVER_ERROR, repr(exc))
            stopped.__cause__ = exc
            self._stop(stopped)

    def _stop(self, exc: GroupMemberError) -> None:
        log.error("member %s of %s stopped: %s", self.member_id, self.group_id, exc)
        self._fatal = exc
        self._assigned.set()

    # -- offsets ---------------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[tuple[str, int], int], metadata: str = "") -> None:
        """Commit synchronously; returns once the offsets are durable. A member's commits (sync
        and async) go out one at a time, in the order they were made.

        Raises ``ValueError`` for a bad offset or partition (nothing is sent),
        ``CommitFailedError`` when the member is rebalancing, left its generation or its member
        epoch is stale, and ``GroupMemberError`` for other refusals (e.g.
        OFFSET_METADATA_TOO_LARGE)."""
        await self._commit(checked_offsets(offsets), checked_metadata(metadata))

    def commit_async(
        self,
        offsets: Mapping[tuple[str, int], int],
        callback: Callable[[BaseException | None], Any] | None = None,
        metadata: str = "",
    ) -> asyncio.Task:
        """Commit in the background; ``callback(None)`` or ``callback(exception)`` afterwards.
        A bad offset or partition raises ``ValueError`` here, and nothing is sent."""
        checked, metadata = checked_offsets(offsets), checked_metadata(metadata)

        def report(outcome: BaseException | None) -> None:
            if callback is not None:
                callback(outcome)
            elif outcome is not None:
                log.warning("async commit failed: %s", outcome)

        async def run() -> None:
            try:
                await self._commit(checked, metadata)
            except asyncio.CancelledError:
                report(
                    CoordinatorUnavailable(
                        "the commit was abandoned (the member closed) before it was acknowledged"
                    )
                )
                raise
            except Exception as exc:  # every failure reaches the callback, as in Kafka
                report(exc)
                return
            report(None)

        task = asyncio.get_running_loop().create_task(run())
        self._async_commits.add(task)
        task.add_done_callback(self._async_commits.discard)
        return task

    async def committed(
        self,
        partitions: Iterable[tuple[str, int]] | None = None,
    ) -> dict[tuple[str, int], int]:
        """Committed offsets (-1 where none), like ``KafkaConsumer.committed``; all when None."""
        checked = checked_partitions(partitions)
        tps = None if checked is None else [TopicPartition(t, p) for t, p in checked]
        response = await self._offset_fetch(tps)
        if response.error != Errors.NONE:
            raise GroupMemberError(response.error, "OffsetFetch failed")
        return {(p.topic, p.partition): p.committed_offset for p in response.partitions}

    async def _offset_fetch(self, tps: list[TopicPartition] | None) -> Any:
        return await self.channel.call(OffsetFetchRequest(self.group_id, tps))


class SyncGroupMember:
    """``GroupMember`` behind blocking methods, for code that is not async."""

    def __init__(
        self, router: RouterHandle, group_id: str, topics: Iterable[str] = (), **kwargs: Any
    ) -> None:
        """``kwargs``: ``GroupMember``'s keyword arguments (``group_protocol`` included)."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name=f"groupcoord-member-{group_id}"
        )
        self._thread.start()
        try:
            self.member: GroupMember = self._run(self._make(router, group_id, topics, kwargs))
        except BaseException:
            self._shutdown()
            raise

    @staticmethod
    async def _make(router, group_id, topics, kwargs) -> GroupMember:
        member = GroupMember(router, group_id, topics, **kwargs)
        member.start()
        return member

    def _run(self, coroutine, timeout_s: float | None = None):
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout_s)

    def wait_assigned(self, timeout_s: float | None = None) -> Partitions:
        """As ``GroupMember.wait_assigned``."""
        return self._run(self.member.wait_assigned(timeout_s))

    def commit(self, offsets: Mapping[tuple[str, int], int], metadata: str = "") -> None:
        self._run(self.member.commit(offsets, metadata))

    def commit_async(
        self,
        offsets: Mapping[tuple[str, int], int],
        callback: Callable[[BaseException | None], Any] | None = None,
        metadata: str = "",
    ) -> None:
        """As ``GroupMember.commit_async``; a bad offset raises ``ValueError`` in the caller's
        thread. ``callback`` runs on the member's thread."""
        checked_offsets(offsets)
        checked_metadata(metadata)
        self._loop.call_soon_threadsafe(self.member.commit_async, offsets, callback, metadata)

    def committed(
        self, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], int]:
        return self._run(self.member.committed(partitions))

    @property
    def assignment(self) -> Partitions:
        return self.member.assignment

    @property
    def stable(self) -> bool:
        return self.member.stable

    def close(self, leave: bool = True, timeout_ms: int = CLOSE_TIMEOUT_MS) -> None:
        """As ``GroupMember.close``, and bounded even if that hangs (a rebalance listener that
        never returns): ``TimeoutError`` when it has not finished ``CLOSE_GRACE_S`` after
        ``timeout_ms``; the member's thread stops either way."""
        if type(timeout_ms) is not int or timeout_ms < 0:
            raise ValueError(f"the close timeout_ms must be an int >= 0, got {timeout_ms!r}")
        try:
            self._run(self.member.close(leave, timeout_ms), timeout_ms / 1000 + CLOSE_GRACE_S)
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
