"""Kafka's RoundRobinAssignor (``roundrobin``): all partitions dealt out like cards.

Every partition of every subscribed topic, sorted by topic then partition, is dealt in turn
over the members sorted by member id; a member not subscribed to the partition's topic is
skipped (the deal moves on to the next member that is). With identical subscriptions the counts
differ by at most one; with different ones, round robin can be far from balanced, which is
what the sticky assignors fix.

Kafka's documented examples. Two members subscribed to two topics of three partitions:

>>> from groupcoord.coordinator.consumer_protocol import Subscription
>>> both = Subscription(("t0", "t1"))
>>> result = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, {"C0": both, "C1": both})
>>> result["C0"].partitions
(('t0', 0), ('t0', 2), ('t1', 1))
>>> result["C1"].partitions
(('t0', 1), ('t1', 0), ('t1', 2))

Three members with different subscriptions (t0, t1, t2 have 1, 2 and 3 partitions):

>>> subs = {"C0": Subscription(("t0",)), "C1": Subscription(("t0", "t1")),
...         "C2": Subscription(("t0", "t1", "t2"))}
>>> result = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, subs)
>>> [result[m].partitions for m in ("C0", "C1", "C2")]   # doctest: +NORMALIZE_WHITESPACE
[(('t0', 0),), (('t1', 0),), (('t1', 1), ('t2', 0), ('t2', 1), ('t2', 2))]
"""

from __future__ import annotations

from .base import Assignor, TopicPartition, all_partitions, java_order


class RoundRobinAssignor(Assignor):
    name = "roundrobin"

    def _assign(self, counts, topics_of, subscriptions) -> dict[str, list[TopicPartition]]:
        members = sorted(topics_of, key=java_order)
        chosen: dict[str, list[TopicPartition]] = {m: [] for m in members}
        turn = 0  # index of the member the next card goes to, if it wants it
        for tp in all_partitions(counts):
            # Some member subscribes to every topic in counts, so this finds one within a lap.
            while tp[0] not in topics_of[members[turn]]:
                turn = (turn + 1) % len(members)
            chosen[members[turn]].append(tp)
            turn = (turn + 1) % len(members)
        return chosen
