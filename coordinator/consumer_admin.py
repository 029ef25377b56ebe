"""Consumer groups beside classic ones: ConsumerGroupDescribe, and the classic APIs on a group id
that belongs to a consumer group.

Part of ``Shard`` (see shard.py). A group id is either a classic group (``Shard._groups``) or a
consumer group (``Shard._consumer_groups``). A consumer group's committed offsets still live
where every group's offsets live: an offsets-only classic ``Group`` of the same id in
``_groups`` (what Kafka calls the group's offsets, whatever its type), so commits, fetches,
retention and the snapshot path are the classic ones. The overrides below (each falls back to
the classic handler for every other group id) make that holder invisible:

* JoinGroup, SyncGroup, Heartbeat, LeaveGroup: served to classic members by
  ``consumer_classic`` (an empty consumer group gives its id to a classic group on JoinGroup).
* OffsetCommit: Kafka's ``ConsumerGroup.validateOffsetCommit``: with members, the member must
  exist (UNKNOWN_MEMBER_ID) and ``generation_id`` must be its member epoch (STALE_MEMBER_EPOCH);
  an empty group takes commits with ``generation_id`` < 0 (admin clients).
* OffsetFetch: ``member_id`` / ``member_epoch`` checked the same way when given.
* OffsetDelete: GROUP_SUBSCRIBED_TO_TOPIC for a topic a member subscribes to.
* DescribeGroups: Dead (Kafka describes only classic groups there); ListGroups: the consumer
  group with protocol type ``consumer`` and its state; DeleteGroups: NON_EMPTY_GROUP unless
  Empty, else every record of the group is tombstoned.
* Retention: offsets of subscribed topics never expire; an Empty consumer group without offsets
  is deleted by the cleanup timer, as Kafka's ``cleanupGroupMetadata`` does.
"""

from __future__ import annotations

from msgspec.structs import replace

from .consumer_group import ConsumerGroup, ConsumerGroupState
from .consumer_messages import (
    ConsumerGroupDescribeAssignment,
    ConsumerGroupDescribeMember,
    ConsumerGroupDescribeResponse,
    ConsumerGroupDescribeTopicPartitions,
    DescribedConsumerGroup,
)
from .consumer_records import (
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    Partitions,
)
from .errors import Errors
from .group import CONSUMER_PROTOCOL_TYPE, DEAD
from .messages import (
    DeletableGroupResult,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetFetchResponse,
)
from .records import OffsetCommitKey, Record
from .validation import is_int32, member_fields_ok, partitions_within_limits

NONE = Errors.NONE
INCONSISTENT = Errors.INCONSISTENT_GROUP_PROTOCOL


def _describe_assignment(*partitions: Partitions) -> ConsumerGroupDescribeAssignment:
    """The union of ``partitions`` as described (topics and partitions in order)."""
    union: dict[str, set[int]] = {}
    for part in partitions:
        for topic, parts in part.items():
            union.setdefault(topic, set()).update(parts)
    return ConsumerGroupDescribeAssignment(
        [
            ConsumerGroupDescribeTopicPartitions(topic, sorted(parts))
            for topic, parts in sorted(union.items())
        ]
    )


class ConsumerAdminMixin:
    def _consumer_group(self, group_id) -> ConsumerGroup | None:
        """The consumer group of this id, only while the partition is owned (a loading or
        unloaded shard answers every request the classic way)."""
        if not self.owned or type(group_id) is not str:
            return None
        return self._consumer_groups.get(group_id)

    # -- ConsumerGroupDescribe ----------------------------------------------------------------

    def _handle_consumer_describe(self, request_id, req) -> None:
        too_many = len(req.group_ids) > self.config.max_groups_per_request
        described = []
        for group_id in req.group_ids:
            error = Errors.INVALID_REQUEST if too_many else self._group_error(group_id)
            group = self._consumer_group(group_id) if error is None else None
            message = None
            if error is None and group is None:
                error = Errors.GROUP_ID_NOT_FOUND
                message = (
                    f"Group {group_id} is not a consumer group."
                    if group_id in self._groups and self._groups[group_id].protocol_type
                    else f"Group {group_id} not found."
                )
            if error is not None:
                described.append(DescribedConsumerGroup(error, message, group_id, "", 0, 0, "", []))
            else:
                described.append(self._describe_consumer_group(group))
        self._reply(request_id, ConsumerGroupDescribeResponse(described))

    def _describe_consumer_group(self, group: ConsumerGroup) -> DescribedConsumerGroup:
        members = [
            ConsumerGroupDescribeMember(
                m.member_id,
                m.subscription.instance_id,
                m.subscription.rack_id,
                m.member_epoch,
                m.subscription.client_id,
                m.subscription.client_host,
                list(m.subscription.subscribed_topic_names),
                # Kafka describes a member without a regex with "", not null.
                m.subscription.subscribed_topic_regex or "",
                # What the member owns: its assignment and what it has yet to revoke, as
                # Kafka 4.3 describes it.
                _describe_assignment(m.assignment.assigned, m.assignment.pending_revocation),
                _describe_assignment(group.target.get(m.member_id, {})),
                m.uses_classic_protocol,
            )
            for m in group.members.values()
        ]
        return DescribedConsumerGroup(
            NONE,
            None,
            group.group_id,
            group.state.value,
            group.group_epoch,
            group.assignment_epoch,
            group.preferred_assignor(self.config.consumer_group_assignors[0]),
            members,
        )

    # -- classic membership APIs on a consumer group ------------------------------------------

    def _handle_join(self, request_id, req) -> None:
        group = self._consumer_group(req.group_id)
        if group is None:
            return super()._handle_join(request_id, req)
        self._classic_join_consumer_group(request_id, req, group)

    def _handle_classic_join(self, request_id, req) -> None:
        """The classic group's JoinGroup, past the consumer-group override."""
        super()._handle_join(request_id, req)

    def _handle_sync(self, request_id, req) -> None:
        group = self._consumer_group(req.group_id)
        if group is None:
            return super()._handle_sync(request_id, req)
        self._classic_sync_consumer_group(request_id, req, group)

    def _handle_heartbeat(self, request_id, req) -> None:
        group = self._consumer_group(req.group_id)
        if group is None:
            return super()._handle_heartbeat(request_id, req)
        self._classic_heartbeat_consumer_group(request_id, req, group)

    def _handle_leave(self, request_id, req) -> None:
        group = self._consumer_group(req.group_id)
        if group is None:
            return super()._handle_leave(request_id, req)
        self._classic_leave_consumer_group(request_id, req, group)

    # -- offsets ------------------------------------------------------------------------------

    def _handle_commit(self, request_id, req) -> None:
        group = self._consumer_group(req.group_id)
        if (
            group is None
            or not partitions_within_limits(req.offsets, self.config)
            or not member_fields_ok(
                req.member_id, req.group_instance_id, req.generation_id, self.config
            )
        ):
            return super()._handle_commit(request_id, req)  # classic, or refused the same way
        error = self._member_epoch_error(group, req.member_id, req.generation_id, commit=True)
        if error is not None:
            partitions = [
                OffsetCommitResponsePartition(p.topic, p.partition, error) for p in req.offsets
            ]
            return self._reply(request_id, OffsetCommitResponse(partitions))
        # Checked: store it as the group's offsets-only holder takes an admin commit.
        anonymous = replace(req, generation_id=-1, member_id="", group_instance_id=None)
        super()._handle_commit(request_id, anonymous)

    @staticmethod
    def _member_epoch_error(
        group: ConsumerGroup, member_id: str | None, epoch: int, commit: bool
    ) -> Errors | None:
        """Kafka's ``ConsumerGroup.validateOffsetCommit`` / ``validateOffsetFetch``."""
        if commit:
            if epoch < 0 and not group.members:
                return None
        elif member_id is None and epoch < 0:
            return None
        member = group.members.get(member_id) if member_id is not None else None
        if member is None:
            return Errors.UNKNOWN_MEMBER_ID
        if epoch != member.member_epoch:
            return Errors.STALE_MEMBER_EPOCH
        return None

    def _handle_fetch(self, request_id, req) -> None:
        group = self._consumer_group(req.group_id)
        if group is not None:
            if not is_int32(req.member_epoch) or (
                req.member_id is not None and type(req.member_id) is not str
            ):
                return self._reply(request_id, OffsetFetchResponse(Errors.INVALID_REQUEST, []))
            error = self._member_epoch_error(group, req.member_id, req.member_epoch, commit=False)
            if error is not None:
                return self._reply(request_id, OffsetFetchResponse(error, []))
        super()._handle_fetch(request_id, req)

    def _handle_offset_delete(self, request_id, req) -> None:
        group = self._consumer_group(req.group_id)
        if group is None or not partitions_within_limits(req.partitions, self.config):
            return super()._handle_offset_delete(request_id, req)
        holder = self._groups.get(req.group_id)
        results, deletable = [], []
        for tp in dict.fromkeys((tp.topic, tp.partition) for tp in req.partitions):
            if group.is_subscribed_to_topic(tp[0]):
                error = Errors.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                error = NONE
                if holder is not None and tp in holder.offsets:
                    deletable.append(tp)
            results.append(OffsetDeleteResponsePartition(tp[0], tp[1], error))
        if deletable:
            self._cleanup_group(holder, deletable)
        self._reply(request_id, OffsetDeleteResponse(NONE, results))

    # -- Describe / List / Delete groups ------------------------------------------------------

    def _handle_describe(self, request_id, req) -> None:
        super()._handle_describe(request_id, req)
        if not self._consumer_groups or not self.owned:
            return
        rid, response = self._replies.pop()
        groups = [
            DescribedGroup(NONE, g.group_id, DEAD.value, "", "", [], -1, "")
            if g.error is NONE and self._consumer_group(g.group_id) is not None
            else g
            for g in response.groups
        ]
        self._reply(rid, DescribeGroupsResponse(groups))

    def _handle_list(self, request_id, req) -> None:
        super()._handle_list(request_id, req)
        if not self._consumer_groups or not self.owned:
            return
        rid, response = self._replies.pop()
        consumer = self._consumer_groups
        wanted = set(req.states_filter)
        groups = [g for g in response.groups if g.group_id not in consumer]
        groups += [
            ListedGroup(g.group_id, CONSUMER_PROTOCOL_TYPE, g.state.value, "consumer")
            for g in consumer.values()
            if not wanted or g.state.value in wanted
        ]
        self._reply(rid, ListGroupsResponse(response.error, groups))

    def _handle_delete_groups(self, request_id, req) -> None:
        if (
            not self._consumer_groups
            or not self.owned
            or len(req.group_ids) > self.config.max_groups_per_request
        ):
            return super()._handle_delete_groups(request_id, req)
        results = []
        for group_id in dict.fromkeys(req.group_ids):
            group = self._consumer_group(group_id)
            if group is None:
                super()._handle_delete_groups(None, DeleteGroupsRequest([group_id]))
                results.extend(self._replies.pop()[1].results)
            elif group.state is not ConsumerGroupState.EMPTY:
                results.append(DeletableGroupResult(group_id, Errors.NON_EMPTY_GROUP))
            else:
                holder = self._groups.get(group_id)
                if holder is not None:
                    self._cleanup_group(holder, list(holder.offsets))
                if group_id in self._consumer_groups:
                    self._delete_consumer_group(group)
                results.append(DeletableGroupResult(group_id, NONE))
        self._reply(request_id, DeleteGroupsResponse(results))

    def _delete_consumer_group(self, group: ConsumerGroup) -> None:
        """Kafka's ``createGroupTombstoneRecords``: every member's records, then the group's."""
        group_id = group.group_id
        for member_id in list(group.members):
            self._remove_member_records(group_id, member_id)
            self._cancel_consumer_timers(group_id, member_id)
        self._emit_consumer(ConsumerGroupTargetAssignmentMetadataKey(group_id), None)
        self._emit_consumer(ConsumerGroupPartitionMetadataKey(group_id), None)
        self._emit_consumer(ConsumerGroupMetadataKey(group_id), None)
        self._event("dead", group_id, f"consumer group epoch {group.group_epoch}")

    # -- retention ----------------------------------------------------------------------------

    def _expired_offsets(self, group, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        expired = super()._expired_offsets(group, now_ms, retention_ms)
        consumer = self._consumer_groups.get(group.group_id)
        if consumer is None:
            return expired
        return [tp for tp in expired if not consumer.is_subscribed_to_topic(tp[0])]

    def _cleanup_group(self, group, removed: list[tuple[str, int]]) -> None:
        consumer = self._consumer_groups.get(group.group_id)
        if consumer is None:
            return super()._cleanup_group(group, removed)
        group_id = group.group_id
        for topic, partition in removed:
            self._emit(Record(OffsetCommitKey(group_id, topic, partition), None))
        if not group.offsets and self._groups.get(group_id) is group:
            self._drop_group(group_id)  # the holder of no offsets is not needed
            if consumer.state is ConsumerGroupState.EMPTY:
                self._delete_consumer_group(consumer)

    def _run_offset_cleanup(self, key, sweep) -> None:
        if sweep is None:  # a sweep begins: empty consumer groups that never held offsets
            for group in list(self._consumer_groups.values()):
                if group.group_id not in self._groups and not group.members:
                    self._delete_consumer_group(group)
        super()._run_offset_cleanup(key, sweep)
