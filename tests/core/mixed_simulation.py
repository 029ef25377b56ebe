"""The seeded consumer-group simulation with classic consumers taking part (online migration).

``MixedSimulation`` is ``ConsumerSimulation`` plus consumers that speak the classic protocol
(JoinGroup with ConsumerProtocol metadata, SyncGroup, Heartbeat, LeaveGroup) on the same group
ids. So groups change type under the shard's ``bidirectional`` policy: a classic group with
members is upgraded when a consumer-protocol consumer joins it, a consumer group whose last
consumer-protocol member goes is downgraded, and classic members live inside consumer groups in
between. Some classic consumers are static (instance ids): when they forget their member id they
join without it and take their predecessor's place. Classic consumers are eager (they drop
every partition before they join again) and, when one leads a classic group, assign by range.
The base class's checks run after every step: no partition of a consumer group has two owners,
and every consumer consumes only what the coordinator has it hold (a classic one: once it is in
its member's current generation, ``ClassicConsumer.bound_by``); replay equivalence every 50
steps.
"""

from __future__ import annotations

from groupcoord.coordinator import (
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from groupcoord.coordinator.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

from .consumer_simulation import GROUPS, SUBSCRIPTIONS, ConsumerSimulation

SESSION_MS = 6_000  # Kafka's group.min.session.timeout.ms
# Answers after which a classic consumer forgets its member id and joins from scratch.
FORGET = (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_INSTANCE_ID)


class ClassicConsumer:
    def __init__(self, index: int, rng) -> None:
        self.index = index
        self.group_id = rng.choice(GROUPS)
        self.topics = tuple(rng.choice(SUBSCRIPTIONS))
        self.rebalance_ms = rng.choice((1_000, 4_000))
        self.instance_id = f"classic-{index}" if rng.random() < 0.3 else None
        self.member_id = ""
        self.generation = -1
        self.owned: dict[str, frozenset[int]] = {}
        self.joined = False  # synced: it consumes ``owned``
        self.pending = None  # (kind, request id) of a parked JoinGroup or SyncGroup
        self.stalled_until_ms = 0

    def rejoin(self, forget: bool = False) -> None:
        self.owned, self.joined = {}, False  # eager: nothing is consumed while rejoining
        if forget:
            self.member_id, self.generation = "", -1

    def bound_by(self, member) -> bool:
        """Only in the member's current generation. The classic protocol keeps a static member
        that did not rejoin within the rebalance timeout and has the leader assign it (Kafka's
        ``completeClassicGroupJoin``; the spec's 4.2), so a static consumer slower than that
        timeout (its SyncGroup answer read late, or silent across a rebalance) consumes its old
        generation's partitions while the next one hands them out, until a heartbeat tells it
        (its commits are fenced meanwhile: ILLEGAL_GENERATION). An upgrade carries that
        generation into the consumer group as it stands."""
        return self.generation == member.member_epoch


class MixedSimulation(ConsumerSimulation):
    def __init__(self, seed: int, consumers: int = 6, classics: int = 4, **kwargs) -> None:
        super().__init__(seed, consumers=consumers, **kwargs)
        self.consumers.extend(ClassicConsumer(consumers + i, self.rng) for i in range(classics))
        self.classic_answers: dict[str, int] = {}
        self.migrations: dict[str, int] = {"upgraded": 0, "downgraded": 0}
        self.synced_in_consumer_groups = 0  # SyncGroups a consumer group answered

    def absorb(self, step) -> None:
        super().absorb(step)
        for event in step.events:
            if event.kind in self.migrations:
                self.migrations[event.kind] += 1

    def lose_parked(self) -> None:
        for c in self.consumers:
            if isinstance(c, ClassicConsumer) and c.pending is not None:
                c.pending = None
                c.rejoin()  # its JoinGroup or SyncGroup timed out: it joins again

    def send(self, request) -> int:
        request_id = next(self._ids)
        self.absorb(self.shard.handle(self.now, request_id, request))
        return request_id

    def act(self, c) -> None:
        if not isinstance(c, ClassicConsumer):
            return super().act(c)
        if self.now < c.stalled_until_ms:
            return
        if c.pending is not None:
            kind, request_id = c.pending
            if request_id in self.replies:
                c.pending = None
                response = self.replies.pop(request_id)
                self._count(kind, response.error)
                (self.on_join if kind == "join" else self.on_sync)(c, response)
            return
        roll = self.rng.random()
        if roll < 0.02:
            c.stalled_until_ms = self.now + SESSION_MS + 1_000
        elif not c.joined:
            self.classic_join(c)
        elif roll < 0.05:
            response = self.call(
                LeaveGroupRequest(c.group_id, [MemberIdentity(c.member_id, c.instance_id)])
            )
            self._count("leave", response.error)
            c.rejoin(forget=True)
        else:
            response = self.call(
                HeartbeatRequest(c.group_id, c.generation, c.member_id, c.instance_id)
            )
            self._count("heartbeat", response.error)
            if response.error in FORGET:
                c.rejoin(forget=True)
            elif response.error != Errors.NONE:
                c.rejoin()  # REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION: join again

    def _count(self, kind: str, error: Errors) -> None:
        name = f"{kind} {Errors(error).name}"
        self.classic_answers[name] = self.classic_answers.get(name, 0) + 1

    def classic_join(self, c: ClassicConsumer) -> None:
        metadata = encode_subscription(Subscription(c.topics))
        request_id = self.send(
            JoinGroupRequest(
                c.group_id,
                c.member_id,
                "consumer",
                [JoinGroupRequestProtocol("range", metadata)],
                SESSION_MS,
                c.rebalance_ms,
                group_instance_id=c.instance_id,
                client_id="classic",
                require_known_member_id=False,
            )
        )
        c.pending = ("join", request_id)

    def on_join(self, c: ClassicConsumer, response) -> None:
        if response.error in FORGET:
            return c.rejoin(forget=True)
        if response.error != Errors.NONE:
            return  # REBALANCE_IN_PROGRESS (an upgrade), GROUP_MAX_SIZE_REACHED...: later
        c.member_id, c.generation = response.member_id, response.generation_id
        assignments = []
        if response.leader == c.member_id and response.members:
            assignments = self.range_assignment(response.members)
        request_id = self.send(
            SyncGroupRequest(
                c.group_id, c.generation, c.member_id, assignments, group_instance_id=c.instance_id
            )
        )
        c.pending = ("sync", request_id)

    def on_sync(self, c: ClassicConsumer, response) -> None:
        if response.error in FORGET:
            return c.rejoin(forget=True)
        if response.error != Errors.NONE:
            return c.rejoin()
        owned: dict[str, frozenset[int]] = {}
        if response.assignment:
            for topic, p in decode_assignment(response.assignment).partitions:
                owned[topic] = owned.get(topic, frozenset()) | {p}
        c.owned, c.joined = owned, True
        if self.shard.consumer_group(c.group_id) is not None:
            self.synced_in_consumer_groups += 1

    def range_assignment(self, members) -> list[SyncGroupRequestAssignment]:
        """The classic leader's range assignment over the members' subscriptions."""
        subscribers: dict[str, list[str]] = {}
        for m in members:
            for topic in decode_subscription(m.metadata).topics:
                subscribers.setdefault(topic, []).append(m.member_id)
        parts: dict[str, list[tuple[str, int]]] = {m.member_id: [] for m in members}
        for topic, ids in sorted(subscribers.items()):
            count = self.catalog.get(topic, 0)
            for index, member_id in enumerate(sorted(ids)):
                parts[member_id].extend((topic, p) for p in range(count) if p % len(ids) == index)
        return [
            SyncGroupRequestAssignment(m, encode_assignment(Assignment(tuple(p))))
            for m, p in parts.items()
        ]
