"""Kafka's CooperativeStickyAssignor (``cooperative-sticky``, KIP-429) and the client's side of it.

Theory of operation
-------------------
Under the eager protocol every member gives up all its partitions before a rebalance, so the
whole group stops. Under the cooperative protocol members keep consuming what they own while
the group rebalances, which is only safe if no partition ever has two owners at once. So a
partition changes owner in two rebalances:

1. The assignor computes the same balanced, sticky target as ``sticky``, from the owned
   partitions and generations in the subscriptions. A partition the target gives to a member
   that does not claim it, while another member does, is left out of everyone's assignment:
   its owner, not seeing it in its new assignment, revokes it, and (having revoked something)
   rejoins. A member the target leaves a partition with keeps it, even if a stale member also
   claims it: that one revokes it, and taking it from the rightful owner too would only stop
   consumption for nothing.
2. In that follow-up rebalance nobody claims the partition any more, and it goes to its new
   owner.

"Claims" here means any claim, stale generations included: handing a partition over only when
no other member says it holds it is the conservative reading and costs at most one more
rebalance. Under the eager protocol (a group with a member that cannot cooperate), members
revoke everything before joining and report nothing owned, so nothing is withheld.

``revocation_plan`` is the member's half: from what it owned and what it was just given, which
partitions to revoke (call onPartitionsRevoked, then rejoin) and which are new.

A new member joins a group whose only member owns all four partitions:

>>> from groupcoord.coordinator.consumer_protocol import Subscription
>>> coop = CooperativeStickyAssignor()
>>> everything = tuple(("t", p) for p in range(4))
>>> subs = {"A": Subscription(("t",), owned_partitions=everything, generation_id=1),
...         "B": Subscription(("t",), generation_id=-1)}
>>> first = coop.assign({"t": 4}, subs)
>>> first["A"].partitions, first["B"].partitions
((('t', 0), ('t', 1)), ())
>>> plan = revocation_plan(set(everything), set(first["A"].partitions))
>>> sorted(plan.revoked), sorted(plan.added), plan.rejoin_needed
([('t', 2), ('t', 3)], [], True)
>>> subs = {"A": Subscription(("t",), owned_partitions=first["A"].partitions, generation_id=2),
...         "B": Subscription(("t",), owned_partitions=(), generation_id=2)}
>>> second = coop.assign({"t": 4}, subs)
>>> second["A"].partitions, second["B"].partitions
((('t', 0), ('t', 1)), (('t', 2), ('t', 3)))
"""

from __future__ import annotations

from typing import NamedTuple

from .base import Assignor, RebalanceProtocol, TopicPartition, is_partition
from .sticky_core import resolve_ownership, sticky_assignment


class CooperativeStickyAssignor(Assignor):
    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)

    def _assign(self, counts, topics_of, subscriptions) -> dict[str, list[TopicPartition]]:
        claims = {m: (sub.owned_partitions, sub.generation_id) for m, sub in subscriptions.items()}
        target = sticky_assignment(counts, topics_of, resolve_ownership(claims, counts, topics_of))
        claimants: dict[TopicPartition, set[str]] = {}
        for member, sub in subscriptions.items():
            for tp in sub.owned_partitions:
                claimants.setdefault(tp, set()).add(member)
        # A member keeps what it already holds; anything else waits until nobody claims it.
        return {
            member: [tp for tp in partitions if tp not in claimants or member in claimants[tp]]
            for member, partitions in target.items()
        }


class RevocationPlan(NamedTuple):
    revoked: set  # owned, not assigned: give these up (onPartitionsRevoked) before anything else
    added: set  # assigned, not owned: start consuming these (onPartitionsAssigned)

    @property
    def rejoin_needed(self) -> bool:
        """A cooperative member that revoked something rejoins, so the partition can move on."""
        return bool(self.revoked)


def revocation_plan(owned, assigned) -> RevocationPlan:
    """(revoked, added) for a member that owned ``owned`` and was just assigned ``assigned``."""
    owned, assigned = set(_checked(owned, "owned")), set(_checked(assigned, "assigned"))
    return RevocationPlan(owned - assigned, assigned - owned)


def _checked(partitions, what: str):
    if isinstance(partitions, (str, bytes)) or not hasattr(partitions, "__iter__"):
        raise ValueError(f"{what} must be a collection of (topic, partition) pairs")
    partitions = list(partitions)
    if not all(is_partition(tp) for tp in partitions):
        raise ValueError(f"{what} must hold only (topic, partition) pairs")
    return partitions
