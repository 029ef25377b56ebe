"""One KIP-848 consumer group's state, and ``apply``: the only code that changes it.

A ``ConsumerGroup`` is a projection of its records (``consumer_records``): ``apply`` turns one
record into state, for live records and on load alike, so a group rebuilt from its records is
the live group. ``apply`` takes records in any order within a snapshot (any member record
creates the member), and tombstones remove what their key names.

State (Kafka's ``ConsumerGroup``): the group epoch (bumped on every membership, subscription or
metadata change), the target assignment and its epoch (the assignor's answer at that epoch),
the partition counts of the subscribed topics the epoch was computed from, and per member its
subscription (``ConsumerMember``) and current assignment (``reconcile.MemberAssignment``).
``owners`` maps every partition a member holds (assigned or pending revocation) to that member:
reconciliation gives a partition only to a member when it has no other owner.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

import msgspec

from .consumer_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    Partitions,
    from_topic_partitions,
)
from .reconcile import STABLE, MemberAssignment
from .regex_topics import RegexTopics
from .topic_regex import compile_regex


class ConsumerGroupState(StrEnum):
    """Kafka's ``ConsumerGroup.ConsumerGroupState`` names, as ListGroups shows them."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class ConsumerMember(msgspec.Struct, frozen=True):
    """A member's subscription (its metadata record) and current assignment (its assignment
    record)."""

    member_id: str
    subscription: ConsumerGroupMemberMetadataValue = ConsumerGroupMemberMetadataValue()
    assignment: MemberAssignment = MemberAssignment()

    @property
    def member_epoch(self) -> int:
        return self.assignment.member_epoch

    @property
    def instance_id(self) -> str | None:
        return self.subscription.instance_id

    @property
    def uses_classic_protocol(self) -> bool:
        """A classic member: it joined with JoinGroup and is served through SyncGroup."""
        return bool(self.subscription.classic_protocols)

    def owned_partitions(self) -> Partitions:
        """Assigned and pending revocation: every partition this member may be consuming."""
        owned = dict(self.assignment.assigned)
        for topic, parts in self.assignment.pending_revocation.items():
            owned[topic] = owned.get(topic, frozenset()) | parts
        return owned


def subscribed_topics(
    subscription: ConsumerGroupMemberMetadataValue,
    catalog: Mapping[str, int],
    regexes: RegexTopics,
) -> frozenset[str]:
    """The topics a member subscribes to: its names, and every catalog topic its regular
    expression matches in full (Kafka matches the whole name), as ``regexes`` keeps them."""
    names = subscription.subscribed_topic_names
    regex = subscription.subscribed_topic_regex
    if not regex:
        return frozenset(names)
    matched = regexes.matching(regex, catalog)
    return matched.union(names) if names else matched


class ConsumerGroup:
    """See the module docstring. Only ``apply`` writes these fields, but two the shard keeps in
    memory only (never replayed): ``assigned_at_ms``, when it last computed the target
    assignment (a loaded group may assign at once), and ``heartbeat_due_ms``, when each
    consumer-protocol member is next expected to heartbeat (the assignor's tie-break:
    ``server_assignors.MemberSpec``)."""

    __slots__ = (
        "assigned_at_ms",
        "assignment_epoch",
        "group_epoch",
        "group_id",
        "heartbeat_due_ms",
        "members",
        "owners",
        "partition_metadata",
        "static_members",
        "target",
    )

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.partition_metadata: dict[str, int] = {}
        self.members: dict[str, ConsumerMember] = {}
        self.target: dict[str, Partitions] = {}
        self.owners: dict[tuple[str, int], str] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.assigned_at_ms: int | None = None
        self.heartbeat_due_ms: dict[str, int] = {}  # member id -> time

    # -- views ------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch != self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            a = member.assignment
            if a.state != STABLE or a.member_epoch != self.assignment_epoch:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def owner_of(self, topic: str, partition: int) -> str | None:
        return self.owners.get((topic, partition))

    def subscribed_topic_names(
        self, catalog: Mapping[str, int], regexes: RegexTopics
    ) -> frozenset[str]:
        topics: set[str] = set()
        for member in self.members.values():
            topics |= subscribed_topics(member.subscription, catalog, regexes)
        return frozenset(topics)

    def watched_topics(self) -> tuple[frozenset[str], bool]:
        """The topics a change of which can change this group's partition metadata by name
        (those in it and its members' subscribed names), and whether a member subscribes by
        regex (then a topic its regex matches can too: ``regex_matches_any``)."""
        topics = set(self.partition_metadata)
        by_regex = False
        for member in self.members.values():
            subscription = member.subscription
            topics.update(subscription.subscribed_topic_names)
            by_regex = by_regex or bool(subscription.subscribed_topic_regex)
        return frozenset(topics), by_regex

    def regex_matches_any(self, topics: frozenset[str]) -> bool:
        """Whether a member's regex matches one of ``topics`` in full: each distinct regex
        times ``topics``, never the catalog."""
        regexes = {m.subscription.subscribed_topic_regex for m in self.members.values()}
        regexes.discard(None)
        regexes.discard("")
        for regex in regexes:
            pattern = compile_regex(regex)
            if any(pattern.fullmatch(topic) for topic in topics):
                return True
        return False

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Whether some member subscribes to ``topic`` by name, or matched it by regex when
        the group's partition metadata was last computed."""
        if topic in self.partition_metadata:
            return True
        return any(topic in m.subscription.subscribed_topic_names for m in self.members.values())

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members name (ties: the name first in sort order), else
        ``default`` (Kafka's ``computePreferredServerAssignor``)."""
        counts: dict[str, int] = {}
        for member in self.members.values():
            name = member.subscription.server_assignor
            if name:
                counts[name] = counts.get(name, 0) + 1
        if not counts:
            return default
        return min(counts, key=lambda name: (-counts[name], name))

    def durable(self) -> tuple:
        """Everything the group's records hold, for comparisons (a reload must give the same)."""
        return (
            self.group_epoch,
            self.assignment_epoch,
            dict(self.partition_metadata),
            dict(self.members),
            {m: p for m, p in self.target.items()},
            dict(self.owners),
            dict(self.static_members),
        )

    # -- the replay -------------------------------------------------------------------------

    def _set_assignment(self, member_id: str, assignment: MemberAssignment) -> None:
        old = self.members.get(member_id)
        if old is not None:
            for topic, parts in old.owned_partitions().items():
                for p in parts:
                    if self.owners.get((topic, p)) == member_id:
                        del self.owners[(topic, p)]
            member = msgspec.structs.replace(old, assignment=assignment)
        else:
            member = ConsumerMember(member_id, assignment=assignment)
        self.members[member_id] = member
        for topic, parts in member.owned_partitions().items():
            for p in parts:
                self.owners[(topic, p)] = member_id

    def _set_subscription(self, member_id: str, value: ConsumerGroupMemberMetadataValue) -> None:
        old = self.members.get(member_id)
        self._forget_instance(old)
        member = old or ConsumerMember(member_id)
        self.members[member_id] = msgspec.structs.replace(member, subscription=value)
        if value.instance_id is not None:
            self.static_members[value.instance_id] = member_id

    def _forget_instance(self, member: ConsumerMember | None) -> None:
        if member is not None and member.instance_id is not None:
            if self.static_members.get(member.instance_id) == member.member_id:
                del self.static_members[member.instance_id]

    def _remove_member(self, member_id: str) -> None:
        self.heartbeat_due_ms.pop(member_id, None)
        if member_id in self.members:
            self._set_assignment(member_id, MemberAssignment())
            self._forget_instance(self.members.pop(member_id))


def apply(groups: dict[str, ConsumerGroup], key, value) -> None:
    """Apply one consumer-group record to ``groups`` (group id -> group): live and on load."""
    group_id = key.group
    group = groups.get(group_id)
    kind = type(key)
    if kind is ConsumerGroupMetadataKey:
        if value is None:
            groups.pop(group_id, None)
            return
        if group is None:
            group = groups[group_id] = ConsumerGroup(group_id)
        group.group_epoch = value.epoch
        return
    if group is None:
        if value is None:
            return  # a tombstone for a group that is gone already
        group = groups[group_id] = ConsumerGroup(group_id)
    if kind is ConsumerGroupPartitionMetadataKey:
        group.partition_metadata = (
            {} if value is None else {t.topic_name: t.num_partitions for t in value.topics}
        )
    elif kind is ConsumerGroupTargetAssignmentMetadataKey:
        group.assignment_epoch = 0 if value is None else value.assignment_epoch
    elif kind is ConsumerGroupTargetAssignmentMemberKey:
        if value is None:
            group.target.pop(key.member_id, None)
        else:
            group.target[key.member_id] = from_topic_partitions(value.topic_partitions)
    elif kind is ConsumerGroupMemberMetadataKey:
        if value is None:
            group._remove_member(key.member_id)
        else:
            group._set_subscription(key.member_id, value)
    elif kind is ConsumerGroupCurrentMemberAssignmentKey:
        if value is None:
            if key.member_id in group.members:
                group._set_assignment(key.member_id, MemberAssignment())
        else:
            group._set_assignment(key.member_id, assignment_of(value))
    else:
        raise ValueError(f"unknown consumer-group record key {kind.__name__}")


def assignment_of(value: ConsumerGroupCurrentMemberAssignmentValue) -> MemberAssignment:
    return MemberAssignment(
        value.member_epoch,
        value.previous_member_epoch,
        value.state,
        from_topic_partitions(value.assigned_partitions),
        from_topic_partitions(value.partitions_pending_revocation),
    )
