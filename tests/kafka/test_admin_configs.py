"""What Kafka's admin tools read of configs and of the cluster, against each coordinator under
test: `kafka-topics --describe` (which asks for the topic's configs besides its partitions),
`kafka-configs --describe` of a broker and of a group, `kafka-configs --alter` of a group's
settings, confluent-kafka's `describe_configs`, kafka-python's `describe_cluster`
(DescribeCluster), `kafka-acls --list` (DescribeAcls) and `kafka-features describe`
(ApiVersions' features).

The assertions hold for both servers: a broker's group settings and a group's KIP-848 settings
that both run with (conftest's deployment and javakafka's broker set the same initial rebalance
delay and heartbeat interval), shown alike, sources and synonyms included. A topic's settings
are not asserted: Kafka's are about storing records, and groupcoord has none (wire.configs).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import ConfigResource, ConfigSource
from kafka.admin import KafkaAdminClient

from tests.kafka.admin import ADMIN_TIMEOUT_S, admin_client, create_topic, unique_name
from tests.kafka.javakafka import run_tool

pytestmark = pytest.mark.timeout(300)

TOPICS_MAIN = "org.apache.kafka.tools.TopicCommand"
CONFIGS_MAIN = "kafka.admin.ConfigCommand"
ACLS_MAIN = "org.apache.kafka.tools.AclCommand"
FEATURES_MAIN = "org.apache.kafka.tools.FeatureCommand"
TOOL_TIMEOUT_S = 120.0
BROKER_ID = "1"  # Kafka's node id; groupcoord's second partition listener


def tool(main_class: str, bootstrap: str, *args: str) -> str:
    done = run_tool(main_class, ["--bootstrap-server", bootstrap, *args], TOOL_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_kafka_topics_describes_a_topic(bootstrap):
    topic = create_topic(bootstrap, 3)
    described = tool(TOPICS_MAIN, bootstrap, "--describe", "--topic", topic)
    assert f"Topic: {topic}\tTopicId: " in described
    assert "PartitionCount: 3\tReplicationFactor: 1\tConfigs: " in described
    assert [line.split("\t")[2] for line in described.splitlines()[1:]] == [
        f"Partition: {p}" for p in range(3)
    ]


def test_kafka_configs_describes_broker_and_group_settings(bootstrap):
    broker = tool(
        CONFIGS_MAIN, bootstrap, "--describe", "--entity-type", "brokers",
        "--entity-name", BROKER_ID, "--all",
    )  # fmt: skip
    assert f"All configs for broker {BROKER_ID} are:" in broker
    lines = {line.strip() for line in broker.splitlines()}
    assert (
        "group.min.session.timeout.ms=6000 sensitive=false "
        "synonyms={DEFAULT_CONFIG:group.min.session.timeout.ms=6000}"
    ) in lines
    assert (
        "group.initial.rebalance.delay.ms=0 sensitive=false "
        "synonyms={STATIC_BROKER_CONFIG:group.initial.rebalance.delay.ms=0, "
        "DEFAULT_CONFIG:group.initial.rebalance.delay.ms=3000}"
    ) in lines

    group = unique_name("configs")
    described = tool(
        CONFIGS_MAIN, bootstrap, "--describe", "--entity-type", "groups",
        "--entity-name", group, "--all",
    )  # fmt: skip
    assert f"All configs for group {group} are:" in described
    settings = {line.strip().split(" ")[0] for line in described.splitlines()[1:]}
    assert {"consumer.session.timeout.ms=45000", "consumer.heartbeat.interval.ms=500"} <= settings


def test_confluent_admin_describes_configs(bootstrap):
    admin = admin_client(bootstrap)
    topic = create_topic(bootstrap, 1)
    resources = [
        ConfigResource(ConfigResource.Type.BROKER, BROKER_ID),
        ConfigResource(ConfigResource.Type.TOPIC, topic),
        ConfigResource(ConfigResource.Type.TOPIC, unique_name("missing")),
    ]
    futures = admin.describe_configs(resources, request_timeout=ADMIN_TIMEOUT_S)
    broker = futures[resources[0]].result(timeout=ADMIN_TIMEOUT_S)
    delay = broker["group.initial.rebalance.delay.ms"]
    assert (delay.value, delay.source, delay.is_read_only) == (
        "0",
        ConfigSource.STATIC_BROKER_CONFIG.value,
        True,
    )
    assert broker["group.max.session.timeout.ms"].value == "1800000"
    assert isinstance(futures[resources[1]].result(timeout=ADMIN_TIMEOUT_S), dict)
    with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PART"):
        futures[resources[2]].result(timeout=ADMIN_TIMEOUT_S)


def test_kafka_python_describes_the_cluster(bootstrap):
    """kafka-python asks DescribeCluster where the broker announces it: every broker, none
    fenced, and the cluster's operations (all of them: no ACLs here)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    assert cluster["brokers"], cluster
    assert all(b["is_fenced"] is False for b in cluster["brokers"])
    assert cluster["controller_id"] in {b["broker_id"] for b in cluster["brokers"]}
    assert set(cluster["authorized_operations"]) == {
        "CREATE",
        "ALTER",
        "DESCRIBE",
        "CLUSTER_ACTION",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE",
    }


def test_kafka_acls_lists_nothing_without_an_authorizer(bootstrap):
    """Neither server under test has ACLs: the tool says so, in Kafka's words for it
    (SECURITY_DISABLED), rather than that the API is unsupported."""
    done = run_tool(ACLS_MAIN, ["--bootstrap-server", bootstrap, "--list"], TOOL_TIMEOUT_S)
    assert done.returncode == 1
    assert "SecurityDisabledException" in done.stdout, done.stdout + done.stderr


def test_kafka_configs_sets_describes_and_deletes_a_groups_settings(bootstrap):
    """A group's own settings, as an operator sets them: each server keeps them, shows them as
    the group's (DYNAMIC_GROUP_CONFIG, over the broker's), refuses one outside its bounds in
    Kafka's words, and drops them on --delete-config."""
    group = unique_name("configs")
    entity = ("--entity-type", "groups", "--entity-name", group)
    added = "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000"
    out = tool(CONFIGS_MAIN, bootstrap, "--alter", *entity, "--add-config", added)
    assert f"Completed updating config for group {group}." in out

    def dynamic() -> set[str]:
        described = tool(CONFIGS_MAIN, bootstrap, "--describe", *entity)
        if described == f"The group '{group}' doesn't exist and doesn't have dynamic config.\n":
            return set()  # the tool's words for a group that never joined and sets nothing
        assert f"Dynamic configs for group {group} are:" in described
        return {line.strip() for line in described.splitlines()[1:] if line.strip()}

    expected = {
        "consumer.session.timeout.ms=50000 sensitive=false synonyms="
        "{DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000, "
        "DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}",
        "consumer.heartbeat.interval.ms=6000 sensitive=false synonyms="
        "{DYNAMIC_GROUP_CONFIG:consumer.heartbeat.interval.ms=6000, "
        "STATIC_BROKER_CONFIG:group.consumer.heartbeat.interval.ms=500, "
        "DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000}",
    }
    wait_for(lambda: dynamic() == expected, "the group's settings", dynamic)
    # Every group with settings of its own (the tool lists them with ListConfigResources).
    every = tool(CONFIGS_MAIN, bootstrap, "--describe", "--entity-type", "groups")
    assert f"Dynamic configs for group {group} are:\n  " + sorted(expected)[0] in every, every

    refused = run_tool(
        CONFIGS_MAIN,
        [
            *("--bootstrap-server", bootstrap, "--alter", *entity),
            *("--add-config", "consumer.session.timeout.ms=1000"),
        ],
        TOOL_TIMEOUT_S,
    )
    assert refused.returncode == 1
    assert (
        "InvalidConfigurationException: consumer.session.timeout.ms must be greater than or "
        "equal to group.consumer.min.session.timeout.ms"
    ) in refused.stdout + refused.stderr

    deleted = "consumer.session.timeout.ms,consumer.heartbeat.interval.ms"
    tool(CONFIGS_MAIN, bootstrap, "--alter", *entity, "--delete-config", deleted)
    wait_for(lambda: dynamic() == set(), "no settings of the group's own", dynamic)


def wait_for(done, what: str, current) -> None:
    """Until ``done()``: a broker applies a group's config from its metadata a moment after
    answering the change."""
    deadline = time.monotonic() + ADMIN_TIMEOUT_S
    while not done():
        assert time.monotonic() < deadline, f"{what} never shown: {current()}"
        time.sleep(0.2)


def test_kafka_features_names_the_consumer_protocol(bootstrap):
    """`kafka-features describe`: group.version 1 (KIP-848's consumer protocol) is finalized on
    both servers; the broker also has features groupcoord has no machinery for."""
    described = run_tool(FEATURES_MAIN, ["--bootstrap-server", bootstrap, "describe"], 120)
    assert described.returncode == 0, described.stdout + described.stderr
    (line,) = [f for f in described.stdout.splitlines() if f.startswith("Feature: group.version")]
    assert line.split()[1:9] == [
        "group.version",
        *("SupportedMinVersion:", "0", "SupportedMaxVersion:", "1"),
        *("FinalizedVersionLevel:", "1", "Epoch:"),
    ]
