"""The member's side of partition assignment: subscriptions, the leader's plan, listeners.

``AssignmentPlan`` turns a member's configuration (topics, assignors, where partition counts
come from) into JoinGroup protocols, runs the selected assignor when the member is leader, and
decodes its own assignment. Assignors are objects with Kafka's shape (``name``,
``supported_protocols``, ``assign(partitions_per_topic, subscriptions)``,
``subscription_user_data(owned, generation_id)``); names are resolved through
``groupcoord.coordinator.assignors.get_assignor``.

The leader remembers the partition count of every topic the group subscribed to when it
assigned (``assigned_counts``); ``counts_changed`` re-reads them, for Kafka's metadata-change
rule (client.py rejoins when one changed).

The member's rebalance protocol is Kafka's rule (ConsumerCoordinator): the highest protocol that
every configured assignor supports, so a list mixing eager and cooperative assignors is eager.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from groupcoord.coordinator import JoinGroupResponseMember
from groupcoord.coordinator.assignors import get_assignor
from groupcoord.coordinator.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

Partitions = frozenset[tuple[str, int]]
MAX_TOPICS = 10_000
# Put by a groupcoord leader in the user data of every assignment (one the assignor left
# without user data) when some member must revoke partitions first, i.e. when a follow-up
# cooperative rebalance (KIP-429) will move them: a member given nothing yet learns that its
# partitions are coming, so ``wait_assigned`` does not return an empty assignment for good.
# Kafka's assignors ignore an assignment's user data; any other value means "not announced".
FOLLOW_UP_MARKER = b"groupcoord:follow-up-rebalance"


def resolve_assignor(spec: Any):
    """An assignor object from a name or an object that already has the assignor's shape."""
    if isinstance(spec, str):
        return get_assignor(spec)
    for attribute in ("name", "supported_protocols", "assign"):
        if not hasattr(spec, attribute):
            raise ValueError(f"assignor {spec!r} has no {attribute!r}")
    return spec


def _protocol_rank(protocol: Any) -> int:
    # EAGER < COOPERATIVE, whatever the enum's values are.
    return 1 if "COOPERATIVE" in str(getattr(protocol, "name", protocol)).upper() else 0


class RebalanceListener:
    """Kafka's ConsumerRebalanceListener. Methods may be plain or ``async``.

    ``on_partitions_lost`` defaults to ``on_partitions_revoked``, as in Kafka.
    """

    def on_partitions_revoked(self, partitions: Partitions) -> Any:
        return None

    def on_partitions_assigned(self, partitions: Partitions) -> Any:
        return None

    def on_partitions_lost(self, partitions: Partitions) -> Any:
        return self.on_partitions_revoked(partitions)


async def call_listener(method: Callable[[Partitions], Any], partitions: Partitions) -> None:
    result = method(partitions)
    if inspect.isawaitable(result):
        await result


class AssignmentPlan:
    def __init__(
        self,
        topics: Iterable[str],
        topic_partitions: Mapping[str, int] | Callable[[str], int],
        assignors: Iterable[Any],
    ) -> None:
        if isinstance(topics, str):  # iterating "orders" would subscribe to o, r, ...
            raise ValueError(f"give a list of topics, not the string {topics!r}")
        self.topics = tuple(sorted(set(topics)))
        if not self.topics or len(self.topics) > MAX_TOPICS:
            raise ValueError(f"a member subscribes to 1..{MAX_TOPICS} topics")
        if not all(isinstance(t, str) and t for t in self.topics):
            raise ValueError("topics must be non-empty strings")
        self._topic_partitions = topic_partitions
        self.assignors = [resolve_assignor(a) for a in assignors]
        if not self.assignors:
            raise ValueError("at least one assignor is needed")
        ranks = [
            max((_protocol_rank(p) for p in a.supported_protocols), default=0)
            for a in self.assignors
        ]
        self.cooperative = min(ranks) == 1
        self.assigned_counts: dict[str, int] | None = None  # the leader's, at its last assign

    def partition_count(self, topic: str) -> int:
        source = self._topic_partitions
        count = source(topic) if callable(source) else source.get(topic, 0)
        if type(count) is not int or count < 0:
            raise ValueError(f"partition count of {topic!r} must be an int >= 0, got {count!r}")
        return count

    def protocols(self, owned: Partitions, generation_id: int) -> list[tuple[str, bytes]]:
        """JoinGroup protocols in preference order, each with its subscription bytes."""
        owned_sorted = tuple(sorted(owned))
        result = []
        for assignor in self.assignors:
            user_data_of = getattr(assignor, "subscription_user_data", None)
            user_data = user_data_of(owned_sorted, generation_id) if user_data_of else None
            subscription = Subscription(self.topics, user_data, owned_sorted, generation_id)
            result.append((assignor.name, encode_subscription(subscription)))
        return result

    def counts_changed(self) -> str | None:
        """What changed in the remembered partition counts (``"t: 2 -> 3"``), or None."""
        if self.assigned_counts is None:
            return None
        changes = [
            f"{topic}: {count} -> {now}"
            for topic, count in self.assigned_counts.items()
            if (now := self.partition_count(topic)) != count
        ]
        return ", ".join(changes) or None

    def forget_counts(self) -> None:
        self.assigned_counts = None

    def remember_counts(self, members: Iterable[JoinGroupResponseMember]) -> None:
        """Read and remember the partition count of every topic ``members`` subscribe to."""
        self._remember_counts(self._subscriptions(members))

    def _remember_counts(self, subscriptions: dict[str, Subscription]) -> dict[str, int]:
        topics = {t for s in subscriptions.values() for t in s.topics}
        self.assigned_counts = {t: self.partition_count(t) for t in sorted(topics)}
        return self.assigned_counts

    @staticmethod
    def _subscriptions(members: Iterable[JoinGroupResponseMember]) -> dict[str, Subscription]:
        subscriptions: dict[str, Subscription] = {}
        for member in members:
            try:
                subscriptions[member.member_id] = decode_subscription(member.metadata)
            except ValueError:  # a member we cannot read gets nothing, as in Kafka's tools
                subscriptions[member.member_id] = Subscription(())
        return subscriptions

    def assign(
        self, protocol_name: str, members: Iterable[JoinGroupResponseMember]
    ) -> dict[str, bytes]:
        """The leader's work: members are JoinGroupResponseMembers; returns member -> bytes."""
        assignor = next((a for a in self.assignors if a.name == protocol_name), None)
        if assignor is None:
            raise ValueError(f"the group chose protocol {protocol_name!r}, not one of ours")
        subscriptions = self._subscriptions(members)
        counts = self._remember_counts(subscriptions)
        partitions_per_topic = {t: n for t, n in counts.items() if n}
        plan = assignor.assign(partitions_per_topic, subscriptions)
        follow_up = any(
            set(sub.owned_partitions) - set(plan.get(member_id, Assignment(())).partitions)
            for member_id, sub in subscriptions.items()
        )
        result = {}
        for member_id in subscriptions:
            assignment = plan.get(member_id, Assignment(()))
            if follow_up and assignment.user_data is None:
                assignment = Assignment(assignment.partitions, FOLLOW_UP_MARKER)
            result[member_id] = encode_assignment(assignment)
        return result

    @staticmethod
    def decode(assignment: bytes) -> tuple[Partitions, bool]:
        """The partitions of an assignment, and whether its leader announced a follow-up
        rebalance (``FOLLOW_UP_MARKER``)."""
        if not assignment:
            return frozenset(), False
        decoded = decode_assignment(assignment)
        return frozenset(decoded.partitions), decoded.user_data == FOLLOW_UP_MARKER
