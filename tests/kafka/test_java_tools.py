"""Kafka's own Java tools against each coordinator under test: `kafka-consumer-groups` lists,
describes, resets (dry run, then execute) and deletes a group; Kafka's console consumer joins a
group with the classic protocol and the tool describes it.

Both scenarios produce records and consume them, which only a broker can serve, so they run
against the real broker alone (groupcoord holds offsets, not records).
"""

from __future__ import annotations

import pytest

from tests.kafka.admin import committed_offsets, create_topic, produce, unique_name
from tests.kafka.members import wait_until

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.parametrize("bootstrap", ["kafka"], indirect=True),
]

MESSAGES = {0: ["a", "b", "c", "d", "e"], 1: ["f", "g", "h", "i", "j"]}
CONSUME_TIMEOUT_S = 60.0


def rows(stdout: str, group: str) -> list[list[str]]:
    """The whitespace-split lines of a tool's table that describe `group` (header skipped)."""
    return [line.split() for line in stdout.splitlines() if line.split()[:1] == [group]]


def offsets_table(stdout: str, group: str, topic: str, column: int) -> dict[int, int]:
    """partition -> the integer in `column` of each table row for `topic`."""
    return {int(row[2]): int(row[column]) for row in rows(stdout, group) if row[1] == topic}


def test_consumer_groups_lists_describes_resets_and_deletes(bootstrap, members, consumer_groups):
    topic = create_topic(bootstrap, len(MESSAGES))
    produce(bootstrap, topic, MESSAGES)
    group = unique_name("tool")
    # A consumer group (protocol type "consumer") with committed offsets and no members left.
    member = members("confluent-kafka", group, topic, "range")
    wait_until(
        lambda: member.assignment() == set(MESSAGES),
        CONSUME_TIMEOUT_S,
        "member owns both partitions",
        lambda: member.assignments,
    )
    member.commit({0: 3, 1: 4})
    member.close()

    listed = consumer_groups("--list")
    assert listed.returncode == 0, listed.stderr
    assert group in listed.stdout.split()

    described = consumer_groups("--describe", "--group", group)
    assert described.returncode == 0, described.stderr
    # CURRENT-OFFSET, LOG-END-OFFSET and LAG columns.
    assert offsets_table(described.stdout, group, topic, 3) == {0: 3, 1: 4}
    assert offsets_table(described.stdout, group, topic, 4) == {0: 5, 1: 5}
    assert offsets_table(described.stdout, group, topic, 5) == {0: 2, 1: 1}

    reset = ["--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "1"]
    planned = consumer_groups(*reset, "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert offsets_table(planned.stdout, group, topic, 3) == {0: 1, 1: 1}  # NEW-OFFSET
    assert committed_offsets(bootstrap, group, topic) == {0: 3, 1: 4}

    executed = consumer_groups(*reset, "--execute")
    assert executed.returncode == 0, executed.stderr
    assert offsets_table(executed.stdout, group, topic, 3) == {0: 1, 1: 1}
    assert committed_offsets(bootstrap, group, topic) == {0: 1, 1: 1}

    deleted = consumer_groups("--delete", "--group", group)
    assert deleted.returncode == 0, deleted.stderr
    assert f"Deletion of requested consumer groups ('{group}') was successful" in deleted.stdout
    assert group not in consumer_groups("--list").stdout.split()
    assert committed_offsets(bootstrap, group, topic) == {}


def test_java_console_consumer_joins_a_classic_group(
    bootstrap, java_console_consumer, consumer_groups
):
    topic = create_topic(bootstrap, len(MESSAGES))
    produce(bootstrap, topic, MESSAGES)
    group = unique_name("console")
    values = sorted(v for vs in MESSAGES.values() for v in vs)
    # One message more than there are: it stays in the group, waiting, until stopped.
    consumer = java_console_consumer(
        topic, group, max_messages=len(values) + 1, timeout_ms=int(CONSUME_TIMEOUT_S * 1000)
    )
    wait_until(
        lambda: sorted(consumer.stdout().split()) == values,
        CONSUME_TIMEOUT_S,
        "console consumer printed every message",
        consumer.stderr,
    )

    state = consumer_groups("--describe", "--group", group, "--state")
    assert state.returncode == 0, state.stderr
    # COORDINATOR (ID) spans two columns: GROUP, host:port, (id), ASSIGNMENT-STRATEGY, STATE, #.
    assert [row[3:] for row in rows(state.stdout, group)] == [["range", "Stable", "1"]]

    described = consumer_groups("--describe", "--group", group, "--members")
    assert described.returncode == 0, described.stderr
    [member] = rows(described.stdout, group)
    # GROUP, CONSUMER-ID, HOST, CLIENT-ID, #PARTITIONS
    assert member[1].startswith("console-consumer-") and member[3] == "console-consumer"
    assert member[4] == str(len(MESSAGES))

    # SIGTERM: the consumer commits what it consumed (auto-commit) and leaves the group.
    consumer.stop()
    assert committed_offsets(bootstrap, group, topic) == {p: len(v) for p, v in MESSAGES.items()}
    assert rows(consumer_groups("--describe", "--group", group, "--members").stdout, group) == []
