"""Consumer-group membership outside the heartbeat's main path: the topic catalog, leaving,
fencing, the session and rebalance timers, and re-arming them on load.

Part of ``Shard`` (see shard.py and ``consumer_heartbeat``). Fencing a member (it left, its
session expired, or it did not revoke within its rebalance timeout) is Kafka's
``consumerGroupFenceMember``: its three records are tombstoned, so its partitions are free at
once, and the group epoch is bumped; the next heartbeat of any member computes the new target.

The topic catalog (``update_topics``) is soft state the runtime hands in (partition counts by
topic name); a change that alters a group's subscribed topics' partition counts bumps its epoch.
Groups' own settings (``update_group_configs``, group_config) are soft state handed in the same
way, beside the catalog.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .consumer_group import ConsumerGroup, apply
from .consumer_messages import LEAVE_GROUP_STATIC_MEMBER_EPOCH, ConsumerGroupHeartbeatResponse
from .consumer_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataTopic,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    to_topic_partitions,
)
from .errors import Errors
from .group_config import SESSION_TIMEOUT, checked_configs, group_setting
from .reconcile import UNREVOKED_PARTITIONS, MemberAssignment
from .records import Record

if TYPE_CHECKING:
    from .shard import Step


class Refusal(Exception):
    """A request refused with a Kafka error (and message); raised before any record."""

    def __init__(self, error: Errors, message: str | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def assignment_value(a: MemberAssignment) -> ConsumerGroupCurrentMemberAssignmentValue:
    return ConsumerGroupCurrentMemberAssignmentValue(
        a.member_epoch,
        a.previous_member_epoch,
        a.state,
        to_topic_partitions(a.assigned),
        to_topic_partitions(a.pending_revocation),
    )


def _catalog_entry_ok(name: object, count: object) -> bool:
    """A catalog entry: a non-empty topic name and a partition count Kafka can hold."""
    return type(name) is str and bool(name) and type(count) is int and 0 < count <= 2**31 - 1


def check_topic_changes(changes: object) -> None:
    """ValueError unless ``changes`` maps non-empty topic names to partition counts or None
    (``change_topics``)."""
    if not isinstance(changes, Mapping) or not all(
        _catalog_entry_ok(name, 1 if count is None else count) for name, count in changes.items()
    ):
        raise ValueError("changes must map non-empty topic names to counts >= 1 or None")


class ConsumerMembershipMixin:
    # -- the topic catalog --------------------------------------------------------------------

    def update_topics(self, now_ms: int, topics: Mapping[str, int]) -> Step:
        """Replace the topic catalog (topic name -> partition count). Consumer groups whose
        subscribed topics' partition counts change get a new group epoch (a rebalance), as
        Kafka's metadata-change rebalance. ValueError (and no change) for a bad catalog.

        The first catalog (of a shard just loaded, whose groups were written against some
        older one) refreshes every group. Later ones are taken as their differences from the
        catalog held (``change_topics``): every group agrees with the catalog held, so only
        the groups a changed topic concerns can change."""
        if not isinstance(topics, Mapping) or not all(
            _catalog_entry_ok(name, count) for name, count in topics.items()
        ):
            raise ValueError("topics must map non-empty topic names to partition counts >= 1")
        held = self._topics
        if held is not None:
            changes: dict[str, int | None] = {t: None for t in held if t not in topics}
            changes.update((t, n) for t, n in topics.items() if held.get(t) != n)
            return self.change_topics(now_ms, changes)
        self._begin(now_ms)
        self._topics = dict(topics)
        self._regex_topics.clear()
        if self.owned:
            for group in list(self._consumer_groups.values()):
                self._refresh_partition_metadata(group, bump=False)
        return self._finish()

    def change_topics(self, now_ms: int, changes: Mapping[str, int | None]) -> Step:
        """``update_topics`` at a change's size: ``changes`` maps each changed topic to its
        partition count (None: deleted) and is applied to the catalog held. Only groups a
        changed topic concerns (``topic_watchers``) are looked at, in group id order: each
        group's records are those ``update_topics`` of the changed catalog writes for it.
        ValueError (and no change) without a catalog or for a bad change."""
        if self._topics is None:
            raise ValueError("no topic catalog to change: update_topics first")
        check_topic_changes(changes)
        self._begin(now_ms)
        topics = self._topics
        for name, count in changes.items():
            if count is None:
                topics.pop(name, None)
            else:
                topics[name] = count
        self._regex_topics.changed(changes)
        if self.owned and changes:
            concerned = self._topic_watchers.concerned(self._consumer_groups, frozenset(changes))
            for group in concerned:
                self._refresh_partition_metadata(group, bump=False)
        return self._finish()

    def change_group_configs(self, changes: Mapping[str, Mapping[str, int] | None]) -> None:
        """``update_group_configs`` at a change's size: each named group's settings (None or
        empty: none). ValueError (and no change) for a bad mapping."""
        if not isinstance(changes, Mapping) or not all(type(g) is str for g in changes):
            raise ValueError("group configs' changes must map group ids to settings or None")
        checked = checked_configs({g: v for g, v in changes.items() if v is not None})
        for group_id in changes:
            settings = checked.get(group_id)
            if settings is None:
                self._group_configs.pop(group_id, None)
            else:
                self._group_configs[group_id] = settings

    def update_group_configs(self, configs: Mapping[str, Mapping[str, int]]) -> None:
        """Replace every group's own settings ({group id: {setting: value}}, group_config):
        read at each heartbeat, so a change reaches a member at its next one, as in Kafka. No
        records: the topic catalog keeps them. ValueError (and no change) for a bad mapping."""
        self._group_configs = checked_configs(configs)

    def _group_setting(self, group_id: str, name: str) -> int:
        return group_setting(self._group_configs.get(group_id), name, self.config)

    def _refresh_partition_metadata(self, group: ConsumerGroup, bump: bool) -> None:
        """Write the subscribed topics' partition counts if they changed, and bump the group
        epoch if they did or ``bump`` asks (Kafka's ``updateSubscriptionMetadata``). Without a
        catalog (a reloaded shard the runtime has not handed one yet; a timer may fence a member
        then) the counts last recorded stay; ``update_topics`` refreshes them when it comes."""
        catalog = self._topics
        if catalog is not None:
            metadata = {
                topic: catalog[topic]
                for topic in sorted(group.subscribed_topic_names(catalog, self._regex_topics))
                if topic in catalog
            }
            if metadata != group.partition_metadata:
                bump = True
                self._emit_consumer(
                    ConsumerGroupPartitionMetadataKey(group.group_id),
                    ConsumerGroupPartitionMetadataValue(
                        tuple(
                            ConsumerGroupPartitionMetadataTopic(t, n) for t, n in metadata.items()
                        )
                    ),
                )
        if bump:
            self._emit_consumer(
                ConsumerGroupMetadataKey(group.group_id),
                ConsumerGroupMetadataValue(group.group_epoch + 1),
            )
            self._event("consumer-epoch", group.group_id, f"epoch {group.group_epoch}")

    def _emit_consumer(self, key, value) -> None:
        self._records.append(Record(key, value))
        apply(self._consumer_groups, key, value)
        self._topic_watchers.applied(key, value)

    # -- leaving and fencing ------------------------------------------------------------------

    def _consumer_leave(self, req) -> ConsumerGroupHeartbeatResponse:
        group = self._consumer_group_for(req.group_id, create=False)
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise Refusal(
                    Errors.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {req.group_id}.",
                )
        else:
            member = group.static_member(req.instance_id)
            if member is None:
                raise Refusal(
                    Errors.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
                )
            if member.member_id != req.member_id:
                raise Refusal(
                    Errors.FENCED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} was "
                    f"fenced by member {member.member_id}.",
                )
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # It keeps its partitions (nobody else gets them) until it rejoins under a new
                # member id or its session expires.
                a = member.assignment
                self._emit_consumer(
                    ConsumerGroupCurrentMemberAssignmentKey(req.group_id, member.member_id),
                    assignment_value(
                        MemberAssignment(
                            LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                            a.previous_member_epoch,
                            a.state,
                            a.assigned,
                        )
                    ),
                )
                return ConsumerGroupHeartbeatResponse(
                    Errors.NONE, None, member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH
                )
        self._fence_consumer_member(group, member.member_id, "left the group")
        return ConsumerGroupHeartbeatResponse(Errors.NONE, None, req.member_id, req.member_epoch)

    def _remove_member_records(self, group_id: str, member_id: str) -> None:
        self._emit_consumer(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None)
        self._emit_consumer(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None)
        self._emit_consumer(ConsumerGroupMemberMetadataKey(group_id, member_id), None)

    def _fence_consumer_member(self, group: ConsumerGroup, member_id: str, why: str) -> None:
        """Kafka's ``consumerGroupFenceMember``: remove the member, free its partitions, and
        bump the group epoch (the next heartbeat computes the new target assignment). When
        the last consumer-protocol member goes, the group may become classic again instead, at
        the epoch it had (``consumer_migration``)."""
        was_consumer = not group.members[member_id].uses_classic_protocol
        epoch = group.group_epoch
        self._remove_member_records(group.group_id, member_id)
        self._cancel_consumer_timers(group.group_id, member_id)
        self._event("consumer-member-fenced", group.group_id, f"{member_id} {why}")
        # Kafka converts to a classic group instead of bumping the epoch: the classic members
        # keep the generation they know, and learn of the rebalance from their next Heartbeat.
        if was_consumer and self._maybe_downgrade(group, epoch):
            return
        self._refresh_partition_metadata(group, bump=True)

    def _cancel_consumer_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("consumer-session", "consumer-rebalance", "consumer-join", "consumer-sync"):
            self._timer.cancel((kind, group_id, member_id))

    def _expire_consumer_session(self, key, _payload) -> None:
        _, group_id, member_id = key
        group = self._consumer_groups.get(group_id)
        if group is not None and member_id in group.members:
            self._fence_consumer_member(group, member_id, "session expired")

    def _expire_consumer_rebalance(self, key, member_epoch) -> None:
        _, group_id, member_id = key
        group = self._consumer_groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is not None and member.member_epoch == member_epoch:
            self._fence_consumer_member(group, member_id, "did not revoke in time")

    def _on_consumer_groups_loaded(self) -> None:
        """Re-arm every member's session (soft state: ``now`` + session timeout, a classic
        member's own) and the rebalance timeout of members that must still revoke; then
        refresh partition counts against the catalog if the runtime has handed one in."""
        for group in list(self._consumer_groups.values()):
            session_ms = self._group_setting(group.group_id, SESSION_TIMEOUT)
            for member in group.members.values():
                classic_ms = member.subscription.classic_session_timeout_ms
                self._arm(
                    ("consumer-session", group.group_id, member.member_id),
                    classic_ms if member.uses_classic_protocol else session_ms,
                )
                if member.assignment.state == UNREVOKED_PARTITIONS:
                    self._arm(
                        ("consumer-rebalance", group.group_id, member.member_id),
                        member.subscription.rebalance_timeout_ms,
                        member.member_epoch,
                    )
            self._refresh_partition_metadata(group, bump=False)
