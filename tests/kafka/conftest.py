"""Fixtures of the Kafka compatibility tests.

Every scenario here takes the address it talks to from the `bootstrap` fixture, parametrised over
the group coordinators under test (`COORDINATORS`), so the same client code and the same Java
tools run against each of them side by side: a real Apache Kafka broker ("kafka"), the
reference, and groupcoord's Kafka listeners ("groupcoord": a deployment of two partition actors
on the session's Ray, reached through its bootstrap listener). A test that needs what only a
broker has (records to produce and fetch) asks for `broker_bootstrap` instead.

Each is started at most once per pytest session, on the first test that needs it, and stopped
at the session's end.
"""

from __future__ import annotations

import pytest

from groupcoord.actors import WireConfig, start, stop
from groupcoord.coordinator import CoordinatorConfig
from tests.kafka.javakafka import (
    CONSOLE_CONSUMER_MAIN,
    CONSUMER_GROUPS_MAIN,
    JavaProcess,
    KafkaBroker,
    ToolResult,
    run_tool,
)
from tests.kafka.members import Member, open_member

# Coordinator name (the test id) -> the session fixture serving it.
COORDINATORS = {"kafka": "kafka_broker", "groupcoord": "groupcoord_listeners"}

TOOL_TIMEOUT_S = 90.0


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """One real Apache Kafka node (KRaft, combined broker+controller) on 127.0.0.1."""
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka-broker"))
    broker.start()
    yield broker
    broker.stop()


class GroupcoordListeners:
    """A groupcoord deployment with Kafka listeners, as the tests here see a coordinator."""

    def __init__(self, log_dir: str) -> None:
        self.deployment = start(
            2,
            log_dir,
            namespace="gc-kafka-compat",
            # KIP-848's heartbeat interval and migration policy as the broker's
            # (javakafka.broker_properties).
            config=CoordinatorConfig(
                group_initial_rebalance_delay_ms=0,
                consumer_group_heartbeat_interval_ms=500,
                consumer_group_migration_policy="bidirectional",
            ),
            wire=WireConfig(bootstrap_port=0),
        )
        self.deployment.wait_ready(120)
        self.bootstrap = self.deployment.kafka


@pytest.fixture(scope="session")
def groupcoord_listeners(ray_session, tmp_path_factory):
    served = GroupcoordListeners(str(tmp_path_factory.mktemp("groupcoord-logs")))
    yield served
    stop(served.deployment)


@pytest.fixture(params=sorted(COORDINATORS))
def bootstrap(request) -> str:
    """The bootstrap address ("host:port") of the group coordinator under test."""
    return request.getfixturevalue(COORDINATORS[request.param]).bootstrap


@pytest.fixture
def broker_bootstrap(kafka_broker) -> str:
    """The real broker's address, for scenarios that produce and fetch records."""
    return kafka_broker.bootstrap


@pytest.fixture
def consumer_groups(bootstrap):
    """Runs Kafka's `kafka-consumer-groups` against the coordinator under test:
    `consumer_groups("--describe", "--group", "g")` -> ToolResult (exit code, stdout, stderr)."""

    def run(*args: str, timeout_s: float = TOOL_TIMEOUT_S) -> ToolResult:
        return run_tool(CONSUMER_GROUPS_MAIN, ["--bootstrap-server", bootstrap, *args], timeout_s)

    return run


@pytest.fixture
def java_console_consumer(bootstrap, tmp_path):
    """Starts Kafka's console consumer in a group with the classic protocol, in the background:
    `java_console_consumer(topic, group, max_messages=, timeout_ms=)` -> JavaProcess. It exits by
    itself after `max_messages` or `timeout_ms` without a message; any still running at the
    test's end is stopped (SIGTERM: it leaves its group)."""
    started: list[JavaProcess] = []

    def start(topic: str, group: str, *, max_messages: int, timeout_ms: int) -> JavaProcess:
        args = [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--from-beginning",
            "--max-messages",
            str(max_messages),
            "--timeout-ms",
            str(timeout_ms),
            # --consumer-property is deprecated in Kafka 4.3; this is its new name.
            "--command-property",
            "group.protocol=classic",
            "--command-property",
            "session.timeout.ms=6000",
            "--command-property",
            "heartbeat.interval.ms=500",
        ]
        process = JavaProcess(
            CONSOLE_CONSUMER_MAIN, args, tmp_path / f"console-consumer-{len(started)}"
        )
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def members(bootstrap):
    """Opens real client consumers as group members against the coordinator under test:
    `members(client, group, topic, assignor, **options)` -> Member (`open_member`); those not
    closed by the test are closed (they leave their group) at its end."""
    opened: list[Member] = []

    def open_one(client: str, group: str, topic: str, assignor: str, **options) -> Member:
        member = open_member(client, bootstrap, group, topic, assignor, **options)
        opened.append(member)
        return member

    yield open_one
    for member in opened:
        member.close()
