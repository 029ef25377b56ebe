"""Online migration between classic and consumer groups with members (Kafka 4.x's
``convertToConsumerGroup`` / ``convertToClassicGroup``), under
``CoordinatorConfig.consumer_group_migration_policy``.

Part of ``Shard``. Empty groups change type without a policy (a ConsumerGroupHeartbeat deletes an
empty classic group, a classic JoinGroup an empty consumer group, as Kafka does); these two
conversions keep the members:

* Upgrade (policy ``upgrade`` or ``bidirectional``): a consumer-protocol member joins a classic
  group of protocol type ``consumer`` that has members. The classic group's record is tombstoned
  and every classic member becomes a classic member of a new consumer group at epoch =
  the classic generation, keeping the partitions of its last SyncGroup assignment as both its
  target and its current assignment; parked JoinGroups and SyncGroups get
  REBALANCE_IN_PROGRESS. The joining member then bumps the epoch like any other, and the
  classic members learn from their next Heartbeat that they must join again. Refused (the
  heartbeat gets GROUP_ID_NOT_FOUND, nothing changes) when the policy forbids it, the protocol
  type is not ``consumer``, a member's metadata is no ConsumerProtocol subscription, or the
  group has more than ``consumer_group_max_size`` members (with exactly that many, the joining
  member gets GROUP_MAX_SIZE_REACHED). Static members stay static (their instance ids carry over).
* Downgrade (policy ``downgrade`` or ``bidirectional``): when the last consumer-protocol member
  of a consumer group leaves or is fenced and classic members remain (at most
  ``group_max_size``), the consumer group's records are tombstoned and a classic group record
  written instead of the leave's epoch bump: generation = the group epoch the members know, the
  protocol every member supports (the first member's first such), the first member as leader,
  each member's assigned partitions as its assignment. The group then prepares a rebalance, so
  the members join again the classic way (their next Heartbeat: REBALANCE_IN_PROGRESS).
"""

from __future__ import annotations

import struct

from .consumer_classic import classic_assignment_bytes
from .consumer_group import ConsumerGroup
from .consumer_membership import assignment_value
from .consumer_protocol import decode_assignment, decode_subscription
from .consumer_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataTopic,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    to_topic_partitions,
)
from .errors import Errors
from .group import CONSUMER_PROTOCOL_TYPE, Group
from .reconcile import STABLE, MemberAssignment
from .records import GroupMetadataKey, GroupMetadataValue, MemberMetadataValue, Record


class ConsumerMigrationMixin:
    # -- upgrade ------------------------------------------------------------------------------

    def _upgrade_refusal(self, classic: Group) -> str | None:
        """Why ``classic`` (which has members) cannot become a consumer group, or None."""
        group_id = classic.group_id
        prefix = f"Cannot upgrade classic group {group_id} to consumer group"
        if not self.config.upgrade_allowed:
            return f"{prefix} because the online upgrade is disabled."
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return f"{prefix} because the group does not use the consumer embedded protocol."
        if len(classic.members) > self.config.consumer_group_max_size:
            return f"{prefix} because the group is larger than the consumer group maximum size."
        for member in classic.members.values():
            try:
                decode_subscription(self._classic_metadata(classic, member))
                if member.assignment:
                    decode_assignment(member.assignment)
            except (ValueError, struct.error):
                return f"{prefix} because a member's metadata is not a consumer subscription."
        return None

    def _classic_members(self, group_id: str) -> dict:
        """The members of the classic group of this id (none when there is none)."""
        classic = self._groups.get(group_id)
        return classic.members if classic is not None else {}

    @staticmethod
    def _classic_metadata(classic: Group, member) -> bytes:
        protocol = classic.protocol_name
        return member.metadata(protocol) if protocol is not None else member.protocols[0][1]

    def _upgrade_classic_group(self, classic: Group) -> ConsumerGroup:
        """Kafka's ``convertToConsumerGroup`` (module docstring); ``_upgrade_refusal`` is None."""
        group_id, epoch = classic.group_id, classic.generation_id
        for member in classic.members.values():
            self._answer_join(
                member, classic, self._join_error(Errors.REBALANCE_IN_PROGRESS, member.member_id)
            )
            if member.sync_request is not None:
                self._reply(member.sync_request, self._sync_error(Errors.REBALANCE_IN_PROGRESS))
                member.sync_request = None
                self._parked -= 1
            self._timer.cancel(("hb", group_id, member.member_id))
        for member_id in classic.pending_members:
            self._timer.cancel(("pending", group_id, member_id))
        self._timer.cancel(("join", group_id))
        self._timer.cancel(("sync", group_id))
        members = list(classic.members.values())
        metadata = {m.member_id: self._classic_metadata(classic, m) for m in members}
        if classic.persisted is not None:
            self._records.append(Record(GroupMetadataKey(group_id), None))
        self._apply_group(group_id, None)  # an offsets-only holder stays (consumer_admin)
        group = self._consumer_groups[group_id] = ConsumerGroup(group_id)
        self._emit_consumer(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(epoch))
        taken: set[tuple[str, int]] = set()
        for member in members:
            parsed = decode_subscription(metadata[member.member_id])
            subscription = ConsumerGroupMemberMetadataValue(
                member.group_instance_id,
                parsed.rack_id,
                member.client_id,
                member.client_host,
                tuple(sorted(set(parsed.topics))),
                None,
                member.rebalance_timeout_ms,
                None,
                member.session_timeout_ms,
                member.protocols,
            )
            assigned: dict[str, frozenset[int]] = {}
            if member.assignment:
                for topic, p in decode_assignment(member.assignment).partitions:
                    if (topic, p) not in taken:  # one owner per partition, whatever was synced
                        taken.add((topic, p))
                        assigned[topic] = assigned.get(topic, frozenset()) | {p}
            member_id = member.member_id
            self._emit_consumer(ConsumerGroupMemberMetadataKey(group_id, member_id), subscription)
            self._emit_consumer(
                ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
                ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(assigned)),
            )
            self._emit_consumer(
                ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id),
                assignment_value(MemberAssignment(epoch, epoch, STABLE, assigned)),
            )
            self._arm(("consumer-session", group_id, member_id), member.session_timeout_ms)
        catalog = self._topics
        counts = {
            t: catalog[t]
            for t in sorted(group.subscribed_topic_names(catalog, self._regex_topics))
            if t in catalog
        }
        self._emit_consumer(
            ConsumerGroupPartitionMetadataKey(group_id),
            ConsumerGroupPartitionMetadataValue(
                tuple(ConsumerGroupPartitionMetadataTopic(t, n) for t, n in counts.items())
            ),
        )
        self._emit_consumer(
            ConsumerGroupTargetAssignmentMetadataKey(group_id),
            ConsumerGroupTargetAssignmentMetadataValue(epoch),
        )
        self._event("upgraded", group_id, f"classic generation {epoch}")
        return group

    # -- downgrade ----------------------------------------------------------------------------

    def _maybe_downgrade(self, group: ConsumerGroup, generation: int) -> bool:
        """After a consumer-protocol member left or was fenced (its records already removed):
        Kafka's ``convertToClassicGroup`` at ``generation`` (the epoch before it left) when
        only classic members remain and the policy allows it (module docstring). Whether it
        did."""
        members = list(group.members.values())
        if (
            not members
            or not self.config.downgrade_allowed
            or not all(m.uses_classic_protocol for m in members)
            or len(members) > self.config.group_max_size
        ):
            return False
        common = set.intersection(
            *({name for name, _ in m.subscription.classic_protocols} for m in members)
        )
        protocol = next(
            (name for name, _ in members[0].subscription.classic_protocols if name in common), None
        )
        if protocol is None:
            return False
        group_id = group.group_id
        value = GroupMetadataValue(
            CONSUMER_PROTOCOL_TYPE,
            generation,
            protocol,
            members[0].member_id,
            self._now,
            tuple(
                MemberMetadataValue(
                    m.member_id,
                    m.instance_id,
                    m.subscription.client_id,
                    m.subscription.client_host,
                    m.subscription.rebalance_timeout_ms,
                    m.subscription.classic_session_timeout_ms,
                    dict(m.subscription.classic_protocols)[protocol],
                    classic_assignment_bytes(m.assignment.assigned),
                )
                for m in members
            ),
        )
        self._delete_consumer_group(group)  # its tombstones remove it from _consumer_groups
        self._records.append(Record(GroupMetadataKey(group_id), value))
        self._apply_group(group_id, value)
        classic = self._groups[group_id]
        for member in classic.members.values():
            self._reset_heartbeat(classic, member)
        self._event("downgraded", group_id, f"consumer group epoch {value.generation}")
        self._prepare_rebalance(classic, "downgraded from a consumer group")
        return True
