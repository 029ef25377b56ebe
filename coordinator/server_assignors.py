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
    # When the member is next expected to heartbeat (None: not known, e.g. a classic member).
    # A partition a member must give up moves only once that member has heartbeated, learnt it
    # and released it; so where several members could equally give one up, ``uniform`` takes it
    # from those due soonest, and the member it goes to gets it sooner.
    heartbeat_due_ms: int | None = None


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

    When every member subscribes to the same topics, ``_assign_homogeneous`` does it in counts
    (Kafka's ``UniformHomogeneousAssignmentBuilder``). Otherwise:

    1. Sticky: every member keeps the partitions of its current target that still exist and it
       still subscribes to.
    2. Fill: each unassigned partition goes to the least loaded member subscribed to its topic
       (ties: member order).
    3. Balance: per topic, while a holder of its partitions holds
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
        if len(set(subscriptions.values())) == 1:
            return _assign_homogeneous(spec, members, sorted(subscriptions[members[0]]))
        load = dict.fromkeys(members, 0)
        owned: dict[str, set[int]] = {topic: set() for topic in spec.topics}
        for m in members:
            for topic, parts in sorted(spec.members[m].current.items()):
                if topic not in subscriptions[m]:
                    continue
                keep = {p for p in parts if 0 <= p < spec.topics[topic]} - owned[topic]
                if keep:
                    owned[topic] |= keep
                    result[m].setdefault(topic, set()).update(keep)
                    load[m] += len(keep)
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
                for p in sorted(set(range(spec.topics[topic])) - owned[topic]):
                    _, m = heapq.heappop(heap)
                    result[m].setdefault(topic, set()).add(p)
                    load[m] += 1
                    heapq.heappush(heap, (load[m], m))
        self._balance(result, load, subscribers)
        return _freeze(result)

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


def _assign_homogeneous(spec: AssignmentSpec, members: list[str], topics: list[str]) -> Assignment:
    """Every member subscribes to ``topics``: each gets ``total // n`` partitions and
    ``total % n`` of them one more, the extra going to those that hold the most already (among
    equals: those due to heartbeat last, then by member id, so that the members that must give
    a partition up are those that will hear of it first). Work is
    counted in members x topics and whole-set operations (done in C), never a Python object
    per partition, so 1,000 members x 10,000 partitions take milliseconds.

    1. Keep: each member keeps the partitions of its current target that exist and that no
       earlier member (in id order) kept, up to its quota (the smallest partition numbers when
       it must give some up); an unchanged topic keeps its very frozenset.
    2. Fill: the partitions nobody kept, in topic then partition order, go in contiguous runs
       to the members below their quota, in member order (as Kafka's builder hands them out).
    """
    counts = {t: spec.topics[t] for t in topics}
    every = {t: frozenset(range(n)) for t, n in counts.items()}
    kept: dict[str, dict[str, frozenset[int]]] = {}
    claimed: dict[str, set[int]] = {t: set() for t in topics}
    held: dict[str, int] = {}
    for m in members:
        mine: dict[str, frozenset[int]] = {}
        current = spec.members[m].current
        for topic in sorted(current.keys() & counts.keys()):
            parts = current[topic]
            if not parts:
                continue
            taken = claimed[topic]
            if not (parts <= every[topic] and taken.isdisjoint(parts)):
                # Gone partitions, or ones an earlier member kept (an inconsistent spec).
                parts = frozenset(parts & every[topic] - taken)
                if not parts:
                    continue
            taken.update(parts)
            mine[topic] = parts
        kept[m] = mine
        held[m] = sum(map(len, mine.values()))
    base, extra = divmod(sum(counts.values()), len(members))
    ranked = sorted(members, key=lambda m: (-held[m], _due_last_first(spec.members[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(ranked)}
    for m in members:  # give back what is over the quota, the largest partition numbers first
        surplus = held[m] - quota[m]
        if surplus <= 0:
            continue
        mine = kept[m]
        for topic in sorted(mine, reverse=True):
            parts = sorted(mine[topic])
            drop = min(surplus, len(parts))
            claimed[topic].difference_update(parts[len(parts) - drop :])
            if drop == len(parts):
                del mine[topic]
            else:
                mine[topic] = frozenset(parts[: len(parts) - drop])
            surplus -= drop
            if not surplus:
                break
        held[m] = quota[m]
    free = [
        (topic, sorted(set(range(counts[topic])) - claimed[topic]))
        if claimed[topic]
        else (topic, list(range(counts[topic])))
        for topic in topics
    ]
    run, index = 0, 0  # the next free partition: free[run][1][index]
    for m in members:
        want = quota[m] - held[m]
        mine = kept[m]
        while want and run < len(free):
            topic, parts = free[run]
            piece = parts[index : index + want]
            if piece:
                have = mine.get(topic)
                mine[topic] = frozenset(piece) if have is None else have.union(piece)
                want -= len(piece)
                index += len(piece)
            if index >= len(parts):
                run, index = run + 1, 0
    return kept


def _due_last_first(member: MemberSpec) -> tuple[bool, int]:
    """Sorts members due to heartbeat later first, members with no known time before all."""
    due_ms = member.heartbeat_due_ms
    return (due_ms is not None, -(due_ms or 0))


SERVER_ASSIGNORS: dict[str, ServerAssignor] = {
    a.name: a for a in (UniformAssignor(), RangeAssignor())
}
