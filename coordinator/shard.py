"""The state machine of one offsets partition: Kafka's classic group coordinator, sans IO.

Theory of operation
-------------------
A ``Shard`` owns the groups whose ids hash to its partition (spec §7.1), their committed offsets
and a timing wheel of their deadlines. It never reads a clock, touches a file or starts a task:
time arrives as ``now_ms`` and every call returns a ``Step``.

    Shard(...) --replay(record)*--> on_loaded(now) --handle/on_timer*--> on_unloaded(now)
      LOADING                          OWNED                                 UNLOADED

* ``handle(now, request_id, request)`` answers one request. A JoinGroup or SyncGroup that must
  wait is *parked* under its request id and answered by a later Step (a completing join phase
  answers every parked JoinGroup at once), so replies in a Step may belong to earlier calls.
* ``Step.records`` are already applied in memory. The runtime must make them durable before it
  releases any reply of the same Step (DESIGN.md principle 3); if that fails the partition is
  reloaded from its log, so the Shard never rolls anything back.
* Offsets change only through ``_apply_offset``, used by ``replay`` while loading and by every
  live offset record (commit, expiry, deletion), so "rebuilt from the log == live" holds by
  construction. Group records are written where Kafka writes them (the leader's SyncGroup, a
  join phase ending Empty, a static member's id replacement in Stable) and are a projection of
  the live group, which ``replay`` turns back into a group while loading.
* Deadlines (session, join phase, pending sync, pending member, offset cleanup) are soft state
  in the wheel, keyed by what they watch: re-arming a key replaces it. Nothing re-arms from the
  log: ``on_loaded`` gives every loaded member ``now + session timeout``. A firing timer re-checks
  the group before acting, because the group may have moved on.
* A timer armed with a delay <= 0 fires before the call that armed it returns, as on Kafka's
  test timer, so a zero initial-rebalance delay completes the join phase in the same Step. With
  ``immediate_timers=False`` it waits for the next ``on_timer`` instead, as in Kafka's running
  coordinator, which queues a due timer's operation behind the requests already in its event
  queue: the actors use this, so that JoinGroups read in the same loop turn join the same
  generation (with the initial delay at 0 and members arriving together, a first generation of
  one member is the difference between a group stable in about a second and one that waits
  out a heartbeat interval).
* Kafka's arbitrary choices (new leader, vote ties) take the first candidate in member order,
  and member ids come from the injected ``ids``: a seed reproduces a whole run.

The protocol itself is in ``shard_members`` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup),
``shard_rebalance`` (the join phase and the delayed operations) and ``shard_offsets`` (offsets,
retention and the admin APIs). KIP-848's consumer groups live beside the classic ones:
``consumer_heartbeat`` (ConsumerGroupHeartbeat), ``consumer_membership`` (the topic catalog,
leaving, fencing, timers), ``consumer_admin`` (ConsumerGroupDescribe, and the classic APIs on a
consumer group's id), ``consumer_classic`` (classic members of consumer groups) and
``consumer_migration`` (upgrade and downgrade); their
records go through ``consumer_group.apply``, live and on load.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import msgspec

from .config import CoordinatorConfig
from .consumer_admin import ConsumerAdminMixin
from .consumer_classic import ConsumerClassicMixin
from .consumer_group import ConsumerGroup, apply
from .consumer_heartbeat import ConsumerHeartbeatMixin
from .consumer_membership import ConsumerMembershipMixin
from .consumer_messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from .consumer_migration import ConsumerMigrationMixin
from .consumer_records import CONSUMER_KEY_TYPES
from .errors import Errors
from .group import DEAD, Group, GroupState
from .messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from .record_size import record_bytes
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from .regex_topics import RegexTopics
from .routing import partition_for
from .shard_members import MembershipMixin
from .shard_offsets import OffsetsMixin
from .shard_rebalance import RebalanceMixin
from .timing_wheel import TimingWheel
from .topic_watchers import TopicWatchers
from .validation import group_id_ok

LOADING, OWNED, UNLOADED = "loading", "owned", "unloaded"


class Event(msgspec.Struct, frozen=True):
    """Something an operator wants to know about (why a rebalance started, a group died)."""

    kind: str
    group_id: str
    detail: str = ""


class Step(msgspec.Struct, frozen=True):
    """The outcome of one call: durable records first, then the replies they guard.

    ``dropped`` names parked requests the coordinator will never answer (Kafka replaces a parked
    JoinGroup or SyncGroup when the same member sends another): the runtime should release their
    callers. ``events`` explain what happened, for logs and metrics.
    """

    records: list[Record] = []
    replies: list[tuple[Any, Any]] = []
    dropped: list[Any] = []
    events: list[Event] = []


def uuid_ids() -> str:
    """Default member-id suffix (Kafka's ``UUID.randomUUID``); tests inject ``SequentialIds``."""
    return str(uuid.uuid4())


class SequentialIds:
    """Deterministic UUID-shaped member-id suffixes, so a seed reproduces a run."""

    def __init__(self, seed: int = 0) -> None:
        self._prefix = f"{seed & 0xFFFFFFFF:08x}"
        self._next = 0

    def __call__(self) -> str:
        self._next += 1
        n = self._next
        return (
            f"{self._prefix}-{(n >> 32) & 0xFFFF:04x}-4{(n >> 20) & 0xFFF:03x}"
            f"-8{(n >> 8) & 0xFFF:03x}-{n & 0xFF:012x}"
        )


class Shard(
    ConsumerAdminMixin,
    ConsumerClassicMixin,
    ConsumerHeartbeatMixin,
    ConsumerMembershipMixin,
    ConsumerMigrationMixin,
    MembershipMixin,
    OffsetsMixin,
    RebalanceMixin,
):
    """One offsets partition's groups, offsets and deadlines. See the module docstring."""

    def __init__(
        self,
        partition: int = 0,
        num_partitions: int = 1,
        config: CoordinatorConfig | None = None,
        ids: Callable[[], str] | None = None,
        *,
        immediate_timers: bool = True,
    ) -> None:
        if type(num_partitions) is not int or num_partitions < 1:
            raise ValueError(f"num_partitions must be an int >= 1, got {num_partitions!r}")
        if type(partition) is not int or not 0 <= partition < num_partitions:
            raise ValueError(f"partition must be in [0, {num_partitions}), got {partition!r}")
        if config is not None and not isinstance(config, CoordinatorConfig):
            raise ValueError("config must be a CoordinatorConfig")
        self.partition = partition
        self.num_partitions = num_partitions
        self.config = config or CoordinatorConfig()
        self._ids = ids or uuid_ids
        self._status = LOADING
        self._groups: dict[str, Group] = {}
        # Groups per state, kept by Group._set_state and by _put_group/_drop_group: the only
        # ways a group enters, leaves or changes state (see group.py).
        self._state_counts: dict[GroupState, int] = dict.fromkeys(GroupState, 0)
        self._consumer_groups: dict[str, ConsumerGroup] = {}  # KIP-848 groups, by id
        self._topics: dict[str, int] | None = None  # the topic catalog (update_topics)
        self._regex_topics = RegexTopics()  # what subscribed regexes match in it (regex_topics)
        self._topic_watchers = TopicWatchers()  # consumer groups by topic (topic_watchers)
        # Groups' own settings, {group id: {setting: value}} (group_config, update_group_configs)
        self._group_configs: dict[str, dict[str, int]] = {}
        self._timer = TimingWheel(0)
        self._immediate_timers = immediate_timers
        self._immediate: dict[Any, Any] = {}  # timers armed with delay <= 0 in this call
        self._parked = 0  # parked JoinGroup + SyncGroup requests
        self._now = 0
        self._records: list[Record] = []
        self._replies: list[tuple[Any, Any]] = []
        self._dropped: list[Any] = []
        self._events: list[Event] = []
        self._handlers = {
            JoinGroupRequest: self._handle_join,
            SyncGroupRequest: self._handle_sync,
            HeartbeatRequest: self._handle_heartbeat,
            LeaveGroupRequest: self._handle_leave,
            OffsetCommitRequest: self._handle_commit,
            OffsetFetchRequest: self._handle_fetch,
            OffsetDeleteRequest: self._handle_offset_delete,
            DescribeGroupsRequest: self._handle_describe,
            ListGroupsRequest: self._handle_list,
            DeleteGroupsRequest: self._handle_delete_groups,
            ConsumerGroupHeartbeatRequest: self._handle_consumer_heartbeat,
            ConsumerGroupDescribeRequest: self._handle_consumer_describe,
        }
        self._timer_actions = {
            "hb": self._expire_heartbeat,
            "pending": self._expire_pending_member,
            "join": self._expire_join,
            "sync": self._expire_sync,
            "cleanup": self._run_offset_cleanup,
            "consumer-session": self._expire_consumer_session,
            "consumer-rebalance": self._expire_consumer_rebalance,
            "consumer-join": self._expire_classic_deadline,
            "consumer-sync": self._expire_classic_deadline,
        }

    # -- the contract ---------------------------------------------------------------------------

    @property
    def loading(self) -> bool:
        return self._status is LOADING

    @property
    def owned(self) -> bool:
        return self._status is OWNED

    @property
    def unloaded(self) -> bool:
        return self._status is UNLOADED

    def replay(self, record: Record) -> None:
        """Apply one record from the log while loading (the same code live commits go through)."""
        if self._status is not LOADING:
            raise ValueError("replay() is only allowed while the shard is loading")
        key, value = record.key, record.value
        if type(key) is OffsetCommitKey:
            self._apply_offset(key, value)
        elif type(key) is GroupMetadataKey:
            self._apply_group(key.group, value)
        elif type(key) in CONSUMER_KEY_TYPES:
            apply(self._consumer_groups, key, value)
            self._topic_watchers.applied(key, value)
        else:
            raise ValueError(f"unknown record key type {type(key).__name__}")

    def restore(
        self,
        group_id: str,
        metadata: GroupMetadataValue | None,
        offsets: dict[tuple[str, int], OffsetCommitValue],
    ) -> None:
        """Load one group's compacted state (a snapshot entry) while loading.

        The result is exactly what replaying the group record ``metadata`` (if any) and then
        one offset record per entry of ``offsets`` would give; it exists because a snapshot of
        a million offsets must load in well under a second. The shard takes ``offsets``
        over: the caller must not reuse the dict.
        """
        if self._status is not LOADING:
            raise ValueError("restore() is only allowed while the shard is loading")
        if metadata is not None:
            self._apply_group(group_id, metadata)
        group = self._groups.get(group_id)
        if group is None:
            if not offsets:
                return
            group = self._put_group(Group(group_id, self._now))
        if group.offsets:
            group.offsets.update(offsets)
        else:
            group.offsets = offsets

    def on_loaded(self, now_ms: int) -> Step:
        if self._status is not LOADING:
            raise ValueError(f"on_loaded() called on a shard that is {self._status}")
        self._begin(now_ms)
        self._status = OWNED
        for group_id in [
            g for g, group in self._groups.items() if group.persisted is None and not group.offsets
        ]:
            self._drop_group(group_id)  # offsets-only groups whose offsets were all deleted
        for group in self._groups.values():
            self._on_group_loaded(group)
        self._on_consumer_groups_loaded()
        self._arm(("cleanup",), 0)  # Kafka runs the first cleanup at start-up
        return self._finish()

    def handle(self, now_ms: int, request_id: Any, request: Any) -> Step:
        handler = self._handlers.get(type(request))
        if handler is None:
            raise ValueError(f"unsupported request type {type(request).__name__}")
        if now_ms > self._now:  # _begin, inlined: this is every request's path
            self._now = now_ms
        handler(request_id, request)
        return self._finish()

    def on_timer(self, now_ms: int) -> Step:
        self._begin(now_ms)
        pop_due, actions = self._timer.pop_due, self._timer_actions
        while (due := pop_due(self._now)) is not None:
            key, _, payload = due
            actions[key[0]](key, payload)
        self._immediate.clear()
        return self._finish()

    def next_deadline_ms(self) -> int | None:
        return self._timer.next_deadline_ms()

    def next_wake_ms(self) -> int | None:
        """When to call ``on_timer`` next: never after ``next_deadline_ms()`` (None when no
        timer is armed), and cheap to ask after every request (``TimingWheel.wake_at_ms``). An
        ``on_timer`` before the deadline fires nothing and moves this answer past its
        ``now_ms``."""
        return self._timer.wake_at_ms()

    def on_unloaded(self, now_ms: int) -> Step:
        """Give the partition up: parked requests get NOT_COORDINATOR, groups become Dead."""
        self._begin(now_ms)
        for group in self._groups.values():
            for member in group.members.values():
                if member.join_request is not None:
                    self._reply(
                        member.join_request,
                        self._join_error(Errors.NOT_COORDINATOR, member.member_id),
                    )
                    member.join_request = None
                if member.sync_request is not None:
                    self._reply(member.sync_request, self._sync_error(Errors.NOT_COORDINATOR))
                    member.sync_request = None
            group.transition_to(DEAD, self._now)
        self._groups.clear()
        self._consumer_groups.clear()
        self._state_counts = dict.fromkeys(GroupState, 0)
        self._timer = TimingWheel(self._now)
        self._immediate.clear()
        self._parked = 0
        self._status = UNLOADED
        return self._finish()

    # -- introspection (tests, CLI) ---------------------------------------------------------------

    def group(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def groups(self) -> list[Group]:
        return list(self._groups.values())

    def group_state_counts(self) -> dict[str, int]:
        """How many groups are in each state (states with none left out), without a scan."""
        return {state.value: count for state, count in self._state_counts.items() if count}

    @property
    def parked_requests(self) -> int:
        return self._parked

    def durable_state(self) -> dict[str, tuple[GroupMetadataValue | None, dict]]:
        """What a reload from this shard's records would restore: per group, the last group
        record and the committed offsets. Groups with neither are not durable."""
        return {
            gid: (g.persisted, dict(g.offsets))
            for gid, g in self._groups.items()
            if g.persisted is not None or g.offsets
        }

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self._consumer_groups.get(group_id)

    def consumer_groups(self) -> list[ConsumerGroup]:
        return list(self._consumer_groups.values())

    def consumer_durable_state(self) -> dict[str, tuple]:
        """Per consumer group, everything its records hold (``ConsumerGroup.durable``): what a
        reload from this shard's records would restore."""
        return {gid: g.durable() for gid, g in self._consumer_groups.items()}

    # -- machinery shared by the protocol mixins --------------------------------------------------

    def _begin(self, now_ms: int) -> None:
        if now_ms > self._now:  # time never runs backwards inside the shard
            self._now = now_ms

    def _finish(self) -> Step:
        immediate = self._immediate
        while immediate:
            key = next(iter(immediate))
            payload = immediate.pop(key)
            deadline = self._timer.deadline_of(key)
            if deadline is not None and deadline <= self._now:
                self._timer.cancel(key)
                self._timer_actions[key[0]](key, payload)
        step = Step(self._records, self._replies, self._dropped, self._events)
        self._records, self._replies, self._dropped, self._events = [], [], [], []
        return step

    def _arm(self, key: tuple, delay_ms: int, payload: Any = None) -> None:
        self._timer.schedule(key, self._now + delay_ms, payload)
        if delay_ms <= 0 and self._immediate_timers:
            self._immediate[key] = payload

    def _reply(self, request_id: Any, response: Any) -> None:
        self._replies.append((request_id, response))

    def _event(self, kind: str, group_id: str, detail: str = "") -> None:
        self._events.append(Event(kind, group_id, detail))

    def _emit(self, record: Record) -> None:
        self._records.append(record)
        if type(record.key) is OffsetCommitKey:
            self._apply_offset(record.key, record.value)

    def _group_record_fits(self, group: Group, value: GroupMetadataValue) -> bool:
        """Whether the group record ``value`` is within ``group_metadata_max_bytes``, measured
        as the log measures it (``record_size.record_bytes``)."""
        record = Record(GroupMetadataKey(group.group_id), value)
        return record_bytes(record) <= self.config.group_metadata_max_bytes

    def _persist_group(self, group: Group, value: GroupMetadataValue) -> None:
        group.persisted = value
        self._records.append(Record(GroupMetadataKey(group.group_id), value))

    def _group_error(self, group_id: str | None, allow_empty: bool = False) -> Errors | None:
        """Kafka's ``validateGroupStatus`` (spec §2.2), in its order."""
        if self._status is OWNED and group_id and group_id in self._groups:
            return None  # cached groups hash here: skip the hash
        if not group_id_ok(group_id, self.config) or (not group_id and not allow_empty):
            return Errors.INVALID_GROUP_ID
        if partition_for(group_id, self.num_partitions) != self.partition:
            return Errors.NOT_COORDINATOR
        if self._status is LOADING:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if self._status is UNLOADED:
            return Errors.NOT_COORDINATOR
        return None

    def _new_group(self, group_id: str) -> Group | None:
        """Create a group, or None when the shard already holds ``max_groups``."""
        if len(self._groups) >= self.config.max_groups:
            return None
        return self._put_group(Group(group_id, self._now))

    def _put_group(self, group: Group) -> Group:
        """Enter ``group`` into the table (replacing one of the same id) and the state counts."""
        self._drop_group(group.group_id)
        self._groups[group.group_id] = group
        group.state_counts = counts = self._state_counts
        counts[group.state] += 1
        return group

    def _drop_group(self, group_id: str) -> None:
        group = self._groups.pop(group_id, None)
        if group is not None:
            self._state_counts[group.state] -= 1
            group.state_counts = None

    def _apply_offset(self, key: OffsetCommitKey, value) -> None:
        group = self._groups.get(key.group)
        if value is None:
            if group is not None:
                group.offsets.pop((key.topic, key.partition), None)
            return
        if group is None:  # offsets-only group, only ever seen while loading
            group = self._put_group(Group(key.group, self._now))
        group.offsets[(key.topic, key.partition)] = value

    def _apply_group(self, group_id: str, value: GroupMetadataValue | None) -> None:
        group = self._groups.get(group_id)
        if value is not None:
            if group is None:
                group = self._put_group(Group(group_id, self._now))
            group.load_metadata(value)
        elif group is not None:
            # A group tombstone leaves the offsets, which reload as an offsets-only group.
            replacement = Group(group_id, self._now)
            replacement.offsets = group.offsets
            self._put_group(replacement)
