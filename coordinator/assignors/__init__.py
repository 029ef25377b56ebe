"""Kafka's four client-side partition assignors, pure: ``range``, ``roundrobin``, ``sticky`` and
``cooperative-sticky``.

    assignor = get_assignor("sticky")
    assignments = assignor.assign({"t0": 3}, {"member-1": Subscription(("t0",))})

Each is stateless, so the shared instances in ``ASSIGNORS`` serve every group. Start at
``base`` (the interface), then ``sticky_core`` (the balancing) and ``cooperative`` (KIP-429).
"""

from types import MappingProxyType

from .base import (
    MAX_MEMBERS,
    MAX_TOTAL_PARTITIONS,
    Assignor,
    RebalanceProtocol,
    TopicPartition,
)
from .cooperative import CooperativeStickyAssignor, RevocationPlan, revocation_plan
from .range_assignor import RangeAssignor
from .roundrobin import RoundRobinAssignor
from .sticky import StickyAssignor

ASSIGNORS = MappingProxyType(
    {
        a.name: a
        for a in (
            RangeAssignor(),
            RoundRobinAssignor(),
            StickyAssignor(),
            CooperativeStickyAssignor(),
        )
    }
)


def get_assignor(name: str) -> Assignor:
    """The assignor Kafka knows as ``name``; ValueError naming the known ones otherwise."""
    try:
        return ASSIGNORS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown assignor {name!r}; known: {', '.join(ASSIGNORS)}") from None


__all__ = [
    "ASSIGNORS",
    "MAX_MEMBERS",
    "MAX_TOTAL_PARTITIONS",
    "Assignor",
    "CooperativeStickyAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RevocationPlan",
    "RoundRobinAssignor",
    "StickyAssignor",
    "TopicPartition",
    "get_assignor",
    "revocation_plan",
]
