"""Kafka's own `kafka-consumer-groups` against each coordinator under test, on a topic with no
records (all that groupcoord serves), so the same assertions hold for both: it describes a group
that does not exist, deletes one partition's committed offset, exports the offsets as CSV and
resets offsets from that file.

Kafka's 4.x tool asks with DescribeGroups v6, which names a missing group GROUP_ID_NOT_FOUND
(KIP-1043) rather than describing it as Dead; it reports that as an error on its own line.
"""

from __future__ import annotations

import pytest

from tests.kafka.admin import committed_offsets, create_topic, unique_name
from tests.kafka.members import wait_until

pytestmark = pytest.mark.timeout(300)

WAIT_S = 60.0


def test_offsets_actions_of_the_tool(bootstrap, members, consumer_groups, tmp_path):
    topic = create_topic(bootstrap, 3)
    group = unique_name("tool-offsets")
    member = members("confluent-kafka", group, topic, "range")
    wait_until(lambda: member.assignment() == {0, 1, 2}, WAIT_S, "member owns all partitions")
    member.commit({0: 0, 1: 0, 2: 0})
    member.close()

    missing = unique_name("missing")
    described = consumer_groups("--describe", "--group", missing)
    assert f"GroupIdNotFoundException: Group {missing} not found" in described.stdout, (
        described.stdout + described.stderr
    )

    deleted = consumer_groups("--delete-offsets", "--group", group, "--topic", f"{topic}:0")
    assert deleted.returncode == 0, deleted.stderr
    assert f"Request succeeded for deleting offsets from group {group}" in deleted.stdout
    assert committed_offsets(bootstrap, group, topic) == {1: 0, 2: 0}

    exported = consumer_groups(
        "--reset-offsets", "--group", group, "--all-topics", "--to-current", "--export", "--dry-run"
    )
    assert exported.returncode == 0, exported.stderr
    assert sorted(exported.stdout.split()) == [f"{topic},1,0", f"{topic},2,0"]

    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,0\n{topic},2,0\n")
    reset = consumer_groups(
        "--reset-offsets", "--group", group, "--from-file", str(plan), "--execute"
    )
    assert reset.returncode == 0, reset.stderr
    assert committed_offsets(bootstrap, group, topic) == {0: 0, 1: 0, 2: 0}
