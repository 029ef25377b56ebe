"""The classic protocol's consumer-group member, for Python code holding Ray actor handles.

``GroupMember(..., group_protocol="classic")`` (the default; member.py) joins a group through the
router, runs the assignor when it is the leader, syncs, heartbeats in a background task, commits
and fetches offsets, calls the rebalance listener, and rejoins on its own after rebalances and
coordinator failovers.

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

``wait_assigned`` waits for that follow-up round too: a partition that changes owner moves in
two rounds, the first giving the newcomer nothing while the old owner revokes it. A groupcoord
leader announces the follow-up in the assignment (``FOLLOW_UP_MARKER``), so a newcomer gets its
partitions, not an empty set. (A leader of another client library announces nothing: then it
returns after the first round, as Kafka's consumer would.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from groupcoord.coordinator import (
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)

from .assignment import AssignmentPlan, call_listener
from .channel import CoordinatorUnavailable
from .member import CommitFailedError, GroupMember, GroupMemberError

log = logging.getLogger("groupcoord.client")

LOST_ERRORS = frozenset({Errors.UNKNOWN_MEMBER_ID, Errors.ILLEGAL_GENERATION})
PROTOCOL_TYPE = "consumer"
CALL_SLACK_MS = 5_000  # over the rebalance timeout, for a parked join or sync
SESSION_TIMEOUT_MS = 10_000  # this member's defaults (Kafka's session.timeout.ms: 45 s)
HEARTBEAT_INTERVAL_MS = 3_000
METADATA_MAX_AGE_MS = 300_000  # Kafka's metadata.max.age.ms default
REASON_MAX_CHARS = 255  # Kafka's JoinGroupRequest.maybeTruncateReason


class ClassicGroupMember(GroupMember, group_protocol="classic"):
    """The classic protocol's member (module docstring); made by ``GroupMember(...)``."""

    OPTIONS = (
        "topic_partitions",
        "assignors",
        "session_timeout_ms",
        "heartbeat_interval_ms",
        "metadata_max_age_ms",
    )

    def _configure(
        self,
        topics: Iterable[str],
        *,
        topic_partitions: Mapping[str, int] | Callable[[str], int] | None = None,
        assignors: Iterable[Any] = ("range",),
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS,
        metadata_max_age_ms: int = METADATA_MAX_AGE_MS,
    ) -> None:
        if topic_partitions is None:
            raise ValueError("the classic protocol needs topic_partitions (its leader assigns)")
        if not 0 < heartbeat_interval_ms < session_timeout_ms:
            raise ValueError("need 0 < heartbeat_interval_ms < session_timeout_ms")
        if type(metadata_max_age_ms) is not int or metadata_max_age_ms < 0:
            raise ValueError(
                f"metadata_max_age_ms must be an int >= 0, got {metadata_max_age_ms!r}"
            )
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self.plan = AssignmentPlan(topics, topic_partitions, assignors)
        self.generation_id = -1
        self.protocol_name: str | None = None
        self.leader_id = ""
        self._needs_join = True
        self._rejoin_reason: str | None = None  # sent with the next JoinGroup (KIP-800)
        self._metadata_due_s = 0.0  # loop time of the next count check
        # Kafka's PreparingRebalance/CompletingRebalance: from the JoinGroup being sent until the
        # sync is applied. Only then are commits refused: a rejoin that was merely requested
        # still commits with the current generation (e.g. from on_partitions_revoked).
        self._joining = False

    @property
    def stable(self) -> bool:
        """In a generation, with its assignment, and not about to rejoin."""
        return not self._needs_join and self.generation_id >= 0 and self._fatal is None

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id

    # -- leaving ---------------------------------------------------------------------------------

    def _loses_on_close(self) -> bool:
        # Kafka's onLeavePrepare: without a generation, or in the middle of a rebalance,
        # the partitions may already be someone else's.
        return self._joining or self.generation_id < 0 or not self.member_id

    async def _leave(self, timeout_ms: int) -> None:
        # A static member never sends LeaveGroup (as in Kafka): its session timeout removes
        # it, and a restart within it takes its place without a rebalance.
        if self.member_id and self.group_instance_id is None:
            await self.channel.call(
                LeaveGroupRequest(
                    self.group_id, [MemberIdentity(self.member_id, None, "consumer closed")]
                ),
                timeout_ms=timeout_ms,
            )

    def _closed(self) -> None:
        self.generation_id = -1  # a closed member commits nothing more
        self._needs_join = True

    # -- the coordination loop -------------------------------------------------------------------

    async def _coordinate(self) -> None:
        while True:
            if self._needs_join:
                await self._join_and_sync()
                continue
            await asyncio.sleep(self.heartbeat_interval_ms / 1000)
            if not self._needs_join:
                self._check_metadata()
            if not self._needs_join:
                await self._heartbeat()

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
            errors = await self._send_commit(generation, offsets, metadata)
        # Outside the lock: losing the partitions calls the listener, which may commit.
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
