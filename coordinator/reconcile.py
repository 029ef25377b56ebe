"""Member reconciliation: Kafka's ``CurrentAssignmentBuilder``, pure.

A member moves from its current assignment towards its target one epoch at a time, and never
gets a partition another member still owns (revoke before assign):

* ``stable``: reconciled to its epoch. When the target epoch is newer, compute the next step.
* ``unrevoked_partitions``: it must first give up ``pending_revocation``. It stays in its epoch
  until a heartbeat's owned partitions no longer contain any of them; then it moves on (its epoch
  goes up by one, and the next step is computed at once).
* ``unreleased_partitions``: it is at the target epoch but some of its target partitions are
  still owned by others; every heartbeat re-computes, and takes those that were released.

The next step (``_next``) keeps current ∩ target; asks to revoke current - target (if the member
still owns any of them); otherwise moves to the target epoch and adds the target partitions that
nobody owns (a partition this member itself still owns counts as free: it has one owner either
way). Every step records the epoch it leaves as the previous epoch (Kafka's
``updateMemberEpoch``).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

STABLE = "stable"
UNREVOKED_PARTITIONS = "unrevoked_partitions"
UNRELEASED_PARTITIONS = "unreleased_partitions"

Partitions = dict[str, frozenset[int]]


class MemberAssignment(msgspec.Struct, frozen=True):
    """A member's epochs, state and partitions (``ConsumerGroupCurrentMemberAssignmentValue``)."""

    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: str = STABLE
    assigned: Partitions = {}
    pending_revocation: Partitions = {}


def owns_any(owned: Partitions | None, partitions: Partitions) -> bool:
    """Whether the owned partitions a member reported contain any of ``partitions``; a member
    that did not report them (``None``) is taken to still own everything."""
    if owned is None:
        return True
    return any(owned.get(topic, frozenset()) & parts for topic, parts in partitions.items())


def reconcile(
    current: MemberAssignment,
    member_id: str,
    target_epoch: int,
    target: Partitions,
    owner_of: Callable[[str, int], str | None],
    owned: Partitions | None,
) -> MemberAssignment:
    """The member's next assignment (``current`` itself when nothing changes).

    ``owner_of(topic, partition)`` names the member that currently owns a partition (assigned or
    pending revocation), or None; ``owned`` is what the member's heartbeat reported owning.
    """
    state = current.state
    if state == STABLE:
        if current.member_epoch == target_epoch:
            return current
        return _next(
            current, current.member_epoch, member_id, target_epoch, target, owner_of, owned
        )
    if state == UNREVOKED_PARTITIONS:
        if owns_any(owned, current.pending_revocation):
            return current
        return _next(
            current, current.member_epoch + 1, member_id, target_epoch, target, owner_of, owned
        )
    return _next(current, current.member_epoch, member_id, target_epoch, target, owner_of, owned)


def _next(
    current: MemberAssignment,
    member_epoch: int,
    member_id: str,
    target_epoch: int,
    target: Partitions,
    owner_of: Callable[[str, int], str | None],
    owned: Partitions | None,
) -> MemberAssignment:
    assigned: Partitions = {}
    revoking: Partitions = {}
    pending: Partitions = {}
    unreleased = False
    for topic in sorted(set(target) | set(current.assigned)):
        wanted = target.get(topic, frozenset())
        had = current.assigned.get(topic, frozenset())
        kept = had & wanted
        if kept:
            assigned[topic] = kept
        if had - kept:
            revoking[topic] = had - kept
        free = set()
        for p in wanted - kept:
            owner = owner_of(topic, p)
            if owner is None or owner == member_id:
                free.add(p)
            else:
                unreleased = True
        if free:
            pending[topic] = frozenset(free)
    if revoking and owns_any(owned, revoking):
        # Revoke first: the member stays in its epoch until it reports the partitions gone.
        return MemberAssignment(
            member_epoch, current.member_epoch, UNREVOKED_PARTITIONS, assigned, revoking
        )
    for topic, parts in pending.items():
        assigned[topic] = assigned.get(topic, frozenset()) | parts
    state = UNRELEASED_PARTITIONS if unreleased else STABLE
    return MemberAssignment(target_epoch, current.member_epoch, state, assigned, {})
