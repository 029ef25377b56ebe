"""Burrow's consumer-lag evaluation rules, as plain functions over one partition's window,
shared by the lake report (``spark_export``) and the live HTTP service (``actors``).

Burrow keeps, per consumed partition, a ring of N slots (its storage's ``intervals``) holding
recent commits (offset, time, lag when committed), and the last N log-end offsets it fetched.
A commit less than ``min-distance`` after the time stored in the newest slot replaces that
slot's offset and lag but keeps its time, so a consumer committing every 200 ms fills one slot
per ``min-distance``, not one per commit (``CommitWindow`` builds the slots so online;
``spark_export.analytics.burrow_status`` builds the same slots from a lake).
Defaults are Burrow's shipped configuration (config/burrow.toml): 15 intervals, min-distance
1 s. The window is then judged without thresholds, in this order (Burrow's evaluator,
``calculatePartitionStatus``):

  no lag now                                                             -> OK
  rule 3  time since the last commit exceeds the window's own span, and
          no recent log end was at or below the last committed offset    -> STOP
  rule 2  the committed offset went backwards (first time in the window)
          and never got back to where it was before                      -> REWIND
  rule 1  lag was zero at some commit in the window                      -> OK
  rule 4  the offset never changed across the window                     -> STALL
  rule 5  the offset moves but the lag never decreases                   -> WARN
  otherwise                                                              -> OK

STOP comes before rule 1 because a consumer that caught up and then died keeps a window of
zero-lag commits forever; the recent log ends keep a consumer of a quiet topic from being
called stopped the moment a new message arrives. REWIND comes before rule 1 too, and a rewind
the consumer has since recovered from (it committed the old offset again, as after a
rebalance that replays some work) is not held against it: Burrow's evaluator since its
``allowed-lag`` release (whose default, 0, is the rule "no lag now" above).

A group takes its worst partition, with STOP, STALL and REWIND all reported as ERR; its total
lag sums the partitions' current lags and its max-lag partition is the one with the largest.
``complete`` is the fraction of the window's slots that hold commits (Burrow reports rather
than hides a short history).

A lag may be unknown (``None``): no log-end offset was known when the commit was seen, or none
is known now. Burrow keeps such a commit's lag null and skips it in rules 1 and 5; a partition
whose current lag is unknown cannot be judged and is reported OK with ``current_lag=None``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from enum import IntEnum

import msgspec

DEFAULT_WINDOW = 15  # Burrow's shipped ``intervals``: window slots per partition
DEFAULT_MIN_DISTANCE_MS = 1_000  # Burrow's shipped ``min-distance`` (1 s): closer commits
# share a slot


class Status(IntEnum):
    # Burrow's order: a higher value is worse; group status caps at ERR.
    NOTFOUND = 0
    OK = 1
    WARN = 2
    ERR = 3
    STOP = 4
    STALL = 5
    REWIND = 6


class CommitPoint(msgspec.Struct, frozen=True):
    offset: int
    timestamp_ms: int  # the commit's time (a merged slot keeps its first commit's)
    lag: int | None  # end offset minus offset when committed; None when no end was known
    observed_at_ms: int = 0  # when the slot's newest commit was seen (Burrow's observedAt)


class PartitionStatus(msgspec.Struct, frozen=True):
    group_id: str
    topic: str
    partition: int
    status: str
    current_lag: int | None
    complete: float
    start: CommitPoint | None = None
    end: CommitPoint | None = None


class GroupStatus(msgspec.Struct, frozen=True):
    group_id: str
    status: str
    total_lag: int | None  # the sum of the known current lags; None when none is known
    max_lag: PartitionStatus | None
    complete: float
    partitions: tuple[PartitionStatus, ...]


def evaluate_window(
    points: list[CommitPoint],
    current_lag: int | None,
    now_ms: int,
    recent_log_ends: Sequence[int] = (),
) -> Status:
    """The status of one partition's window (oldest commit first); ``recent_log_ends`` are
    the last log-end offsets observed up to ``now_ms``."""
    if not points or current_lag is None or current_lag <= 0:
        return Status.OK
    first_ms, last = points[0].timestamp_ms, points[-1]
    if now_ms - last.timestamp_ms > last.timestamp_ms - first_ms and not any(
        end <= last.offset for end in recent_log_ends
    ):
        return Status.STOP
    rewound = next((i for i in range(1, len(points)) if points[i].offset < points[i - 1].offset), 0)
    if rewound and all(p.offset < points[rewound - 1].offset for p in points[rewound:]):
        return Status.REWIND
    if any(p.lag == 0 for p in points):
        return Status.OK
    pairs = list(zip(points, points[1:], strict=False))
    if all(b.offset == a.offset for a, b in pairs):
        return Status.STALL
    known = [p.lag for p in points if p.lag is not None]  # Burrow skips null lags here
    if all(b >= a for a, b in zip(known, known[1:], strict=False)):
        return Status.WARN
    return Status.OK


def partition_status(
    group_id: str,
    topic: str,
    partition: int,
    points: list[CommitPoint],
    current_lag: int | None,
    now_ms: int,
    window: int = DEFAULT_WINDOW,
    recent_log_ends: Sequence[int] = (),
) -> PartitionStatus:
    """``points`` in log order (commits in the same millisecond keep it: the sort is stable)."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    recent = sorted(points, key=lambda p: p.timestamp_ms)[-window:]
    status = evaluate_window(recent, current_lag, now_ms, recent_log_ends)
    return PartitionStatus(
        group_id,
        topic,
        partition,
        status.name,
        None if current_lag is None else max(current_lag, 0),
        len(recent) / window,
        recent[0] if recent else None,
        recent[-1] if recent else None,
    )


def group_status(group_id: str, partitions: list[PartitionStatus]) -> GroupStatus:
    """The worst partition (capped at ERR), the summed current lag and the partition with the
    largest one (the first partition when no lag is known, as Burrow picks its first)."""
    worst = Status.OK if partitions else Status.NOTFOUND
    max_lag = None
    for p in partitions:
        worst = max(worst, min(Status[p.status], Status.ERR))
        if max_lag is None or (p.current_lag or 0) > (max_lag.current_lag or 0):
            max_lag = p
    complete = sum(p.complete == 1.0 for p in partitions) / len(partitions) if partitions else 0.0
    ordered = tuple(sorted(partitions, key=lambda p: (p.topic, p.partition)))
    known = [p.current_lag for p in partitions if p.current_lag is not None]
    total = sum(known) if known or not partitions else None
    return GroupStatus(group_id, worst.name, total, max_lag, complete, ordered)


class CommitWindow:
    """One partition's ring of ``window`` slots, filled as Burrow's storage fills it: a commit
    less than ``min_distance_ms`` after the newest slot's time takes that slot's offset and lag
    but keeps its time; any other commit opens a new slot, dropping the oldest when full.
    Commits must arrive in commit order (a partition sees its log's order)."""

    __slots__ = ("min_distance_ms", "slots")

    def __init__(
        self, window: int = DEFAULT_WINDOW, min_distance_ms: int = DEFAULT_MIN_DISTANCE_MS
    ) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if min_distance_ms < 0:
            raise ValueError(f"min_distance_ms must be >= 0, got {min_distance_ms}")
        self.min_distance_ms = min_distance_ms
        self.slots: deque[CommitPoint] = deque(maxlen=window)

    def add(self, offset: int, timestamp_ms: int, lag: int | None) -> None:
        slots = self.slots
        if slots and timestamp_ms - slots[-1].timestamp_ms < self.min_distance_ms:
            slots[-1] = CommitPoint(offset, slots[-1].timestamp_ms, lag, timestamp_ms)
        else:
            slots.append(CommitPoint(offset, timestamp_ms, lag, timestamp_ms))

    def points(self) -> list[CommitPoint]:
        return list(self.slots)
