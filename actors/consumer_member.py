"""The KIP-848 consumer-group member (``GroupMember(..., group_protocol="consumer")``), for Python
code holding Ray actor handles: Kafka's new consumer (``group.protocol=consumer``) over the
core's ConsumerGroupHeartbeat.

The member names itself (a random member id, as Kafka's client does since KIP-1082) and joins
with member epoch 0, its subscription (topic names or one RE2 ``topic_regex``), its rebalance
timeout and optionally a server assignor (``uniform``, ``range``). The coordinator assigns; the
member heartbeats at the interval the coordinator gives, and each answer that carries a new
assignment is reconciled as Kafka's membership manager does:

1. the partitions no longer assigned are revoked: ``on_partitions_revoked`` (where the user
   commits: the member still has its epoch);
2. the new ones are taken: ``on_partitions_assigned`` (called after every reconciliation, with
   what was added, possibly nothing: listeners learn that it is over);
3. the member acknowledges at once with a heartbeat naming what it now owns.

The coordinator never hands a partition out before its previous owner acknowledged its
revocation, so no two members ever own one at the same time. A member whose partitions are
still held by others gets them in a later heartbeat; so ``wait_assigned`` returns only once the
member holds its whole target assignment, which it reads with a ConsumerGroupDescribe of its
group after each acknowledged reconciliation (Kafka's answers do not say whether more is
coming).

Answers, as Kafka's new consumer handles them: FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID (the
session expired, the rebalance timeout passed, or the member was removed) lose the partitions
(``on_partitions_lost``) and rejoin at once with epoch 0 under the same member id; the
coordinator's unavailability is absorbed by ``CoordinatorChannel`` (a heartbeat that got no
answer, or was retried, is followed by a full one, whose answer names the whole assignment:
the lost answer may have carried a new one); every
other error (GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION,
FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, GROUP_ID_NOT_FOUND for a classic group that may not
be upgraded, ...) is fatal: ``wait_assigned`` raises it.

Commits carry the member epoch as their generation: STALE_MEMBER_EPOCH (the epoch moved on
while the commit was under way) and UNKNOWN_MEMBER_ID fail the commit with
``CommitFailedError``, and a member without an epoch (joining, fenced, closed) commits nothing.
``committed`` names the member and its epoch (OffsetFetch v9) and tries again while the epoch is
stale. ``close`` revokes (or, without an epoch, loses) what the member owns and leaves with
epoch -1; a static member (``group_instance_id``) leaves with -2, so that its partitions wait
for its next incarnation until the session timeout.

Listener callbacks run in the member's task, as with the classic member: a callback that takes
longer than the session timeout gets the member fenced.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable
from typing import Any

from groupcoord.coordinator import (
    SERVER_ASSIGNORS,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatTopicPartitions,
    Errors,
    OffsetFetchRequest,
    TopicPartition,
)
from groupcoord.coordinator.consumer_messages import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
)
from groupcoord.coordinator.topic_regex import regex_error

from .assignment import MAX_TOPICS, Partitions, call_listener
from .channel import CoordinatorUnavailable
from .member import CommitFailedError, GroupMember, GroupMemberError

log = logging.getLogger("groupcoord.client")

FENCED_ERRORS = frozenset({Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID})
COMMIT_FAILED_ERRORS = frozenset({Errors.STALE_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID})


def _partitions(topic_partitions: Iterable[Any], name: str) -> Partitions:
    return frozenset((getattr(tp, name), p) for tp in topic_partitions for p in tp.partitions)


class ConsumerGroupMember(GroupMember, group_protocol="consumer"):
    """The consumer protocol's member (module docstring); made by
    ``GroupMember(..., group_protocol="consumer")``."""

    OPTIONS = ("topic_regex", "server_assignor")

    def _configure(
        self,
        topics: Iterable[str],
        *,
        topic_regex: str | None = None,
        server_assignor: str | None = None,
    ) -> None:
        if isinstance(topics, str):  # iterating "orders" would subscribe to o, r, ...
            raise ValueError(f"give a list of topics, not the string {topics!r}")
        self.topics = tuple(sorted(set(topics)))
        if len(self.topics) > MAX_TOPICS or not all(isinstance(t, str) and t for t in self.topics):
            raise ValueError(f"topics must be at most {MAX_TOPICS} non-empty strings")
        if topic_regex is not None:
            if not isinstance(topic_regex, str) or not topic_regex:
                raise ValueError(f"topic_regex must be a non-empty str, got {topic_regex!r}")
            why = regex_error(topic_regex)
            if why is not None:
                raise ValueError(f"topic_regex {topic_regex!r} is not valid RE2: {why}")
        if bool(self.topics) == (topic_regex is not None):
            raise ValueError("subscribe to topics or to a topic_regex: exactly one of them")
        if server_assignor is not None and server_assignor not in SERVER_ASSIGNORS:
            raise ValueError(
                f"server_assignor must be one of {', '.join(sorted(SERVER_ASSIGNORS))}, "
                f"got {server_assignor!r}"
            )
        self.topic_regex = topic_regex
        self.server_assignor = server_assignor
        self.member_id = uuid.uuid4().hex
        # 0 while (re)joining, the coordinator's epoch once in the group, -1 once closed.
        self.member_epoch = 0
        self.heartbeat_interval_ms = 0  # the coordinator's, from its first answer
        self._send_now = True  # join, or acknowledge a reconciliation, without waiting
        self._full = True  # the next heartbeat carries every field (Kafka's sent-fields reset)
        self._fresh = True  # no reconciliation since (re)joining

    @property
    def stable(self) -> bool:
        return self.member_epoch > 0 and self._assigned.is_set() and self._fatal is None

    # -- heartbeats ------------------------------------------------------------------------------

    async def _coordinate(self) -> None:
        while True:
            if not self._send_now:
                wait_ms = self.heartbeat_interval_ms or self.channel.retry_backoff_ms
                await asyncio.sleep(wait_ms / 1000)
            await self._heartbeat()

    def _request(self) -> ConsumerGroupHeartbeatRequest:
        full = self._full or self.member_epoch == 0
        return ConsumerGroupHeartbeatRequest(
            self.group_id,
            self.member_id,
            self.member_epoch,
            instance_id=self.group_instance_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else -1,
            subscribed_topic_names=list(self.topics) if full and self.topics else None,
            subscribed_topic_regex=self.topic_regex if full else None,
            server_assignor=self.server_assignor if full else None,
            topic_partitions=_owned(self.assignment),
            client_id=self.client_id,
            client_host=self.client_host,
        )

    async def _heartbeat(self) -> None:
        self._send_now = False
        request = self._request()
        retries = self.channel.retries
        try:
            response = await self.channel.call(request)
        except CoordinatorUnavailable:
            self._full = True
            return  # keep trying; the session may still be alive
        # An attempt that got no answer may have been applied, and its answer (a new
        # assignment) is not repeated to the retry: the next heartbeat asks for everything.
        retried = self.channel.retries != retries
        error = response.error_code
        if error in FENCED_ERRORS:
            await self._fenced(error, response.error_message)
            # A join cannot be fenced; should one be, the next waits an interval (no busy loop).
            self._send_now = request.member_epoch != 0
            return
        if error != Errors.NONE:  # fatal: see the module docstring
            raise GroupMemberError(error, response.error_message or "heartbeat refused")
        self._full = retried
        self.member_epoch = response.member_epoch
        self.heartbeat_interval_ms = response.heartbeat_interval_ms
        if response.assignment is not None:
            target = _partitions(response.assignment.topic_partitions, "topic")
            if target != self.assignment or self._fresh:
                await self._reconcile(target)
                return
        if not self._assigned.is_set() and await self._holds_target():
            self._assigned.set()

    async def _reconcile(self, target: Partitions) -> None:
        self._assigned.clear()
        owned = self.assignment
        revoked, added = owned - target, target - owned
        if revoked:
            self.assignment = owned - revoked
            await call_listener(self.listener.on_partitions_revoked, revoked)
        self.assignment = target
        await call_listener(self.listener.on_partitions_assigned, added)
        self._fresh = False
        self.rebalances += 1
        self.history.append((self.member_epoch, target))
        self._send_now = True  # acknowledge: the coordinator then frees or hands on partitions

    async def _holds_target(self) -> bool:
        """Whether the coordinator's target assignment for this member is what it owns."""
        try:
            response = await self.channel.call(ConsumerGroupDescribeRequest([self.group_id]))
        except CoordinatorUnavailable:
            return False
        for group in response.groups:
            for described in group.members if group.error_code == Errors.NONE else ():
                if described.member_id == self.member_id:
                    target = described.target_assignment.topic_partitions
                    return _partitions(target, "topic_name") == self.assignment
        return False

    async def _fenced(self, error: Errors, message: str | None) -> None:
        """Kafka's transitionToFenced: the partitions are lost (someone else may own them
        already); rejoin at once with epoch 0, under the same member id."""
        log.info(
            "member %s of %s rejoins: %s %s", self.member_id, self.group_id, error.name, message
        )
        lost, self.assignment = self.assignment, frozenset()
        self.member_epoch = 0
        self._assigned.clear()
        self._fresh = True
        if lost:
            await call_listener(self.listener.on_partitions_lost, lost)

    # -- leaving ---------------------------------------------------------------------------------

    def _loses_on_close(self) -> bool:
        return self.member_epoch <= 0

    async def _leave(self, timeout_ms: int) -> None:
        if self.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return  # closed already
        static = self.group_instance_id is not None
        await self.channel.call(
            ConsumerGroupHeartbeatRequest(
                self.group_id,
                self.member_id,
                LEAVE_GROUP_STATIC_MEMBER_EPOCH if static else LEAVE_GROUP_MEMBER_EPOCH,
                instance_id=self.group_instance_id,
                client_id=self.client_id,
                client_host=self.client_host,
            ),
            timeout_ms=timeout_ms,
        )  # any answer will do: the member is gone either way

    def _closed(self) -> None:
        self.member_epoch = LEAVE_GROUP_MEMBER_EPOCH  # a closed member commits nothing more
        self._assigned.clear()

    # -- offsets ---------------------------------------------------------------------------------

    async def _commit(self, offsets: dict[tuple[str, int], int], metadata: str) -> None:
        if not offsets:
            return
        async with self._commit_lock:
            epoch = self.member_epoch
            if epoch <= 0:
                raise CommitFailedError(
                    Errors.REBALANCE_IN_PROGRESS,
                    "the member has no member epoch (joining, rejoining after being fenced, or "
                    "closed); commit again once it owns partitions",
                )
            errors = await self._send_commit(epoch, offsets, metadata)
        if not errors:
            return
        error = next(iter(errors.values()))
        if error == Errors.STALE_MEMBER_EPOCH:
            raise CommitFailedError(
                error,
                f"member epoch {epoch} is no longer the member's epoch in the group (a "
                "rebalance moved it on); commit again for the partitions it owns now",
            )
        if error == Errors.UNKNOWN_MEMBER_ID:
            raise CommitFailedError(error, "this member is no longer part of the group")
        raise GroupMemberError(error, f"commit failed for {sorted(errors)}")

    async def _offset_fetch(self, tps: list[TopicPartition] | None) -> Any:
        """OffsetFetch with the member's id and epoch (Kafka's v9), again while the epoch is
        stale (the next heartbeat brings the new one), within the request timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.channel.timeout_ms / 1000
        while True:
            epoch = self.member_epoch
            member = (self.member_id, epoch) if epoch > 0 else (None, -1)
            response = await self.channel.call(
                OffsetFetchRequest(self.group_id, tps, False, member[0], member[1]),
                timeout_ms=max(int((deadline - loop.time()) * 1000), 1),
            )
            stale = response.error in COMMIT_FAILED_ERRORS and epoch > 0
            if not stale or loop.time() >= deadline:
                return response
            wait_s = max(self.heartbeat_interval_ms, self.channel.retry_backoff_ms) / 1000
            await asyncio.sleep(min(wait_s, max(deadline - loop.time(), 0)))


def _owned(assignment: Partitions) -> list[ConsumerGroupHeartbeatTopicPartitions]:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(assignment):
        by_topic.setdefault(topic, []).append(partition)
    return [ConsumerGroupHeartbeatTopicPartitions(t, ps) for t, ps in by_topic.items()]
