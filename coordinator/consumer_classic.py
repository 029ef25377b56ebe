"""Classic members of a consumer group: JoinGroup, SyncGroup, Heartbeat and LeaveGroup from
consumers that still speak the classic protocol, served by a KIP-848 group (Kafka's
``classicGroupJoinToConsumerGroup`` and its siblings), sans IO.

Part of ``Shard`` (see shard.py and ``consumer_admin``, which routes these requests here when
the group id belongs to a non-empty consumer group). A classic member is a consumer-group member
whose subscription record carries its classic metadata (session timeout and JoinGroup protocols);
the server assignor computes its target like anybody's. What differs is the conversation:

* JoinGroup: the subscription (topic names and owned partitions) comes from the ConsumerProtocol
  bytes of the first protocol; the member is created or updated, the group epoch bumped if its
  subscription changed, the target recomputed, and the member reconciled against the partitions
  it says it owns. The answer comes at once: generation = the member's epoch, no leader, no
  member list (the coordinator assigns).
* SyncGroup: the member's assigned partitions (never ones still owned by another member) in
  ConsumerProtocol assignment bytes. REBALANCE_IN_PROGRESS if the group epoch moved on.
* Heartbeat: REBALANCE_IN_PROGRESS when the member must join again: its epoch is behind the group
  epoch, it has partitions to revoke, or partitions it waited for have been released.
* LeaveGroup: the member is fenced like a consumer member that leaves.
* Deadlines (timers, soft state like the others): a member told to join again must do so
  within its rebalance timeout, and send its SyncGroup within it after joining, or it is fenced.

A static classic member (instance id) that joins without its member id after a restart takes
over its predecessor's place and partitions; with another member's id it gets FENCED_INSTANCE_ID.
(A consumer-protocol static member cannot be replaced by a classic one: UNKNOWN_MEMBER_ID.)
A classic JoinGroup on
an *empty* consumer group deletes it and joins a new classic group of that id (Kafka does the
same, whatever the migration policy).
"""

from __future__ import annotations

import struct

from .consumer_group import ConsumerGroup, ConsumerMember
from .consumer_membership import Refusal
from .consumer_protocol import Assignment, decode_subscription, encode_assignment
from .consumer_records import ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue
from .errors import Errors
from .group import CONSUMER_PROTOCOL_TYPE
from .messages import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    LeaveGroupResponseMember,
    SyncGroupResponse,
)
from .reconcile import UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS, MemberAssignment
from .record_size import record_bytes
from .records import Record
from .validation import join_request_ok, member_fields_ok


def classic_assignment_bytes(assigned) -> bytes:
    """The member's partitions as Kafka's ConsumerProtocol assignment."""
    return encode_assignment(
        Assignment(tuple((t, p) for t, parts in sorted(assigned.items()) for p in sorted(parts)))
    )


class ConsumerClassicMixin:
    # -- JoinGroup ------------------------------------------------------------------------------

    def _join_error_for(self, req) -> Errors | None:
        """The classic JoinGroup checks that come before any group (``_handle_join``'s)."""
        error = self._group_error(req.group_id)
        if error is None and not join_request_ok(req, self.config):
            error = Errors.INVALID_REQUEST
        if error is None and not (
            self.config.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            error = Errors.INVALID_SESSION_TIMEOUT
        return error

    def _classic_join_consumer_group(self, request_id, req, group: ConsumerGroup) -> None:
        error = self._join_error_for(req)
        if error is not None:
            return self._reply(request_id, self._join_error(error, req.member_id))
        if not group.members:
            # An empty consumer group gives its id to a classic group; offsets stay.
            self._delete_consumer_group(group)
            return self._handle_classic_join(request_id, req)
        if self._topics is None:  # as ConsumerGroupHeartbeat: no assignment without a catalog
            error = Errors.COORDINATOR_LOAD_IN_PROGRESS
            return self._reply(request_id, self._join_error(error, req.member_id))
        try:
            response = self._classic_join(req, group)
        except Refusal as refusal:
            response = self._join_error(refusal.error, req.member_id)
        self._reply(request_id, response)

    def _classic_join(self, req, group: ConsumerGroup) -> JoinGroupResponse:
        group_id = group.group_id
        if req.protocol_type != CONSUMER_PROTOCOL_TYPE or not req.protocols:
            raise Refusal(Errors.INCONSISTENT_GROUP_PROTOCOL)
        try:
            parsed = decode_subscription(req.protocols[0].metadata)
        except (ValueError, struct.error):
            raise Refusal(Errors.INCONSISTENT_GROUP_PROTOCOL) from None
        names = {p.name for p in req.protocols}
        for other in group.members.values():
            if other.uses_classic_protocol and not names & {
                n for n, _ in other.subscription.classic_protocols
            }:
                raise Refusal(Errors.INCONSISTENT_GROUP_PROTOCOL)  # no protocol in common
        member_id = req.member_id
        instance_id = req.group_instance_id
        replaced = group.static_member(instance_id) if instance_id is not None else None
        if replaced is not None and replaced.member_id == member_id:
            replaced = None  # the static member itself, joining again
        elif replaced is not None and member_id:
            raise Refusal(Errors.FENCED_INSTANCE_ID)  # another member holds the instance id
        existing = group.members.get(member_id) if replaced is None else replaced
        if existing is not None and not existing.uses_classic_protocol:
            raise Refusal(Errors.UNKNOWN_MEMBER_ID)
        # A member id the group does not know joins as a new member (as Kafka's
        # ``getOrMaybeSubscribeDynamicConsumerGroupMember`` does for classic joins).
        if existing is None and len(group.members) >= self.config.consumer_group_max_size:
            raise Refusal(Errors.GROUP_MAX_SIZE_REACHED)
        if not member_id:
            member_id = f"{instance_id or req.client_id}-{self._ids()}"
            if req.require_known_member_id and instance_id is None:
                return JoinGroupResponse(
                    Errors.MEMBER_ID_REQUIRED, -1, None, None, "", False, member_id, []
                )
        if replaced is not None:
            # A static member that restarted: its new member id takes over the old one's
            # subscription, target and partitions (Kafka's ``replaceMember``), at epoch 0.
            a = replaced.assignment
            member = ConsumerMember(
                member_id, replaced.subscription, MemberAssignment(0, 0, a.state, a.assigned)
            )
        else:
            member = group.members.get(member_id) or ConsumerMember(member_id)
        old = member.subscription
        subscription = ConsumerGroupMemberMetadataValue(
            instance_id,
            parsed.rack_id if parsed.rack_id is not None else old.rack_id,
            req.client_id,
            req.client_host,
            tuple(sorted(set(parsed.topics))),
            None,
            req.rebalance_timeout_ms,
            old.server_assignor,
            req.session_timeout_ms,
            tuple((p.name, p.metadata) for p in req.protocols),
        )
        record = Record(ConsumerGroupMemberMetadataKey(group_id, member_id), subscription)
        if record_bytes(record) > self.config.group_metadata_max_bytes:
            raise Refusal(Errors.INVALID_REQUEST)
        owned: dict[str, frozenset[int]] = {}
        for topic, partition in parsed.owned_partitions:
            owned[topic] = owned.get(topic, frozenset()) | {partition}
        # -- nothing below refuses ----------------------------------------------------------
        if replaced is not None:
            self._replace_static_consumer_member(group, replaced, member)
        new_member = member_id not in group.members
        if new_member or subscription != old:
            self._emit_consumer(record.key, subscription)
        if new_member or subscription.subscribed_topic_names != old.subscribed_topic_names:
            self._refresh_partition_metadata(group, bump=True)
        self._maybe_update_target_assignment(group)
        self._reconcile_member(group, group.members[member_id], owned)
        member = group.members[member_id]
        self._arm(("consumer-session", group_id, member_id), req.session_timeout_ms)
        # It joined: the rejoin deadline is met, and its SyncGroup is due within the
        # rebalance timeout (Kafka's consumer-group join and sync timeouts).
        self._timer.cancel(("consumer-join", group_id, member_id))
        self._arm(("consumer-sync", group_id, member_id), req.rebalance_timeout_ms)
        return JoinGroupResponse(
            Errors.NONE,
            member.member_epoch,
            CONSUMER_PROTOCOL_TYPE,
            req.protocols[0].name,
            "",
            False,
            member_id,
            [],
        )

    # -- SyncGroup, Heartbeat, LeaveGroup -------------------------------------------------------

    def _classic_member(self, group: ConsumerGroup, member_id, instance_id) -> ConsumerMember:
        """The classic member the request names (Kafka's ``validateConsumerGroupMember`` and
        ``throwIfMemberDoesNotUseClassicProtocol``); Refusal otherwise."""
        if instance_id is not None:
            member = group.static_member(instance_id)
            if member is None:
                raise Refusal(Errors.UNKNOWN_MEMBER_ID)
            if member.member_id != member_id:
                raise Refusal(Errors.FENCED_INSTANCE_ID)
        else:
            member = group.members.get(member_id)
            if member is None:
                raise Refusal(Errors.UNKNOWN_MEMBER_ID)
        if not member.uses_classic_protocol:
            raise Refusal(Errors.UNKNOWN_MEMBER_ID)
        return member

    def _classic_member_at(self, group: ConsumerGroup, req) -> ConsumerMember:
        """The classic member a SyncGroup or Heartbeat names, at the generation it names
        (its member epoch); Refusal (INVALID_REQUEST, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
        ILLEGAL_GENERATION) otherwise."""
        if not member_fields_ok(
            req.member_id, req.group_instance_id, req.generation_id, self.config
        ):
            raise Refusal(Errors.INVALID_REQUEST)
        member = self._classic_member(group, req.member_id, req.group_instance_id)
        if req.generation_id != member.member_epoch:
            raise Refusal(Errors.ILLEGAL_GENERATION)
        return member

    def _classic_sync_consumer_group(self, request_id, req, group: ConsumerGroup) -> None:
        try:
            member = self._classic_member_at(group, req)
            names = {n for n, _ in member.subscription.classic_protocols}
            if (req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                req.protocol_name is not None and req.protocol_name not in names
            ):
                raise Refusal(Errors.INCONSISTENT_GROUP_PROTOCOL)
            if member.member_epoch < group.group_epoch:
                raise Refusal(Errors.REBALANCE_IN_PROGRESS)
        except Refusal as refusal:
            return self._reply(request_id, self._sync_error(refusal.error))
        self._arm(
            ("consumer-session", group.group_id, member.member_id),
            member.subscription.classic_session_timeout_ms,
        )
        self._timer.cancel(("consumer-sync", group.group_id, member.member_id))
        self._reply(
            request_id,
            SyncGroupResponse(
                Errors.NONE,
                CONSUMER_PROTOCOL_TYPE,
                req.protocol_name or member.subscription.classic_protocols[0][0],
                classic_assignment_bytes(member.assignment.assigned),
            ),
        )

    def _classic_heartbeat_consumer_group(self, request_id, req, group: ConsumerGroup) -> None:
        try:
            member = self._classic_member_at(group, req)
        except Refusal as refusal:
            return self._reply(request_id, HeartbeatResponse(refusal.error))
        self._arm(
            ("consumer-session", group.group_id, member.member_id),
            member.subscription.classic_session_timeout_ms,
        )
        a = member.assignment
        rejoin = (
            member.member_epoch < group.group_epoch
            or a.state == UNREVOKED_PARTITIONS
            or (a.state == UNRELEASED_PARTITIONS and not _waiting_on_others(group, member))
        )
        if rejoin:
            # It must join again within its rebalance timeout, or be fenced (Kafka's
            # ``scheduleConsumerGroupJoinTimeoutIfAbsent``: the first such answer sets it).
            key = ("consumer-join", group.group_id, member.member_id)
            if self._timer.deadline_of(key) is None:
                self._arm(key, member.subscription.rebalance_timeout_ms)
        self._reply(
            request_id, HeartbeatResponse(Errors.REBALANCE_IN_PROGRESS if rejoin else Errors.NONE)
        )

    def _classic_leave_consumer_group(self, request_id, req, group: ConsumerGroup) -> None:
        if len(req.members) > self.config.max_members_per_request or not all(
            member_fields_ok(m.member_id, m.group_instance_id, 0, self.config) for m in req.members
        ):
            return self._reply(request_id, LeaveGroupResponse(Errors.INVALID_REQUEST, []))
        if self._topics is None:  # as ConsumerGroupHeartbeat's leave: it waits for the catalog
            return self._reply(
                request_id, LeaveGroupResponse(Errors.COORDINATOR_LOAD_IN_PROGRESS, [])
            )
        answers = []
        for identity in req.members:
            try:
                member = self._classic_member(group, identity.member_id, identity.group_instance_id)
            except Refusal as refusal:
                error = refusal.error
            else:
                error = Errors.NONE
                if member.member_id in group.members:
                    self._fence_consumer_member(group, member.member_id, "left the group")
            answers.append(
                LeaveGroupResponseMember(identity.member_id, identity.group_instance_id, error)
            )
        self._reply(request_id, LeaveGroupResponse(Errors.NONE, answers))

    def _expire_classic_deadline(self, key, _payload) -> None:
        """A classic member did not join again (``consumer-join``) or did not send its
        SyncGroup (``consumer-sync``) within its rebalance timeout: it is fenced."""
        kind, group_id, member_id = key
        group = self._consumer_groups.get(group_id)
        if group is not None and member_id in group.members:
            why = "did not rejoin in time" if kind == "consumer-join" else "did not sync in time"
            self._fence_consumer_member(group, member_id, why)


def _waiting_on_others(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Kafka's ``waitingOnUnreleasedPartition``: a partition of the member's target that it
    does not hold yet is still owned by another member."""
    held = member.assignment.assigned
    for topic, parts in group.target.get(member.member_id, {}).items():
        for p in parts - held.get(topic, frozenset()):
            owner = group.owner_of(topic, p)
            if owner is not None and owner != member.member_id:
                return True
    return False
