"""Kafka's RangeAssignor (``range``): contiguous ranges of each topic, topic by topic.

For each topic, the members subscribed to it are sorted by member id and its partitions are cut
into contiguous ranges in that order: with ``n`` partitions and ``m`` members each gets
``n // m`` and the first ``n % m`` get one more. Topics are independent, so the first members
collect the extra partitions of every topic: range is simple and co-locates partition ``i`` of
topics with equal counts (useful for joins), at the price of balance across many topics.

Kafka's documented example: two members, two topics of three partitions each.

>>> from groupcoord.coordinator.consumer_protocol import Subscription
>>> both = Subscription(("t0", "t1"))
>>> result = RangeAssignor().assign({"t0": 3, "t1": 3}, {"C0": both, "C1": both})
>>> result["C0"].partitions
(('t0', 0), ('t0', 1), ('t1', 0), ('t1', 1))
>>> result["C1"].partitions
(('t0', 2), ('t1', 2))
"""

from __future__ import annotations

from .base import Assignor, TopicPartition, java_order


class RangeAssignor(Assignor):
    name = "range"

    def _assign(self, counts, topics_of, subscriptions) -> dict[str, list[TopicPartition]]:
        chosen: dict[str, list[TopicPartition]] = {m: [] for m in topics_of}
        for topic, n in counts.items():
            members = sorted(
                (m for m, topics in topics_of.items() if topic in topics), key=java_order
            )
            per_member, extra = divmod(n, len(members))
            start = 0
            for i, member in enumerate(members):
                length = per_member + (1 if i < extra else 0)
                chosen[member].extend((topic, p) for p in range(start, start + length))
                start += length
        return chosen
