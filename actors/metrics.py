"""Partition metrics through ``ray.util.metrics`` (exported by Ray's metrics agent).

Commits and their latency, appends (one fsync each) and their latency, rebalances by cause,
groups by state, load time, failed load attempts by kind. The runtime calls the small interface
below (``committed``, ``appended``, ``event``, ``loaded``, ``load_failed``, ``groups``); tests
pass their own object or none.
Label values are kept low-cardinality: a rebalance's free-text reason is reduced to a cause.
"""

from __future__ import annotations

import logging

from ray.util import metrics as m

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
_LATENCY_BOUNDARIES_S = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0]


def rebalance_cause(detail: str) -> str:
    """A short, low-cardinality label for why a rebalance started."""
    for needle, cause in _REBALANCE_CAUSES:
        if needle in detail:
            return cause
    return "other"


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

    @classmethod
    def create(cls) -> RayMetrics | None:
        try:
            return cls()
        except Exception as exc:  # metrics must never keep a partition from starting
            log.warning("metrics disabled: %r", exc)
            return None

    def committed(self, partition: int, offsets: int, seconds: float) -> None:
        tags = {"partition": str(partition)}
        self.commits.inc(1, tags)
        if offsets:
            self.committed_offsets.inc(offsets, tags)
        self.commit_seconds.observe(seconds, tags)

    def appended(self, partition: int, records: int, seconds: float) -> None:
        tags = {"partition": str(partition)}
        self.appends.inc(1, tags)
        self.records.inc(records, tags)
        self.append_seconds.observe(seconds, tags)

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
        for state in GROUP_STATES:
            self.groups_gauge.set(
                counts.get(state, 0), {"partition": str(partition), "state": state}
            )
