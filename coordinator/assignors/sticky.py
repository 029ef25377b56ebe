"""Kafka's StickyAssignor (``sticky``): balanced, and keeps partitions where they were.

An eager assignor: every member revokes all its partitions before it rejoins, so its
Subscription's ``owned_partitions`` may well be empty. Like Kafka's, this assignor therefore
also carries the previous assignment in the subscription's ``user_data``
(``subscription_user_data``), in Kafka's StickyAssignor layout, and reads it back when
``owned_partitions`` is empty. The algorithm itself is in ``sticky_core``.

Kafka's documented examples. Three members subscribed to four topics of two partitions each:

>>> from groupcoord.coordinator.consumer_protocol import Subscription
>>> counts = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
>>> every = Subscription(tuple(counts))
>>> first = StickyAssignor().assign(counts, {"C0": every, "C1": every, "C2": every})
>>> for member, assignment in first.items():
...     print(member, assignment.partitions)
C0 (('t0', 0), ('t1', 1), ('t3', 0))
C1 (('t0', 1), ('t2', 0), ('t3', 1))
C2 (('t1', 0), ('t2', 1))

C1 leaves. Round robin would reshuffle; sticky keeps every remaining partition in place:

>>> def rejoin(member, generation=1):
...     return Subscription(tuple(counts), owned_partitions=first[member].partitions,
...                         generation_id=generation)
>>> second = StickyAssignor().assign(counts, {"C0": rejoin("C0"), "C2": rejoin("C2")})
>>> for member, assignment in second.items():
...     print(member, assignment.partitions)
C0 (('t0', 0), ('t1', 1), ('t2', 0), ('t3', 0))
C2 (('t0', 1), ('t1', 0), ('t2', 1), ('t3', 1))

Different subscriptions: t0, t1, t2 have 1, 2 and 3 partitions; C0 takes t0, C1 t0 and t1,
C2 all three. Round robin gives C2 four partitions and C1 one; sticky balances:

>>> counts = {"t0": 1, "t1": 2, "t2": 3}
>>> subs = {"C0": Subscription(("t0",)), "C1": Subscription(("t0", "t1")),
...         "C2": Subscription(("t0", "t1", "t2"))}
>>> result = StickyAssignor().assign(counts, subs)
>>> for member, assignment in result.items():
...     print(member, assignment.partitions)
C0 (('t0', 0),)
C1 (('t1', 0), ('t1', 1))
C2 (('t2', 0), ('t2', 1), ('t2', 2))
"""

from __future__ import annotations

import struct

from ..consumer_protocol import Subscription
from .base import Assignor, TopicPartition, is_partition
from .sticky_core import resolve_ownership, sticky_assignment

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class StickyAssignor(Assignor):
    name = "sticky"

    def subscription_user_data(self, owned: tuple, generation_id: int) -> bytes | None:
        """Kafka's StickyAssignor user data (V1): the partitions owned and their generation."""
        owned = tuple(owned)
        if not all(is_partition(tp) for tp in owned):
            raise ValueError("owned must hold (topic, partition) pairs")
        if isinstance(generation_id, bool) or not isinstance(generation_id, int):
            raise ValueError(f"generation_id is not an integer: {generation_id!r}")
        return encode_user_data(owned, generation_id)

    def _assign(self, counts, topics_of, subscriptions) -> dict[str, list[TopicPartition]]:
        claims = {m: previous_ownership(sub) for m, sub in subscriptions.items()}
        return sticky_assignment(counts, topics_of, resolve_ownership(claims, counts, topics_of))


def previous_ownership(sub: Subscription) -> tuple[tuple[TopicPartition, ...], int]:
    """(partitions, generation) a member owned: the Subscription's own fields, else user data.

    User data that does not parse counts as no claim: one member's bad bytes must not stop
    the whole group from getting an assignment.
    """
    if sub.owned_partitions or not sub.user_data:
        return tuple(sub.owned_partitions), sub.generation_id
    decoded = decode_user_data(sub.user_data)
    if decoded is None:
        return (), sub.generation_id
    partitions, generation = decoded
    return partitions, sub.generation_id if generation is None else generation


# -- Kafka's StickyAssignor user data -----------------------------------------------------------
# V0: [topic string, partitions [int32]]; V1 appends generation int32. Neither carries a version:
# Kafka tries V1 and falls back to V0, i.e. the generation is there when four bytes remain.


def encode_user_data(owned: tuple[TopicPartition, ...], generation_id: int) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in owned:
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(_I32.pack(len(by_topic)))
    for topic, partitions in by_topic.items():
        name = topic.encode("utf-8")
        out += _I16.pack(len(name)) + name + _I32.pack(len(partitions))
        out += b"".join(_I32.pack(p) for p in partitions)
    out += _I32.pack(generation_id)
    return bytes(out)


def decode_user_data(data: bytes) -> tuple[tuple[TopicPartition, ...], int | None] | None:
    """(partitions, generation or None for V0), or None when ``data`` is not this layout."""
    view, pos = memoryview(data), 0

    def take(n: int) -> memoryview:
        nonlocal pos
        if n < 0 or pos + n > len(view):
            raise ValueError("truncated")
        pos += n
        return view[pos - n : pos]

    def count() -> int:
        n = _I32.unpack(take(4))[0]
        if n < 0:
            raise ValueError("negative count")
        return n

    try:
        partitions = []
        for _ in range(count()):
            topic = str(take(_I16.unpack(take(2))[0]), "utf-8")
            for _ in range(count()):
                partitions.append((topic, _I32.unpack(take(4))[0]))
        generation = _I32.unpack(take(4))[0] if pos < len(view) else None
    except (ValueError, UnicodeDecodeError):
        return None
    if pos != len(view):
        return None
    return tuple(partitions), generation
