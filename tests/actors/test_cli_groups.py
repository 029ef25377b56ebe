"""``groupcoord groups``, Kafka's kafka-consumer-groups options, in-process against the session's
Ray: dry-run resets with --topic scopes, refusals and unknown groups with exit status 1, usage
errors in one line with exit status 2, per-action help, one JSON schema with nulls and full ids,
and Kafka's columns (HOST included)."""

from __future__ import annotations

import asyncio
import json

import pytest
import ray

from groupcoord.actors import AdminClient, SyncGroupMember, start, stop
from groupcoord.actors.cli import main
from groupcoord.actors.groups_output import GROUP_KEYS, MEMBER_KEYS, OFFSET_KEYS
from groupcoord.coordinator import CoordinatorConfig

NS = "gc-cli-groups"
# Longer than the 24/40 characters the old tables cut ids to.
LONG_GROUP = "a-consumer-group-with-a-rather-long-name-0123456789"


@pytest.fixture(scope="module")
def served(ray_session, tmp_path_factory):
    deployment = start(
        2,
        str(tmp_path_factory.mktemp("logs-cli-groups")),
        namespace=NS,
        config=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
    )
    deployment.wait_ready(120)
    yield deployment
    stop(deployment)


@pytest.fixture(scope="module")
def active(served):
    """A Stable group whose one member records a client host, owning cli-t 0 and 1."""
    member = SyncGroupMember(
        served.router,
        LONG_GROUP,
        ["cli-t"],
        topic_partitions={"cli-t": 2},
        client_id="cli-client",
        client_host="10.1.2.3",
        session_timeout_ms=6_000,
        heartbeat_interval_ms=1_000,
    )
    member.wait_assigned(30)
    member.commit({("cli-t", 0): 5})
    yield member
    member.close()


def commit(served, group: str, offsets: dict) -> None:
    """Offsets committed as a non-member: the group exists and is Empty."""
    asyncio.run(AdminClient(served.router).alter_offsets(group, offsets))


def committed(served, group: str) -> dict:
    return asyncio.run(AdminClient(served.router).fetch_offsets(group))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["groups", *argv, "--namespace", NS])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv: str, expect: int = 0) -> dict:
    code, out, err = run(capsys, *argv, "--json")
    assert code == expect, err
    document = json.loads(out)
    errors = [n for n in document["notes"] if n.startswith(("Error", "groupcoord"))]
    assert bool(errors) == (expect == 1) and all(e in err for e in errors)  # stderr, too
    assert set(document) == {"groups", "members", "offsets", "notes"}
    for key, keys in (("groups", GROUP_KEYS), ("members", MEMBER_KEYS), ("offsets", OFFSET_KEYS)):
        assert all(tuple(row) == keys for row in document[key]), document[key]
    return document


def last_line(err: str) -> str:
    *_, line = err.strip().splitlines()
    return line


def test_reset_is_a_dry_run_unless_executed_and_covers_only_its_topics(served, capsys):
    # Before: reset-offsets wrote at once and had no --topic (every committed partition).
    commit(served, "reset-g", {("t", 0): 9, ("t", 1): 9, ("u", 0): 9})
    argv = ("--reset-offsets", "--group", "reset-g", "--topic", "t:0", "--to-offset", "3")
    planned = run_json(capsys, *argv)
    assert [
        (o["topic"], o["partition"], o["current_offset"], o["new_offset"])
        for o in planned["offsets"]
    ] == [("t", 0, 9, 3)]
    assert any("dry run" in n for n in planned["notes"])
    assert committed(served, "reset-g") == {("t", 0): 9, ("t", 1): 9, ("u", 0): 9}
    run_json(capsys, *argv, "--execute")
    assert committed(served, "reset-g") == {("t", 0): 3, ("t", 1): 9, ("u", 0): 9}
    # A whole topic (its committed partitions: "t" is not in the catalog), shifted.
    run_json(
        capsys,
        "--reset-offsets",
        "--group",
        "reset-g",
        "--topic",
        "t",
        "--shift-by",
        "-5",
        "--execute",
    )
    assert committed(served, "reset-g") == {("t", 0): 0, ("t", 1): 4, ("u", 0): 9}
    # --to-latest from a source that lacks t-1: refused for the group, nothing written.
    code, _, err = run(
        capsys,
        "--reset-offsets",
        "--group",
        "reset-g",
        "--all-topics",
        "--to-latest",
        "--end-offsets",
        "python:tests.actors.offsets_sources:ends",
        "--execute",
    )
    assert code == 1 and "no end offset known for t-1" in err
    assert committed(served, "reset-g") == {("t", 0): 0, ("t", 1): 4, ("u", 0): 9}
    # --to-earliest without a start source: 0, and a note saying so.
    reset = run_json(
        capsys,
        "--reset-offsets",
        "--group",
        "reset-g",
        "--topic",
        "u:0",
        "--to-earliest",
        "--execute",
    )
    assert "no --start-offsets source: earliest is offset 0" in " ".join(reset["notes"])
    assert committed(served, "reset-g")[("u", 0)] == 0
    # The older spelling still works, now as a dry run over every committed partition.
    old = run_json(capsys, "reset-offsets", "reset-g", "--to-offset", "1")
    assert {o["new_offset"] for o in old["offsets"]} == {1} and len(old["offsets"]) == 3


def test_a_reset_plan_exported_as_csv_is_read_back_with_from_file(served, capsys, tmp_path):
    # Kafka's plan-then-apply: --export prints the plan as CSV, --from-file applies a file.
    commit(served, "export-g", {("t", 0): 9, ("t", 1): 8, ("u", 0): 7})
    commit(served, "export,h", {("t", 0): 6})  # a comma in a group id: quoted in the CSV
    code, out, err = run(
        capsys,
        "--reset-offsets",
        "--group",
        "export-g",
        "--all-topics",
        "--shift-by",
        "-2",
        "--export",
    )
    assert code == 0 and out == "t,0,7\nt,1,6\nu,0,5\n\n", err  # Kafka's: no group column
    assert "dry run" in err and committed(served, "export-g")[("t", 0)] == 9
    code, out, _ = run(
        capsys,
        "--reset-offsets",
        "--group",
        "export-g",
        "--group",
        "export,h",
        "--all-topics",
        "--to-offset",
        "1",
        "--export",
    )
    assert code == 0 and out.splitlines() == [
        "export-g,t,0,1",
        "export-g,t,1,1",
        "export-g,u,0,1",
        '"export,h",t,0,1',
        "",
    ]
    plan = tmp_path / "plan.csv"
    plan.write_text('"export,h",t,0,2\nexport-g,u,0,3\nexport-g,t,1,4\nother-g,t,0,0\n')
    both = ("--group", "export-g", "--group", "export,h")
    document = run_json(capsys, "--reset-offsets", *both, "--from-file", str(plan), "--execute")
    assert [
        (o["group"], o["topic"], o["partition"], o["new_offset"]) for o in document["offsets"]
    ] == [
        ("export-g", "t", 1, 4),
        ("export-g", "u", 0, 3),
        ("export,h", "t", 0, 2),
    ]
    assert committed(served, "export-g") == {("t", 0): 9, ("t", 1): 4, ("u", 0): 3}
    assert committed(served, "export,h") == {("t", 0): 2}
    assert "other-g" not in str(document)  # a group the command does not name is left alone
    # One group, the file without a group column; --all-topics is accepted, as Kafka does.
    plan.write_text("t,0,1\n")
    run_json(
        capsys,
        "--reset-offsets",
        "--group",
        "export-g",
        "--all-topics",
        "--from-file",
        str(plan),
        "--execute",
    )
    assert committed(served, "export-g")[("t", 0)] == 1
    # A group the file has no plan for, and a partition past a catalogued topic's count:
    # refused for that group (status 1), nothing written.
    assert main(["topics", "create", "export-t", "--partitions", "2", "--namespace", NS]) == 0
    plan.write_text('export-g,export-t,2,0\n"export,h",t,0,0\n')
    code, out, err = run(capsys, "--reset-offsets", *both, "--from-file", str(plan), "--execute")
    assert code == 1
    assert "export-t-2 in " in err and "(2 in the topic catalog)" in err, err
    assert f"no reset plan for group 'export,h' in {plan}" not in err  # the quoted group has one
    assert committed(served, "export-g") == {("t", 0): 1, ("t", 1): 4, ("u", 0): 3}
    code, _, err = run(
        capsys,
        "--reset-offsets",
        "--group",
        "export-g",
        "--group",
        "no-plan-g",
        "--from-file",
        str(plan),
    )
    assert code == 1 and f"no reset plan for group 'no-plan-g' in {plan}" in err


def test_resets_that_cannot_happen_fail_with_status_1(served, active, capsys):
    # Kafka refuses a reset of a group with active members.
    code, out, err = run(
        capsys,
        "--reset-offsets",
        "--group",
        LONG_GROUP,
        "--all-topics",
        "--to-offset",
        "0",
        "--execute",
    )
    assert code == 1 and "inactive, but the current state is Stable" in err
    assert committed(served, LONG_GROUP) == {("cli-t", 0): 5}
    # Before: an unknown group printed an empty table and exited 0.
    document = run_json(
        capsys,
        "--reset-offsets",
        "--group",
        "no-such-g",
        "--all-topics",
        "--to-offset",
        "0",
        expect=1,
    )
    assert document["offsets"] == [] and document["groups"][0]["error"] == "GROUP_ID_NOT_FOUND"
    assert "has no committed offsets to reset" in " ".join(document["notes"])
    # Nothing was planned, so no "dry run ... add --execute to write these offsets" either.
    assert not any("dry run" in note for note in document["notes"])


def test_describe_views_columns_and_json(served, active, capsys, tmp_path):
    ends = tmp_path / "ends.json"
    ends.write_text(json.dumps({"cli-t:0": 12}))  # no end offset for cli-t 1
    # Before: a partition missing from the end offsets failed the whole describe.
    document = run_json(capsys, "--describe", "--group", LONG_GROUP, "--end-offsets", str(ends))
    (group,) = document["groups"]
    assert group["group"] == LONG_GROUP and group["state"] == "Stable" and group["error"] is None
    assert group["assignment_strategy"] == "range" and group["members"] == 1
    (member,) = document["members"]
    member_id = member["consumer_id"]
    assert len(member_id) > 40 and group["leader"] == member_id  # full ids
    assert member["host"] == "10.1.2.3" and member["group_instance_id"] is None
    assert member["assignment"] == [
        {"topic": "cli-t", "partition": 0},
        {"topic": "cli-t", "partition": 1},
    ]
    rows = {o["partition"]: o for o in document["offsets"]}
    assert (rows[0]["current_offset"], rows[0]["log_end_offset"], rows[0]["lag"]) == (5, 12, 7)
    # Owned but never committed, and no end offset known: nulls, not "" or a failure.
    assert (rows[1]["current_offset"], rows[1]["log_end_offset"], rows[1]["lag"]) == (
        None,
        None,
        None,
    )
    assert rows[1]["consumer_id"] == member_id and rows[1]["host"] == "10.1.2.3"

    code, out, _ = run(capsys, "--describe", "--group", LONG_GROUP, "--end-offsets", str(ends))
    header, first, second = out.split("\n")[:3]
    assert header.split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert first.split() == [
        LONG_GROUP,
        "cli-t",
        "0",
        "5",
        "12",
        "7",
        member_id,
        "10.1.2.3",
        "cli-client",
    ]
    assert second.split()[3:6] == ["-", "-", "-"]
    # Kafka 4's tool: --verbose gives a classic group the consumer group's columns, "-" where
    # it has no such thing (before: an ASSIGNMENT column, Kafka 3's).
    code, out, _ = run(capsys, "--describe", "--group", LONG_GROUP, "--members", "--verbose")
    header, row = out.split("\n")[:2]
    assert header.split() == [
        "GROUP",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
        "CURRENT-EPOCH",
        "CURRENT-ASSIGNMENT",
        "TARGET-EPOCH",
        "TARGET-ASSIGNMENT",
    ]
    assert row.split() == [
        LONG_GROUP,
        member_id,
        "10.1.2.3",
        "cli-client",
        "2",
        "-",
        "cli-t:0,1",
        "-",
        "-",
    ]
    code, out, _ = run(capsys, "--describe", "--group", LONG_GROUP, "--state")
    header, row = out.split("\n")[:2]
    assert (
        header.startswith("GROUP") and "COORDINATOR (ID)" in header and header.endswith("#MEMBERS")
    )
    assert row.split()[-3:] == ["range", "Stable", "1"]
    code, out, _ = run(capsys, "--describe", "--group", LONG_GROUP, "--state", "--verbose")
    header, row = out.split("\n")[:2]
    assert header.split()[-3:] == ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    assert row.split()[-5:] == ["range", "Stable", "-", "-", "1"]


def test_describe_shows_a_consumer_groups_epochs_and_assignments_with_verbose(
    served, active, capsys
):
    group_id = "cli-kip848"
    ray.get(served.router.create_topic.remote("cli-k", 2))
    member = SyncGroupMember(
        served.router, group_id, ["cli-k"], group_protocol="consumer", client_id="kc"
    )
    try:
        assert member.wait_assigned(30) == {("cli-k", 0), ("cli-k", 1)}
        member_id = member.member.member_id
        # As Kafka 4's tool: the epochs only with --verbose, and no TYPE column (--list --type).
        code, out, _ = run(capsys, "--describe", "--group", group_id, "--state")
        header, row = out.split("\n")[:2]
        assert header.split()[-3:] == ["ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        assert row.split()[-3:] == ["uniform", "Stable", "1"]
        code, out, _ = run(capsys, "--describe", "--group", group_id, "--state", "--verbose")
        header, row = out.split("\n")[:2]
        assert header.split()[-3:] == ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
        assert row.split()[-5:] == ["uniform", "Stable", "2", "2", "1"]
        code, out, _ = run(capsys, "--describe", "--group", group_id, "--members")
        header, row = out.split("\n")[:2]
        assert header.split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert row.split() == [group_id, member_id, "-", "kc", "2"]
        code, out, _ = run(capsys, "--describe", "--group", group_id, "--members", "--verbose")
        header, row = out.split("\n")[:2]
        assert header.split() == [
            "GROUP",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
            "CURRENT-EPOCH",
            "CURRENT-ASSIGNMENT",
            "TARGET-EPOCH",
            "TARGET-ASSIGNMENT",
        ]
        assert row.split() == [
            group_id,
            member_id,
            "-",
            "kc",
            "2",
            "2",
            "cli-k:0,1",
            "2",
            "cli-k:0,1",
        ]
        # JSON: the same facts; a classic group's epochs and target assignment are null.
        document = run_json(capsys, "--describe", "--group", group_id, "--group", LONG_GROUP)
        consumer, classic = document["groups"]
        assert (consumer["group_type"], consumer["generation"], consumer["assignment_epoch"]) == (
            "consumer",
            2,
            2,
        )
        assert (classic["group_type"], classic["assignment_epoch"]) == ("classic", None)
        mine, theirs = document["members"]
        both = [{"topic": "cli-k", "partition": 0}, {"topic": "cli-k", "partition": 1}]
        assert (mine["member_epoch"], mine["assignment"], mine["target_assignment"]) == (
            2,
            both,
            both,
        )
        assert (theirs["member_epoch"], theirs["target_assignment"]) == (None, None)
        # Without --verbose, a classic group's --state has no epochs either.
        code, out, _ = run(capsys, "--describe", "--group", LONG_GROUP, "--state")
        assert "EPOCH" not in out and "TYPE" not in out
        # Kafka 4's --list --type: a TYPE column (Classic, Consumer); with types, a filter.
        code, out, _ = run(capsys, "--list", "--type")
        lines = [line.split() for line in out.splitlines() if line.strip()]
        assert code == 0 and lines[0] == ["GROUP", "TYPE"]
        assert {(group_id, "Consumer"), (LONG_GROUP, "Classic")} <= {tuple(r) for r in lines}
        code, out, _ = run(capsys, "--list", "--type", "CONSUMER", "--state")
        lines = [line.split() for line in out.splitlines() if line.strip()]
        assert lines[0] == ["GROUP", "TYPE", "STATE"] and [group_id, "Consumer", "Stable"] in lines
        assert all(row[1] == "Consumer" for row in lines[1:])
        listed = run_json(capsys, "--list", "--type", "classic")
        assert LONG_GROUP in {g["group"] for g in listed["groups"]}
        assert {g["group_type"] for g in listed["groups"]} == {"classic"}
    finally:
        member.close()


def test_unknown_groups_and_refused_deletes_fail_with_status_1(served, active, capsys):
    # Before: describing an unknown group printed state Dead and exited 0.
    commit(served, "known-g", {("t", 0): 1})
    document = run_json(capsys, "describe", "known-g", "no-such-g", expect=1)
    assert [(g["group"], g["state"], g["error"]) for g in document["groups"]] == [
        ("known-g", "Empty", None),
        ("no-such-g", "Dead", "GROUP_ID_NOT_FOUND"),
    ]
    assert "Error: Consumer group 'no-such-g' does not exist." in " ".join(document["notes"])
    code, out, err = run(capsys, "--describe", "--group", "known-g", "--members")
    assert code == 0 and out.split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    assert "Consumer group 'known-g' has no active members." in err
    every = run_json(capsys, "--describe", "--all-groups", "--state")
    assert {LONG_GROUP, "known-g"} <= {g["group"] for g in every["groups"]}
    code, _, err = run(capsys, "--delete", "--group", LONG_GROUP)
    assert code == 1 and f"'{LONG_GROUP}' could not be deleted due to: NON_EMPTY_GROUP" in err
    listed = run_json(capsys, "--list", "--state", "stable,empty")
    assert {(g["group"], g["state"]) for g in listed["groups"]} >= {
        (LONG_GROUP, "Stable"),
        ("known-g", "Empty"),
    }
    assert all(g["generation"] is None for g in listed["groups"])  # not known to ListGroups
    code, out, _ = run(capsys, "--list")
    assert code == 0 and {LONG_GROUP, "known-g"} <= set(out.split())
    deleted = run_json(capsys, "--delete", "--group", "known-g")
    assert deleted["groups"][0]["group"] == "known-g" and deleted["groups"][0]["error"] is None
    code, out, _ = run(capsys, "--delete", "--group", "known-g")
    assert code == 1


def test_delete_offsets(served, active, capsys):
    commit(served, "delete-offsets-g", {("t", 0): 1, ("t", 1): 2, ("u", 0): 3})
    document = run_json(capsys, "--delete-offsets", "--group", "delete-offsets-g", "--topic", "t")
    assert [(o["topic"], o["partition"], o["error"]) for o in document["offsets"]] == [
        ("t", 0, None),
        ("t", 1, None),
    ]
    assert committed(served, "delete-offsets-g") == {("u", 0): 3}
    # The active group still subscribes to cli-t: refused per partition.
    code, out, _ = run(capsys, "--delete-offsets", "--group", LONG_GROUP, "--topic", "cli-t:0")
    assert code == 1 and "Error: GROUP_SUBSCRIBED_TO_TOPIC" in out


@pytest.mark.parametrize(
    "argv, why",
    [
        (["--describe", "--group", "g", "--bogus"], "unrecognized arguments: --bogus"),
        (["--list", "--state", "bogus"], "valid states are: Empty, PreparingRebalance"),
        (["--list", "--type", "classic,bogus"], "valid types are: classic, consumer"),
        (["--validate-regex"], "--validate-regex needs the REGEX to check"),
        (["--describe", "--list"], "exactly one action"),
        (["--describe"], "--group G (repeatable) or --all-groups"),
        (["--reset-offsets", "--group", "g", "--to-offset", "1"], "scope"),
        (["--reset-offsets", "--group", "g", "--all-topics"], "one of the arguments --to-earliest"),
        (
            ["--reset-offsets", "--group", "g", "--all-topics", "--to-latest"],
            "--to-latest needs --end-offsets",
        ),
        (
            ["--reset-offsets", "--group", "g", "--all-topics", "--by-duration", "PT1H"],
            "kafka:HOST:PORT",
        ),
        (["--describe", "--group", "g", "--to-offset", "1"], "unrecognized arguments: --to-offset"),
        (["--describe", "--group", "g", "--export"], "unrecognized arguments: --export"),
        (
            [
                "--reset-offsets",
                "--group",
                "g",
                "--all-topics",
                "--to-current",
                "--export",
                "--json",
            ],
            "--export and --json are two forms of the output",
        ),
        (
            ["--reset-offsets", "--group", "g", "--topic", "t", "--from-file", "PLAN"],
            "--from-file names its partitions itself: drop --topic",
        ),
        (
            ["--reset-offsets", "--group", "g", "--from-file", "PLAN", "--to-offset", "1"],
            "not allowed with argument",
        ),
        (
            ["--reset-offsets", "--group", "g", "--topic", "t:²", "--to-current"],
            "invalid partition",
        ),
        (["--delete-offsets", "--group", "g", "--topic", "t:x"], "invalid partition 'x'"),
    ],
)
def test_usage_errors_are_one_line_and_status_2(served, capsys, argv, why):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and why in err and err.startswith("groupcoord groups"), err


@pytest.mark.parametrize(
    "content, groups, why",
    [
        (b"topic,partition,offset\nt,0,1\n", ["g"], "line 1: partition 'partition' is not"),
        (b"t,0,1\n", ["g", "h"], "has no group column (topic,partition,offset)"),
        (b"t,0,1\n", ["--all-groups"], "has no group column"),
        (b"\xff\xfe,0,1\n", ["g"], "not UTF-8 text"),
        (None, ["g"], "No such file or directory"),
    ],
)
def test_a_bad_reset_plan_is_a_usage_error_before_ray(capsys, tmp_path, content, groups, why):
    plan = tmp_path / "plan.csv"
    if content is not None:
        plan.write_bytes(content)
    chosen = groups if groups == ["--all-groups"] else [x for g in groups for x in ("--group", g)]
    code, out, err = run(capsys, "--reset-offsets", *chosen, "--from-file", str(plan))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"groupcoord groups --reset-offsets: --from-file {plan}") and why in err


def test_a_malformed_end_offsets_file_is_named(served, capsys, tmp_path):
    bad = tmp_path / "ends.json"
    bad.write_text("{oops")
    code, _, err = run(capsys, "--describe", "--group", "g", "--end-offsets", str(bad))
    assert code == 2 and err.count("\n") == 1 and f"{bad}: not valid JSON" in err


def test_help_version_and_top_level_flags(capsys):
    helps = {}
    actions = ("--list", "--describe", "--reset-offsets", "--delete-offsets", "--delete")
    for action in (*actions, "--validate-regex"):
        assert main(["groups", action, "--help"]) == 0
        helps[action] = capsys.readouterr().out
        assert helps[action].startswith(f"usage: groupcoord groups {action}")
    assert len(set(helps.values())) == 6  # before: the same text for every action
    assert "--execute" in helps["--reset-offsets"] and "--execute" not in helps["--describe"]
    assert main(["groups", "describe", "--help"]) == 0  # the older spelling
    assert capsys.readouterr().out == helps["--describe"]
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "groupcoord 0.1.0"
    assert main(["status", "--bogus"]) == 2
    err = capsys.readouterr().err
    assert (
        err == "groupcoord status: unrecognized arguments: --bogus (see groupcoord status --help)\n"
    )
