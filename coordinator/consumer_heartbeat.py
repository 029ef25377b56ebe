"""KIP-848's ConsumerGroupHeartbeat: Kafka's ``consumerGroupHeartbeat``, sans IO.

Part of ``Shard`` (see shard.py). One heartbeat, in Kafka's order:

1. Checks that change nothing: the group's partition, the request's fields (Kafka's rules,
   INVALID_REQUEST with Kafka's message), the regular expression (RE2), the assignor name, the
   group (GROUP_ID_NOT_FOUND unless joining), its size, the member (UNKNOWN_MEMBER_ID,
   FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID) and its epoch (FENCED_MEMBER_EPOCH).
2. Records, each applied at once through ``consumer_group.apply`` (the replay):
   an empty classic group of the same id is deleted (its offsets stay); a static member that
   rejoins replaces its departed predecessor (which left with epoch -2); the member's
   subscription; the subscribed topics' partition counts and a group epoch bump when
   membership, subscriptions or partition counts changed; the target assignment at the new epoch
   (``server_assignors``); the member's reconciled assignment (``reconcile``).
3. Timers: the session (``consumer_group_session_timeout_ms`` after every heartbeat) and, while
   the member must revoke partitions, its rebalance timeout. Both fence the member when they
   fire: its records are tombstoned, its partitions freed, the group epoch bumped.

The answer names the heartbeat interval: ``consumer_group_heartbeat_interval_ms``, or the shorter
``consumer_group_unreleased_heartbeat_interval_ms`` while the member waits for partitions others
must release (not in Kafka: it then takes them soon after their release). The shard notes when
each member is due next, and ``uniform`` takes partitions from those due soonest.

Leaving, fencing, the timers and the topic catalog are in ``consumer_membership``. Until the
runtime has handed a catalog in, a heartbeat gets COORDINATOR_LOAD_IN_PROGRESS: an empty catalog
would look like every topic deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    subscribed_topics,
)
from .consumer_membership import Refusal, assignment_value
from .consumer_messages import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupHeartbeatAssignment,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupHeartbeatTopicPartitions,
)
from .consumer_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    Partitions,
    to_topic_partitions,
)
from .errors import Errors
from .group import EMPTY as CLASSIC_EMPTY
from .group_config import ASSIGNMENT_INTERVAL, HEARTBEAT_INTERVAL, SESSION_TIMEOUT
from .reconcile import (
    STABLE,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    MemberAssignment,
    reconcile,
)
from .record_size import record_bytes
from .records import GroupMetadataKey, Record
from .server_assignors import SERVER_ASSIGNORS, AssignmentSpec, MemberSpec
from .topic_regex import regex_error
from .validation import is_int32, string_ok

if TYPE_CHECKING:
    pass

# A new consumer group's epoch and assignment epoch (Kafka 4.3, KAFKA-20268).
FIRST_GROUP_EPOCH = 1


def _owned(req) -> Partitions | None:
    if req.topic_partitions is None:
        return None
    owned: dict[str, frozenset[int]] = {}
    for tp in req.topic_partitions:
        owned[tp.topic] = owned.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    return owned


def _response_assignment(assigned: Partitions) -> ConsumerGroupHeartbeatAssignment:
    return ConsumerGroupHeartbeatAssignment(
        [
            ConsumerGroupHeartbeatTopicPartitions(topic, sorted(parts))
            for topic, parts in sorted(assigned.items())
        ]
    )


class ConsumerHeartbeatMixin:
    # -- ConsumerGroupHeartbeat ---------------------------------------------------------------

    def _handle_consumer_heartbeat(self, request_id, req) -> None:
        try:
            response = self._consumer_heartbeat(req)
        except Refusal as refusal:
            response = ConsumerGroupHeartbeatResponse(refusal.error, refusal.message)
        self._reply(request_id, response)

    def _check_heartbeat_fields(self, req) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``, plus the bounds every
        value that reaches a record must respect (validation.py)."""
        config = self.config
        names = req.subscribed_topic_names
        if not (
            is_int32(req.member_epoch)
            and is_int32(req.rebalance_timeout_ms)
            and req.rebalance_timeout_ms >= -1
            and all(
                string_ok(s, config)
                for s in (
                    req.member_id,
                    req.instance_id,
                    req.rack_id,
                    req.subscribed_topic_regex,
                    req.server_assignor,
                    req.client_id,
                    req.client_host,
                )
            )
            and (names is None or len(names) <= config.max_topics_per_request)
            and (names is None or all(string_ok(n, config) for n in names))
            and (
                req.topic_partitions is None
                or sum(len(tp.partitions) for tp in req.topic_partitions)
                <= config.max_partitions_per_request
            )
        ):
            raise Refusal(Errors.INVALID_REQUEST, "A field is out of range.")
        epoch = req.member_epoch
        if (req.api_version >= 1 or epoch != 0) and req.member_id == "":
            raise Refusal(Errors.INVALID_REQUEST, "MemberId can't be empty.")
        if req.group_id == "":
            raise Refusal(Errors.INVALID_REQUEST, "GroupId can't be empty.")
        if req.instance_id == "":
            raise Refusal(Errors.INVALID_REQUEST, "InstanceId can't be empty.")
        if req.rack_id == "":
            raise Refusal(Errors.INVALID_REQUEST, "RackId can't be empty.")
        if epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise Refusal(
                    Errors.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
                )
            if req.topic_partitions is None or req.topic_partitions:
                raise Refusal(
                    Errors.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
                )
            if not names and not req.subscribed_topic_regex:
                raise Refusal(
                    Errors.INVALID_REQUEST,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise Refusal(Errors.INVALID_REQUEST, "InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise Refusal(Errors.INVALID_REQUEST, "MemberEpoch is invalid.")
        if req.subscribed_topic_regex:
            why = regex_error(req.subscribed_topic_regex)
            if why is not None:
                raise Refusal(
                    Errors.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid "
                    f"regular expression: {why}.",
                )
        assignors = config.consumer_group_assignors
        if req.server_assignor is not None and req.server_assignor not in assignors:
            raise Refusal(
                Errors.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(assignors)}.",
            )

    def _consumer_group_for(self, group_id: str, create: bool) -> ConsumerGroup | None:
        """The consumer group, or None when a join may create it; Refusal otherwise. A
        classic group of that id may be replaced only while joining: when Empty, or when it
        has members and may be upgraded (``consumer_migration``)."""
        group = self._consumer_groups.get(group_id)
        if group is not None:
            return group
        classic = self._groups.get(group_id)
        if classic is not None and (
            not create or classic.state is not CLASSIC_EMPTY or classic.members
        ):
            if create and classic.members and self._upgrade_refusal(classic) is None:
                return None
            # Kafka's message whatever the reason (it only logs why it could not upgrade).
            raise Refusal(Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not create:
            raise Refusal(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        if classic is None and (
            len(self._groups) + len(self._consumer_groups) >= self.config.max_groups
        ):
            raise Refusal(Errors.COORDINATOR_NOT_AVAILABLE, "Too many groups.")
        return None

    def _check_member_epoch(self, member: ConsumerMember, req) -> None:
        """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: a member may come back with
        its previous epoch (the response that bumped it may have been lost) if it owns only
        partitions of its current assignment; and with epoch 0 it rejoins after being fenced
        (KAFKA-19233, Kafka 4.3), whatever its epoch here."""
        received, known = req.member_epoch, member.member_epoch
        if received == 0:
            return
        if received > known:
            side = "greater"
        elif received < known and (
            received != member.assignment.previous_member_epoch
            or not _is_subset(_owned(req), member.assignment.assigned)
        ):
            side = "smaller"
        else:
            return
        raise Refusal(
            Errors.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a {side} member epoch ({received}) than the one "
            f"known by the group coordinator ({known}). The member must abandon all its "
            "partitions and rejoin.",
        )

    def _consumer_heartbeat(self, req) -> ConsumerGroupHeartbeatResponse:
        error = self._group_error(req.group_id, allow_empty=True)
        if error is not None:
            raise Refusal(error)
        self._check_heartbeat_fields(req)
        if self._topics is None:
            raise Refusal(Errors.COORDINATOR_LOAD_IN_PROGRESS, "Topic metadata is not known yet.")
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._consumer_leave(req)
        group_id, epoch = req.group_id, req.member_epoch
        joining = epoch == 0
        group = self._consumer_group_for(group_id, create=joining)
        members = group.members if group is not None else {}
        # A classic group about to be upgraded brings its members along.
        size = len(members) if group is not None else len(self._classic_members(group_id))
        member_id = req.member_id
        if size >= self.config.consumer_group_max_size and member_id not in members:
            raise Refusal(
                Errors.GROUP_MAX_SIZE_REACHED,
                "The consumer group has reached its maximum capacity of "
                f"{self.config.consumer_group_max_size} members.",
            )
        if member_id == "":
            member_id = self._ids()  # v0: the coordinator names new members
        replaced: ConsumerMember | None = None
        if req.instance_id is None:
            member = members.get(member_id)
            if member is None:
                if not joining:
                    raise Refusal(
                        Errors.UNKNOWN_MEMBER_ID,
                        f"Member {member_id} is not a member of group {group_id}.",
                    )
                member = ConsumerMember(member_id)
            else:
                self._check_member_epoch(member, req)
        else:
            existing = group.static_member(req.instance_id) if group is not None else None
            if joining:
                if existing is None:
                    member = members.get(member_id) or ConsumerMember(member_id)
                else:
                    if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        raise Refusal(
                            Errors.UNRELEASED_INSTANCE_ID,
                            f"Static member {member_id} with instance id {req.instance_id} "
                            "cannot join the group because the instance id is owned by "
                            f"{existing.member_id} member.",
                        )
                    replaced = existing
                    member = ConsumerMember(
                        member_id,
                        existing.subscription,
                        MemberAssignment(
                            0, 0, existing.assignment.state, existing.assignment.assigned
                        ),
                    )
            else:
                if existing is None:
                    raise Refusal(
                        Errors.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown."
                    )
                if existing.member_id != member_id:
                    raise Refusal(
                        Errors.FENCED_INSTANCE_ID,
                        f"Static member {member_id} with instance id {req.instance_id} was "
                        f"fenced by member {existing.member_id}.",
                    )
                self._check_member_epoch(existing, req)
                member = existing
        subscription = self._updated_subscription(member.subscription, req)
        subscription_record = Record(
            ConsumerGroupMemberMetadataKey(group_id, member_id), subscription
        )
        if record_bytes(subscription_record) > self.config.group_metadata_max_bytes:
            # Bounded like a classic group record, so the log never meets a record it refuses.
            raise Refusal(Errors.INVALID_REQUEST, "The subscription is too large.")
        # -- nothing below refuses: records from here on ------------------------------------
        if group is None and group_id in self._groups and self._groups[group_id].members:
            group = self._upgrade_classic_group(self._groups[group_id])
        if group is None:
            classic = self._groups.get(group_id)
            if classic is not None and classic.persisted is not None:
                # Kafka deletes an empty classic group when a consumer group takes its id; its
                # offsets stay (they are the group's, whatever its type).
                self._records.append(Record(GroupMetadataKey(group_id), None))
                self._apply_group(group_id, None)
            # A new group starts at epoch 1 with an empty target assignment, so its first
            # computed assignment is epoch 2 (Kafka 4.3, KAFKA-20268: epoch 0 is reserved for
            # joining members, epoch 1 for "nothing assigned yet"). The records below bump it;
            # the new member's record creates it on replay.
            group = self._consumer_groups[group_id] = ConsumerGroup(group_id)
            group.group_epoch = group.assignment_epoch = FIRST_GROUP_EPOCH
        if replaced is not None:
            self._replace_static_consumer_member(group, replaced, member)
        before = member
        new_member = member_id not in group.members
        bump = new_member or (
            subscription.subscribed_topic_names != before.subscription.subscribed_topic_names
            or subscription.subscribed_topic_regex != before.subscription.subscribed_topic_regex
        )
        if new_member or subscription != before.subscription:
            self._emit_consumer(ConsumerGroupMemberMetadataKey(group_id, member_id), subscription)
        if bump:
            self._refresh_partition_metadata(group, bump=True)
        self._maybe_update_target_assignment(group)
        member = group.members[member_id]
        self._reconcile_member(group, member, _owned(req))
        member = group.members[member_id]
        self._arm(
            ("consumer-session", group_id, member_id),
            self._group_setting(group_id, SESSION_TIMEOUT),
        )
        full = joining or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.topic_partitions is not None
        )
        assignment = None
        if full or member.assignment.assigned != before.assignment.assigned:
            assignment = _response_assignment(member.assignment.assigned)
        interval_ms = self._group_setting(group_id, HEARTBEAT_INTERVAL)
        if member.assignment.state == UNRELEASED_PARTITIONS:
            interval_ms = min(
                interval_ms, self.config.consumer_group_unreleased_heartbeat_interval_ms
            )
        group.heartbeat_due_ms[member_id] = self._now + interval_ms
        return ConsumerGroupHeartbeatResponse(
            Errors.NONE,
            None,
            member_id,
            member.member_epoch,
            interval_ms,
            assignment,
        )

    @staticmethod
    def _updated_subscription(
        old: ConsumerGroupMemberMetadataValue, req
    ) -> ConsumerGroupMemberMetadataValue:
        """The member's subscription with the request's changes (None / -1: unchanged)."""
        names = old.subscribed_topic_names
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
        regex = old.subscribed_topic_regex
        if req.subscribed_topic_regex is not None:
            regex = req.subscribed_topic_regex or None  # "" clears it
        return ConsumerGroupMemberMetadataValue(
            req.instance_id if req.instance_id is not None else old.instance_id,
            req.rack_id if req.rack_id is not None else old.rack_id,
            req.client_id,
            req.client_host,
            names,
            regex,
            old.rebalance_timeout_ms
            if req.rebalance_timeout_ms == -1
            else req.rebalance_timeout_ms,
            req.server_assignor if req.server_assignor is not None else old.server_assignor,
        )

    def _replace_static_consumer_member(
        self, group: ConsumerGroup, old: ConsumerMember, new: ConsumerMember
    ) -> None:
        """Kafka's ``replaceMember``: the new member id takes over the old one's subscription,
        target and current assignment (at epoch 0)."""
        group_id = group.group_id
        target = group.target.get(old.member_id, {})
        self._remove_member_records(group_id, old.member_id)
        self._cancel_consumer_timers(group_id, old.member_id)
        self._emit_consumer(
            ConsumerGroupMemberMetadataKey(group_id, new.member_id), new.subscription
        )
        self._emit_consumer(
            ConsumerGroupTargetAssignmentMemberKey(group_id, new.member_id),
            ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(target)),
        )
        self._emit_consumer(
            ConsumerGroupCurrentMemberAssignmentKey(group_id, new.member_id),
            assignment_value(new.assignment),
        )

    def _maybe_update_target_assignment(self, group: ConsumerGroup) -> None:
        """The target assignment at the group epoch, once the group epoch moved past it, and
        at most once per ``consumer_group_assignment_interval_ms`` (Kafka 4.3, KIP-1263):
        until then the group stays Assigning and its members reconcile towards the old
        target, so members that join together cost one assignor run, not one each."""
        if group.group_epoch <= group.assignment_epoch:
            return
        interval_ms = self._group_setting(group.group_id, ASSIGNMENT_INTERVAL)
        last_ms = group.assigned_at_ms
        if interval_ms and last_ms is not None and self._now - last_ms < interval_ms:
            return
        self._update_target_assignment(group)
        group.assigned_at_ms = self._now

    def _update_target_assignment(self, group: ConsumerGroup) -> None:
        """The assignor's answer at the group epoch: a record per member whose target changed
        (Kafka's ``TargetAssignmentBuilder``), then the assignment epoch."""
        catalog = self._topics
        topics = {t: n for t, n in group.partition_metadata.items() if t in catalog}
        spec = AssignmentSpec(
            {
                m.member_id: MemberSpec(
                    subscribed_topics(m.subscription, catalog, self._regex_topics),
                    group.target.get(m.member_id, {}),
                    m.subscription.instance_id,
                    m.subscription.rack_id,
                    group.heartbeat_due_ms.get(m.member_id),
                )
                for m in group.members.values()
            },
            topics,
        )
        default = self.config.consumer_group_assignors[0]
        assignor = SERVER_ASSIGNORS[group.preferred_assignor(default)]
        result = assignor.assign(spec)
        for member_id in group.members:
            partitions = result.get(member_id, {})
            if group.target.get(member_id) != partitions:
                self._emit_consumer(
                    ConsumerGroupTargetAssignmentMemberKey(group.group_id, member_id),
                    ConsumerGroupTargetAssignmentMemberValue(to_topic_partitions(partitions)),
                )
        self._emit_consumer(
            ConsumerGroupTargetAssignmentMetadataKey(group.group_id),
            ConsumerGroupTargetAssignmentMetadataValue(group.group_epoch),
        )

    def _reconcile_member(
        self, group: ConsumerGroup, member: ConsumerMember, owned: Partitions | None
    ) -> None:
        current = member.assignment
        epoch = group.assignment_epoch
        if current.state == STABLE and current.member_epoch == epoch:
            return
        new = reconcile(
            current,
            member.member_id,
            epoch,
            group.target.get(member.member_id, {}),
            group.owner_of,
            owned,
        )
        if new == current:
            return
        key = ConsumerGroupCurrentMemberAssignmentKey(group.group_id, member.member_id)
        self._emit_consumer(key, assignment_value(new))
        timer = ("consumer-rebalance", group.group_id, member.member_id)
        if new.state == UNREVOKED_PARTITIONS:
            self._arm(timer, member.subscription.rebalance_timeout_ms, new.member_epoch)
        else:
            self._timer.cancel(timer)


def _is_subset(owned: Partitions | None, assigned: Partitions) -> bool:
    if owned is None:
        return False
    return all(parts <= assigned.get(topic, frozenset()) for topic, parts in owned.items())
