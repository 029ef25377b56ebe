"""What every partition assignor shares: the interface, input checks, and Java's orderings.

Theory of operation
-------------------
The group leader's client runs an assignor once per rebalance: it sees every member's
``Subscription`` (decoded from the JoinGroup metadata) and the partition count of each topic,
and returns one ``Assignment`` per member, which the leader sends in its SyncGroup. An assignor
is a pure function of those two inputs, so any member elected leader computes the same answer.

``Assignor.assign`` does the part common to all four: it checks the input (``ValueError`` with a
message, before anything is computed), drops topics that are not in ``partitions_per_topic``
(unknown topics, as Kafka's metadata would lack them), calls the subclass's ``_assign`` with
clean data, and packages the result: every member appears, partitions sorted.

Ordering follows Java's ``String.compareTo`` (UTF-16 code units), because Kafka's assignors sort
member ids and topics that way; Python's code-point order differs only for characters outside
the Basic Multilingual Plane, but then it differs, and a mixed Java/Python group must agree.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from ..consumer_protocol import Assignment, Subscription

TopicPartition = tuple[str, int]

# Limits keep one assignment bounded in time and memory; both are far above real groups.
MAX_MEMBERS = 10_000
MAX_TOTAL_PARTITIONS = 200_000
MAX_PARTITIONS_PER_TOPIC = 2**31 - 1  # Kafka's partition ids are int32


class RebalanceProtocol(enum.IntEnum):
    """Kafka's ConsumerPartitionAssignor.RebalanceProtocol, with Kafka's ids."""

    EAGER = 0  # every member revokes everything before it rejoins
    COOPERATIVE = 1  # members keep what they own; moved partitions take a second rebalance


def java_order(s: str) -> bytes:
    """Sort key that orders strings as Java's ``String.compareTo`` does (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


def partition_order(tp: TopicPartition) -> tuple[bytes, int]:
    return java_order(tp[0]), tp[1]


class Assignor:
    """Base class: subclasses set ``name`` and implement ``_assign``."""

    name: str = ""
    supported_protocols: tuple[RebalanceProtocol, ...] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, owned: tuple, generation_id: int) -> bytes | None:
        """What a member puts in its Subscription's ``user_data`` (None: this assignor uses
        none)."""
        return None

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        """member id -> Assignment for every member of ``subscriptions``."""
        counts = _checked_counts(partitions_per_topic)
        _check_subscriptions(subscriptions)
        topics_of = {
            m: frozenset(t for t in sub.topics if counts.get(t, 0) > 0)
            for m, sub in subscriptions.items()
        }
        subscribed = frozenset().union(*topics_of.values()) if topics_of else frozenset()
        total = sum(counts[t] for t in subscribed)
        if total > MAX_TOTAL_PARTITIONS:
            raise ValueError(
                f"{total} subscribed partitions exceed the limit of {MAX_TOTAL_PARTITIONS}"
            )
        counts = {t: counts[t] for t in subscribed}
        chosen = self._assign(counts, topics_of, subscriptions)
        return {
            m: Assignment(tuple(sorted(chosen.get(m, ()), key=partition_order)))
            for m in sorted(subscriptions, key=java_order)
        }

    def _assign(
        self,
        counts: dict[str, int],
        topics_of: dict[str, frozenset[str]],
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, list[TopicPartition]]:
        """The assignor proper. ``counts`` holds only subscribed topics with partitions;
        ``topics_of`` is each member's subscription restricted to those topics."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def _checked_counts(partitions_per_topic) -> dict[str, int]:
    if not isinstance(partitions_per_topic, Mapping):
        raise ValueError(
            "partitions_per_topic must map topic names to partition counts, "
            f"not {type(partitions_per_topic).__name__}"
        )
    counts = {}
    for topic, count in partitions_per_topic.items():
        if not isinstance(topic, str):
            raise ValueError(f"topic name {topic!r} is not a string")
        if isinstance(count, bool) or not isinstance(count, int):
            raise ValueError(f"partition count of topic {topic!r} is not an integer: {count!r}")
        if count < 0 or count > MAX_PARTITIONS_PER_TOPIC:
            raise ValueError(f"partition count of topic {topic!r} is out of range: {count}")
        counts[topic] = count
    return counts


def _check_subscriptions(subscriptions) -> None:
    if not isinstance(subscriptions, Mapping):
        raise ValueError(
            f"subscriptions must map member ids to Subscription, not {type(subscriptions).__name__}"
        )
    if len(subscriptions) > MAX_MEMBERS:
        raise ValueError(f"{len(subscriptions)} members exceed the limit of {MAX_MEMBERS}")
    for member, sub in subscriptions.items():
        if not isinstance(member, str):
            raise ValueError(f"member id {member!r} is not a string")
        if not isinstance(sub, Subscription):
            raise ValueError(
                f"subscription of member {member!r} is a {type(sub).__name__}, not a Subscription"
            )
        # msgspec does not check types on construction, so a hand-built Subscription can hold
        # anything; decode_subscription's output always passes.
        if not isinstance(sub.topics, (tuple, list)) or not all(
            isinstance(t, str) for t in sub.topics
        ):
            raise ValueError(f"topics of member {member!r} must be a sequence of strings")
        if not isinstance(sub.owned_partitions, (tuple, list)) or not all(
            is_partition(tp) for tp in sub.owned_partitions
        ):
            raise ValueError(
                f"owned_partitions of member {member!r} must be a sequence of "
                "(topic, partition) pairs"
            )
        if isinstance(sub.generation_id, bool) or not isinstance(sub.generation_id, int):
            raise ValueError(f"generation_id of member {member!r} is not an integer")
        if sub.user_data is not None and not isinstance(sub.user_data, bytes):
            raise ValueError(f"user_data of member {member!r} is not bytes")


def is_partition(tp) -> bool:
    return (
        isinstance(tp, tuple)
        and len(tp) == 2
        and isinstance(tp[0], str)
        and isinstance(tp[1], int)
        and not isinstance(tp[1], bool)
    )


def all_partitions(counts: Mapping[str, int]) -> list[TopicPartition]:
    """Every partition of ``counts``' topics, in Kafka's order (topic, then partition)."""
    return [(t, p) for t in sorted(counts, key=java_order) for p in range(counts[t])]
