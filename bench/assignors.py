"""Benchmark of the server-side assignors (KIP-848): ``uniform`` against ``range``.

Run: ``.venv/bin/python bench/assignors.py [--repeats N]``. Prints a table and writes
``bench/results/assignors.json``. Groups of 10 x 100, 100 x 1,000 and 1,000 x 10,000
(members x partitions, the partitions spread over 10 topics), each:

* homogeneous: every member subscribes to all 10 topics;
* heterogeneous: member ``i`` subscribes to 5 or 6 consecutive topics starting at ``i % 3``;

and two computations: the first assignment (no member holds anything) and the rebalance after
one more member joins (everyone else holds what the first assignment gave it). Each figure is
the best of ``--repeats`` runs (this machine is shared and noisy), and is also given as a ratio
to ``range`` on the same spec in the same run. The issue's goal: ``uniform`` computes 1,000
members x 10,000 partitions in under 50 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime

from groupcoord.coordinator.server_assignors import (
    SERVER_ASSIGNORS,
    AssignmentSpec,
    MemberSpec,
)

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "assignors.json")
SIZES = ((10, 100), (100, 1_000), (1_000, 10_000))
TOPICS = 10


def make_spec(members: int, partitions: int, heterogeneous: bool, current=None) -> AssignmentSpec:
    topics = {f"topic-{i}": partitions // TOPICS for i in range(TOPICS)}
    names = sorted(topics)
    specs = {}
    for i in range(members):
        subs = names[i % 3 : i % 3 + 5 + i % 2] if heterogeneous else names
        member_id = f"member-{i:05d}"
        specs[member_id] = MemberSpec(frozenset(subs), (current or {}).get(member_id, {}))
    return AssignmentSpec(specs, topics)


def best_ms(assignor, spec: AssignmentSpec, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        assignor.assign(spec)
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description="Time the uniform and range server assignors.")
    parser.add_argument("--repeats", type=int, default=5, help="runs per figure (best kept)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    uniform, range_ = SERVER_ASSIGNORS["uniform"], SERVER_ASSIGNORS["range"]
    rows = []
    for members, partitions in SIZES:
        for heterogeneous in (False, True):
            first = make_spec(members, partitions, heterogeneous)
            joined = {}
            for name, assignor in (("uniform", uniform), ("range", range_)):
                # Each assignor's rebalance starts from its own first assignment.
                held = assignor.assign(first)
                joined[name] = make_spec(members + 1, partitions, heterogeneous, held)
            for phase, specs in (("first", (first, first)), ("join", tuple(joined.values()))):
                uniform_ms = best_ms(uniform, specs[0], args.repeats)
                range_ms = best_ms(range_, specs[1], args.repeats)
                rows.append(
                    {
                        "members": members,
                        "partitions": partitions,
                        "subscriptions": "heterogeneous" if heterogeneous else "homogeneous",
                        "phase": phase,
                        "uniform_ms": uniform_ms,
                        "range_ms": range_ms,
                        "uniform_over_range": uniform_ms / range_ms,
                    }
                )
    print(
        f"{'members x partitions':>21} {'subscriptions':14} {'phase':6} {'uniform ms':>11} "
        f"{'range ms':>9} {'ratio':>6}"
    )
    for r in rows:
        size = f"{r['members']:,} x {r['partitions']:,}"
        print(
            f"{size:>21} {r['subscriptions']:14} {r['phase']:6} {r['uniform_ms']:11.2f} "
            f"{r['range_ms']:9.2f} {r['uniform_over_range']:6.2f}"
        )
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, Python {sys.version.split()[0]}",
        "repeats": args.repeats,
        "topics": TOPICS,
        "rows": rows,
    }
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
