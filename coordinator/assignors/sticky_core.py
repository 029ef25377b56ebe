"""The sticky assignment shared by ``sticky`` and ``cooperative-sticky``: balanced, then sticky.

Theory of operation
-------------------
Input: each member's subscribed topics and the partitions each member validly owns now. Output:
a complete assignment that is *balanced* and, within that, moves as few partitions as possible.

Ownership (``resolve_ownership``). Members report what they owned with the generation they owned
it in. A claim counts only for a partition that exists and whose topic the member still
subscribes to. When members claim the same partition, the newest generation wins (the others
are stale: they missed a rebalance); a tie at the newest generation has no winner, so the
partition is treated as unowned rather than guessed at.

Balanced means: no member could take a partition from a member holding two or more partitions
more than itself (Kafka's criterion). In particular members with identical subscriptions hold
counts that differ by at most one.

Two algorithms, chosen by the shape of the subscriptions:

* All subscriptions identical (the common case): quotas are known up front. With ``n``
  partitions and ``m`` members everyone gets ``n // m`` and ``n % m`` members one more; those
  extra slots go to the members that own the most, which keeps the most partitions in place.
  Each member keeps its owned partitions up to its quota; the rest are dealt, in partition
  order, to the member with a free slot and the fewest partitions (ties: member id).
* Otherwise: every member keeps all it owns; unowned partitions are placed, those with the
  fewest eligible members first, on the eligible member with the fewest partitions; then single
  partitions move from a member to one holding two or more fewer, preferring partitions placed
  in this run over owned ones, until no such move exists. Every move lowers the sum of squared
  counts, so the loop ends.

Both are deterministic: iteration follows sorted member ids and partitions, never dict order.
Feeding a result back as the ownership returns it unchanged. With identical subscriptions,
feeding back any *part* of a result keeps every owned partition (no count exceeds its quota),
which is why a cooperative rebalance then completes in the second round (see ``cooperative``).
With different subscriptions the greedy placement can land elsewhere than the first time and
the cooperative protocol may need a third round; each round is still safe.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

from .base import TopicPartition, all_partitions, java_order, partition_order

Claims = Mapping[str, tuple[Iterable[TopicPartition], int]]  # member -> (owned, generation)


def resolve_ownership(
    claims: Claims, counts: Mapping[str, int], topics_of: Mapping[str, frozenset[str]]
) -> dict[TopicPartition, str]:
    """partition -> its valid owner; newest generation wins, a tie there leaves it unowned."""
    best: dict[TopicPartition, tuple[int, str | None]] = {}
    for member, (partitions, generation) in claims.items():
        for tp in set(partitions):
            topic, partition = tp
            if topic not in topics_of[member] or not 0 <= partition < counts[topic]:
                continue
            current = best.get(tp)
            if current is None or generation > current[0]:
                best[tp] = (generation, member)
            elif generation == current[0] and current[1] != member:
                best[tp] = (generation, None)
    return {tp: member for tp, (_, member) in best.items() if member is not None}


def sticky_assignment(
    counts: Mapping[str, int],
    topics_of: Mapping[str, frozenset[str]],
    owner: Mapping[TopicPartition, str],
) -> dict[str, list[TopicPartition]]:
    """member -> partitions: a balanced assignment of every partition that keeps most owners."""
    members = sorted(topics_of, key=java_order)
    owned_by: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for tp, member in owner.items():
        owned_by[member].append(tp)
    for partitions in owned_by.values():
        partitions.sort(key=partition_order)
    if len(set(topics_of.values())) <= 1:
        return _identical(all_partitions(counts), members, owned_by)
    return _general(counts, members, topics_of, owned_by)


def _identical(
    partitions: list[TopicPartition], members: list[str], owned_by: dict[str, list[TopicPartition]]
) -> dict[str, list[TopicPartition]]:
    if not partitions:
        return {m: [] for m in members}
    base_quota, extra = divmod(len(partitions), len(members))
    by_claim = sorted(members, key=lambda m: (-len(owned_by[m]), java_order(m)))
    quota = {m: base_quota + (1 if i < extra else 0) for i, m in enumerate(by_claim)}
    chosen = {m: owned_by[m][: quota[m]] for m in members}
    kept = {tp for partitions_of in chosen.values() for tp in partitions_of}
    open_slots = [(len(chosen[m]), java_order(m), m) for m in members if len(chosen[m]) < quota[m]]
    heapq.heapify(open_slots)
    for tp in partitions:
        if tp in kept:
            continue
        count, key, member = heapq.heappop(open_slots)  # quotas sum to len(partitions)
        chosen[member].append(tp)
        if count + 1 < quota[member]:
            heapq.heappush(open_slots, (count + 1, key, member))
    return chosen


def _general(
    counts: Mapping[str, int],
    members: list[str],
    topics_of: Mapping[str, frozenset[str]],
    owned_by: dict[str, list[TopicPartition]],
) -> dict[str, list[TopicPartition]]:
    chosen = {m: list(owned_by[m]) for m in members}
    subscribers = {t: [m for m in members if t in topics_of[m]] for t in counts}
    owned = {tp for partitions in owned_by.values() for tp in partitions}
    # Hardest to place first: partitions few members may take (stable sort keeps Kafka's order).
    unowned = sorted(
        (tp for tp in all_partitions(counts) if tp not in owned),
        key=lambda tp: len(subscribers[tp[0]]),
    )
    for tp in unowned:
        member = min(subscribers[tp[0]], key=lambda m: (len(chosen[m]), java_order(m)))
        chosen[member].append(tp)
    move = _find_move(members, topics_of, chosen, owned)
    while move is not None:
        donor, taker, tp = move
        chosen[donor].remove(tp)
        chosen[taker].append(tp)
        move = _find_move(members, topics_of, chosen, owned)
    return chosen


def _find_move(members, topics_of, chosen, owned):
    """(donor, taker, partition) that improves balance, or None when balanced.

    The taker is the emptiest member that can improve, the donor the fullest one it can take
    from; among the donor's partitions, one placed in this run moves before an owned one.
    """
    fewest_first = sorted(members, key=lambda m: (len(chosen[m]), java_order(m)))
    most_first = sorted(members, key=lambda m: (-len(chosen[m]), java_order(m)))
    for taker in fewest_first:
        for donor in most_first:
            if len(chosen[donor]) <= len(chosen[taker]) + 1:
                break
            movable = [tp for tp in chosen[donor] if tp[0] in topics_of[taker]]
            if movable:
                tp = min(movable, key=lambda tp: (tp in owned, partition_order(tp)))
                return donor, taker, tp
    return None
