"""One consumer group's in-memory state: members, the five-state machine, protocol vote, offsets.

Theory of operation
-------------------
A ``Group`` is Kafka's ``GroupMetadata``: plain data plus the small rules that keep it consistent
(spec §3, §5). It decides nothing about time and answers no request; the Shard does both and
calls these methods. The pieces that matter:

* ``state`` moves only along ``VALID_PREVIOUS_STATES`` (spec §3); anything else is a bug in the
  Shard, raised as ``IllegalStateTransition`` rather than silently tolerated.
* ``members`` keeps insertion order, which is how every "arbitrary" choice of Kafka's (a new
  leader, a vote tie) is made deterministic here: the first candidate in that order wins.
* A member is *awaiting join* while its JoinGroup is parked (``join_request`` holds the request
  id) and *awaiting sync* while its SyncGroup is parked; ``num_awaiting_join`` is kept in step so
  "has everyone joined" is O(1).
* ``supported_protocols`` counts, per protocol name, how many members offer it; a protocol is a
  candidate when its count equals the member count (spec §5).
* ``offsets`` holds the committed offsets, changed only by ``Shard`` replaying records.
* ``persisted`` is the last group record written or loaded: what a reload would restore.
* ``state_counts`` is the Shard's count of its groups per state (shared by all of them): every
  change of ``state`` goes through ``_set_state``, which keeps it exact, so the groups-by-state
  gauge reads five numbers instead of scanning every group.
"""

from __future__ import annotations

from enum import StrEnum

from .consumer_protocol import subscribed_topics
from .messages import JoinGroupResponseMember
from .records import GroupMetadataValue, MemberMetadataValue, OffsetCommitValue

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

# target state -> the states it may be entered from (spec §3)
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    PREPARING_REBALANCE: frozenset({STABLE, COMPLETING_REBALANCE, EMPTY}),
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),
    STABLE: frozenset({COMPLETING_REBALANCE}),
    EMPTY: frozenset({PREPARING_REBALANCE}),
    DEAD: frozenset(GroupState),
}

# "can rebalance": maybePrepareRebalance is a no-op in any other state
REBALANCEABLE_STATES = frozenset({STABLE, COMPLETING_REBALANCE, EMPTY})


class IllegalStateTransition(RuntimeError):
    """A transition outside VALID_PREVIOUS_STATES: a coordinator bug, never a client error."""


Protocols = tuple[tuple[str, bytes], ...]


class Member:
    __slots__ = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "protocol_type",
        "protocols",
        "assignment",
        "join_request",
        "sync_request",
        "is_new",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.join_request = None  # request id of the parked JoinGroup, if any
        self.sync_request = None  # request id of the parked SyncGroup, if any
        # Added by JoinGroup and not yet through a completed join phase: such a member is
        # expired by the new-member join timeout even while it waits (spec §4.5).
        self.is_new = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_request is not None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise KeyError(f"member {self.member_id} supports none of {sorted(candidates)}")


class Group:
    __slots__ = (
        "group_id",
        "state",
        "state_timestamp_ms",
        "generation_id",
        "protocol_type",
        "protocol_name",
        "leader_id",
        "members",
        "static_members",
        "pending_members",
        "num_awaiting_join",
        "pending_sync",
        "supported_protocols",
        "new_member_added",
        "subscribed_topics",
        "offsets",
        "persisted",
        "join_op",
        "state_counts",
    )

    def __init__(self, group_id: str, now_ms: int, state: GroupState = EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp_ms: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: dict[str, None] = {}  # ordered set of MEMBER_ID_REQUIRED ids
        self.num_awaiting_join = 0
        self.pending_sync: dict[str, None] = {}  # ordered set: not yet synced this gen
        self.supported_protocols: dict[str, int] = {}
        self.new_member_added = False
        self.subscribed_topics: frozenset[str] | None = None
        self.offsets: dict[tuple[str, int], OffsetCommitValue] = {}
        self.persisted: GroupMetadataValue | None = None
        # The armed join phase: None, or the Shard's marker of a regular or initial join.
        self.join_op = None
        # The Shard's groups-per-state counts while this group is in its table, else None.
        self.state_counts: dict[GroupState, int] | None = None

    # -- state ----------------------------------------------------------------------------------

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise IllegalStateTransition(
                f"group {self.group_id!r}: {self.state} -> {target} is not a valid transition"
            )
        self._set_state(target)
        self.state_timestamp_ms = now_ms

    def _set_state(self, state: GroupState) -> None:
        counts = self.state_counts
        if counts is not None:
            counts[self.state] -= 1
            counts[state] += 1
        self.state = state

    @property
    def can_rebalance(self) -> bool:
        return self.state in REBALANCEABLE_STATES

    @property
    def is_empty_of_members(self) -> bool:
        return not self.members

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- membership -------------------------------------------------------------------------------

    def add(self, member: Member, join_request=None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member.protocols, +1)
        member.join_request = join_request
        if join_request is not None:
            self.num_awaiting_join += 1
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        """Kafka's ``GroupMetadata.remove``: parked requests are the caller's to answer first."""
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member.protocols, -1)
            if member.join_request is not None:
                self.num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.pop(member_id, None)
        return member

    def update_member(
        self,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_request,
    ) -> None:
        self._count_protocols(member.protocols, -1)
        self._count_protocols(protocols, +1)
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        self.set_join_request(member, join_request)

    def set_join_request(self, member: Member, join_request) -> None:
        if member.join_request is None and join_request is not None:
            self.num_awaiting_join += 1
        elif member.join_request is not None and join_request is None:
            self.num_awaiting_join -= 1
        member.join_request = join_request

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give the instance's member a new id; its parked requests are the caller's to fence."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return member

    def _count_protocols(self, protocols: Protocols, delta: int) -> None:
        counts = self.supported_protocols
        for name in {name for name, _ in protocols}:
            count = counts.get(name, 0) + delta
            if count:
                counts[name] = count
            else:
                del counts[name]

    # -- protocol (spec §5) -----------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if self.state is EMPTY:
            return bool(protocol_type) and bool(names)
        size = len(self.members)
        counts = self.supported_protocols
        return self.protocol_type == protocol_type and any(counts.get(n, 0) == size for n in names)

    def candidate_protocols(self) -> set[str]:
        size = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == size}

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        # max() keeps the first of equal counts: ties go to the earliest-voted protocol.
        return max(votes, key=votes.__getitem__)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(EMPTY, now_ms)
        self.pending_sync.clear()

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = subscribed_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def current_member_metadata(self) -> list[JoinGroupResponseMember]:
        protocol = self.protocol_name
        return [
            JoinGroupResponseMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self.members.values()
        ]

    # -- records ----------------------------------------------------------------------------------

    def metadata_value(self, assignments: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The group record Kafka would write now (spec §7.2), with ``assignments`` if given."""
        protocol = self.protocol_name
        members = tuple(
            MemberMetadataValue(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(protocol) if protocol is not None else b"",
                assignments.get(m.member_id, b"") if assignments is not None else m.assignment,
            )
            for m in self.members.values()
        )
        ts = self.state_timestamp_ms
        return GroupMetadataValue(
            self.protocol_type or "",
            self.generation_id,
            protocol,
            self.leader_id,
            -1 if ts is None else ts,
            members,
        )

    def load_metadata(self, value: GroupMetadataValue) -> None:
        """Become the group a record describes (spec §7.2 "Reading"), keeping the offsets."""
        self._set_state(STABLE if value.members else EMPTY)
        ts = value.current_state_timestamp_ms
        self.state_timestamp_ms = None if ts < 0 else ts
        self.generation_id = value.generation
        self.protocol_type = value.protocol_type or None
        self.protocol_name = value.protocol
        self.leader_id = value.leader
        self.members = {}
        self.static_members = {}
        self.supported_protocols = {}
        for mv in value.members:
            protocols = ((value.protocol or "", mv.subscription),)
            member = Member(
                mv.member_id,
                mv.group_instance_id,
                mv.client_id,
                mv.client_host,
                mv.rebalance_timeout_ms,
                mv.session_timeout_ms,
                value.protocol_type,
                protocols,
            )
            member.assignment = mv.assignment
            self.members[mv.member_id] = member
            self._count_protocols(protocols, +1)
            if mv.group_instance_id is not None:
                self.static_members[mv.group_instance_id] = mv.member_id
        self.subscribed_topics = self.compute_subscribed_topics()
        self.persisted = value
