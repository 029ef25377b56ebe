"""A consumer-group member for Python code holding Ray actor handles.

``GroupMember`` (async) joins a group through the router, runs the assignor when it is the
leader, syncs, heartbeats in a background task, commits and fetches offsets, calls the rebalance
listener, and rejoins on its own after rebalances and coordinator failovers.
``SyncGroupMember`` is the same behind blocking methods (its own event loop in a thread).

Every call to the coordinator is bounded (see channel.py): a heartbeat by the session timeout, a
JoinGroup or SyncGroup by the rebalance timeout plus a slack (and at least
``request_timeout_ms``), commits and fetches by ``request_timeout_ms``, the LeaveGroup of
``close`` by what is left of the close timeout. Offsets and partitions are checked before
anything is sent (offsets.py): a bad one is a ``ValueError`` and nothing is committed.

``close(timeout_ms)`` is Kafka's ``close(Duration)``: it first waits (heartbeating meanwhile) for
the ``commit_async`` calls still pending, then gives its partitions up through the listener and
leaves. As in Kafka's onLeavePrepare, they are *lost* rather than revoked when the member is in
the middle of a rebalance or no longer has a generation: the group may be handing them on.

Kafka's metadata-change rule: the leader remembers the partition count of every topic a member
subscribed to when it assigned, re-reads them from ``topic_partitions`` every
``metadata_max_age_ms`` (at heartbeat granularity) and rejoins, with the change as the JoinGroup
reason, when one changed, so that new partitions get owners.

Error handling follows Kafka's Java consumer (AbstractCoordinator / ConsumerCoordinator):

========================  ======================================================================
answer                    what the member does
========================  ======================================================================
MEMBER_ID_REQUIRED        (JoinGroup) keeps the id it was given and joins again at once
UNKNOWN_MEMBER_ID         forgets id and generation, partitions are *lost*, joins as new
ILLEGAL_GENERATION        forgets the generation (keeps its id), partitions lost, rejoins
REBALANCE_IN_PROGRESS     rejoins (heartbeat, sync); a commit fails with CommitFailedError
FENCED_INSTANCE_ID        fatal: another process took our group.instance.id
INCONSISTENT_GROUP_PROTOCOL, GROUP_MAX_SIZE_REACHED, INVALID_SESSION_TIMEOUT, INVALID_GROUP_ID,
INVALID_REQUEST, UNKNOWN_SERVER_ERROR, GROUP_AUTHORIZATION_FAILED, and any error not named
here: fatal (``wait_assigned`` raises), as Kafka's consumer raises on an unexpected error
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, a dead or restarting
actor: absorbed by ``CoordinatorChannel`` (rediscover, back off, retry)
========================  ======================================================================

Rebalance protocols: with EAGER assignors every owned partition is revoked before joining; with
COOPERATIVE ones (KIP-429) nothing is revoked up front, only the partitions the new assignment
takes away are revoked after the sync, and the member rejoins at once so that the follow-up
rebalance can hand them to their new owners.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from groupcoord.coordinator import (
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetFetchRequest,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    TopicPartition,
)

from .assignment import AssignmentPlan, Partitions, RebalanceListener, call_listener
from .channel import CoordinatorChannel, CoordinatorUnavailable, RouterHandle
from .offsets import checked_metadata, checked_offsets, checked_partitions

log = logging.getLogger("groupcoord.client")

LOST_ERRORS = frozenset({Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION})
PROTOCOL_TYPE = "consumer"
HISTORY_MAX = 1_000  # (generation, assignment) pairs kept for inspection
CALL_SLACK_MS = 5_000  # over the rebalance timeout, for a parked join or sync
# How long SyncGroupMember.close waits beyond its timeout_ms for GroupMember.close to return.
CLOSE_GRACE_S = 5.0
CLOSE_TIMEOUT_MS = 30_000  # Kafka's default for close()
LEAVE_TIMEOUT_MS = 5_000  # past it, the session timeout removes the member instead
METADATA_MAX_AGE_MS = 300_000  # Kafka's metadata.max.age.ms default
REASON_MAX_CHARS = 255  # Kafka's JoinGroupRequest.maybeTruncateReason


class GroupMemberError(RuntimeError):
    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(f"{error.name}: {message}")
        self.error = error


class CommitFailedError(GroupMemberError):
    """Kafka's CommitFailedException / RebalanceInProgressException: the member is not (or no
    longer) in a stable generation; commit again after the rebalance."""


class GroupMember:
    def __init__(
        self,
        router: RouterHandle,
        group_id: str,
        topics: Iterable[str],
        *,
        topic_partitions: Mapping[str, int] | Callable[[str], int],
        assignors: Iterable[Any] = ("range",),
        group_instance_id: str | None = None,
        client_id: str = "groupcoord-consumer",
        client_host: str = "",
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 30_000,
        heartbeat_interval_ms: int = 3_000,
        listener: RebalanceListener | None = None,
        retry_backoff_ms: int = 50,
        request_timeout_ms: int = 60_000,
        metadata_max_age_ms: int = METADATA_MAX_AGE_MS,
    ) -> None:
        if not isinstance(group_id, str) or not group_id:
            raise ValueError("group_id must be a non-empty str")
        if not 0 < heartbeat_interval_ms < session_timeout_ms:
            raise ValueError("need 0 < heartbeat_interval_ms < session_timeout_ms")
        if rebalance_timeout_ms < 1:
            raise ValueError("rebalance_timeout_ms must be >= 1")
        if type(metadata_max_age_ms) is not int or metadata_max_age_ms < 0:
            raise ValueError(
                f"metadata_max_age_ms must be an int >= 0, got {metadata_max_age_ms!r}"
            )
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self.plan = AssignmentPlan(topics, topic_partitions, assignors)
        self.listener = listener or RebalanceListener()
        self.channel = CoordinatorChannel(
            router, group_id, retry_backoff_ms=retry_backoff_ms, timeout_ms=request_timeout_ms
        )
        self.member_id = ""
        self.generation_id = -1
        self.protocol_name: str | None = None
        self.leader_id = ""
        self.assignment: Partitions = frozenset()
        self.history: deque[tuple[int, Partitions]] = deque(maxlen=HISTORY_MAX)
        self.rebalances = 0
        self._needs_join = True
        self._rejoin_reason: str | None = None  # sent with the next JoinGroup (KIP-800)
        self._metadata_due_s = 0.0  # loop time of the next count check
        # Kafka's PreparingRebalance/CompletingRebalance: from the JoinGroup being sent until the
        # sync is applied. Only then are commits refused: a rejoin that was merely requested
        # still commits with the current generation (e.g. from on_partitions_revoked).
        self._joining = False
        self._assigned = asyncio.Event()
        # One commit in flight at a time, in call order (asyncio.Lock is FIFO): Ray's async
        # actors and failover retries do not keep a caller's order, and an older offset landing
        # after a newer acknowledged one would undo it.
        self._commit_lock = asyncio.Lock()
        self._async_commits: set[asyncio.Task] = set()  # close() waits for these
        self._fatal: GroupMemberError | None = None
        self._task: asyncio.Task | None = None

    @property
    def stable(self) -> bool:
        """In a generation, with its assignment, and not about to rejoin."""
        return not self._needs_join and self.generation_id >= 0 and self._fatal is None

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start keeping this member in the group, in a background task."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def wait_assigned(self, timeout_s: float | None = None) -> Partitions:
        """Wait until the member has applied the assignment of a generation and no rebalance
        is under way or announced for it, then return what it owns.

        Under the cooperative protocol a partition that changes owner moves in two rounds
        (KIP-429): the first round gives the newcomer nothing while the old owner revokes it,
        the follow-up round hands it over. A groupcoord leader announces the follow-up in the
        assignment (``FOLLOW_UP_MARKER``), so this waits for that round too and a newcomer
        gets its partitions, not an empty set. (A leader of another client library announces
        nothing: then this returns after the first round, as Kafka's consumer would.) An
        empty result means the group gave this member nothing (more members than
        partitions). ``timeout_s`` bounds the whole wait (``TimeoutError``); a member that
        stopped on a fatal error raises it (``GroupMemberError``)."""
        await asyncio.wait_for(self._assigned.wait(), timeout_s)
        if self._fatal is not None:
            raise self._fatal
        return self.assignment

    async def close(self, leave: bool = True, timeout_ms: int = CLOSE_TIMEOUT_MS) -> None:
        """Wait for pending ``commit_async`` calls, stop heartbeating, give up what we own, and
        (dynamic members) leave the group at once; all within ``timeout_ms``.

        Async commits still pending at the timeout are cancelled: their callbacks get
        ``CoordinatorUnavailable`` (such a commit may or may not have landed). A static member
        never sends LeaveGroup (as in Kafka): its session timeout removes it, and a restart
        within it takes its place without a rebalance."""
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
            # Kafka's onLeavePrepare: without a generation, or in the middle of a rebalance,
            # the partitions may already be someone else's.
            if self._joining or self.generation_id < 0 or not self.member_id:
                await call_listener(self.listener.on_partitions_lost, dropped)
            else:
                await call_listener(self.listener.on_partitions_revoked, dropped)
        leave_ms = min(LEAVE_TIMEOUT_MS, int((deadline - loop.time()) * 1000))
        if leave and self.member_id and self.group_instance_id is None and leave_ms > 0:
            try:
                await self.channel.call(
                    LeaveGroupRequest(
                        self.group_id, [MemberIdentity(self.member_id, None, "consumer closed")]
                    ),
                    timeout_ms=leave_ms,
                )
            except CoordinatorUnavailable:
                pass  # the session timeout will remove us instead
        self.generation_id = -1  # a closed member commits nothing more
        self._needs_join = True

    # -- the coordination loop -------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            while True:
                if self._needs_join:
                    await self._join_and_sync()
                    continue
                await asyncio.sleep(self.heartbeat_interval_ms / 1000)
                if not self._needs_join:
                    self._check_metadata()
                if not self._needs_join:
                    await self._heartbeat()
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

    async def _heartbeat(self) -> None:
        generation = self.generation_id
        try:
            response = await self.channel.call(
                HeartbeatRequest(self.group_id, generation, self.member_id, self.group_instance_id),
                timeout_ms=self.session_timeout_ms,
            )
        except CoordinatorUnavailable:
            return  # keep trying; the session may still be alive
        error = response.error
        if error == Errors.REBALANCE_IN_PROGRESS:
            self._request_rejoin("the group is rebalancing")
        elif error in LOST_ERRORS:
            if generation == self.generation_id:
                await self._lose_partitions(error)
        elif error != Errors.NONE:  # fatal: see the table in the module docstring
            raise GroupMemberError(error, "heartbeat refused")

    def _request_rejoin(self, why: str) -> None:
        if not self._needs_join:
            log.info("member %s of %s rejoins: %s", self.member_id, self.group_id, why)
            self._rejoin_reason = why
        self._needs_join = True
        self._assigned.clear()

    def _check_metadata(self) -> None:
        """Kafka's metadata-change rule, for the leader, every ``metadata_max_age_ms``."""
        now_s = asyncio.get_running_loop().time()
        if now_s < self._metadata_due_s:
            return
        self._metadata_due_s = now_s + self.metadata_max_age_ms / 1000
        if not self.is_leader:
            return
        try:
            change = self.plan.counts_changed()
        except Exception as exc:  # as a failed metadata refresh: try again next time
            log.warning(
                "member %s of %s could not read partition counts: %r",
                self.member_id,
                self.group_id,
                exc,
            )
            return
        if change:
            self._request_rejoin(f"partition counts changed since the assignment: {change}")

    async def _lose_partitions(self, error: Errors) -> None:
        """Kafka's resetGenerationOnResponseError: our generation is gone, and with it the
        right to the partitions (lost, not revoked: someone else may already own them)."""
        lost, self.assignment = self.assignment, frozenset()
        self.generation_id = -1
        if error == Errors.UNKNOWN_MEMBER_ID:
            self.member_id = ""
        self._request_rejoin(error.name)
        if lost:
            await call_listener(self.listener.on_partitions_lost, lost)

    async def _join_and_sync(self) -> None:
        # onJoinPrepare: EAGER gives everything up now; COOPERATIVE keeps its partitions.
        if not self.plan.cooperative and self.assignment:
            revoked, self.assignment = self.assignment, frozenset()
            await call_listener(self.listener.on_partitions_revoked, revoked)
        self._joining = True
        while True:
            join = await self._join()
            if join is None:
                continue
            sync = await self._sync(join)
            if sync is not None:
                break
        await self._apply(sync.assignment)

    async def _join(self):
        request = JoinGroupRequest(
            self.group_id,
            self.member_id,
            PROTOCOL_TYPE,
            [
                JoinGroupRequestProtocol(name, metadata)
                for name, metadata in self.plan.protocols(self.assignment, self.generation_id)
            ],
            self.session_timeout_ms,
            self.rebalance_timeout_ms,
            group_instance_id=self.group_instance_id,
            client_id=self.client_id,
            client_host=self.client_host,
            require_known_member_id=True,
            reason=None if self._rejoin_reason is None else self._rejoin_reason[:REASON_MAX_CHARS],
        )
        self._rejoin_reason = None
        try:
            response = await self._call_parked(request)
        except CoordinatorUnavailable:
            return None
        error = response.error
        if error == Errors.NONE:
            self.member_id, self.generation_id = response.member_id, response.generation_id
            self.protocol_name, self.leader_id = response.protocol_name, response.leader
            return response
        if error == Errors.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
        elif error in LOST_ERRORS:
            await self._lose_partitions(error)
        elif error == Errors.REBALANCE_IN_PROGRESS:  # join again
            await asyncio.sleep(self.channel.retry_backoff_ms / 1000)
        else:  # fatal: see the table in the module docstring
            raise GroupMemberError(error, f"JoinGroup to {self.group_id!r} failed")
        return None

    async def _call_parked(self, request):
        """A JoinGroup or SyncGroup, which the coordinator may park for a rebalance timeout."""
        parked_ms = self.rebalance_timeout_ms + CALL_SLACK_MS
        return await self.channel.call(
            request,
            attempt_timeout_s=parked_ms / 1000,
            timeout_ms=max(self.channel.timeout_ms, parked_ms),
        )

    async def _sync(self, join):
        assignments = []
        if join.member_id != join.leader:
            self.plan.forget_counts()  # only the leader watches partition counts
        elif join.skip_assignment:
            self.plan.remember_counts(join.members)
        else:
            plan = self.plan.assign(join.protocol_name, join.members)
            assignments = [SyncGroupRequestAssignment(m, a) for m, a in plan.items()]
        try:
            response = await self._call_parked(
                SyncGroupRequest(
                    self.group_id,
                    join.generation_id,
                    self.member_id,
                    assignments,
                    self.group_instance_id,
                    PROTOCOL_TYPE,
                    join.protocol_name,
                )
            )
        except CoordinatorUnavailable:
            return None
        error = response.error
        if error == Errors.NONE:
            # KIP-559: a coordinator that names another protocol than the join chose is not
            # talking about our generation; Kafka's consumer treats that as fatal.
            if response.protocol_type not in (
                None,
                PROTOCOL_TYPE,
            ) or response.protocol_name not in (None, join.protocol_name):
                raise GroupMemberError(
                    Errors.INCONSISTENT_GROUP_PROTOCOL,
                    f"SyncGroup answered protocol {response.protocol_type}/"
                    f"{response.protocol_name}, joined with "
                    f"{PROTOCOL_TYPE}/{join.protocol_name}",
                )
            return response
        if error in LOST_ERRORS:
            await self._lose_partitions(error)
        elif error != Errors.REBALANCE_IN_PROGRESS:  # that one: rejoin
            # fatal: see the table in the module docstring
            raise GroupMemberError(error, f"SyncGroup to {self.group_id!r} failed")
        return None

    async def _apply(self, assignment_bytes: bytes) -> None:
        new, follow_up = self.plan.decode(assignment_bytes)
        owned = self.assignment
        self.rebalances += 1
        self._needs_join = self._joining = False
        self.history.append((self.generation_id, new))
        if self.plan.cooperative:
            revoked, added = owned - new, new - owned
            if revoked:
                self.assignment = owned - revoked
                await call_listener(self.listener.on_partitions_revoked, revoked)
            self.assignment = new
            # Called after every rebalance, even with nothing added (as Kafka's consumer does):
            # listeners use it to learn that the rebalance is over.
            await call_listener(self.listener.on_partitions_assigned, added)
            if revoked:  # KIP-429: let the new owners take them
                self._request_rejoin(f"revoked {len(revoked)} partitions")
                return
        else:
            self.assignment = new
            await call_listener(self.listener.on_partitions_assigned, new)
        if not self._needs_join and not follow_up:
            self._assigned.set()

    # -- offsets ---------------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[tuple[str, int], int], metadata: str = "") -> None:
        """Commit synchronously; returns once the offsets are durable. A member's commits (sync
        and async) go out one at a time, in the order they were made.

        Raises ``ValueError`` for a bad offset or partition (nothing is sent),
        ``CommitFailedError`` when the member is rebalancing or left its generation, and
        ``GroupMemberError`` for other refusals (e.g. OFFSET_METADATA_TOO_LARGE)."""
        await self._commit(checked_offsets(offsets), checked_metadata(metadata))

    async def _commit(self, offsets: dict[tuple[str, int], int], metadata: str) -> None:
        if not offsets:
            return
        async with self._commit_lock:
            if self._joining or self.generation_id < 0:
                raise CommitFailedError(
                    Errors.REBALANCE_IN_PROGRESS,
                    "the member is not in a stable generation (rebalancing "
                    "or closed); commit again after the rebalance",
                )
            generation = self.generation_id
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
        # Outside the lock: losing the partitions calls the listener, which may commit.
        errors = {
            (p.topic, p.partition): p.error for p in response.partitions if p.error != Errors.NONE
        }
        if not errors:
            return
        error = next(iter(errors.values()))
        if error == Errors.REBALANCE_IN_PROGRESS:
            self._request_rejoin("a commit met a rebalance")
            raise CommitFailedError(error, "rebalance in progress; commit again after it")
        if error in LOST_ERRORS:
            if generation == self.generation_id:
                await self._lose_partitions(error)
            raise CommitFailedError(error, "this member is no longer part of the generation")
        raise GroupMemberError(error, f"commit failed for {sorted(errors)}")

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
        response = await self.channel.call(OffsetFetchRequest(self.group_id, tps))
        if response.error != Errors.NONE:
            raise GroupMemberError(response.error, "OffsetFetch failed")
        return {(p.topic, p.partition): p.committed_offset for p in response.partitions}


class SyncGroupMember:
    """``GroupMember`` behind blocking methods, for code that is not async."""

    def __init__(
        self, router: RouterHandle, group_id: str, topics: Iterable[str], **kwargs: Any
    ) -> None:
        """``kwargs``: ``GroupMember``'s keyword arguments."""
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
        """As ``GroupMember.wait_assigned`` (follow-up cooperative rounds included)."""
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
