"""Partition metrics through ``ray.util.metrics`` (exported by Ray's metrics agent).

Commits and their latency, appends (one fsync each) and their latency, rebalances by cause,
groups by state, load time, failed load attempts by kind; and the HTTP service's live lag
(``LagMetrics``). The runtime calls the small interface
below (``committed``, ``appended``, ``event``, ``loaded``, ``load_failed``, ``groups``); tests
pass their own object or none.
Label values are kept low-cardinality: a rebalance's free-text reason is reduced to a cause.
The commit and append counters reach Ray in sums, at most ``COUNTER_PUSH_INTERVAL_S`` apart
while requests come and at every ``groups`` call (every few seconds) otherwise. Each latency
histogram (commits, appends) observes every value up to about ``LATENCY_SAMPLES_PER_S`` a
second, and every k-th one beyond (k from the last interval's rate): its quantiles stay those of
every value, its count does not (``groupcoord_commits`` and ``groupcoord_appends`` count them
all).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import msgspec
from ray.util import metrics as m

from groupcoord.coordinator.burrow import Status

from .kafka_listener import ListenerCounters

T = TypeVar("T")

log = logging.getLogger("groupcoord.metrics")

# substring of the Shard's rebalance reason -> cause label
_REBALANCE_CAUSES = (
    ("new member", "member_joined"),
    ("member left", "member_left"),
    ("session timeout", "session_timeout"),
    ("SyncGroup", "sync_timeout"),
    ("leader rejoined", "leader_rejoined"),
    ("metadata changed", "metadata_changed"),
    ("joining during", "member_rejoined"),
    ("static member", "static_member"),
    ("max.size", "group_max_size"),
    ("too large", "group_record_too_large"),
)
GROUP_STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
STATUS_CODES = {s.name: int(s) for s in Status}
COUNTER_PUSH_INTERVAL_S = 1.0
# Values each latency histogram observes per second at most, roughly (Sampled). A few
# thousand between two scrapes still place a p99; each observation costs the partition's
# thread microseconds (Sampled's comment).
LATENCY_SAMPLES_PER_S = 100
_LATENCY_BOUNDARIES_S = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0]


def rebalance_cause(detail: str) -> str:
    """A short, low-cardinality label for why a rebalance started."""
    for needle, cause in _REBALANCE_CAUSES:
        if needle in detail:
            return cause
    return "other"


def created(metrics: Callable[[], T], what: str) -> T | None:
    """``metrics()``, or None when Ray cannot make them (logged, naming ``what``): metrics
    must never keep an actor from starting."""
    try:
        return metrics()
    except Exception as exc:
        log.warning("%s disabled: %r", what, exc)
        return None


class Sampled:
    """A Ray histogram fed every ``every``-th value; ``retune`` sets ``every`` from the rate of
    values since the last retune, so that about ``LATENCY_SAMPLES_PER_S`` a second reach Ray.
    Every k-th, not the first n of each second: the sample is spread over the interval."""

    # Why sample: a Ray histogram's observe costs the partition's thread 2 µs in a tight loop
    # and several times that between requests (caches cold). Observing each commit's and each
    # append's latency took 35–40 µs of a 64-partition commit's ~400 in the partition's thread
    # (bench/wire-findings.md, "Latency histograms sampled"); counting stays exact (the counters).

    __slots__ = ("histogram", "every", "_until", "_seen")

    def __init__(self, histogram) -> None:
        self.histogram = histogram
        self.every = 1
        self._until = 1
        self._seen = 0

    def observe(self, value: float, tags: dict) -> None:
        self._seen += 1
        self._until -= 1
        if self._until <= 0:
            self._until = self.every
            self.histogram.observe(value, tags)

    def retune(self, seconds: float) -> None:
        self.every = max(1, int(self._seen / seconds / LATENCY_SAMPLES_PER_S))
        self._seen = 0


class RayMetrics:
    def __init__(self) -> None:
        tags = ("partition",)
        self.commits = m.Counter("groupcoord_commits", "OffsetCommit requests answered", tags)
        self.committed_offsets = m.Counter(
            "groupcoord_committed_offsets", "partitions in answered OffsetCommit requests", tags
        )
        self.commit_seconds = m.Histogram(
            "groupcoord_commit_seconds",
            "OffsetCommit latency inside the partition",
            _LATENCY_BOUNDARIES_S,
            tags,
        )
        self.appends = m.Counter("groupcoord_appends", "log appends (one fsync each)", tags)
        self.records = m.Counter("groupcoord_records", "records appended", tags)
        self.append_seconds = m.Histogram(
            "groupcoord_append_seconds", "append+fsync latency", _LATENCY_BOUNDARIES_S, tags
        )
        self.rebalances = m.Counter(
            "groupcoord_rebalances", "rebalances started, by cause", ("partition", "cause")
        )
        self.group_events = m.Counter(
            "groupcoord_group_events", "group events by kind", ("partition", "kind")
        )
        self.groups_gauge = m.Gauge("groupcoord_groups", "groups by state", ("partition", "state"))
        self.load_seconds = m.Gauge("groupcoord_load_seconds", "last load time", tags)
        self.load_failures = m.Counter(
            "groupcoord_load_failures",
            "failed load attempts, by kind (locked, corrupt, io)",
            ("partition", "kind"),
        )
        self.listeners = ListenerMetrics()
        self._summed = (self.commits, self.committed_offsets, self.appends, self.records)
        self._counts: dict[int, list[int]] = {}  # partition -> _pending's counts
        self._tags: dict[int, dict[str, str]] = {}  # partition -> its label, made once
        self._pushed_at = time.monotonic()
        self.commit_latency = Sampled(self.commit_seconds)
        self.append_latency = Sampled(self.append_seconds)

    # Counters are summed here and handed to Ray at most every COUNTER_PUSH_INTERVAL_S (and at
    # every ``groups`` call, every few seconds): each Ray metric call costs ~6 µs of the
    # partition's thread, three per commit were ~10 % of a commit's CPU, and Ray exports every
    # few seconds anyway. The latency histograms are sampled (Sampled).
    def committed(self, partition: int, offsets: int, seconds: float) -> None:
        pending = self._pending(partition)
        pending[0] += 1
        pending[1] += offsets
        self.commit_latency.observe(seconds, self._tags[partition])
        self._maybe_push()

    def appended(self, partition: int, records: int, seconds: float) -> None:
        pending = self._pending(partition)
        pending[2] += 1
        pending[3] += records
        self.append_latency.observe(seconds, self._tags[partition])
        self._maybe_push()

    def _pending(self, partition: int) -> list[int]:
        """[commits, committed offsets, appends, records] not yet handed to Ray."""
        pending = self._counts.get(partition)
        if pending is None:
            pending = self._counts[partition] = [0, 0, 0, 0]
            self._tags[partition] = {"partition": str(partition)}
        return pending

    def _maybe_push(self) -> None:
        if time.monotonic() - self._pushed_at >= COUNTER_PUSH_INTERVAL_S:
            self.push_counters()

    def push_counters(self) -> None:
        """Hand the summed counters to Ray, and retune the latency histograms' sampling to the
        rates since the last push."""
        now = time.monotonic()
        seconds = max(now - self._pushed_at, COUNTER_PUSH_INTERVAL_S)
        self.commit_latency.retune(seconds)
        self.append_latency.retune(seconds)
        self._pushed_at = now
        for partition, pending in self._counts.items():
            tags = self._tags[partition]
            for counter, value in zip(self._summed, pending, strict=True):
                if value:
                    counter.inc(value, tags)
            pending[:] = [0, 0, 0, 0]

    def event(self, partition: int, event) -> None:
        self.group_events.inc(1, {"partition": str(partition), "kind": event.kind})
        if event.kind == "rebalance":
            self.rebalances.inc(
                1, {"partition": str(partition), "cause": rebalance_cause(event.detail)}
            )

    def loaded(self, partition: int, seconds: float) -> None:
        self.load_seconds.set(seconds, {"partition": str(partition)})

    def load_failed(self, partition: int, kind: str) -> None:
        self.load_failures.inc(1, {"partition": str(partition), "kind": kind})

    def groups(self, partition: int, counts: dict[str, int]) -> None:
        self.push_counters()
        for state in GROUP_STATES:
            self.groups_gauge.set(
                counts.get(state, 0), {"partition": str(partition), "state": state}
            )


class ListenerMetrics:
    """A Kafka listener's connections (a gauge) and its counters' growth, labelled by
    ``partition``: a partition's number, or "bootstrap" for the router's listener."""

    def __init__(self) -> None:
        tags = ("partition",)
        self.kafka_connections = m.Gauge(
            "groupcoord_kafka_connections", "open Kafka connections of the listener", tags
        )
        # ListenerCounters' totals, in its field order after connections
        self._counters = tuple(
            m.Counter(f"groupcoord_kafka_{name}", description, tags)
            for name, description in (
                ("refused_connections", "connections refused over max_connections"),
                ("protocol_errors", "connections closed for a request they could not frame"),
                ("authentication_failures", "failed SASL authentications"),
                (
                    "idle_poll_turns",
                    "turns the network processes' loops polled rather than slept",
                ),
            )
        )
        self._reported: dict[str, tuple[int, ...]] = {}  # label -> totals

    def report(self, partition: int | str, counters: ListenerCounters) -> None:
        """The listener's connections now, and what its totals grew by since the last call."""
        label = str(partition)
        tags = {"partition": label}
        connections, *totals = msgspec.structs.astuple(counters)
        self.kafka_connections.set(connections, tags)
        before = self._reported.get(label, (0,) * len(totals))
        for counter, now, then in zip(self._counters, totals, before, strict=True):
            if now > then:
                counter.inc(now - then, tags)
        self._reported[label] = tuple(totals)


class LagMetrics:
    """The HTTP service's live lag gauges: each partition's current lag (unknown lags are not
    set), and each group's Burrow status as Burrow numbers it (NOTFOUND 0, OK 1, WARN 2,
    ERR 3; a partition's STOP 4, STALL 5, REWIND 6). Label sets are bounded by the
    partitions' window limit (``LagWindowConfig.max_windows``)."""

    def __init__(self) -> None:
        self.lag = m.Gauge(
            "groupcoord_consumer_lag",
            "current lag (log-end offset minus committed offset)",
            ("group", "topic", "partition"),
        )
        self.partition_status = m.Gauge(
            "groupcoord_partition_status",
            "Burrow status of a group's partition",
            ("group", "topic", "partition"),
        )
        self.status = m.Gauge("groupcoord_group_status", "Burrow status of a group", ("group",))
        self.total_lag = m.Gauge("groupcoord_group_lag", "summed current lag", ("group",))

    def group_status(self, group_id: str, status) -> None:
        self.status.set(STATUS_CODES[status.status], {"group": group_id})
        if status.total_lag is not None:
            self.total_lag.set(status.total_lag, {"group": group_id})
        for p in status.partitions:
            tags = {"group": group_id, "topic": p.topic, "partition": str(p.partition)}
            self.partition_status.set(STATUS_CODES[p.status], tags)
            if p.current_lag is not None:
                self.lag.set(p.current_lag, tags)
