"""A hierarchical timing wheel on virtual milliseconds, keyed, with O(1) schedule and cancel.

Theory of operation
-------------------
Level ``i`` of the wheel has buckets ``WHEEL_SIZE ** i`` milliseconds wide. A timer
``deadline_ms`` away by ``delta = deadline_ms - reference_ms`` goes to the lowest level whose
span ``WHEEL_SIZE ** (i + 1)`` exceeds ``delta``, into the bucket that starts at
``deadline_ms`` rounded down to that level's slot width. So near deadlines sit in fine buckets
and far ones in coarse buckets; level-0 buckets are 1 ms wide and hold a single deadline.

Buckets are found by an integer *bucket key* ``start_ms << LEVEL_BITS | level``. Every live
bucket key is in a min-heap exactly once (Kafka's TimingWheel keeps its buckets in a
DelayQueue the same way), which orders buckets by start and, for one start, finer level first.
The heap holds buckets, not timers, so it stays small (a few hundred entries for a million
timers) and a clock jump of hours costs nothing per skipped tick.

* ``schedule(key, deadline_ms)`` replaces any earlier deadline of ``key``: two dict writes and,
  only when the bucket is new, one heap push.
* ``cancel(key)`` is two dict deletes. A bucket left empty stays until the heap reaches it.
* ``pop_due(now_ms)`` walks the heap: a coarse bucket whose start has come is *cascaded*, its
  timers re-placed relative to that start (each lands in a strictly finer bucket that starts no
  earlier); a level-0 bucket whose start is due hands out its timers one at a time. Timers that
  a firing action schedules or cancels are seen at once, because the bucket being drained stays
  live until it is empty.

Why this order is exact: a bucket's start never exceeds any deadline in it, and buckets leave the
heap in start order, so a timer is handed out only after every timer with an earlier deadline.
Equal deadlines come out in an unspecified order, as in Kafka.

Memory per live timer: one entry in the key index (pointing at the bucket dict itself, no new
object), one entry in the bucket (the deadline), and the deadline's int. Payloads are rare and
live in a side dict only when not None.
"""

from __future__ import annotations

from collections.abc import Hashable
from heapq import heappop, heappush
from typing import Any

WHEEL_SIZE_BITS = 6
WHEEL_SIZE = 1 << WHEEL_SIZE_BITS  # slots per level
LEVEL_BITS = 3
LEVELS = 1 << LEVEL_BITS  # 64**8 ms ~ 8,900 years: covers every int deadline
LEVEL_MASK = LEVELS - 1
# delta_ms < LEVEL_SPAN_MS[i] -> level i (the top level takes everything larger); the level is
# computed as (bit_length(delta) - 1) // WHEEL_SIZE_BITS, which is the same thing.
LEVEL_SPAN_MS = tuple(WHEEL_SIZE ** (level + 1) for level in range(LEVELS))


class TimingWheel:
    """Keyed timers: ``schedule``, ``cancel``, ``pop_due``, ``next_deadline_ms``, ``wake_at_ms``,
    ``deadline_of``.

    ``reference_ms`` only chooses levels (placement is correct for any reference not after the
    deadline); the wheel moves it forward as ``pop_due`` is called.
    """

    __slots__ = (
        "_reference_ms",
        "_index",
        "_buckets",
        "_heap",
        "_payloads",
        "_recent_from_ms",
        "_recent_until_ms",
        "_recent_bucket",
    )

    def __init__(self, reference_ms: int = 0) -> None:
        self._reference_ms = reference_ms
        self._index: dict[Hashable, dict] = {}  # key -> the bucket dict holding it
        self._buckets: dict[int, dict] = {}  # bucket key -> {timer key: deadline_ms}
        self._heap: list[int] = []  # every key of _buckets, once
        self._payloads: dict[Hashable, Any] = {}  # only non-None payloads
        # The bucket most recently chosen and the deadlines it covers: heartbeats arriving
        # together re-arm into the same bucket, so most schedules skip choosing one.
        self._recent_from_ms = self._recent_until_ms = 0
        self._recent_bucket: dict = {}

    def __len__(self) -> int:
        return len(self._index)

    def schedule(self, key: Hashable, deadline_ms: int, payload: Any = None) -> None:
        """Arm ``key`` at ``deadline_ms``, replacing its earlier deadline if it had one."""
        index = self._index
        old = index.get(key)
        if old is not None:
            del old[key]
        if self._recent_from_ms <= deadline_ms < self._recent_until_ms:
            bucket = self._recent_bucket
        else:
            bucket = self._bucket_for(deadline_ms, self._reference_ms)
        bucket[key] = deadline_ms
        index[key] = bucket
        if payload is not None:
            self._payloads[key] = payload
        elif old is not None and self._payloads:
            self._payloads.pop(key, None)

    def cancel(self, key: Hashable) -> bool:
        """Disarm ``key``; False if it was not armed."""
        bucket = self._index.pop(key, None)
        if bucket is None:
            return False
        del bucket[key]
        if self._payloads:
            self._payloads.pop(key, None)
        return True

    def deadline_of(self, key: Hashable) -> int | None:
        bucket = self._index.get(key)
        return None if bucket is None else bucket[key]

    def pop_due(self, now_ms: int) -> tuple[Hashable, int, Any] | None:
        """Remove and return the earliest timer with ``deadline_ms <= now_ms``, or None."""
        if now_ms > self._reference_ms:
            self._reference_ms = now_ms
        bucket = self._first_fine_bucket(now_ms)
        if bucket is None:
            return None
        key, deadline_ms = bucket.popitem()
        del self._index[key]
        payload = self._payloads.pop(key, None) if self._payloads else None
        return key, deadline_ms, payload

    def next_deadline_ms(self) -> int | None:
        """The earliest armed deadline, exactly (coarse buckets ahead of it are cascaded)."""
        bucket = self._first_fine_bucket(None)
        if bucket is None:
            return None
        return next(iter(bucket.values()))

    def wake_at_ms(self) -> int | None:
        """A time not after the earliest armed deadline (None when none is armed): the start of
        the first bucket in the heap, found without cascading. ``pop_due`` at that time may hand
        out nothing (the bucket was coarse, or its timers were re-armed later); it has then
        cascaded or dropped that bucket, so the next answer is later than its ``now_ms``.

        For a caller that polls: ``next_deadline_ms`` is exact, but when a re-armed timer
        (a heartbeat, a commit) leaves the front it cascades coarse buckets to find the next
        one, and a caller asking after every request pays that each time; this answer moves
        only when the front bucket does."""
        if not self._index:
            return None
        return self._heap[0] >> LEVEL_BITS

    # -- internals --------------------------------------------------------------------------------

    def _bucket_for(self, deadline_ms: int, reference_ms: int) -> dict:
        delta_ms = deadline_ms - reference_ms
        if delta_ms < WHEEL_SIZE:
            level = shift = 0
        else:
            level = min((delta_ms.bit_length() - 1) // WHEEL_SIZE_BITS, LEVELS - 1)
            shift = level * WHEEL_SIZE_BITS
        start_ms = deadline_ms >> shift << shift
        bucket_key = start_ms << LEVEL_BITS | level
        bucket = self._buckets.get(bucket_key)
        if bucket is None:
            bucket = self._buckets[bucket_key] = {}
            heappush(self._heap, bucket_key)
        # Any live bucket whose span holds a deadline is a correct place for it (its start is
        # not after the deadline and it leaves the heap in start order), so reuse this one.
        self._recent_from_ms, self._recent_until_ms = start_ms, start_ms + (1 << shift)
        self._recent_bucket = bucket
        return bucket

    def _first_fine_bucket(self, now_ms: int | None) -> dict | None:
        """The non-empty level-0 bucket that comes first (cascading coarser buckets before it),
        or None if there is none, or if ``now_ms`` is given and that bucket is not yet due."""
        heap, buckets = self._heap, self._buckets
        while heap:
            bucket_key = heap[0]
            start_ms, level = bucket_key >> LEVEL_BITS, bucket_key & LEVEL_MASK
            if now_ms is not None and start_ms > now_ms:
                return None
            bucket = buckets[bucket_key]
            if bucket and level == 0:
                return bucket
            heappop(heap)
            del buckets[bucket_key]
            if bucket is self._recent_bucket:  # never hand out a bucket that left
                self._recent_from_ms = self._recent_until_ms = 0
            if bucket:
                self._cascade(bucket, start_ms)
        return None

    def _cascade(self, bucket: dict, start_ms: int) -> None:
        index = self._index
        for key, deadline_ms in bucket.items():
            finer = self._bucket_for(deadline_ms, start_ms)
            finer[key] = deadline_ms
            index[key] = finer
