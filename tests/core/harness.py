"""A small driver for Kafka-style scenario tests against one Shard.

It plays the part of the runtime: it numbers requests, keeps every reply (including the late
ones a completing join phase releases), moves virtual time and fires timers, and after every
Step checks the standing invariant of DESIGN.md principle 2: a fresh shard that replays all
records written so far holds the same durable state as the live one; and that no record is
larger than ``largest_record_bytes`` (what bootstrap sizes the log for).

Defaults mirror Kafka's ``GroupCoordinatorTest``: min session 10 ms, max 600000 ms, group max
size 4, initial rebalance delay 50 ms, members with session and rebalance timeouts of 500 ms,
two offsets partitions with "groupId" on partition 0 (ours) and "otherGroup" on partition 1.
"""

from __future__ import annotations

import itertools

from msgspec.structs import replace

from groupcoord.coordinator import (
    CoordinatorConfig,
    Errors,
    GroupState,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetFetchRequest,
    SequentialIds,
    Shard,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    TopicPartition,
)
from groupcoord.coordinator.record_size import largest_record_bytes, record_bytes

GROUP = "groupId"
OTHER_GROUP = "otherGroup"
GROUP2, GROUP3 = "group-0", "group-2"  # also on partition 0 of 2
PROTOCOL_TYPE = "consumer"
PROTOCOLS = [("range", b"")]
PROTOCOL_SUPERSET = [("range", b""), ("roundrobin", b"")]
SESSION_MS = 500
REBALANCE_MS = 500

TEST_CONFIG = dict(
    group_min_session_timeout_ms=10,
    group_max_session_timeout_ms=600_000,
    group_max_size=4,
    group_initial_rebalance_delay_ms=50,
)


def protocols_of(pairs):
    return [JoinGroupRequestProtocol(name, metadata) for name, metadata in pairs]


class Harness:
    def __init__(
        self, check_replay: bool = True, seed: int = 0, immediate_timers: bool = True, **config
    ) -> None:
        self.config = CoordinatorConfig(**{**TEST_CONFIG, **config})
        self.shard = Shard(
            partition=0,
            num_partitions=2,
            config=self.config,
            ids=SequentialIds(seed),
            immediate_timers=immediate_timers,
        )
        self.now = 0
        self.records = []  # every record of every step, in order
        self.replies = {}  # request id -> response
        self.dropped = set()
        self.events = []
        self.check_replay = check_replay
        self.largest_record_bytes = largest_record_bytes(self.config)
        self._ids = itertools.count(1)
        self._absorb(self.shard.on_loaded(self.now))

    # -- driving --------------------------------------------------------------------------------

    def send(self, request) -> int:
        request_id = next(self._ids)
        self._absorb(self.shard.handle(self.now, request_id, request))
        return request_id

    def call(self, request):
        """Send and return the immediate reply (fails if the request was parked)."""
        request_id = self.send(request)
        assert request_id in self.replies, f"request {request!r} was parked"
        return self.replies[request_id]

    def advance(self, ms: int) -> None:
        self.now += ms
        self._absorb(self.shard.on_timer(self.now))

    def advance_until_answered(self, request_ids, step_ms=None, limit_ms=600_000) -> None:
        """Advance in initial-delay windows, as a client would wait, until all are answered."""
        step_ms = step_ms or max(self.config.group_initial_rebalance_delay_ms, 1)
        waited = 0
        while any(r not in self.replies for r in request_ids):
            assert waited < limit_ms, "requests never answered"
            self.advance(step_ms)
            waited += step_ms

    def reply(self, request_id):
        return self.replies.get(request_id)

    def _absorb(self, step) -> None:
        self.records.extend(step.records)
        for record in step.records:  # what bootstrap sizes the log for (issue #9 item 3)
            assert record_bytes(record) <= self.largest_record_bytes, record.key
        for request_id, response in step.replies:
            assert request_id not in self.replies, f"request {request_id} answered twice"
            self.replies[request_id] = response
        self.dropped.update(step.dropped)
        self.events.extend(step.events)
        if self.check_replay:
            assert_replay_equivalent(self.shard, self.records)

    # -- request builders (Kafka test names) ----------------------------------------------------

    def join(
        self,
        member_id="",
        group_id=GROUP,
        protocols=PROTOCOLS,
        session_ms=SESSION_MS,
        rebalance_ms=REBALANCE_MS,
        instance_id=None,
        require_known=False,
        protocol_type=PROTOCOL_TYPE,
        client_id="client",
    ) -> int:
        return self.send(
            JoinGroupRequest(
                group_id,
                member_id,
                protocol_type,
                protocols_of(protocols),
                session_ms,
                rebalance_ms,
                group_instance_id=instance_id,
                client_id=client_id,
                client_host="/127.0.0.1",
                require_known_member_id=require_known,
            )
        )

    def sync(
        self, member_id, generation, assignments=None, group_id=GROUP, instance_id=None
    ) -> int:
        items = [SyncGroupRequestAssignment(m, a) for m, a in (assignments or {}).items()]
        return self.send(
            SyncGroupRequest(group_id, generation, member_id, items, group_instance_id=instance_id)
        )

    def heartbeat(self, member_id, generation, group_id=GROUP, instance_id=None) -> Errors:
        return self.call(HeartbeatRequest(group_id, generation, member_id, instance_id)).error

    def leave(self, *identities, group_id=GROUP):
        members = [
            MemberIdentity(*i) if isinstance(i, tuple) else MemberIdentity(i) for i in identities
        ]
        return self.call(LeaveGroupRequest(group_id, members))

    def commit(
        self,
        offsets,
        member_id="",
        generation=-1,
        group_id=GROUP,
        instance_id=None,
        retention_ms=-1,
    ):
        parts = [
            OffsetCommitRequestPartition(t, p, o)
            if not isinstance(o, tuple)
            else OffsetCommitRequestPartition(t, p, *o)
            for (t, p), o in offsets.items()
        ]
        response = self.call(
            OffsetCommitRequest(group_id, generation, member_id, parts, instance_id, retention_ms)
        )
        return {(p.topic, p.partition): p.error for p in response.partitions}

    def fetch(self, partitions=None, group_id=GROUP):
        tps = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
        return self.call(OffsetFetchRequest(group_id, tps))

    def committed(self, group_id=GROUP):
        return {
            (p.topic, p.partition): p.committed_offset
            for p in self.fetch(group_id=group_id).partitions
        }

    # -- composite steps --------------------------------------------------------------------------

    def join_stable(
        self, n=1, group_id=GROUP, protocols=PROTOCOLS, instance_ids=None, session_ms=SESSION_MS
    ):
        """Bring n dynamic (or static) members into a Stable generation; returns (ids, gen)."""
        rids = [
            self.join(
                group_id=group_id,
                protocols=protocols,
                session_ms=session_ms,
                instance_id=None if instance_ids is None else instance_ids[i],
            )
            for i in range(n)
        ]
        self.advance_until_answered(rids)
        responses = [self.replies[r] for r in rids]
        assert all(r.error == Errors.NONE for r in responses), responses
        generation = responses[0].generation_id
        leader = responses[0].leader
        ids = [r.member_id for r in responses]
        sync_ids = [
            self.sync(
                m,
                generation,
                {i: i.encode() for i in ids} if m == leader else None,
                group_id=group_id,
                instance_id=None if instance_ids is None else instance_ids[k],
            )
            for k, m in enumerate(ids)
        ]
        assert all(self.replies[r].error == Errors.NONE for r in sync_ids)
        assert self.state(group_id) == GroupState.STABLE
        return ids, generation

    def state(self, group_id=GROUP):
        group = self.shard.group(group_id)
        return None if group is None else group.state


def replayed_shard(shard: Shard, records) -> Shard:
    fresh = Shard(
        partition=shard.partition, num_partitions=shard.num_partitions, config=shard.config
    )
    for record in records:
        fresh.replay(record)
    return fresh


def scanned_state_counts(shard: Shard) -> dict[str, int]:
    """Groups per state by a full scan: what ``group_state_counts`` must equal."""
    counts: dict[str, int] = {}
    for group in shard.groups():
        counts[group.state.value] = counts.get(group.state.value, 0) + 1
    return counts


def assert_replay_equivalent(shard: Shard, records) -> None:
    fresh = replayed_shard(shard, records)
    assert fresh.durable_state() == shard.durable_state()
    assert fresh.consumer_durable_state() == shard.consumer_durable_state()
    assert fresh.group_state_counts() == scanned_state_counts(fresh)
    assert shard.group_state_counts() == scanned_state_counts(shard)
    for group in fresh.groups():
        if group.persisted is not None:  # a loaded group reproduces its record exactly
            assert group.metadata_value() == group.persisted
    for group in shard.groups():
        at_rest = group.state == GroupState.STABLE or (
            group.state == GroupState.EMPTY and group.generation_id > 0
        )
        if at_rest:
            # Nothing durable about a group at rest may differ from its last record.
            live = group.metadata_value()
            assert group.persisted is not None, group.group_id
            assert replace(live, current_state_timestamp_ms=0) == replace(
                group.persisted, current_state_timestamp_ms=0
            ), group.group_id
