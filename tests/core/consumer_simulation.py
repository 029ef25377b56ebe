"""Seeded simulation of KIP-848 consumers against one Shard, with invariant checkers.

Consumers (dynamic and static, subscribing by names or by regex, with either assignor) join,
heartbeat (now and then losing the response), take their time to revoke, commit, leave (-1, or
-2 for static ones), stall past their session or rebalance timeout, and come back; the topic
catalog grows, shrinks and loses topics (handed to the shard as its changes, and checked
against a twin handed the whole catalog); a group's own settings (session timeout, heartbeat and
assignment intervals: ``group_config``) are set, changed and dropped; the clock creeps or jumps;
the shard restarts (a fresh one replays every record, handed the groups' settings first as the
runtime does) and the runtime hands it the catalog only a few steps later, so timers fire and
requests arrive before it has one. One ``random.Random(seed)``
drives everything and member ids come from the seed, so a seed replays a run exactly. After
every step:

* single ownership (the protocol's safety): no partition is held, assigned or pending
  revocation, by two members of a group, and the group's owner index agrees;
* the clients' view: what a consumer that is still a member believes it consumes is a subset of
  what the coordinator has it hold, so no two live consumers consume one partition;
* every request gets exactly one reply (or, parked when the shard restarts, none), and a refused
  request writes no record;
* replay equivalence (every ``check_replay_every`` steps and at the end): a fresh shard replaying
  every record holds the same consumer groups and offsets.
"""

from __future__ import annotations

import itertools
import random

from groupcoord.coordinator import (
    CoordinatorConfig,
    Errors,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    SequentialIds,
    Shard,
)
from groupcoord.coordinator.consumer_messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatTopicPartitions,
)
from groupcoord.coordinator.group_config import (
    ASSIGNMENT_INTERVAL,
    HEARTBEAT_INTERVAL,
    SESSION_TIMEOUT,
)

from .consumer_harness import assert_single_owners
from .harness import replayed_shard

GROUPS = ("groupId", "group-0")
TOPICS = ("alpha", "beta", "gamma", "delta")
SUBSCRIPTIONS = (("alpha",), ("alpha", "beta"), ("beta", "gamma", "delta"), TOPICS)
REGEXES = ("(alpha|beta)", "g.*", ".*a")
# Answers after which a consumer abandons its partitions and joins again (GROUP_ID_NOT_FOUND: its
# group emptied by expiries and was cleaned up meanwhile).
REJOIN = (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID, Errors.GROUP_ID_NOT_FOUND)
# A group's own settings the runs choose from: shorter and longer than the deployment's.
GROUP_SETTINGS = {
    SESSION_TIMEOUT: (2_000, 5_000, 9_000),
    HEARTBEAT_INTERVAL: (200, 500, 1_500),
    ASSIGNMENT_INTERVAL: (0, 1_000, 3_000),
}


class Consumer:
    def __init__(self, index: int, rng: random.Random) -> None:
        self.index = index
        self.group_id = rng.choice(GROUPS)
        self.instance_id = f"instance-{index}" if rng.random() < 0.3 else None
        self.names = list(rng.choice(SUBSCRIPTIONS)) if rng.random() < 0.8 else None
        self.regex = rng.choice(REGEXES) if self.names is None else None
        self.rebalance_ms = rng.choice((300, 1_000, 4_000))
        self.assignor = rng.choice((None, None, "range", "uniform"))
        self.incarnation = 0
        self.stalled_until_ms = 0
        self.reset()

    def reset(self) -> None:
        """Lose everything (fenced, left, or a restart): the next heartbeat joins."""
        self.member_id = ""
        self.epoch = 0
        self.owned: dict[str, frozenset[int]] = {}  # what this consumer is consuming
        self.assigned: dict[str, frozenset[int]] = {}  # the coordinator's last word
        self.joined = False

    def new_member_id(self) -> str:
        self.incarnation += 1
        return f"consumer-{self.index}-{self.incarnation}"

    def bound_by(self, member) -> bool:
        """Whether what the coordinator has ``member`` hold bounds what this consumer consumes:
        always, under KIP-848 (a partition moves only once its owner has revoked it)."""
        return True


class ConsumerSimulation:
    def __init__(
        self,
        seed: int,
        consumers: int = 8,
        check_replay_every: int = 50,
        assignment_interval_ms: int = 0,
    ) -> None:
        self.rng = random.Random(seed)
        self.config = CoordinatorConfig(
            consumer_group_assignment_interval_ms=assignment_interval_ms,
            consumer_group_session_timeout_ms=5_000,
            consumer_group_heartbeat_interval_ms=500,
            consumer_group_max_size=6,
            offsets_retention_ms=60_000,
            offsets_retention_check_interval_ms=10_000,
        )
        self.ids = SequentialIds(seed)  # kept across restarts: member ids never repeat
        self.shard = Shard(0, 1, config=self.config, ids=self.ids)
        self.now = 0
        self.records: list = []
        self.replies: dict = {}
        self.check_replay_every = check_replay_every
        self.steps = 0
        self.catalog = {t: self.rng.randint(1, 6) for t in TOPICS}
        self.group_configs: dict[str, dict[str, int]] = {}
        self.group_config_changes = 0
        self.unbound_checks = 0  # live consumers the check let be (``bound_by``)
        self.consumers = [Consumer(i, self.rng) for i in range(consumers)]
        self._ids = itertools.count(1)
        self.errors: dict[Errors, int] = {}
        self.lost_responses = 0
        self.catalog_due_in = 0  # steps until the runtime hands a restarted shard the catalog
        self.catalog_changes = self.catalog_change_records = 0  # taken as changes alone
        self.reloads = 0
        self.fenced_without_catalog = 0  # members fenced by a timer before the catalog came
        self.absorb(self.shard.on_loaded(0))
        self.absorb(self.shard.update_topics(0, self.catalog))

    # -- plumbing -----------------------------------------------------------------------------

    def absorb(self, step) -> None:
        self.records.extend(step.records)
        if self.catalog_due_in:
            self.fenced_without_catalog += sum(
                e.kind == "consumer-member-fenced" for e in step.events
            )
        for request_id, response in step.replies:
            assert request_id not in self.replies, f"request {request_id} answered twice"
            self.replies[request_id] = response

    def call(self, request):
        request_id = next(self._ids)
        before = len(self.records)
        self.absorb(self.shard.handle(self.now, request_id, request))
        response = self.replies.pop(request_id)
        error = getattr(response, "error_code", None)
        if error is not None and error != Errors.NONE:
            assert len(self.records) == before, f"refused {request!r} wrote records"
        return response

    # -- one step -----------------------------------------------------------------------------

    def step(self) -> None:
        rng = self.rng
        self.steps += 1
        if self.catalog_due_in:
            self.catalog_due_in -= 1
            if not self.catalog_due_in:
                self.absorb(self.shard.update_topics(self.now, self.catalog))
        roll = rng.random()
        if roll < 0.03:
            self.change_catalog()
        elif roll < 0.035:
            self.change_group_configs()
        elif roll < 0.045:
            self.advance(rng.choice((3_000, 5_000, 70_000)))
        elif roll < 0.05:
            self.reload()
        else:
            self.advance(rng.randint(0, 300))
            self.act(rng.choice(self.consumers))
        self.check()

    def advance(self, ms: int) -> None:
        self.now += ms
        self.absorb(self.shard.on_timer(self.now))

    def change_catalog(self) -> None:
        topic = self.rng.choice(TOPICS)
        old = self.catalog
        catalog = dict(old)
        if topic in catalog and self.rng.random() < 0.3:
            del catalog[topic]  # deleted
        else:
            catalog[topic] = max(catalog.get(topic, 0), 1) + self.rng.randint(0, 2)
        self.catalog = catalog
        if not self.catalog_due_in:  # else a restarted shard gets this one when it comes
            self.absorb(self.change_topics(old, catalog))

    def change_topics(self, old: dict[str, int], new: dict[str, int]):
        """The shard takes a catalog change by the groups it concerns alone: as its changes
        (``change_topics``, as the runtime hands it one) or, half the time, as the whole new
        catalog (``update_topics``, which takes its differences from the held one). Either
        must write exactly what a shard in the same state writes refreshing every group
        against the new catalog: a twin replaying every record and handed it as its first
        catalog is the reference (and one handed the old catalog first writes nothing)."""
        assert not self.twin().update_topics(self.now, old).records  # agrees with the held
        expected = self.twin().update_topics(self.now, new).records
        changes = {
            t: new.get(t) for t in sorted(old.keys() | new.keys()) if old.get(t) != new.get(t)
        }
        if self.rng.random() < 0.5:
            step = self.shard.change_topics(self.now, changes)
        else:
            step = self.shard.update_topics(self.now, new)
        # Groups in group id order there, in the shard's order here: each group's alike.
        by_group = lambda records: sorted(records, key=lambda r: r.key.group)  # noqa: E731
        assert by_group(step.records) == by_group(expected), (changes, step.records, expected)
        self.catalog_changes += 1
        self.catalog_change_records += len(step.records)
        return step

    def twin(self) -> Shard:
        """A shard that replayed every record, loaded, with no catalog yet."""
        twin = Shard(0, 1, config=self.config, ids=self.ids)
        twin.update_group_configs(self.group_configs)
        for record in self.records:
            twin.replay(record)
        twin.on_loaded(self.now)
        return twin

    def change_group_configs(self) -> None:
        """A group's settings set, changed or dropped (``kafka-configs --alter``): the shard
        reads them at the group's next heartbeat and arms nothing anew (as Kafka)."""
        group_id = self.rng.choice(GROUPS)
        configs = dict(self.group_configs)
        if group_id in configs and self.rng.random() < 0.3:
            del configs[group_id]
        else:
            names = self.rng.sample(sorted(GROUP_SETTINGS), self.rng.randint(1, 3))
            configs[group_id] = {n: self.rng.choice(GROUP_SETTINGS[n]) for n in names}
        self.group_configs = configs
        self.shard.update_group_configs(configs)
        self.group_config_changes += 1

    def reload(self) -> None:
        """A restart: a fresh shard replays every record and is loaded; the catalog comes a
        few steps later (timers fire and requests arrive before it does)."""
        self.shard = Shard(0, 1, config=self.config, ids=self.ids)
        self.shard.update_group_configs(self.group_configs)  # the runtime: before on_loaded
        for record in self.records:
            self.shard.replay(record)
        self.absorb(self.shard.on_loaded(self.now))
        self.catalog_due_in = self.rng.randint(1, 8)
        self.reloads += 1
        self.lose_parked()
        # Sessions and rebalance timeouts are re-armed on load; some expire before the catalog.
        self.advance(self.rng.choice((0, 1_000, 5_000)))

    def lose_parked(self) -> None:
        """Requests the old shard had parked are never answered (every call here is answered
        at once; ``MixedSimulation`` parks JoinGroups and SyncGroups)."""

    def act(self, c: Consumer) -> None:
        rng = self.rng
        if self.now < c.stalled_until_ms:
            return
        if rng.random() < 0.03:
            c.stalled_until_ms = self.now + rng.choice((2_000, 5_000))  # a long GC pause
            return
        if not c.joined:
            return self.join(c)
        roll = rng.random()
        if roll < 0.03:
            return self.leave(c)
        if roll < 0.10:
            return self.commit(c)
        self.heartbeat(c)

    def join(self, c: Consumer) -> None:
        if not c.member_id:
            c.member_id = c.new_member_id()
        response = self.call(
            ConsumerGroupHeartbeatRequest(
                c.group_id,
                c.member_id,
                0,
                instance_id=c.instance_id,
                rebalance_timeout_ms=c.rebalance_ms,
                subscribed_topic_names=c.names,
                subscribed_topic_regex=c.regex,
                server_assignor=c.assignor,
                topic_partitions=[],
            )
        )
        self.absorb_heartbeat(c, response)

    def heartbeat(self, c: Consumer) -> None:
        full = self.rng.random() < 0.1
        response = self.call(
            ConsumerGroupHeartbeatRequest(
                c.group_id,
                c.member_id,
                c.epoch,
                instance_id=c.instance_id,
                rebalance_timeout_ms=c.rebalance_ms if full else -1,
                subscribed_topic_names=c.names if full else None,
                subscribed_topic_regex=c.regex if full else None,
                topic_partitions=[
                    ConsumerGroupHeartbeatTopicPartitions(t, sorted(p))
                    for t, p in sorted(c.owned.items())
                ],
            )
        )
        if self.rng.random() < 0.05:
            self.lost_responses += 1
            return  # the response is lost: the consumer carries on with what it had
        self.absorb_heartbeat(c, response)

    def absorb_heartbeat(self, c: Consumer, response) -> None:
        error = response.error_code
        self.errors[error] = self.errors.get(error, 0) + 1
        if error in REJOIN:
            c.reset()  # abandon every partition and rejoin
            return
        if error in (
            Errors.UNRELEASED_INSTANCE_ID,
            Errors.GROUP_MAX_SIZE_REACHED,
            Errors.COORDINATOR_LOAD_IN_PROGRESS,
        ):
            # The previous instance has not left yet, the group is full, or a restarted shard
            # has no topic catalog yet: later.
            return
        assert error == Errors.NONE, response
        c.joined, c.epoch, c.member_id = True, response.member_epoch, response.member_id
        if response.assignment is not None:
            c.assigned = {
                tp.topic: frozenset(tp.partitions)
                for tp in response.assignment.topic_partitions
                if tp.partitions
            }
        # Revocation may take the consumer a while (it finishes its batch and commits); new
        # partitions only come once nothing is pending, so taking them is immediate.
        revoking = any(
            c.owned.get(t, frozenset()) - c.assigned.get(t, frozenset()) for t in c.owned
        )
        if not revoking or self.rng.random() < 0.6:
            c.owned = dict(c.assigned)

    def leave(self, c: Consumer) -> None:
        static = c.instance_id is not None and self.rng.random() < 0.7
        response = self.call(
            ConsumerGroupHeartbeatRequest(
                c.group_id, c.member_id, -2 if static else -1, instance_id=c.instance_id
            )
        )
        if response.error_code == Errors.NONE:
            c.reset()  # a static member comes back under a new member id

    def commit(self, c: Consumer) -> None:
        if not c.owned:
            return
        topic = self.rng.choice(sorted(c.owned))
        partition = self.rng.choice(sorted(c.owned[topic]))
        response = self.call(
            OffsetCommitRequest(
                c.group_id,
                c.epoch,
                c.member_id,
                [OffsetCommitRequestPartition(topic, partition, self.steps)],
            )
        )
        error = response.partitions[0].error
        self.errors[error] = self.errors.get(error, 0) + 1
        # ILLEGAL_GENERATION: the group itself is gone (emptied by expiries, then cleaned up).
        assert error in (
            Errors.NONE,
            Errors.STALE_MEMBER_EPOCH,
            Errors.UNKNOWN_MEMBER_ID,
            Errors.ILLEGAL_GENERATION,
        ), error

    # -- invariants ---------------------------------------------------------------------------

    def check(self) -> None:
        assert_single_owners(self.shard)
        for c in self.consumers:
            group = self.shard.consumer_group(c.group_id)
            member = group.members.get(c.member_id) if group is not None else None
            if member is None or not c.joined or member.member_epoch < 0:
                continue
            if not c.bound_by(member):
                self.unbound_checks += 1
                continue
            held = member.owned_partitions()
            for topic, parts in c.owned.items():
                assert parts <= held.get(topic, frozenset()), (c.member_id, topic, parts, held)
        if self.check_replay_every and self.steps % self.check_replay_every == 0:
            self.check_replay()

    def check_replay(self) -> None:
        fresh = replayed_shard(self.shard, self.records)
        assert fresh.consumer_durable_state() == self.shard.consumer_durable_state()
        assert fresh.durable_state() == self.shard.durable_state()

    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step()
        self.check_replay()
