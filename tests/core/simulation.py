"""Seeded simulation of consumer clients against one Shard, with invariant checkers.

Clients join (dynamic, static, with and without MEMBER_ID_REQUIRED), sync, heartbeat, commit,
leave, stall, crash and come back, while the clock creeps or jumps (up to hours, to reach the
offset retention). One ``random.Random(seed)`` drives everything, member ids come from
``SequentialIds(seed)``, so a seed replays a run exactly. After every step the checkers assert:

* structure: counters and maps inside each group agree with the members they summarise;
* one assignment per generation: clients the coordinator still counts as members of a
  generation hold disjoint partitions, all from that generation's leader;
* no acknowledged commit is lost: every offset acknowledged with NONE is what the shard holds,
  unless a tombstone removed it since;
* replies: each request is answered at most once, parked requests are counted exactly;
* replay equivalence (every ``replay_every`` steps and at the end): a fresh shard replaying all
  records holds the same durable state.
"""

from __future__ import annotations

import itertools
import random

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
    SequentialIds,
    Shard,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from groupcoord.coordinator.records import OffsetCommitKey

from .harness import assert_replay_equivalent, scanned_state_counts

GROUPS = ("groupId", "group-0", "group-2")  # all on partition 0 of 2
PARTITIONS = 6
PROTOCOL_CHOICES = (
    [("range", b"")],
    [("range", b""), ("roundrobin", b"")],
    [("roundrobin", b""), ("range", b"")],
)


class Client:
    def __init__(self, index: int, rng: random.Random) -> None:
        self.index = index
        self.group_id = rng.choice(GROUPS)
        self.instance_id = f"instance-{index}" if rng.random() < 0.3 else None
        self.session_ms = rng.choice((60, 120, 300))
        self.rebalance_ms = rng.choice((50, 150, 400))
        self.protocols = rng.choice(PROTOCOL_CHOICES)
        self.reset()
        self.stalled_until_ms = 0

    def reset(self) -> None:
        self.member_id = ""
        self.generation = -1
        self.phase = "idle"  # idle | joining | syncing | stable
        self.request = None
        self.leader = ""
        self.members: list[str] = []
        self.assignment: frozenset[int] = frozenset()
        self.next_offset = 0


def encode_assignment(partitions) -> bytes:
    return ",".join(map(str, sorted(partitions))).encode()


def decode_assignment(data: bytes) -> frozenset[int]:
    return frozenset(int(p) for p in data.decode().split(",") if p)


class Simulation:
    def __init__(self, seed: int, clients: int = 6, replay_every: int = 500) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.config = CoordinatorConfig(
            group_min_session_timeout_ms=10,
            group_max_session_timeout_ms=600_000,
            group_max_size=self.rng.choice((3, 5, 100)),
            group_initial_rebalance_delay_ms=self.rng.choice((0, 20, 50)),
            offsets_retention_ms=3_600_000,
            offsets_retention_check_interval_ms=60_000,
        )
        # Odd seeds run the shard as the actors do: a timer due now waits for the next
        # on_timer (the parity leaves the seed's random choices as they were).
        self.shard = Shard(
            0, 2, self.config, ids=SequentialIds(seed), immediate_timers=seed % 2 == 0
        )
        self.clients = [Client(i, self.rng) for i in range(clients)]
        self.now = 0
        self.request_ids = itertools.count(1)
        self.records = []
        self.replies: dict[int, object] = {}
        self.dropped: set[int] = set()
        self.outstanding: set[int] = set()
        self.acked: dict[tuple[str, str, int], int] = {}  # (group, topic, partition) -> offset
        self.commits: dict[int, OffsetCommitRequest] = {}  # in flight, by request id
        self.leader_maps: dict[tuple[str, int], dict[str, bytes]] = {}
        self.replay_every = replay_every
        self.steps = 0
        self.absorb(self.shard.on_loaded(0))

    # -- driving --------------------------------------------------------------------------------

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()
        self.settle()

    def settle(self) -> None:
        """Every client stops; driven deadline by deadline, as the runtime drives it, the
        coordinator must answer every parked request, expire every member and, after the
        retention, forget every group and offset."""
        end_ms = self.now + 3 * self.config.offsets_retention_ms
        for _ in range(100_000):
            deadline = self.shard.next_deadline_ms()
            if deadline is None or deadline > end_ms:
                break
            self.advance(max(deadline - self.now, 0))
            self.check()
        self.check_replay()
        assert self.shard.parked_requests == 0, self.context("parked requests never answered")
        assert not self.outstanding, self.context(f"never answered: {sorted(self.outstanding)}")
        assert self.shard.groups() == [] and not self.acked, self.context("groups outlived all")

    def step(self) -> None:
        self.steps += 1
        roll = self.rng.random()
        if roll < 0.25:
            self.advance(self.rng.choice((1, 5, 10, 25, 50)))
        elif roll < 0.27:
            self.advance(self.rng.choice((200, 1_000, 60_000, 3_700_000)))
        else:
            self.act(self.rng.choice(self.clients))
        self.check()
        if self.steps % self.replay_every == 0:
            self.check_replay()

    def advance(self, ms: int) -> None:
        self.now += ms
        self.absorb(self.shard.on_timer(self.now))

    def send(self, request) -> int:
        request_id = next(self.request_ids)
        self.outstanding.add(request_id)
        if isinstance(request, OffsetCommitRequest):
            self.commits[request_id] = request
        self.absorb(self.shard.handle(self.now, request_id, request))
        return request_id

    def absorb(self, step) -> None:
        for record in step.records:
            self.records.append(record)
            if isinstance(record.key, OffsetCommitKey) and record.value is None:
                self.acked.pop((record.key.group, record.key.topic, record.key.partition), None)
        for request_id, response in step.replies:
            assert request_id in self.outstanding, self.context(f"reply twice to {request_id}")
            self.outstanding.discard(request_id)
            assert isinstance(response.error if hasattr(response, "error") else Errors.NONE, Errors)
            self.replies[request_id] = response
            commit = self.commits.pop(request_id, None)
            if commit is not None:  # acknowledged now, whenever the client looks
                self.on_commit_acked(commit, response)
        for request_id in step.dropped:
            self.outstanding.discard(request_id)
            self.dropped.add(request_id)

    # -- one client's move ----------------------------------------------------------------------

    def act(self, c: Client) -> None:
        if self.now < c.stalled_until_ms:
            return
        if c.request is not None:
            if c.request in self.dropped:
                c.request = None
                c.phase = "idle"
            elif c.request in self.replies:
                self.on_response(c, self.replies.pop(c.request))
            return
        roll = self.rng.random()
        if roll < 0.02:
            c.stalled_until_ms = self.now + self.rng.choice((50, 200, 1_000))
        elif roll < 0.04:
            c.reset()  # crash: a new incarnation
        elif roll < 0.06 and c.member_id:
            self.send(LeaveGroupRequest(c.group_id, [MemberIdentity(c.member_id, c.instance_id)]))
            c.reset()
        elif c.phase == "idle":
            c.phase = "joining"
            c.request = self.send(
                JoinGroupRequest(
                    c.group_id,
                    c.member_id,
                    "consumer",
                    [JoinGroupRequestProtocol(n, m) for n, m in c.protocols],
                    c.session_ms,
                    c.rebalance_ms,
                    group_instance_id=c.instance_id,
                    client_id=f"c{c.index}",
                    require_known_member_id=c.instance_id is None and self.rng.random() < 0.7,
                )
            )
        elif c.phase == "stable" and roll < 0.5:
            c.request = self.send(
                HeartbeatRequest(c.group_id, c.generation, c.member_id, c.instance_id)
            )
        elif c.phase == "stable":
            c.next_offset += self.rng.randint(1, 5)
            c.request = self.send(
                OffsetCommitRequest(
                    c.group_id,
                    c.generation,
                    c.member_id,
                    [
                        OffsetCommitRequestPartition("t", p, c.next_offset)
                        for p in sorted(c.assignment)
                    ],
                    c.instance_id,
                )
            )

    def on_response(self, c: Client, response) -> None:
        c.request = None
        error = getattr(response, "error", Errors.NONE)
        kind = type(response).__name__
        if kind == "OffsetCommitResponse":
            error = response.partitions[0].error if response.partitions else Errors.NONE
        if error == Errors.MEMBER_ID_REQUIRED:
            c.member_id, c.phase = response.member_id, "idle"
        elif error in (
            Errors.UNKNOWN_MEMBER_ID,
            Errors.FENCED_INSTANCE_ID,
            Errors.ILLEGAL_GENERATION,
        ):
            c.reset()
        elif error != Errors.NONE:  # rebalance, limits: rejoin
            c.phase = "idle"
        elif kind == "JoinGroupResponse":
            c.member_id, c.generation, c.leader = (
                response.member_id,
                response.generation_id,
                response.leader,
            )
            c.members = [m.member_id for m in response.members]
            c.phase = "syncing"
            assignments = None
            if c.member_id == c.leader and not response.skip_assignment:
                assignments = {
                    m: encode_assignment(range(i, PARTITIONS, len(c.members)))
                    for i, m in enumerate(c.members)
                }
                self.leader_maps.setdefault((c.group_id, c.generation), assignments)
            c.request = self.send(
                SyncGroupRequest(
                    c.group_id,
                    c.generation,
                    c.member_id,
                    [SyncGroupRequestAssignment(m, a) for m, a in (assignments or {}).items()],
                    c.instance_id,
                )
            )
        elif kind == "SyncGroupResponse":
            c.assignment = decode_assignment(response.assignment)
            c.phase = "stable"

    # -- invariants -----------------------------------------------------------------------------

    def context(self, message: str) -> str:
        return f"seed={self.seed} step={self.steps} now={self.now}: {message}"

    def on_commit_acked(self, commit: OffsetCommitRequest, response) -> None:
        group = self.shard.group(commit.group_id)
        for sent, result in zip(commit.offsets, response.partitions, strict=True):
            if result.error != Errors.NONE:
                continue
            assert group is not None and (
                commit.generation_id < 0
                or (
                    commit.member_id in group.members
                    and commit.generation_id == group.generation_id
                )
            ), self.context("a commit from outside the current generation was accepted")
            self.acked[(commit.group_id, sent.topic, sent.partition)] = sent.committed_offset

    def check(self) -> None:
        shard, parked = self.shard, 0
        for group in shard.groups():
            members = group.members
            awaiting = [m for m in members.values() if m.join_request is not None]
            syncing = [m for m in members.values() if m.sync_request is not None]
            parked += len(awaiting) + len(syncing)
            assert group.num_awaiting_join == len(awaiting), self.context("awaiting count")
            assert not (set(group.pending_members) & set(members)), self.context("pending")
            assert (
                (group.leader_id in members)
                if members
                else group.leader_id in (None,) or group.state == GroupState.EMPTY
            ), self.context("leader not a member")
            for instance_id, member_id in group.static_members.items():
                assert members[member_id].group_instance_id == instance_id, self.context("static")
            # Kafka bounds the members *awaiting join* (unjoined static members may be kept
            # beyond group.max.size, as in Kafka).
            assert group.num_awaiting_join <= self.config.group_max_size, self.context("max size")
            if group.state == GroupState.EMPTY:
                assert not members, self.context("Empty group with members")
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                assert group.protocol_name is not None and not awaiting
            if group.state != GroupState.COMPLETING_REBALANCE:
                assert not syncing, self.context("parked sync outside CompletingRebalance")
            self.check_assignments(group)
        assert parked == shard.parked_requests, self.context("parked request count")
        assert shard.group_state_counts() == scanned_state_counts(shard), self.context(
            "groups-by-state counts differ from a scan"
        )
        for (group_id, topic, partition), offset in self.acked.items():
            group = shard.group(group_id)
            held = group.offsets.get((topic, partition)) if group is not None else None
            assert held is not None and held.offset == offset, self.context(
                f"acknowledged commit lost: {group_id} {topic}-{partition}"
            )

    def check_assignments(self, group) -> None:
        owners: dict[int, str] = {}
        leader_map = self.leader_maps.get((group.group_id, group.generation_id))
        for c in self.clients:
            if (
                c.group_id != group.group_id
                or c.phase != "stable"
                or c.member_id not in group.members
                or c.generation != group.generation_id
            ):
                continue
            for p in c.assignment:
                assert p not in owners, self.context(f"partition {p} owned twice")
                owners[p] = c.member_id
            if leader_map is not None and c.member_id in leader_map:
                assert c.assignment == decode_assignment(leader_map[c.member_id]), self.context(
                    "assignment not from this generation's leader"
                )

    def check_replay(self) -> None:
        assert_replay_equivalent(self.shard, self.records)
