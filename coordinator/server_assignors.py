"""KIP-848's server-side assignors: the coordinator computes each consumer group's target
assignment itself, with ``uniform`` (Kafka's default) or ``range``.

The interface is one pure method::

    assignor.assign(spec: AssignmentSpec) -> dict[member_id, dict[topic, frozenset[int]]]

``spec.members`` maps every member id to a ``MemberSpec``: the topics it subscribes to (already
resolved: names and regular expressions against the topic catalog), its current *target*
assignment (what the previous epoch gave it; assignors use it to be sticky), its instance id and
rack. ``spec.topics`` maps each subscribed topic that exists to its partition count. The result
has an entry for every member (possibly empty), gives each partition of a subscribed topic to
exactly one member subscribed to it, and names no other partition. Assignors are stateless and
deterministic (same spec, same result); ``tests/core/test_server_assignors.py`` checks these
properties. Another implementation subclasses ``ServerAssignor`` and joins ``SERVER_ASSIGNORS``.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Mapping

import msgspec

Assignment = dict[str, dict[str, frozenset[int]]]  # member id -> topic -> partitions


class MemberSpec(msgspec.Struct, frozen=True):
    subscribed_topics: frozenset[str]
    current: Mapping[str, frozenset[int]] = {}  # the member's target assignment so far
    instance_id: str | None = None
    rack_id: str | None = None


class AssignmentSpec(msgspec.Struct, frozen=True):
    members: Mapping[str, MemberSpec]
    topics: Mapping[str, int]  # topic name -> partition count (subscribed, existing topics)


class ServerAssignor(ABC):
    """The interface (module docstring): a name members may ask for, and ``assign``."""

    name: str

    @abstractmethod
    def assign(self, spec: AssignmentSpec) -> Assignment:
        """The target assignment of every member in ``spec`` (module docstring)."""


def _empty(spec: AssignmentSpec) -> dict[str, dict[str, set[int]]]:
    return {member_id: {} for member_id in spec.members}


def _freeze(result: dict[str, dict[str, set[int]]]) -> Assignment:
    return {
        member_id: {topic: frozenset(parts) for topic, parts in topics.items() if parts}
        for member_id, topics in result.items()
    }


def _subscribers(spec: AssignmentSpec) -> dict[str, list[str]]:
    """Topic -> its subscribers, in a fixed order: by instance id where set, then member id
    (as Kafka's range assignor orders members, so a static member keeps its place)."""

    def rank(member_id: str) -> tuple[bool, str, str]:
        instance_id = spec.members[member_id].instance_id
        return (instance_id is None, instance_id or "", member_id)

    # Members grouped by subscription first: a topic's subscribers are then the groups that
    # name it, so the work is (distinct subscriptions x topics), not (members x topics).
    alike: dict[frozenset[str], list[str]] = {}
    for member_id in sorted(spec.members, key=rank):
        alike.setdefault(spec.members[member_id].subscribed_topics, []).append(member_id)
    subscribers: dict[str, list[str]] = {topic: [] for topic in spec.topics}
    for topics, member_ids in alike.items():
        for topic in topics:
            if topic in subscribers:
                subscribers[topic].extend(member_ids)
    if len(alike) > 1:  # keep the member order within each topic
        order = {m: i for i, m in enumerate(sorted(spec.members, key=rank))}
        for member_ids in subscribers.values():
            member_ids.sort(key=order.__getitem__)
    return subscribers


class RangeAssignor(ServerAssignor):
    """Per topic, its subscribers (ordered as ``_subscribers``) get contiguous ranges: each
    ``count // n`` partitions and the first ``count % n`` one more. Members with the same
    subscriptions thus get the same partition numbers of every topic (co-partitioning)."""

    name = "range"

    def assign(self, spec: AssignmentSpec) -> Assignment:
        result = _empty(spec)
        for topic, members in _subscribers(spec).items():
            if not members:
                continue
            count = spec.topics[topic]
            base, extra = divmod(count, len(members))
            start = 0
            for index, member_id in enumerate(members):
                size = base + (1 if index < extra else 0)
                if size:
                    result[member_id][topic] = set(range(start, start + size))
                start += size
        return _freeze(result)


class UniformAssignor(ServerAssignor):
    """Spreads partitions as evenly as subscriptions allow, keeping partitions where they are.

    1. Sticky: every member keeps the partitions of its current target that still exist and it
       still subscribes to, up to its share when all members subscribe to the same topics
       (``total // n``, plus one for the first ``total % n`` members by how much they hold).
    2. Fill: each unassigned partition goes to the least loaded member subscribed to its topic
       (ties: member order).
    3. Balance (different subscriptions only): per topic, while a holder of its partitions holds
       two or more more than one of its subscribers, move one (``_balance``).
    """

    name = "uniform"

    def assign(self, spec: AssignmentSpec) -> Assignment:
        members = sorted(spec.members)
        result = _empty(spec)
        if not members:
            return {}
        existing = frozenset(spec.topics)
        subscriptions = {m: spec.members[m].subscribed_topics & existing for m in members}
        homogeneous = len(set(subscriptions.values())) == 1
        load = dict.fromkeys(members, 0)
        owned: set[tuple[str, int]] = set()
        caps = self._caps(spec, members, subscriptions) if homogeneous else None
        for m in members:
            cap = caps[m] if caps is not None else None
            for topic, parts in sorted(spec.members[m].current.items()):
                if topic not in subscriptions[m]:
                    continue
                for p in sorted(parts):
                    if cap is not None and load[m] >= cap:
                        break
                    if p < spec.topics[topic] and (topic, p) not in owned:
                        owned.add((topic, p))
                        result[m].setdefault(topic, set()).add(p)
                        load[m] += 1
        subscribers = _subscribers(spec)
        by_subscribers: dict[tuple[str, ...], list[str]] = {}
        for topic, subs in subscribers.items():
            if subs:
                by_subscribers.setdefault(tuple(subs), []).append(topic)
        # Most constrained first: topics with the fewest subscribers take their pick first.
        for subs, topics in sorted(by_subscribers.items(), key=lambda kv: (len(kv[0]), kv[0])):
            heap = [(load[m], m) for m in subs]
            heapq.heapify(heap)
            for topic in sorted(topics):
                for p in range(spec.topics[topic]):
                    if (topic, p) in owned:
                        continue
                    _, m = heapq.heappop(heap)
                    result[m].setdefault(topic, set()).add(p)
                    load[m] += 1
                    heapq.heappush(heap, (load[m], m))
        if not homogeneous:
            self._balance(result, load, subscribers)
        return _freeze(result)

    @staticmethod
    def _caps(spec: AssignmentSpec, members: list[str], subscriptions) -> dict[str, int]:
        """Each member's share when all subscribe alike: the members that hold the most of
        their current assignment get the ``total % n`` extra partitions."""
        topics = subscriptions[members[0]]
        total = sum(spec.topics[t] for t in topics)
        base, extra = divmod(total, len(members))

        def kept(m: str) -> int:
            current = spec.members[m].current
            return sum(
                sum(1 for p in parts if p < spec.topics[t])
                for t, parts in current.items()
                if t in topics
            )

        ranked = sorted(members, key=lambda m: (-kept(m), m))
        return {m: base + (1 if i < extra else 0) for i, m in enumerate(ranked)}

    @staticmethod
    def _balance(result, load: dict[str, int], subscribers: dict[str, list[str]]) -> None:
        """Passes over the topics: within each, move a partition from its most loaded holder
        to its least loaded subscriber while they differ by two or more. Every move lowers the
        sum of squared loads, so passes end when one moves nothing; ``BALANCE_MAX_PASSES``
        bounds them (a pass costs about subscribers x log subscribers per topic)."""
        for _ in range(BALANCE_MAX_PASSES):
            moved = False
            for topic in sorted(subscribers):
                subs = subscribers[topic]
                if len(subs) < 2:
                    continue
                takers = [(load[m], m) for m in subs]
                givers = [(-load[m], m) for m in subs if result[m].get(topic)]
                heapq.heapify(takers)
                heapq.heapify(givers)
                while givers and takers:
                    giver_load, giver = givers[0]
                    taker_load, taker = takers[0]
                    if -giver_load != load[giver] or not result[giver].get(topic):
                        heapq.heappop(givers)  # stale, or has no partition of this topic left
                        if result[giver].get(topic):
                            heapq.heappush(givers, (-load[giver], giver))
                        continue
                    if taker_load != load[taker]:
                        heapq.heapreplace(takers, (load[taker], taker))
                        continue
                    if load[giver] - load[taker] < 2:
                        break
                    p = max(result[giver][topic])
                    result[giver][topic].discard(p)
                    result[taker].setdefault(topic, set()).add(p)
                    load[giver] -= 1
                    load[taker] += 1
                    heapq.heapreplace(givers, (-load[giver], giver))
                    heapq.heapreplace(takers, (load[taker], taker))
                    moved = True
            if not moved:
                return


BALANCE_MAX_PASSES = 64


SERVER_ASSIGNORS: dict[str, ServerAssignor] = {
    a.name: a for a in (UniformAssignor(), RangeAssignor())
}
