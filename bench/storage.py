"""Benchmark of storage: append throughput against raw write+fsync, and load (failover) time.

Run: ``.venv/bin/python bench/storage.py [--quick] [--dir DIR]``. Prints tables and writes
``bench/results/storage.json``. Figures are ratios against baselines measured in the same run,
on the same filesystem (this machine is shared and noisy):

* append: ``PartitionLog.append`` with fsync "always" of batches of 1, 10, 100, 1000 offset-commit
  records, against ``os.write`` + ``os.fsync`` of the very bytes the log wrote, interleaved append
  by append. Ratio = log throughput / raw throughput (goal >= 0.8 from 100 records up).
* load: a partition of 10,000 groups x 100 offsets (1,000,000 live offsets) built by 1x and 10x
  that many commits of history (plus a group record per group per round), snapshots by record
  threshold, a snapshot at the end of the history, then a tail of 5% of random commits.
  Load = ``open_partition_log`` + ``load_into`` into a fresh Shard, best of 5 (wall and CPU
  seconds). Ratio load(10x)/load(1x) (goal <= 1.2), absolute time (goal < 1 s), and records
  replayed per second from a log without snapshots, against ``Shard.replay`` from memory.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime

from groupcoord.coordinator import Shard
from groupcoord.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from groupcoord.storage import LogConfig, list_segments, open_partition_log, read_log

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "storage.json")
BASE_MS = 1_700_000_000_000


def commit(group: int, topic: int, partition: int, offset: int) -> Record:
    return Record(
        OffsetCommitKey(f"group-{group:05d}", f"topic-{topic}", partition),
        OffsetCommitValue(offset, 0, "", BASE_MS + offset),
    )


# -- append --------------------------------------------------------------------------------------


def bench_append(
    workdir: str, sizes: list[int], rounds: dict[int, int], policy: str = "always"
) -> list[dict]:
    """Log appends against raw writes of the same bytes (fsynced, as the log, under "always")."""
    rows = []
    for size in sizes:
        path = os.path.join(workdir, f"append-{policy}-{size}")
        raw_path = os.path.join(workdir, f"raw-{policy}-{size}.bin")
        log = open_partition_log(path, LogConfig(fsync_policy=policy, segment_bytes=1 << 30))
        segment = list_segments(path)[-1].path
        raw_fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        log_s = raw_s = 0.0
        written = 0
        try:
            for r in range(rounds[size]):
                batch = [commit(i % 1000, i % 10, i, r * size + i) for i in range(size)]
                before = os.path.getsize(segment)
                started = time.perf_counter()
                log.append(batch)
                log_s += time.perf_counter() - started
                with open(segment, "rb") as f:  # the very bytes the log just wrote
                    f.seek(before)
                    chunk = f.read()
                started = time.perf_counter()
                view = memoryview(chunk)
                while view:
                    view = view[os.write(raw_fd, view) :]
                if policy == "always":
                    os.fsync(raw_fd)
                raw_s += time.perf_counter() - started
                written += len(chunk)
        finally:
            log.close()
            os.close(raw_fd)
        records = size * rounds[size]
        rows.append(
            {
                "policy": policy,
                "batch_records": size,
                "appends": rounds[size],
                "bytes": written,
                "log_records_per_s": records / log_s,
                "raw_records_per_s": records / raw_s,
                "log_ms_per_append": log_s / rounds[size] * 1000,
                "raw_ms_per_append": raw_s / rounds[size] * 1000,
                "ratio": raw_s / log_s,
            }
        )
        shutil.rmtree(path)
        os.remove(raw_path)
    return rows


def bench_owner_checks(workdir: str, calls: int = 20_000) -> dict:
    """What fencing and the durable end add to each append: two ownership checks (a ``stat`` of
    epoch.json, before the write and before returning) and, under "always", one publication of
    the durable end (a 20-byte ``pwrite``). Timed alone, in microseconds per call."""
    path = os.path.join(workdir, "owner-checks")
    with open_partition_log(path) as log:
        started = time.perf_counter()
        for _ in range(calls):
            log._check_owner()
        check_us = (time.perf_counter() - started) / calls * 1e6
        started = time.perf_counter()
        for _ in range(calls):
            log._publish_durable_end(0)
        publish_us = (time.perf_counter() - started) / calls * 1e6
    shutil.rmtree(path)
    return {
        "check_owner_us": check_us,
        "publish_durable_end_us": publish_us,
        "per_append_always_us": 2 * check_us + publish_us,
        "per_append_other_policies_us": 2 * check_us,
    }


# -- load ----------------------------------------------------------------------------------------


def build_partition(
    path: str,
    groups: int,
    topics: int,
    partitions: int,
    history: int,
    snapshot_every_records: int,
    seed: int,
) -> dict:
    """``history`` rounds of commits to every offset, then a 5% tail of random commits."""
    rng = random.Random(seed)
    config = LogConfig(
        fsync_policy="never",
        snapshot_every_records=snapshot_every_records,
        snapshot_every_bytes=0,
        keep_snapshots=2,
    )
    keys = [
        [
            OffsetCommitKey(f"group-{g:05d}", f"topic-{t}", p)
            for t in range(topics)
            for p in range(partitions)
        ]
        for g in range(groups)
    ]
    started = time.perf_counter()
    appended = 0
    with open_partition_log(path, config) as log:
        log.load_into(Shard(0, 1))
        for round_ in range(history):
            for first in range(0, groups, 10):
                batch = []
                for g in range(first, min(first + 10, groups)):
                    member = MemberMetadataValue(
                        f"m-{g}-{round_}",
                        None,
                        "c",
                        "/10.0.0.1",
                        300_000,
                        45_000,
                        b"s" * 20,
                        b"a" * 20,
                    )
                    batch.append(
                        Record(
                            GroupMetadataKey(f"group-{g:05d}"),
                            GroupMetadataValue(
                                "consumer",
                                round_ + 1,
                                "range",
                                member.member_id,
                                BASE_MS,
                                (member,),
                            ),
                        )
                    )
                    offset = round_ * 1_000_000
                    batch.extend(
                        Record(key, OffsetCommitValue(offset + i, 0, "", BASE_MS + offset))
                        for i, key in enumerate(keys[g])
                    )
                log.append(batch)
                log.maybe_snapshot(None)
                appended += len(batch)
            print(
                f"  built round {round_ + 1}/{history}: {appended:,} records, "
                f"{time.perf_counter() - started:.0f}s",
                file=sys.stderr,
                flush=True,
            )
        if snapshot_every_records:
            # Both histories end in the same steady state: a snapshot, then the same 5% tail,
            # so load(10x) / load(1x) isolates the cost of history (threshold drift otherwise
            # leaves tails anywhere between 0 and one threshold).
            log.snapshot()
        tail = groups * topics * partitions // 20
        for first in range(0, tail, 1000):
            log.append(
                [
                    Record(
                        keys[rng.randrange(groups)][rng.randrange(topics * partitions)],
                        OffsetCommitValue(10**9 + first + i, 0, "", BASE_MS),
                    )
                    for i in range(min(1000, tail - first))
                ]
            )
        appended += tail
    return {
        "records": appended,
        "build_s": time.perf_counter() - started,
        "disk_bytes": sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path)),
    }


def time_load(path: str, repeats: int) -> dict:
    """Best of ``repeats`` (wall and CPU seconds) of open + load_into, as a restarted actor does."""
    best = None
    for _ in range(repeats):
        gc.unfreeze()  # forget the previous repeat's frozen state
        gc.collect()
        shard = Shard(0, 1)
        started, started_cpu = time.perf_counter(), time.process_time()
        with open_partition_log(path) as log:
            summary = log.load_into(shard)
        wall_s, cpu_s = time.perf_counter() - started, time.process_time() - started_cpu
        offsets = sum(len(g.offsets) for g in shard.groups())
        if best is None or wall_s < best["load_s"]:
            best = {
                "load_s": wall_s,
                "load_cpu_s": cpu_s,
                "offsets": offsets,
                "groups": len(shard.groups()),
                "snapshot_offset": summary.snapshot_offset,
                "tail_records": summary.records,
                "snapshot_ms": summary.snapshot_ms,
                "replay_ms": summary.replay_ms,
                "bytes_read": summary.bytes,
            }
        del shard
    return best


def bench_replay(path: str) -> dict:
    """Full replay (no snapshot) through the log, against Shard.replay from memory."""
    records = [entry.record for entry in read_log(path)]
    gc.collect()
    gc.disable()
    try:
        shard = Shard(0, 1)
        started = time.perf_counter()
        for record in records:
            shard.replay(record)
        memory_s = time.perf_counter() - started
    finally:
        gc.enable()
    del shard, records
    load = time_load(path, 1)
    replayed = load["tail_records"]
    return {
        "records": replayed,
        "log_records_per_s": replayed / load["load_s"],
        "memory_records_per_s": replayed / memory_s,
        "ratio": memory_s / load["load_s"],
        "load_s": load["load_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="100x smaller partition, fewer appends"
    )
    parser.add_argument(
        "--append-only",
        action="store_true",
        help="only the append rows (nothing is written to bench/results)",
    )
    parser.add_argument("--dir", default=None, help="work directory (default: a temp dir on /tmp)")
    args = parser.parse_args()
    scale = 100 if args.quick else 1
    groups, topics, partitions = 10_000 // scale, 10, 10
    live = groups * topics * partitions
    workdir = tempfile.mkdtemp(prefix="groupcoord-bench-", dir=args.dir)
    try:
        rounds = (
            {1: 300, 10: 300, 100: 200, 1000: 60}
            if not args.quick
            else {1: 50, 10: 50, 100: 30, 1000: 10}
        )
        append_rows = []
        for policy in ("always", "never"):
            # "never" shows the log's own CPU cost per append (no fsync to hide it).
            print(
                f"append: fsync {policy}, log vs raw os.write of the same bytes"
                + (" + os.fsync" if policy == "always" else "")
            )
            rows = bench_append(workdir, [1, 10, 100, 1000], rounds, policy)
            print(
                f"{'batch':>6} {'log rec/s':>12} {'raw rec/s':>12} {'log ms':>8} {'raw ms':>8} "
                f"{'ratio':>6}"
            )
            for row in rows:
                print(
                    f"{row['batch_records']:>6} {row['log_records_per_s']:>12,.0f} "
                    f"{row['raw_records_per_s']:>12,.0f} {row['log_ms_per_append']:>8.3f} "
                    f"{row['raw_ms_per_append']:>8.3f} {row['ratio']:>6.2f}"
                )
            append_rows += rows
        owner = bench_owner_checks(workdir)
        print(
            f"per append: ownership check {owner['check_owner_us']:.2f} us (x2), durable-end "
            f"publish {owner['publish_durable_end_us']:.2f} us ('always' only): "
            f"{owner['per_append_always_us']:.2f} us with 'always', "
            f"{owner['per_append_other_policies_us']:.2f} us otherwise"
        )
        if args.append_only:
            return

        print(f"\nload: {groups:,} groups, {live:,} live offsets (building partitions...)")
        builds, loads = {}, {}
        for history in (1, 10):
            path = os.path.join(workdir, f"history-{history}x")
            builds[history] = build_partition(
                path, groups, topics, partitions, history, snapshot_every_records=live, seed=history
            )
            loads[history] = time_load(path, 5)
            shutil.rmtree(path)
        nosnap = os.path.join(workdir, "no-snapshots")
        build_partition(nosnap, groups, topics, partitions, 1, snapshot_every_records=0, seed=1)
        replay = bench_replay(nosnap)
        shutil.rmtree(nosnap)
        print(
            f"{'history':>8} {'records':>12} {'disk MB':>8} {'load s':>7} {'cpu s':>6} "
            f"{'snapshot ms':>12} {'tail recs':>10} {'tail ms':>8}"
        )
        for history in (1, 10):
            b, lo = builds[history], loads[history]
            print(
                f"{history:>7}x {b['records']:>12,} {b['disk_bytes'] / 1e6:>8.1f} "
                f"{lo['load_s']:>7.3f} "
                f"{lo['load_cpu_s']:>6.3f} {lo['snapshot_ms']:>12.0f} {lo['tail_records']:>10,} "
                f"{lo['replay_ms']:>8.0f}"
            )
        ratio = loads[10]["load_s"] / loads[1]["load_s"]
        print(
            f"load(10x) / load(1x) = {ratio:.2f} (goal <= 1.2); "
            f"load(1x) = {loads[1]['load_s']:.3f} s "
            f"(goal < 1 s at full size)"
        )
        print(
            f"full replay without snapshot: {replay['records']:,} records "
            f"in {replay['load_s']:.2f} s = "
            f"{replay['log_records_per_s']:,.0f} rec/s; Shard.replay from memory "
            f"{replay['memory_records_per_s']:,.0f} rec/s; ratio {replay['ratio']:.2f}"
        )
        result = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": (
                f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}"
            ),
            "quick": args.quick,
            "append": append_rows,
            "append_overhead": owner,
            "load": {
                "groups": groups,
                "live_offsets": live,
                "builds": builds,
                "loads": loads,
                "load_10x_over_1x": ratio,
            },
            "replay": replay,
        }
        os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
        if not args.quick:
            with open(RESULTS, "w") as f:
                json.dump(result, f, indent=2)
            print(f"\nwrote {RESULTS}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
