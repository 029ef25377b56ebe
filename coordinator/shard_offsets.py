"""Offsets and group administration: commit, fetch, retention, OffsetDelete and the admin APIs.

Part of ``Shard`` (see shard.py for the theory of operation):

    _handle_commit          spec §2.7, §6.1
    _handle_fetch           spec §2.8
    _handle_offset_delete   spec §2.12
    _handle_describe        spec §2.9
    _handle_list            spec §2.10
    _handle_delete_groups   spec §2.11
    _run_offset_cleanup     spec §6.2 (periodic timer ("cleanup",), in bounded turns)

Every change to offsets is a record handed to ``_emit``, which applies it through the same code
``replay`` uses; a removed offset is a tombstone. Nothing here is ever "pending": the runtime
orders reads behind unacknowledged writes, so ``require_stable`` never finds an in-flight commit
here and UNSTABLE_OFFSET_COMMIT is not produced (there are no transactions either).

Request bounds
--------------
Kafka bounds these requests only by their bytes (``socket.request.max.bytes``, 100 MiB), which
lets one OffsetFetch name millions of partitions and hold the partition for seconds. Here each is
bounded by count first, before any other check or lookup (``CoordinatorConfig``):

* OffsetCommit with more than ``max_partitions_per_request`` partitions or
  ``max_topics_per_request`` distinct topics: INVALID_COMMIT_OFFSET_SIZE on every partition, what
  Kafka answers a commit whose records are too large (RECORD_LIST_TOO_LARGE, mapped).
* OffsetFetch and OffsetDelete over the same bounds: INVALID_REQUEST as the response's error,
  with no partitions. An OffsetFetch of all offsets (``partitions=None``) of a group holding more
  than ``max_partitions_per_request`` offsets gets INVALID_REQUEST too: fetch named partitions.
* DescribeGroups and DeleteGroups with more than ``max_groups_per_request`` group ids:
  INVALID_REQUEST for every group id, without looking any up.
* (shard_members) LeaveGroup with more than ``max_members_per_request`` members, SyncGroup with
  more assignments: INVALID_REQUEST as the response's error.

An over-limit request changes nothing and writes no record. ListGroups is bounded by
``max_groups`` (the shard's table) instead: it has no way to ask for less.
"""

from __future__ import annotations

from .errors import Errors
from .group import (
    COMPLETING_REBALANCE,
    CONSUMER_PROTOCOL_TYPE,
    DEAD,
    EMPTY,
    STABLE,
    Group,
)
from .messages import (
    DeletableGroupResult,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsResponse,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
)
from .record_size import offset_records_bytes_at_most, record_bytes
from .records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue, Record
from .validation import (
    INT64_MAX,
    commit_chars,
    partitions_within_limits,
    topic_partition_exists,
    utf16_length,
)

NONE = Errors.NONE


class OffsetsMixin:
    # -- OffsetCommit (spec §2.7) ---------------------------------------------------------------

    def _handle_commit(self, request_id, req) -> None:
        config = self.config
        if not partitions_within_limits(req.offsets, config):
            error = Errors.INVALID_COMMIT_OFFSET_SIZE
        else:
            error = self._group_error(req.group_id, allow_empty=True)
        if error is None:
            chars = commit_chars(req, config)
            if chars is None:
                error = Errors.INVALID_REQUEST
            elif self._commit_too_large(req, chars):
                error = Errors.INVALID_COMMIT_OFFSET_SIZE  # Kafka: RECORD_LIST_TOO_LARGE, mapped
        group = self._groups.get(req.group_id) if error is None else None
        if error is None and group is None:
            if req.generation_id >= 0:
                error = Errors.ILLEGAL_GENERATION  # a stale member of a forgotten group
            else:
                group = self._new_group(req.group_id)  # a "simple" group: offsets only
                if group is None:
                    error = Errors.COORDINATOR_NOT_AVAILABLE
        if error is None:
            error = self._validate_offset_commit(group, req)
        if error is None and group.state is COMPLETING_REBALANCE:
            error = Errors.REBALANCE_IN_PROGRESS
        if error is not None:
            return self._reply(
                request_id,
                OffsetCommitResponse(
                    [
                        OffsetCommitResponsePartition(p.topic, p.partition, error)
                        for p in req.offsets
                    ]
                ),
            )

        if group.state is not EMPTY:  # Stable or PreparingRebalance
            self._reset_heartbeat(group, group.members[req.member_id])
        max_chars = config.offset_metadata_max_bytes
        # The per-partition loop of a commit is the hot path of a busy coordinator: records go
        # out and into the group's offsets here, as _emit and _apply_offset (the replay) would
        # put them; tests/storage/test_replay_equivalence.py holds the two to the same state.
        offsets, add, group_id = group.offsets, self._records.append, req.group_id
        now_ms, expire_ms = self._now, _expire_ms(req, self._now)
        results = []
        for p in req.offsets:
            topic, partition, metadata = p.topic, p.partition, p.committed_metadata or ""
            if not topic_partition_exists(topic, partition):
                error = Errors.UNKNOWN_TOPIC_OR_PARTITION
            elif len(metadata) * 2 > max_chars and utf16_length(metadata) > max_chars:
                error = Errors.OFFSET_METADATA_TOO_LARGE
            else:
                error = NONE
                value = OffsetCommitValue(
                    p.committed_offset, p.committed_leader_epoch, metadata, now_ms, expire_ms
                )
                add(Record(OffsetCommitKey(group_id, topic, partition), value))
                offsets[(topic, partition)] = value
            results.append(OffsetCommitResponsePartition(topic, partition, error))
        self._reply(request_id, OffsetCommitResponse(results))

    def _commit_too_large(self, req, chars: int) -> bool:
        """The request's offset records, sized as the log sizes them, total more than
        ``offset_commit_max_bytes`` (Kafka: RECORD_LIST_TOO_LARGE). A cheap upper bound from
        its ``chars`` (``commit_chars``) first; the records are encoded only when it is over."""
        limit = self.config.offset_commit_max_bytes
        if offset_records_bytes_at_most(req.group_id, len(req.offsets), chars) <= limit:
            return False
        return sum(record_bytes(r) for r in self._offset_records(req, self._now)) > limit

    @staticmethod
    def _offset_records(req, now_ms: int) -> list[Record]:
        """The offset record of each of the request's partitions, in its order (the hot loop
        of ``_handle_commit`` builds the same ones inline)."""
        group_id, expire_ms = req.group_id, _expire_ms(req, now_ms)
        return [
            Record(
                OffsetCommitKey(group_id, p.topic, p.partition),
                OffsetCommitValue(
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.committed_metadata or "",
                    now_ms,
                    expire_ms,
                ),
            )
            for p in req.offsets
        ]

    def _validate_offset_commit(self, group: Group, req) -> Errors | None:
        if req.generation_id < 0 and group.state is EMPTY:
            return None  # admin clients and manual assignment: no member checks at all
        if req.generation_id >= 0 or req.member_id != "" or req.group_instance_id is not None:
            error = self._validate_member(group, req.member_id, req.group_instance_id)
            if error is None and req.generation_id != group.generation_id:
                error = Errors.ILLEGAL_GENERATION
            return error
        return Errors.UNKNOWN_MEMBER_ID  # anonymous commit to a group with members

    # -- OffsetFetch (spec §2.8) ----------------------------------------------------------------

    def _handle_fetch(self, request_id, req) -> None:
        if req.partitions is not None and not partitions_within_limits(req.partitions, self.config):
            error = Errors.INVALID_REQUEST
        else:
            error = self._group_error(req.group_id, allow_empty=True)
        group = self._groups.get(req.group_id) if error is None else None
        offsets = group.offsets if group is not None else {}
        if req.partitions is None and len(offsets) > self.config.max_partitions_per_request:
            error = Errors.INVALID_REQUEST
        if error is not None:
            return self._reply(request_id, OffsetFetchResponse(error, []))
        if req.partitions is None:
            keys = sorted(offsets)
        else:
            keys = [(tp.topic, tp.partition) for tp in req.partitions]
        results = []
        for key in keys:
            value = offsets.get(key)
            if value is None:
                results.append(OffsetFetchResponsePartition(key[0], key[1], -1, -1, "", NONE))
            else:
                results.append(
                    OffsetFetchResponsePartition(
                        key[0], key[1], value.offset, value.leader_epoch, value.metadata, NONE
                    )
                )
        self._reply(request_id, OffsetFetchResponse(NONE, results))

    # -- OffsetDelete (spec §2.12) --------------------------------------------------------------

    def _handle_offset_delete(self, request_id, req) -> None:
        if not partitions_within_limits(req.partitions, self.config):
            error = Errors.INVALID_REQUEST
        else:
            error = self._group_error(req.group_id)
        group = self._groups.get(req.group_id) if error is None else None
        if error is None and group is None:
            error = Errors.GROUP_ID_NOT_FOUND
        if (
            error is None
            and group.state is not EMPTY
            and group.protocol_type != CONSUMER_PROTOCOL_TYPE
        ):
            error = Errors.NON_EMPTY_GROUP
        if error is not None:
            return self._reply(request_id, OffsetDeleteResponse(error, []))
        results, deletable = [], []
        for tp in dict.fromkeys((tp.topic, tp.partition) for tp in req.partitions):
            if group.state is not EMPTY and group.is_subscribed_to_topic(tp[0]):
                results.append(
                    OffsetDeleteResponsePartition(tp[0], tp[1], Errors.GROUP_SUBSCRIBED_TO_TOPIC)
                )
            else:
                deletable.append(tp)
                results.append(OffsetDeleteResponsePartition(tp[0], tp[1], NONE))
        if deletable:
            self._cleanup_group(group, [tp for tp in deletable if tp in group.offsets])
        self._reply(request_id, OffsetDeleteResponse(NONE, results))

    # -- Describe / List / Delete groups (spec §2.9–2.11) -----------------------------------------

    def _handle_describe(self, request_id, req) -> None:
        if len(req.group_ids) > self.config.max_groups_per_request:
            return self._reply(
                request_id,
                DescribeGroupsResponse(
                    [
                        DescribedGroup(Errors.INVALID_REQUEST, group_id, "", "", "", [], -1, "")
                        for group_id in req.group_ids
                    ]
                ),
            )
        described = []
        for group_id in req.group_ids:
            error = self._group_error(group_id, allow_empty=True)
            group = self._groups.get(group_id) if error is None else None
            if error is not None:
                described.append(DescribedGroup(error, group_id, "", "", "", [], -1, ""))
            elif group is None:
                described.append(DescribedGroup(NONE, group_id, DEAD.value, "", "", [], -1, ""))
            else:
                described.append(self._describe(group))
        self._reply(request_id, DescribeGroupsResponse(described))

    @staticmethod
    def _describe(group: Group) -> DescribedGroup:
        stable = group.state is STABLE
        protocol = group.protocol_name if stable else ""
        members = [
            DescribedGroupMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return DescribedGroup(
            NONE,
            group.group_id,
            group.state.value,
            group.protocol_type or "",
            protocol or "",
            members,
            group.generation_id,
            group.leader_id or "",
        )

    def _handle_list(self, request_id, req) -> None:
        if not self.owned:
            # A loading partition has no cached groups yet; an unloaded one has none left.
            error = Errors.COORDINATOR_LOAD_IN_PROGRESS if self.loading else Errors.NOT_COORDINATOR
            return self._reply(request_id, ListGroupsResponse(error, []))
        wanted = set(req.states_filter)
        self._reply(
            request_id,
            ListGroupsResponse(
                NONE,
                [
                    ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
                    for g in self._groups.values()
                    if not wanted or g.state.value in wanted
                ],
            ),
        )

    def _handle_delete_groups(self, request_id, req) -> None:
        if len(req.group_ids) > self.config.max_groups_per_request:
            return self._reply(
                request_id,
                DeleteGroupsResponse(
                    [
                        DeletableGroupResult(group_id, Errors.INVALID_REQUEST)
                        for group_id in req.group_ids
                    ]
                ),
            )
        results = []
        for group_id in dict.fromkeys(req.group_ids):
            error = self._group_error(group_id, allow_empty=True)
            group = self._groups.get(group_id) if error is None else None
            if error is None:
                if group is None:
                    error = Errors.GROUP_ID_NOT_FOUND
                elif group.state is not EMPTY:
                    error = Errors.NON_EMPTY_GROUP
                else:
                    group.transition_to(DEAD, self._now)
                    self._cleanup_group(group, list(group.offsets))
                    error = NONE
            results.append(DeletableGroupResult(group_id, error))
        self._reply(request_id, DeleteGroupsResponse(results))

    # -- retention (spec §6.2) ------------------------------------------------------------------

    def _run_offset_cleanup(self, key, sweep) -> None:
        """One turn of a cleanup sweep: at most ``offsets_cleanup_max_offsets_per_turn`` offsets
        examined (and at least one group), then the sweep resumes 1 ms later, so a runtime
        serves requests between turns. ``sweep`` is None to start one (the group ids are fixed
        then: a group created during the sweep waits for the next one), else ``(ids, next)``."""
        ids, position = (list(self._groups), 0) if sweep is None else sweep
        now, retention_ms = self._now, self.config.offsets_retention_ms
        budget = self.config.offsets_cleanup_max_offsets_per_turn
        groups = self._groups
        while position < len(ids) and budget > 0:
            group = groups.get(ids[position])
            position += 1
            if group is None:
                continue  # gone since the sweep began
            budget -= len(group.offsets) + 1
            self._cleanup_group(group, self._expired_offsets(group, now, retention_ms))
        if position < len(ids):
            self._arm(key, 1, (ids, position))
        else:
            self._arm(key, self.config.offsets_retention_check_interval_ms)

    @staticmethod
    def _expired_offsets(group: Group, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        if group.protocol_type is not None and group.state is EMPTY:
            # Retention counts from when the group emptied (or, if unknown, from the commit).
            state_ms = group.state_timestamp_ms
            subscribed: frozenset[str] = frozenset()
        elif (
            group.protocol_type == CONSUMER_PROTOCOL_TYPE
            and group.state is STABLE
            and group.subscribed_topics is not None
        ):
            state_ms, subscribed = None, group.subscribed_topics  # KIP-496: unsubscribed topics
        elif group.protocol_type is None:
            state_ms, subscribed = None, frozenset()  # simple group
        else:
            return []
        expired = []
        for tp, value in group.offsets.items():
            if tp[0] in subscribed:
                continue
            expire_ms = value.expire_timestamp_ms
            if expire_ms is not None and expire_ms >= 0:
                if now_ms >= expire_ms:
                    expired.append(tp)
            elif (
                now_ms - (value.commit_timestamp_ms if state_ms is None else state_ms)
                >= retention_ms
            ):
                expired.append(tp)
        return expired

    def _cleanup_group(self, group: Group, removed: list[tuple[str, int]]) -> None:
        """Kafka's ``cleanupGroupMetadata``: tombstone ``removed`` offsets, then drop the group
        if it is (or became) Dead, or is Empty with no offsets left."""
        group_id = group.group_id
        for topic, partition in removed:
            self._emit(Record(OffsetCommitKey(group_id, topic, partition), None))
        if group.state is EMPTY and not group.offsets:
            group.transition_to(DEAD, self._now)
        if group.state is DEAD and self._groups.get(group_id) is group:
            self._drop_group(group_id)
            for member_id in group.pending_members:
                self._timer.cancel(("pending", group_id, member_id))
            self._event("dead", group_id, f"generation {group.generation_id}")
            if group.generation_id > 0:  # simple groups never wrote a group record
                group.persisted = None
                self._records.append(Record(GroupMetadataKey(group_id), None))


def _expire_ms(req, now_ms: int) -> int | None:
    """When a commit's offsets expire by its own retention time (v2-v4), or None (-1: the
    group's retention applies). Held within int64, as records and the lake store it: a
    retention near int64's largest would pass it (Kafka's long addition wraps there instead)."""
    if req.retention_time_ms == -1:
        return None
    return min(now_ms + req.retention_time_ms, INT64_MAX)
