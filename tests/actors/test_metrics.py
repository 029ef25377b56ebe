"""Metrics: what the partition actors report reaches Ray's metrics agent (Prometheus format),
and every rebalance the coordinator can start is counted under a named cause."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from groupcoord.actors import stop
from groupcoord.actors.kafka_listener import ListenerCounters
from groupcoord.actors.metrics import LATENCY_SAMPLES_PER_S, RayMetrics, rebalance_cause
from tests.core import simulation

from .helpers import (
    member,
    metric_value,
    scrape_metrics,
    settled,
    start_deployment,
    wait_until,
)


def test_every_rebalance_reason_of_the_shard_has_a_cause():
    # Drive the seeded simulator (all the ways a group rebalances) and collect the reasons.
    reasons = set()
    absorb = simulation.Simulation.absorb

    def record(self, step):
        reasons.update(e.detail for e in step.events if e.kind == "rebalance")
        return absorb(self, step)

    simulation.Simulation.absorb = record
    try:
        for seed in range(20):
            simulation.Simulation(seed).run(1_000)
    finally:
        simulation.Simulation.absorb = absorb
    causes = {rebalance_cause(r) for r in reasons}
    assert "other" not in causes, [r for r in reasons if rebalance_cause(r) == "other"]
    assert {"member_joined", "member_left", "session_timeout"} <= causes


class _Observed:
    def __init__(self) -> None:
        self.values: list[float] = []

    def observe(self, value: float, tags: dict) -> None:
        self.values.append(value)


@pytest.mark.parametrize("histogram", ["commit", "append"])
def test_latency_is_observed_for_every_value_until_the_rate_passes_the_sample_rate(
    ray_session, monkeypatch, histogram
):
    metrics = RayMetrics()
    observed, counted = _Observed(), _Counted()
    if histogram == "commit":
        metrics.commit_latency.histogram = observed
        metrics._summed = (counted, *metrics._summed[1:])
        record = metrics.committed
    else:
        metrics.append_latency.histogram = observed
        metrics._summed = (*metrics._summed[:2], counted, metrics._summed[3])
        record = metrics.appended
    clock = [time.monotonic()]
    monkeypatch.setattr("groupcoord.actors.metrics.time.monotonic", lambda: clock[0])
    metrics.push_counters()
    for n in range(50):  # slow: every value is observed
        record(0, 1, n / 1000)
    assert observed.values == [n / 1000 for n in range(50)]
    # A push after 100 times the sample rate's values in one second: every 100th from then.
    for _ in range(100 * LATENCY_SAMPLES_PER_S):
        record(0, 1, 0.002)
    clock[0] += 1.0
    metrics.push_counters()
    observed.values.clear()
    for n in range(1_000):
        record(0, 1, n)
    assert observed.values == list(range(0, 1_000, 100))  # evenly spread, not the first ten
    # The rate falls (those 1,000 over ten seconds): every value again after the next push.
    clock[0] += 1_000 / LATENCY_SAMPLES_PER_S
    metrics.push_counters()
    observed.values.clear()
    for n in range(5):
        record(0, 1, n)
    assert observed.values == list(range(5))
    # The counters count every value, sampled or not.
    clock[0] += 1.0
    metrics.push_counters()
    assert sum(value for value, _ in counted.calls) == 50 + 100 * LATENCY_SAMPLES_PER_S + 1_005


class _Counted:
    def __init__(self) -> None:
        self.calls: list[tuple[float, dict]] = []

    def inc(self, value: float, tags: dict) -> None:
        self.calls.append((value, tags))

    set = inc  # a gauge's set, recorded alike


def test_listener_counters_go_to_ray_as_what_they_grew_by(ray_session):
    metrics = RayMetrics().listeners
    metrics.kafka_connections = connections = _Counted()
    counted = _Counted(), _Counted(), _Counted(), _Counted()
    metrics._counters = refused, errors, failures, polled = counted
    metrics.report(3, ListenerCounters(5, 0, 2, 1, 40))
    # two more failed authentications, and the network processes polled 25 more turns
    metrics.report(3, ListenerCounters(4, 0, 2, 3, 65))
    metrics.report(4, ListenerCounters(1, 1, 0, 0))  # another partition's, apart
    metrics.report("bootstrap", ListenerCounters(2, 0, 1, 0))  # the router's, apart too
    tags3, tags4, boot = {"partition": "3"}, {"partition": "4"}, {"partition": "bootstrap"}
    assert connections.calls == [(5, tags3), (4, tags3), (1, tags4), (2, boot)]
    assert refused.calls == [(1, tags4)]
    assert errors.calls == [(2, tags3), (1, boot)]
    assert failures.calls == [(1, tags3), (2, tags3)]
    assert polled.calls == [(40, tags3), (25, tags3)]


@pytest.fixture(scope="module")
def deployment(ray_session, tmp_path_factory):
    d = start_deployment(tmp_path_factory.mktemp("logs-metrics"), "gc-metrics", num_partitions=1)
    yield d
    stop(d)


def test_partition_metrics_reach_the_metrics_agent(ray_session, deployment):
    async def scenario():
        members = [member(deployment.router, "metrics-g") for _ in range(2)]
        await wait_until(lambda: settled(members, 6), what="group settled")
        for round_ in range(5):
            for m in members:
                await m.commit({tp: round_ for tp in m.assignment})
        for m in members:
            await m.close()

    asyncio.run(scenario())

    wanted = {
        "groupcoord_commits_total": 10,  # 5 rounds x 2 members, at least
        "groupcoord_committed_offsets_total": 30,  # 6 partitions per round
        "groupcoord_appends_total": 1,
        "groupcoord_records_total": 30,
        "groupcoord_commit_seconds_count": 10,
    }
    deadline = time.monotonic() + 30
    while True:
        text = scrape_metrics(ray_session)
        seen = {name: metric_value(text, name, partition="0") for name in wanted}
        rebalances = metric_value(text, "groupcoord_rebalances_total", cause="member_joined")
        load = re.search(r'^ray_groupcoord_load_seconds\{[^}]*partition="0"', text, re.M)
        if all(seen[n] >= v for n, v in wanted.items()) and rebalances >= 1 and load:
            break
        assert time.monotonic() < deadline, (seen, rebalances, bool(load))
        time.sleep(1)
