"""Rebalance: entering PreparingRebalance, the join phase that ends it, and the membership
deadlines. Part of ``Shard`` (see shard.py), beside ``shard_members``; method names follow
Kafka's ``GroupCoordinator``:

    _prepare_rebalance  spec §3     (enter PreparingRebalance, arm the join phase)
    _complete_join      spec §4.2   (end of a join phase: new generation, answer the joins)
    _expire_join        spec §4.2-3 (DelayedJoin / InitialDelayedJoin deadline)
    _expire_sync        spec §4.4   (DelayedSync: evict members that never synced)
    _expire_heartbeat   spec §4.5   (session expiry)
    _expire_pending_member spec §4.6
    _on_group_loaded    spec §8.1

Timer keys: ("hb", group, member), ("pending", group, member), ("join", group), ("sync", group).
"""

from __future__ import annotations

import msgspec

from .errors import Errors
from .group import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE, Group


class InitialJoin(msgspec.Struct, frozen=True):
    """The first join phase of an Empty group (spec §4.3): never completes early."""

    delay_ms: int
    remaining_ms: int


REGULAR_JOIN = "join"  # a DelayedJoin: completes early once everyone has joined


class RebalanceMixin:
    # -- rebalance (spec §3, §4.2–4.4) ----------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state is COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(group, Errors.REBALANCE_IN_PROGRESS)
        self._timer.cancel(("sync", group.group_id))
        initial = group.state is EMPTY
        delay_ms = group.rebalance_timeout_ms()
        group.transition_to(PREPARING_REBALANCE, self._now)
        self._event("rebalance", group.group_id, reason)
        if initial:
            initial_delay_ms = self.config.group_initial_rebalance_delay_ms
            group.join_op = InitialJoin(initial_delay_ms, max(delay_ms - initial_delay_ms, 0))
            self._arm(("join", group.group_id), initial_delay_ms)
        else:
            group.join_op = REGULAR_JOIN
            self._arm(("join", group.group_id), delay_ms)
            self._try_complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if group.join_op is REGULAR_JOIN and group.has_all_members_joined():
            self._timer.cancel(("join", group.group_id))
            self._complete_join(group)

    def _expire_join(self, key, _payload) -> None:
        group = self._groups.get(key[1])
        if group is None or group.join_op is None:
            return
        op = group.join_op
        if isinstance(op, InitialJoin) and group.new_member_added and op.remaining_ms != 0:
            # Someone joined during this window: wait once more, within the rebalance timeout.
            group.new_member_added = False
            delay_ms = min(self.config.group_initial_rebalance_delay_ms, op.remaining_ms)
            group.join_op = InitialJoin(delay_ms, max(op.remaining_ms - op.delay_ms, 0))
            return self._arm(key, delay_ms)
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """Kafka's ``onCompleteJoin`` (spec §4.2)."""
        group.join_op = None
        for member in [
            m
            for m in group.members.values()
            if m.join_request is None and m.group_instance_id is None
        ]:
            group.remove(member.member_id)
            self._timer.cancel(("hb", group.group_id, member.member_id))
        if not self._elect_joined_leader(group) and group.members:
            # Only static members that have not rejoined are left: wait for them (or for their
            # sessions to expire). At least 1 ms, so a zero rebalance timeout cannot spin.
            group.join_op = REGULAR_JOIN
            return self._arm(("join", group.group_id), max(group.rebalance_timeout_ms(), 1))
        group.init_next_generation(self._now)
        if group.state is EMPTY:
            self._persist_group(group, group.metadata_value())
            self._event("empty", group.group_id, f"generation {group.generation_id}")
            return
        leader = group.leader_id
        for member in group.members.values():
            self._answer_join(
                member,
                group,
                self._generation_response(
                    group, member.member_id, with_members=member.member_id == leader
                ),
            )
            self._reset_heartbeat(group, member)
            member.is_new = False
            group.pending_sync[member.member_id] = None
        self._arm(("sync", group.group_id), group.rebalance_timeout_ms(), group.generation_id)

    def _elect_joined_leader(self, group: Group) -> bool:
        leader = group.members.get(group.leader_id) if group.leader_id is not None else None
        if leader is None:
            return False
        if leader.awaiting_join:
            return True
        for member in group.members.values():
            if member.awaiting_join:
                group.leader_id = member.member_id
                return True
        return False

    def _expire_sync(self, key, generation: int) -> None:
        group = self._groups.get(key[1])
        if (
            group is None
            or group.generation_id != generation
            or not group.pending_sync
            or group.state not in (COMPLETING_REBALANCE, STABLE)
        ):
            return
        missing = list(group.pending_sync)
        for member_id in missing:
            group.remove(member_id)
            self._timer.cancel(("hb", group.group_id, member_id))
        self._prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    def _expire_heartbeat(self, key, _payload) -> None:
        group = self._groups.get(key[1])
        member = group.members.get(key[2]) if group is not None else None
        if member is None:
            return
        if member.is_new or (member.join_request is None and member.sync_request is None):
            self._remove_member_and_update_group(group, member, "session timeout")

    def _expire_pending_member(self, key, _payload) -> None:
        group = self._groups.get(key[1])
        if group is not None and key[2] in group.pending_members:
            self._remove_pending_member(group, key[2])

    def _on_group_loaded(self, group: Group) -> None:
        """Kafka's ``onGroupLoaded`` (spec §8.1)."""
        if len(group.members) > self.config.group_max_size:
            self._prepare_rebalance(group, "group loaded over group.max.size")
        for member in group.members.values():
            self._reset_heartbeat(group, member)
