"""Log offsets from an upstream Kafka cluster (``kafka:HOST:PORT`` sources) against the real
broker: records produced there are what the source reports, a partition the cluster does not
have is simply absent, and ``groupcoord groups`` describes lag and resets by time from them."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from groupcoord.actors import (
    AdminClient,
    end_offsets_source,
    kafka_offsets,
    kafka_offsets_for_times,
    start_offsets_source,
)
from groupcoord.actors.cli import main
from tests.kafka.admin import create_topic, produce, unique_name
from tests.kafka.javakafka import free_ports

pytestmark = pytest.mark.timeout(300)


def test_kafka_sources_report_the_brokers_offsets(broker_bootstrap):
    topic = create_topic(broker_bootstrap, 2)
    before_ms = int(time.time() * 1000) - 1
    produce(broker_bootstrap, topic, {0: ["a", "b", "c"], 1: ["d", "e", "f", "g", "h"]})
    asked = [(topic, 0), (topic, 1), (topic, 7), ("no-such-topic-x", 0)]
    spec = f"kafka:{broker_bootstrap}"
    assert end_offsets_source(spec)(asked) == {(topic, 0): 3, (topic, 1): 5}
    assert start_offsets_source(spec)(asked) == {(topic, 0): 0, (topic, 1): 0}
    at = kafka_offsets_for_times(broker_bootstrap, before_ms)
    assert at(asked) == {(topic, 0): 0, (topic, 1): 0}
    later_ms = int(time.time() * 1000) + 3_600_000
    assert kafka_offsets_for_times(broker_bootstrap, later_ms)(asked) == {}  # no record after


def test_an_unreachable_cluster_is_a_connection_error():
    (port,) = free_ports(1)
    ends = kafka_offsets(f"127.0.0.1:{port}", timeout_s=1.0)
    with pytest.raises(ConnectionError, match="cluster unreachable"):
        ends([("t", 0)])


def test_describe_lag_and_reset_by_time_from_the_broker(
    broker_bootstrap, groupcoord_listeners, capsys
):
    topic = create_topic(broker_bootstrap, 2)
    produce(broker_bootstrap, topic, {0: ["a", "b", "c", "d"], 1: ["e", "f"]})
    group = unique_name("gc-lag")
    admin = AdminClient(groupcoord_listeners.deployment.router)
    asyncio.run(admin.alter_offsets(group, {(topic, 0): 1, (topic, 1): 2}))
    namespace = ["--namespace", groupcoord_listeners.deployment.namespace, "--json"]
    source = ["--end-offsets", f"kafka:{broker_bootstrap}"]
    capsys.readouterr()
    assert main(["groups", "--describe", "--group", group, *source, *namespace]) == 0
    rows = json.loads(capsys.readouterr().out)["offsets"]
    assert [(r["partition"], r["current_offset"], r["log_end_offset"], r["lag"]) for r in rows] == [
        (0, 1, 4, 3),
        (1, 2, 2, 0),
    ]
    reset = ["groups", "--reset-offsets", "--group", group, "--topic", topic, *source]
    # Every record is younger than a day: the earliest offset at or after it is 0.
    assert main([*reset, "--by-duration", "P1D", "--execute", *namespace]) == 0
    planned = json.loads(capsys.readouterr().out)["offsets"]
    assert [(r["partition"], r["new_offset"]) for r in planned] == [(0, 0), (1, 0)]
    assert asyncio.run(admin.fetch_offsets(group)) == {(topic, 0): 0, (topic, 1): 0}
    # No record after a time in the future: Kafka falls back to the end offsets.
    assert main([*reset, "--to-datetime", "2999-01-01T00:00:00Z", *namespace]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert [(r["partition"], r["new_offset"]) for r in planned["offsets"]] == [(0, 4), (1, 2)]
    # --to-earliest takes the start offsets from the same cluster: no "offset 0" note.
    assert main([*reset, "--to-earliest", *namespace]) == 0
    assert not any("--start-offsets" in n for n in json.loads(capsys.readouterr().out)["notes"])
