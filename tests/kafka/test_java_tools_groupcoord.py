"""Kafka's own `kafka-consumer-groups` against groupcoord's listeners: it lists, describes (with
the members while they are connected), resets (dry run, then execute) and deletes a group, and
reset plans pass between it and `groupcoord groups` as CSV files.

groupcoord holds offsets, not records, so its ListOffsets answers 0 for every partition: the
tool shows a log-end offset of 0, and clamps a reset above it to 0, as it does on an empty topic.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Consumer, TopicPartition

from groupcoord.actors.cli import main
from tests.kafka.admin import committed_offsets, create_topic, unique_name
from tests.kafka.members import wait_until

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.parametrize("bootstrap", ["groupcoord"], indirect=True),
]

WAIT_S = 60.0


def rows(stdout: str, group: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines() if line.split()[:1] == [group]]


def column(stdout: str, group: str, topic: str, index: int) -> dict[int, str]:
    return {int(r[2]): r[index] for r in rows(stdout, group) if r[1] == topic}


def test_consumer_groups_tool_against_groupcoord(bootstrap, members, consumer_groups):
    topic = create_topic(bootstrap, 2)
    group = unique_name("gc-tool")
    member = members("confluent-kafka", group, topic, "range")
    wait_until(lambda: member.assignment() == {0, 1}, WAIT_S, "member owns both partitions")
    member.commit({0: 3, 1: 4})

    listed = consumer_groups("--list")
    assert listed.returncode == 0, listed.stderr
    assert group in listed.stdout.split()
    described = consumer_groups("--describe", "--group", group)
    assert described.returncode == 0, described.stderr
    assert column(described.stdout, group, topic, 3) == {0: "3", 1: "4"}  # CURRENT-OFFSET
    consumer_ids = set(column(described.stdout, group, topic, 6).values())
    assert len(consumer_ids) == 1 and consumer_ids != {"-"}  # the connected member
    member.close()

    reset = ["--reset-offsets", "--group", group, "--topic", topic, "--to-earliest"]
    planned = consumer_groups(*reset, "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert column(planned.stdout, group, topic, 3) == {0: "0", 1: "0"}  # NEW-OFFSET
    assert committed_offsets(bootstrap, group, topic) == {0: 3, 1: 4}  # a dry run changes nothing
    executed = consumer_groups(*reset, "--execute")
    assert executed.returncode == 0, executed.stderr
    assert committed_offsets(bootstrap, group, topic) == {0: 0, 1: 0}

    deleted = consumer_groups("--delete", "--group", group)
    assert deleted.returncode == 0, deleted.stderr
    assert f"Deletion of requested consumer groups ('{group}') was successful" in deleted.stdout
    assert group not in consumer_groups("--list").stdout.split()


def test_reset_plans_pass_between_groupcoord_and_kafkas_tool(
    bootstrap, groupcoord_listeners, consumer_groups, tmp_path, capsys
):
    """A plan Kafka's tool exports (its --export CSV, a quoted group id among them) is read by
    ``groupcoord groups --from-file``, and one groupcoord exports is applied by the tool."""
    topic = create_topic(bootstrap, 2)
    groups = [unique_name("plan"), unique_name("plan,with-comma")]
    for group in groups:  # offsets committed outside any generation: the groups stay Empty
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.commit(
            offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 4)],
            asynchronous=False,
        )
        consumer.close()
    both = [x for g in groups for x in ("--group", g)]
    namespace = groupcoord_listeners.deployment.namespace

    exported = consumer_groups(
        "--reset-offsets", *both, "--all-topics", "--to-current", "--export", "--dry-run"
    )
    assert exported.returncode == 0, exported.stderr
    assert f'"{groups[1]}",{topic},1,4' in exported.stdout.splitlines()
    kafka_plan = tmp_path / "kafka.csv"
    kafka_plan.write_text(exported.stdout)
    capsys.readouterr()
    argv = ["groups", "--reset-offsets", *both, "--from-file", str(kafka_plan), "--json"]
    assert main([*argv, "--namespace", namespace]) == 0
    planned = json.loads(capsys.readouterr().out)["offsets"]
    assert sorted((o["group"], o["partition"], o["new_offset"]) for o in planned) == sorted(
        (g, p, o) for g in groups for p, o in ((0, 3), (1, 4))
    )

    argv = ["groups", "--reset-offsets", *both, "--all-topics", "--to-offset", "1", "--export"]
    assert main([*argv, "--namespace", namespace]) == 0
    our_plan = tmp_path / "groupcoord.csv"
    our_plan.write_text(capsys.readouterr().out)
    applied = consumer_groups("--reset-offsets", *both, "--from-file", str(our_plan), "--execute")
    assert applied.returncode == 0, applied.stderr
    # groupcoord's ListOffsets answers 0, so the tool clamps 1 to 0 (the module's docstring).
    for group in groups:
        assert committed_offsets(bootstrap, group, topic) == {0: 0, 1: 0}, applied.stdout


def test_offsets_verbose_shows_the_committed_leader_epoch_as_kafkas_tool_does(
    bootstrap, groupcoord_listeners, consumer_groups, capsys
):
    topic = create_topic(bootstrap, 2)
    group = unique_name("epochs")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.commit(
        offsets=[TopicPartition(topic, 0, 3, leader_epoch=7), TopicPartition(topic, 1, 4)],
        asynchronous=False,
    )
    consumer.close()
    kafka = consumer_groups("--describe", "--group", group, "--offsets", "--verbose")
    assert kafka.returncode == 0, kafka.stderr
    argv = ["groups", "--describe", "--group", group, "--offsets", "--verbose"]
    capsys.readouterr()
    assert main([*argv, "--namespace", groupcoord_listeners.deployment.namespace]) == 0
    ours = capsys.readouterr().out

    def table(text: str) -> list[list[str]]:
        return [line.split()[:5] for line in text.splitlines() if line.strip()]

    # GROUP TOPIC PARTITION LEADER-EPOCH CURRENT-OFFSET: the same cells from both tools.
    assert table(ours) == table(kafka.stdout)
    assert table(ours)[1:] == [[group, topic, "0", "7", "3"], [group, topic, "1", "-", "4"]]


@pytest.mark.parametrize(
    "client, assignor",
    [("confluent-kafka", "range"), ("confluent-kafka-consumer-protocol", "uniform")],
)
def test_describe_and_list_have_kafkas_columns_and_cells(
    bootstrap, groupcoord_listeners, members, consumer_groups, capsys, client, assignor
):
    """``groupcoord groups --describe --members/--state [--verbose]`` and ``--list
    --state/--type`` and Kafka 4's tool, both asked about the same live group (classic, then
    KIP-848's): the same header, and the same cells (the coordinator's, COORDINATOR (ID), not
    compared: groupcoord's names the offsets partition too)."""
    topic = create_topic(bootstrap, 2)
    group = unique_name("verbose")
    member = members(client, group, topic, assignor)
    wait_until(lambda: member.assignment() == {0, 1}, WAIT_S, "member owns both partitions")
    namespace = groupcoord_listeners.deployment.namespace
    for view in (["--members"], ["--members", "--verbose"], ["--state"], ["--state", "--verbose"]):
        kafka = consumer_groups("--describe", "--group", group, *view)
        assert kafka.returncode == 0, kafka.stderr
        capsys.readouterr()
        assert (
            main(["groups", "--describe", "--group", group, *view, "--namespace", namespace]) == 0
        )
        ours = capsys.readouterr().out
        (kafka_header, kafka_row), (header, row) = (
            [line.split() for line in text.splitlines() if line.strip()]
            for text in (kafka.stdout, ours)
        )
        assert header == kafka_header, view
        if view[0] == "--state":  # after COORDINATOR (ID), whose cell is two words
            assert row[-5:] == kafka_row[-5:] and row[0] == kafka_row[0], view
        else:
            assert row == kafka_row, view
    for view in (["--state"], ["--type"], ["--state", "--type"]):
        kafka = consumer_groups("--list", *view)
        assert kafka.returncode == 0, kafka.stderr
        capsys.readouterr()
        assert main(["groups", "--list", *view, "--namespace", namespace]) == 0
        ours = capsys.readouterr().out
        kafka_lines, lines = (
            [line.split() for line in text.splitlines() if line.strip()]
            for text in (kafka.stdout, ours)
        )
        assert lines[0] == kafka_lines[0], view  # the header
        assert [r for r in lines if r[0] == group] == [r for r in kafka_lines if r[0] == group]
