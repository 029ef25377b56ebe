"""Kafka's Java consumer (kafka-clients 4.3.1) in a group, against each
coordinator under test (the `bootstrap` fixture: the real broker and groupcoord's listeners).

The consumer is the tests' own small program, tests/kafka/java/GroupcoordConsumer.java, compiled
with `javac` against the Kafka jars on first use: it subscribes, polls until it owns the number
of partitions it is told, commits an offset for each synchronously, reads the topic's committed
offsets back with `committed()`, prints one `RESULT` line and closes (leaving the group).

Three scenarios: the Java consumer alone leads its group and owns every partition (with the range
and the cooperative-sticky assignor); the same with KIP-848's protocol (`group.protocol=consumer`,
the coordinator's uniform assignor); and a mixed group (cooperative-sticky, the harder case:
partitions move in two rebalances), where a librdkafka consumer owns everything first, the Java
consumer joins and takes half, each reads the other's commits, and the librdkafka consumer gets
everything back once the Java consumer has left.
"""

from __future__ import annotations

import pytest

from tests.kafka.admin import committed_offsets, create_topic, unique_name
from tests.kafka.javakafka import JAVA_SOURCES_DIR, compiled_classes, run_tool
from tests.kafka.members import wait_until

PARTITIONS = 4
ALL = frozenset(range(PARTITIONS))
ASSIGNORS = ["range", "cooperative-sticky"]
JAVA_MAIN = "GroupcoordConsumer"
# The consumer's own bound on getting its partitions, and the test's on the whole JVM run.
ASSIGN_TIMEOUT_MS = 60_000
RUN_TIMEOUT_S = 120.0
WAIT_S = 60.0

pytestmark = pytest.mark.timeout(300)


def java_consumer(
    bootstrap: str,
    group: str,
    topic: str,
    assignor: str,
    *,
    owned: int,
    base: int,
    protocol: str = "classic",
) -> dict:
    """Run GroupcoordConsumer to completion with `group.protocol` = `protocol`; its RESULT line
    as {"generation": int, "assigned": set of partitions, "committed": {partition: offset}}."""
    args = [bootstrap, group, topic, assignor, str(owned), str(base), str(PARTITIONS)]
    done = run_tool(
        JAVA_MAIN,
        [*args, str(ASSIGN_TIMEOUT_MS), protocol],
        RUN_TIMEOUT_S,
        classes=compiled_classes(JAVA_SOURCES_DIR / f"{JAVA_MAIN}.java"),
    )
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr[-4000:]}"
    [line] = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    fields = dict(item.split("=", 1) for item in line.split()[1:])
    return {
        "generation": int(fields["generation"]),
        "assigned": {int(p) for p in fields["assigned"].split(",") if p},
        "committed": {
            int(p): int(o)
            for p, o in (pair.split(":") for pair in fields["committed"].split(",") if pair)
        },
    }


@pytest.mark.parametrize("assignor", ASSIGNORS)
def test_java_consumer_alone_commits_and_reads_back(bootstrap, assignor):
    topic = create_topic(bootstrap, PARTITIONS)
    group = unique_name(f"java-{assignor}")

    result = java_consumer(bootstrap, group, topic, assignor, owned=PARTITIONS, base=100)

    expected = {p: 100 + p for p in ALL}
    assert result["assigned"] == ALL
    assert result["generation"] >= 1
    assert result["committed"] == expected
    # The commits are the coordinator's, not the client's cache: another client reads them.
    assert committed_offsets(bootstrap, group, topic) == expected


def test_java_consumer_protocol_joins_commits_and_reads_back(bootstrap):
    """KIP-848: `group.protocol=consumer`, the coordinator's uniform assignor."""
    topic = create_topic(bootstrap, PARTITIONS)
    group = unique_name("java-kip848")

    result = java_consumer(
        bootstrap, group, topic, "uniform", owned=PARTITIONS, base=300, protocol="consumer"
    )

    expected = {p: 300 + p for p in ALL}
    assert result["assigned"] == ALL
    assert result["generation"] >= 1  # the member epoch
    assert result["committed"] == expected
    assert committed_offsets(bootstrap, group, topic) == expected


def test_java_and_librdkafka_consumers_share_a_group(bootstrap, members):
    assignor = "cooperative-sticky"
    topic = create_topic(bootstrap, PARTITIONS)
    group = unique_name(f"java-mixed-{assignor}")
    rdkafka = members("confluent-kafka", group, topic, assignor)
    wait_until(lambda: rdkafka.assignment() == ALL, WAIT_S, "librdkafka owns all")
    rdkafka.commit({p: 1000 + p for p in ALL})

    result = java_consumer(bootstrap, group, topic, assignor, owned=PARTITIONS // 2, base=2000)

    java_owned = result["assigned"]
    assert len(java_owned) == PARTITIONS // 2
    # Java's commits for its half; librdkafka's, made before the split, for the other half.
    assert result["committed"] == {p: (2000 if p in java_owned else 1000) + p for p in ALL}
    # Java has left: librdkafka owns everything again and reads the offsets Java committed.
    wait_until(
        lambda: rdkafka.assignment() == ALL,
        WAIT_S,
        "librdkafka owns all again",
        lambda: rdkafka.assignments,
    )
    assert ALL - java_owned in rdkafka.assignments  # it held exactly the other half meanwhile
    assert rdkafka.committed(set(ALL)) == result["committed"]
    assert committed_offsets(bootstrap, group, topic) == result["committed"]
