"""bench/proc_cpu.py measures what bench/wire.py reports: per-thread CPU, and the time a thread
was runnable but had no CPU (real processes made to share one CPU); bench/wire.py picks the
server's figures out of a sample and reports each commit row as its median trial, each join row
as the mean of its trials, each rejoin row as the median of every rejoin; bench/wire_raw.py's
members settle into one generation and rejoin together (against a real listener); the
benchmarks compare against Kafka's broker JVM as Kafka ships it; bench/wire_split.py's blasted
commits all reach a real partition through its channel."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

from bench.proc_cpu import CpuSample
from bench.wire import add_ratios, cpu_per_commit_us, paired_trials, server_cpu, summary_run
from bench.wire_raw import join_alone, rebalance_times
from bench.wire_split import measure
from groupcoord.coordinator import DescribeGroupsRequest, OffsetFetchRequest
from tests.actors.kafka_inproc import WirePartition
from tests.kafka.javakafka import (
    SHIPPED_BROKER_JVM,
    TEST_BROKER_JVM,
    KafkaBroker,
    benchmark_broker,
)

SPIN = (
    "import os, time\n"
    "os.sched_setaffinity(0, {%d})\n"
    "end = time.time() + %f\n"
    "while time.time() < end: pass\n"
)


def test_threads_sharing_one_cpu_are_seen_waiting_for_it():
    cpu = min(os.sched_getaffinity(0))
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN % (cpu, 3.0)]) for _ in range(3)]
    try:
        time.sleep(0.5)  # started and pinned
        sample = CpuSample()
        time.sleep(1.5)
        seen = sample.finish()
    finally:
        for p in spinners:
            p.wait(30)
    mine = {f"python/{p.pid}" for p in spinners}
    running = {k: sum(v.values()) for k, v in seen["threads"].items() if k in mine}
    waiting = {k: sum(v.values()) for k, v in seen["waiting"].items() if k in mine}
    assert running.keys() == waiting.keys() == mine, seen
    # Three busy processes on one CPU: each runs about a third of the time and waits the rest.
    assert sum(running.values()) < 1.1, running
    assert all(w > 0.3 for w in waiting.values()), waiting


def test_the_server_figures_are_its_processes_and_their_threads_waits():
    sample = {
        "processes": {
            "ray::PartitionActor": 0.65,
            "python:network_process": 0.3,
            "python:wire_members": 1.0,
        },
        "threads": {
            "ray::PartitionActor/7": {"ray::IDLE/8": 0.6},
            "python:network_process/11": {"python/11": 0.3},
            "python:wire_members/9": {"python/9": 0.5},
        },
        "waiting": {
            "ray::PartitionActor/7": {"ray::IDLE/8": 0.4},
            "python:network_process/11": {"python/11": 0.05},
            "python:wire_members/9": {"python/9": 0.2},
        },
    }
    assert server_cpu(sample, ("ray::PartitionActor",)) == {
        "server_cores": 0.65,
        "server_waiting_cores": 0.4,
    }
    # gc-net: the partition and its network processes together, never the clients.
    assert server_cpu(sample, ("ray::PartitionActor", "python:network_process")) == {
        "server_cores": 0.95,
        "server_waiting_cores": 0.45,
    }
    assert server_cpu(sample, ("java",)) == {"server_cores": 0.0, "server_waiting_cores": 0.0}


def test_a_commit_row_is_its_median_trial_and_a_join_row_the_mean_with_every_trial_beside_it():
    runs = [
        {"kind": "commits", "target": "kafka", "commits_per_s": rate, "cpu_cores": n}
        for n, rate in enumerate([900.0, 1200.0, 1000.0])
    ]
    row = summary_run(runs)
    assert row["commits_per_s"] == 1000.0 and row["cpu_cores"] == 2  # the median run's own CPU
    assert row["commit_trials_per_s"] == [900.0, 1200.0, 1000.0]
    # A join is a race with two outcomes: the median of these would be 1.2 s or 3.0 s with
    # one trial more or less of either; the mean is what they add up to.
    times = [3.1, 1.1, 3.0, 1.2, 1.1]
    joins = [{"kind": "join", "target": "kafka", "join_to_stable_s": t} for t in times]
    row = summary_run(joins)
    assert row["join_to_stable_s"] == 1.9 and row["join_trials_s"] == times
    assert summary_run(runs[:1]) == runs[0]


def test_a_rejoin_row_is_the_median_of_every_groups_rejoins():
    groups = [[0.004, 0.001, 0.002], [0.003, 0.009, 0.005]]
    runs = [  # as rejoin_row makes them: each group's own median beside its rejoins
        {"kind": "rejoin", "target": "gc-never", "rejoin_s": sorted(g)[1], "rejoin_trials_s": g}
        for g in groups
    ]
    row = summary_run(runs)
    assert row["rejoin_trials_s"] == [0.004, 0.001, 0.002, 0.003, 0.009, 0.005]
    assert row["rejoin_s"] == 0.0035


def test_raw_members_settle_into_one_generation_then_rejoin_together(tmp_path):
    # No initial rebalance delay: the first generation holds whoever joined first, and the
    # rest must get in through later rebalances before the rejoins are timed.
    served = WirePartition(str(tmp_path / "log"), {"t": 1})
    bootstrap = served.start()
    try:
        times = asyncio.run(rebalance_times(bootstrap, "g", 12, 3))
        assert served.runtime is not None
        described = asyncio.run_coroutine_threadsafe(
            served.runtime.handle(DescribeGroupsRequest(["g"])), served.loop
        ).result(30)
    finally:
        served.stop()
    assert len(times) == 3 and all(0 < t < 5 for t in times)
    # rebalance_times raises unless each rejoin ends in one generation for all, every member
    # synced: the group is stable with the 12 members.
    (group,) = described.groups
    assert group.group_state == "Stable" and len(group.members) == 12


def test_the_benchmarks_broker_runs_kafkas_jvm_and_threads_as_shipped_not_the_tests_trims(
    tmp_path,
):
    broker = benchmark_broker(tmp_path)
    command = broker.command()
    options = command[command.index("java") + 1 : command.index("-cp")]
    # Kafka's scripts give a broker a 1 GiB heap, G1 and the full JIT; the tests' broker has C1
    # only and the serial collector, which a throughput comparison must not be measured against.
    assert options[: len(SHIPPED_BROKER_JVM)] == list(SHIPPED_BROKER_JVM), options
    assert not set(options) & (set(TEST_BROKER_JVM) - set(SHIPPED_BROKER_JVM)), options
    # Nor with the tests' fewer network, I/O and background threads: Kafka's defaults apply.
    properties = broker.properties()
    assert not {"num.network.threads", "num.io.threads", "background.threads"} & set(properties)
    assert KafkaBroker(tmp_path).properties()["num.io.threads"] == "2"


def test_the_split_bench_commits_every_blasted_commit_through_a_real_partition(tmp_path):
    partition = WirePartition(str(tmp_path / "p0"), {"split": 64}, loop="uvloop")
    bootstrap = partition.start()
    try:
        _, member_id, generation = asyncio.run(join_alone(bootstrap, "g-split"))
        member = ("g-split", [member_id], generation)
        # 40 commits of 2 partitions (n and n + 1, offset n), 8 in flight on one channel.
        loop_s, process_s, commits, seconds, appends = measure(partition, member, (8, 2, 1), 40)
        assert commits == 40 and loop_s > 0 and process_s >= loop_s and seconds > 0
        assert 1 <= appends <= 40  # a record per commit, appended in one turn's batches

        async def fetch():
            return await partition.runtime.handle(OffsetFetchRequest("g-split", None))

        fetched = asyncio.run_coroutine_threadsafe(fetch(), partition.loop).result(30)
    finally:
        partition.stop()
    # One channel's frames are taken in order: each partition holds the last commit naming it.
    assert sorted((p.partition, p.committed_offset) for p in fetched.partitions) == [
        (0, 0),
        *((p, p) for p in range(1, 40)),
        (40, 39),
    ]


def test_cpu_per_commit_is_the_servers_cores_over_its_rate_and_is_compared_with_kafkas():
    assert cpu_per_commit_us(0.6, 12_000.0) == 50.0
    assert cpu_per_commit_us(0.6, 0.0) is None  # no commits: no figure, not a division error
    rows = [
        {"kind": "commits", "target": "kafka", "members": 64, "cpu_us_per_commit": 50.0},
        {"kind": "commits", "target": "gc-never", "members": 64, "cpu_us_per_commit": 60.0},
        {"kind": "commits", "target": "gc-never", "members": 16, "cpu_us_per_commit": 90.0},
    ]
    add_ratios(rows)
    assert rows[1]["cpu_per_commit_vs_kafka"] == 1.2
    assert "cpu_per_commit_vs_kafka" not in rows[2]  # no Kafka row of that size to compare with


def test_a_commit_rows_trials_are_each_set_against_kafkas_trial_of_the_same_turn():
    kafka = [1000.0, 1200.0, 800.0, 1000.0]
    mine = [1100.0, 1150.0, 800.0, 1050.0]  # its median trial 1.1x Kafka's; one trial behind
    rows = [
        summary_run(
            [{"kind": "commits", "target": t, "members": 16, "commits_per_s": x} for x in rates]
        )
        for t, rates in (("kafka", kafka), ("gc-poll", mine))
    ]
    add_ratios(rows)
    assert rows[1]["commits_vs_kafka"] == 1.1
    assert rows[1]["commit_trials_vs_kafka"] == [1.1, 0.96, 1.0, 1.05]
    assert rows[1]["trials_ahead"] == 3  # the equal trial counts as at least as fast
    assert "trials_ahead" not in rows[0]  # Kafka against itself says nothing
    # Trials that cannot be paired one to one are not paired at all.
    assert paired_trials(mine[:3], kafka) == {} and paired_trials(mine, None) == {}
    assert paired_trials([5.0], [0.0]) == {}
