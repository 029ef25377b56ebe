"""Benchmark of the sans-IO core: shard request rates, timer churn, memory per object.

Run: ``make bench`` or ``.venv/bin/python bench/core.py [--quick]``. Prints a table and writes
``bench/results/core.json``. Every rate is also given as a ratio against a baseline measured in the
same run (this machine is shared and noisy; absolute numbers drift, ratios much less):

* timer churn: 100,000 members, 1,000,000 heartbeats, each replacing the member's previous
  deadline (schedule + cancel), on the timing wheel and on a ``heapq`` timer with lazy deletion.
* shard: heartbeats and single-partition commits per second on a shard holding 10,000 members
  (100 Stable groups of 100), against the bare wheel's churn rate.
* memory (tracemalloc): bytes per member, per committed offset, per live timer.
* bounds (issue #9 item 12), on a shard of 1,000,000 groups with one offset each: reading the
  groups-by-state counts against the full scan the 5 s gauge used to make; the longest
  retention-cleanup turn against the whole sweep; an OffsetFetch naming 3,000,000 partitions
  refused by the default bound against the same request served by a shard without it, and one
  at the bound (10,000 partitions).
"""

from __future__ import annotations

import argparse
import gc
import heapq
import itertools
import json
import os
import platform
import sys
import time
import tracemalloc
from datetime import UTC, datetime

from groupcoord.coordinator import (
    CoordinatorConfig,
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetFetchRequest,
    SequentialIds,
    Shard,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    TopicPartition,
)
from groupcoord.coordinator.records import OffsetCommitValue
from groupcoord.coordinator.timing_wheel import TimingWheel

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "core.json")
SESSION_MS = 10_000  # the churn workload's session timeout


class HeapTimer:
    """The baseline: a binary heap with lazy deletion (a cancelled entry stays until popped)."""

    def __init__(self) -> None:
        self._heap: list = []
        self._live: dict = {}  # key -> its current entry's sequence number
        self._seq = itertools.count()

    def schedule(self, key, deadline_ms: int, payload=None) -> None:
        seq = next(self._seq)
        self._live[key] = seq
        heapq.heappush(self._heap, (deadline_ms, seq, key))

    def cancel(self, key) -> bool:
        return self._live.pop(key, None) is not None

    def pop_due(self, now_ms: int):
        heap, live = self._heap, self._live
        while heap and heap[0][0] <= now_ms:
            deadline_ms, seq, key = heapq.heappop(heap)
            if live.get(key) == seq:
                del live[key]
                return key, deadline_ms, None
        return None


def timer_churn(timer, members: int, heartbeats: int) -> float:
    """Heartbeats per second: each re-arms one member's session deadline (cancel + schedule).
    Members heartbeat round-robin, each every third of a session (Kafka's default ratio), so
    virtual time advances members / (3 * session) ms per heartbeat and the run spans several
    sessions; due timers are popped as a runtime would, which is where the heap pays for the
    stale entries lazy deletion left behind (no live timer falls due: every member keeps up)."""
    keys = [("hb", "group", f"member-{i}") for i in range(members)]
    now = 0
    for key in keys:
        timer.schedule(key, now + SESSION_MS)
    schedule, cancel, pop_due = timer.schedule, timer.cancel, timer.pop_due
    per_ms = max(members * 3 // SESSION_MS, 1)
    started = time.perf_counter()
    for i in range(heartbeats):
        key = keys[i % members]
        cancel(key)
        schedule(key, now + SESSION_MS)
        if i % per_ms == 0:
            now += 1
            while pop_due(now) is not None:
                pass
    return heartbeats / (time.perf_counter() - started)


# Shard members' sessions outlast building 100 groups, so every measured request is a success.
MEMBER_SESSION_MS = 1_800_000
REBALANCE_MS = 1_000


def _join(group: str) -> JoinGroupRequest:
    return JoinGroupRequest(
        group,
        "",
        "consumer",
        [JoinGroupRequestProtocol("range", b"")],
        MEMBER_SESSION_MS,
        REBALANCE_MS,
        client_id="bench",
        require_known_member_id=False,
    )


def stable_shard(groups: int, members_per_group: int):
    """A loaded shard with Stable groups, built through the protocol itself.
    Returns the shard, its members as (group, member id, generation) and the shard's clock."""
    shard = Shard(
        0, 1, CoordinatorConfig(group_initial_rebalance_delay_ms=100), ids=SequentialIds(1)
    )
    shard.on_loaded(0)
    rid = itertools.count()
    now = 0
    members: list[tuple[str, str, int]] = []
    for g in range(groups):
        group = f"group-{g}"
        parked = [next(rid) for _ in range(members_per_group)]
        replies = {}
        for request_id in parked:
            replies.update(shard.handle(now, request_id, _join(group)).replies)
        while any(r not in replies for r in parked):  # initial delay windows, then the phase ends
            now += 100
            replies.update(shard.on_timer(now).replies)
        joined = [replies[r] for r in parked]
        generation, leader = joined[0].generation_id, joined[0].leader
        assignments = [SyncGroupRequestAssignment(j.member_id, b"") for j in joined]
        for j in joined:
            shard.handle(
                now,
                next(rid),
                SyncGroupRequest(
                    group, generation, j.member_id, assignments if j.member_id == leader else []
                ),
            )
            members.append((group, j.member_id, generation))
    return shard, members, now


def _rate(shard: Shard, requests_list, count: int, now: int) -> float:
    handle, n = shard.handle, len(requests_list)
    started = time.perf_counter()
    for i in range(count):
        handle(now, i, requests_list[i % n])
    rate = count / (time.perf_counter() - started)
    # Refuse to report the speed of an error path.
    for request in (requests_list[0], requests_list[-1]):
        response = shard.handle(now, -1, request).replies[0][1]
        errors = (
            [p.error for p in response.partitions]
            if hasattr(response, "partitions")
            else [response.error]
        )
        if any(errors):
            raise SystemExit(f"benchmark request failed: {response}")
    return rate


def shard_rates(shard: Shard, members, count: int, now: int) -> tuple[float, float]:
    heartbeats = [HeartbeatRequest(g, gen, m) for g, m, gen in members]
    commits = [
        OffsetCommitRequest(g, gen, m, [OffsetCommitRequestPartition("topic", i % 64, i)])
        for i, (g, m, gen) in enumerate(members)
    ]
    return _rate(shard, heartbeats, count, now), _rate(shard, commits, count, now)


def bytes_per(build, count: int) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return (after - before) / count


def timer_memory(count: int) -> float:
    keys = [("hb", "group", f"member-{i}") for i in range(count)]  # owned by the caller

    def build():
        wheel = TimingWheel(0)
        for i, key in enumerate(keys):
            wheel.schedule(key, SESSION_MS + i % 5_000)
        return wheel

    return bytes_per(build, count)


def member_memory(groups: int, per_group: int) -> float:
    return bytes_per(lambda: stable_shard(groups, per_group), groups * per_group)


def offset_memory(count: int) -> float:
    def build():
        shard = Shard(0, 1, CoordinatorConfig())
        shard.on_loaded(0)
        for i in range(count // 100):
            shard.handle(
                1,
                i,
                OffsetCommitRequest(
                    f"group-{i % 100}",
                    -1,
                    "",
                    [
                        OffsetCommitRequestPartition(f"topic-{i}", p, 1_000_000 + p)
                        for p in range(100)
                    ],
                ),
            )
        return shard

    return bytes_per(build, count)


def many_groups_shard(groups: int) -> Shard:
    """A loaded shard of ``groups`` Empty groups with one offset each (as a snapshot loads)."""
    config = CoordinatorConfig(max_groups=groups, offsets_retention_check_interval_ms=1_000)
    shard = Shard(0, 1, config)
    value = OffsetCommitValue(1, commit_timestamp_ms=0)
    for i in range(groups):
        shard.restore(f"group-{i}", None, {("topic", 0): value})
    shard.on_loaded(0)
    while shard.next_deadline_ms() == 1:  # let the first cleanup sweep finish
        shard.on_timer(1)
    return shard


def gauge_seconds(shard: Shard, reads: int = 1_000) -> tuple[float, float]:
    """Seconds per read of groups-by-state: the Shard's counts, and a full scan of the groups."""
    started = time.perf_counter()
    for _ in range(reads):
        counted = shard.group_state_counts()
    per_read = (time.perf_counter() - started) / reads
    started = time.perf_counter()
    scanned: dict[str, int] = {}
    for group in shard.groups():
        scanned[str(group.state)] = scanned.get(str(group.state), 0) + 1
    scan = time.perf_counter() - started
    if counted != scanned:
        raise SystemExit(f"state counts {counted} differ from a scan {scanned}")
    return per_read, scan


def cleanup_turn_seconds(shard: Shard) -> tuple[float, float]:
    """(longest turn, whole sweep) of one retention sweep in which nothing expires."""
    now = shard.next_deadline_ms()
    longest = total = 0.0
    while True:
        started = time.perf_counter()
        shard.on_timer(now)
        elapsed = time.perf_counter() - started
        longest, total = max(longest, elapsed), total + elapsed
        if shard.next_deadline_ms() != now + 1:
            return longest, total
        now += 1


def fetch_seconds(partitions: int, config: CoordinatorConfig) -> tuple[float, Errors]:
    """Seconds to answer one OffsetFetch naming ``partitions`` partitions, and its error."""
    shard = Shard(0, 1, config)
    shard.on_loaded(0)
    shard.handle(
        0, 0, OffsetCommitRequest("group", -1, "", [OffsetCommitRequestPartition("topic", 0, 1)])
    )
    request = OffsetFetchRequest("group", [TopicPartition("topic", p) for p in range(partitions)])
    started = time.perf_counter()
    response = shard.handle(0, 1, request).replies[0][1]
    return time.perf_counter() - started, response.error


def bounds(groups: int, fetched: int) -> dict:
    shard = many_groups_shard(groups)
    counts_s, scan_s = gauge_seconds(shard)
    turn_s, sweep_s = cleanup_turn_seconds(shard)
    del shard
    bound = CoordinatorConfig().max_partitions_per_request
    refused_s, refused = fetch_seconds(fetched, CoordinatorConfig())
    unbounded = CoordinatorConfig(
        max_partitions_per_request=fetched, max_topics_per_request=fetched
    )
    served_s, served = fetch_seconds(fetched, unbounded)
    at_bound_s, at_bound = fetch_seconds(bound, CoordinatorConfig())
    if (refused, served, at_bound) != (Errors.INVALID_REQUEST, Errors.NONE, Errors.NONE):
        raise SystemExit(f"unexpected OffsetFetch answers: {refused!r} {served!r} {at_bound!r}")
    return {
        "groups": groups,
        "gauge_counts_s": counts_s,
        "gauge_scan_s": scan_s,
        "cleanup_longest_turn_s": turn_s,
        "cleanup_sweep_s": sweep_s,
        "fetch_partitions": fetched,
        "fetch_refused_s": refused_s,
        "fetch_served_unbounded_s": served_s,
        "fetch_bound_partitions": bound,
        "fetch_at_bound_s": at_bound_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10x smaller, for a smoke run")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    members, heartbeats = 100_000 // scale, 1_000_000 // scale

    heap_rate = timer_churn(HeapTimer(), members, heartbeats)
    wheel_rate = timer_churn(TimingWheel(0), members, heartbeats)
    shard, shard_members, now = stable_shard(100, 100 // scale)
    hb_rate, commit_rate = shard_rates(shard, shard_members, 200_000 // scale, now)
    per_timer = timer_memory(100_000 // scale)
    per_member = member_memory(100, 100 // scale)
    per_offset = offset_memory(100_000 // scale)
    bound = bounds(1_000_000 // scale, 3_000_000 // scale)

    rows = [
        ("heapq timer churn (baseline)", heap_rate, "ops/s", 1.0, ""),
        ("timing wheel churn", wheel_rate, "ops/s", wheel_rate / heap_rate, ">= 1.5 x heapq"),
        (
            "shard heartbeats, 10k members",
            hb_rate,
            "req/s",
            hb_rate / wheel_rate,
            ">= 0.33 x wheel",
        ),
        ("shard commits (1 partition)", commit_rate, "req/s", commit_rate / wheel_rate, ""),
        ("bytes per live timer", per_timer, "B", None, "<= 150"),
        ("bytes per member", per_member, "B", None, ""),
        ("bytes per committed offset", per_offset, "B", None, ""),
        (f"full scan of {bound['groups']:,} groups", bound["gauge_scan_s"] * 1e3, "ms", 1.0, ""),
        (
            "groups-by-state counts read",
            bound["gauge_counts_s"] * 1e3,
            "ms",
            bound["gauge_counts_s"] / bound["gauge_scan_s"],
            "<= 0.001 x scan",
        ),
        ("whole cleanup sweep", bound["cleanup_sweep_s"] * 1e3, "ms", 1.0, ""),
        (
            "longest cleanup turn",
            bound["cleanup_longest_turn_s"] * 1e3,
            "ms",
            bound["cleanup_longest_turn_s"] / bound["cleanup_sweep_s"],
            "",
        ),
        (
            f"OffsetFetch {bound['fetch_partitions']:,} p, no bound",
            bound["fetch_served_unbounded_s"] * 1e3,
            "ms",
            1.0,
            "",
        ),
        (
            "  same, refused by the bound",
            bound["fetch_refused_s"] * 1e3,
            "ms",
            bound["fetch_refused_s"] / bound["fetch_served_unbounded_s"],
            "<= 0.001 x served",
        ),
        (
            f"  at the bound ({bound['fetch_bound_partitions']:,} p)",
            bound["fetch_at_bound_s"] * 1e3,
            "ms",
            bound["fetch_at_bound_s"] / bound["fetch_served_unbounded_s"],
            "",
        ),
    ]
    print(f"{'measure':34} {'value':>14} {'unit':6} {'ratio':>8}  goal")
    for name, value, unit, ratio, goal in rows:
        ratio_text = f"{ratio:8.2f}" if ratio is not None else " " * 8
        ratio_text = f"{ratio:8.2g}" if ratio is not None and ratio < 0.01 else ratio_text
        value_text = f"{value:14,.0f}" if value >= 100 else f"{value:14.3g}"
        print(f"{name:34} {value_text} {unit:6} {ratio_text}  {goal}")

    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, Python {sys.version.split()[0]}",
        "quick": args.quick,
        "timer_churn": {
            "members": members,
            "heartbeats": heartbeats,
            "heapq_ops_per_s": heap_rate,
            "wheel_ops_per_s": wheel_rate,
            "wheel_over_heapq": wheel_rate / heap_rate,
        },
        "shard": {
            "members": len(shard_members),
            "heartbeats_per_s": hb_rate,
            "commits_per_s": commit_rate,
            "heartbeats_over_wheel": hb_rate / wheel_rate,
            "commits_over_wheel": commit_rate / wheel_rate,
        },
        "memory_bytes": {
            "per_live_timer": per_timer,
            "per_member": per_member,
            "per_offset": per_offset,
        },
        "bounds": bound,
    }
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
