"""The ``groupcoord`` CLI, in-process against the session's Ray: serve, groups *, --json."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient as KafkaAdmin
from confluent_kafka.admin import ConfigResource

from groupcoord.actors import SyncGroupMember, connect, stop
from groupcoord.actors.cli import main
from groupcoord.actors.output import table
from groupcoord.coordinator import partition_for

NS = "gc-cli"


@pytest.fixture(scope="module")
def served(ray_session, tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("logs-cli")
    assert (
        main(
            [
                "serve",
                "--namespace",
                NS,
                "--partitions",
                "2",
                "--log-dir",
                str(log_dir),
                "--detach",
                "--kafka-port",
                "0",
                "--http-port",
                "0",
            ]
        )
        == 0
    )
    deployment = connect(NS)
    yield deployment
    stop(deployment)


def run_json(capsys, *argv) -> dict:
    capsys.readouterr()
    assert main([*argv, "--namespace", NS, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_topics_set_by_the_cli_are_what_kafka_clients_see(served, capsys):
    assert served.kafka  # serve --kafka-port 0 started the listeners
    created = run_json(capsys, "topics", "create", "cli-events", "--partitions", "3")
    assert {"topic": "cli-events", "partitions": 3} in created["topics"]
    run_json(capsys, "topics", "alter", "cli-events", "--partitions", "5")
    admin = KafkaAdmin({"bootstrap.servers": served.kafka})
    assert len(admin.list_topics(timeout=20).topics["cli-events"].partitions) == 5
    capsys.readouterr()
    for refused, why in [
        (["alter", "cli-events", "--partitions", "2"], "only grow"),
        (["create", "cli-events", "--partitions", "1"], "already exists"),
        (["create", "bad name", "--partitions", "1"], "illegal topic name"),
        (["delete", "nope"], "unknown topic"),
        (["create", "x"], "--partitions"),
    ]:
        assert main(["topics", *refused, "--namespace", NS]) == 2
        err = capsys.readouterr().err  # the cluster it reached, then the one-line error
        *_, last = err.strip().splitlines()
        assert last.startswith("groupcoord: ") and why in last and "Traceback" not in err, err
    run_json(capsys, "topics", "delete", "cli-events")
    assert "cli-events" not in run_json(capsys, "topics", "list")["topics"]


def test_a_groups_settings_set_by_the_cli_are_what_kafka_clients_see(served, capsys):
    session, heartbeat = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
    shown = run_json(capsys, "configs", "cli-tuned", "--set", f"{heartbeat}=6000")
    rows = {row["setting"]: (row["value"], row["source"]) for row in shown["settings"]}
    assert rows[heartbeat] == (6000, "group") and rows[session] == (45_000, "deployment")
    admin = KafkaAdmin({"bootstrap.servers": served.kafka})
    resource = ConfigResource(ConfigResource.Type.GROUP, "cli-tuned")
    (future,) = admin.describe_configs([resource], request_timeout=20).values()
    assert future.result(timeout=30)[heartbeat].value == "6000"
    capsys.readouterr()
    for refused, why in [
        (["--set", f"{session}=1000"], "group.consumer.min.session.timeout.ms"),
        (["--set", "no.such=1"], "Unknown group config name"),
        (["--set", heartbeat], "NAME=VALUE"),
    ]:
        assert main(["configs", "cli-tuned", *refused, "--namespace", NS]) == 2
        err = capsys.readouterr().err
        *_, last = err.strip().splitlines()
        assert last.startswith("groupcoord") and why in last and "Traceback" not in err, err
    shown = run_json(capsys, "configs", "cli-tuned", "--delete", heartbeat)
    assert {row["source"] for row in shown["settings"]} == {"deployment"}


def test_a_non_local_kafka_listener_is_refused_before_ray_starts(capsys, tmp_path):
    argv = ["serve", "--log-dir", str(tmp_path), "--kafka-port", "0", "--kafka-host", "0.0.0.0"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a loopback address" in err
    assert not os.listdir(tmp_path)  # nothing was started or written


def test_serve_http_port_serves_burrows_api_and_bad_ports_are_refused(served, capsys, tmp_path):
    assert served.http  # serve --http-port 0 started the HTTP service; connect() finds it
    with urllib.request.urlopen(f"http://{served.http}/v3/kafka", timeout=10) as response:
        assert json.load(response)["clusters"] == ["groupcoord"]
    capsys.readouterr()
    assert main(["serve", "--log-dir", str(tmp_path), "--http-port", "70000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "port must be an int in [0, 65535]" in err
    assert not os.listdir(tmp_path)  # refused before anything started


def test_serve_is_ready_once_metadata_names_every_partition(served):
    # serve waited (wait_ready) for every partition's listener to register with the router:
    # a client asking at once is told of every broker.
    metadata = KafkaAdmin({"bootstrap.servers": served.kafka}).list_topics(timeout=10)
    assert sorted(metadata.brokers) == [0, 1]


def test_a_partition_listener_that_cannot_listen_fails_serve_in_one_line(
    ray_session, capsys, tmp_path
):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    base = str(taken.getsockname()[1])  # partition 0's port: taken
    argv = ["serve", "--namespace", "gc-taken", "--log-dir", str(tmp_path), "--detach"]
    try:
        capsys.readouterr()
        assert main([*argv, "--kafka-port", "0", "--kafka-partition-ports", base]) == 2
        last = capsys.readouterr().err.splitlines()[-1]  # after serve's progress lines
        assert last.startswith("groupcoord: cannot serve Kafka clients: partition 0 (Kafka ")
        assert "address already in use" in last
    finally:
        taken.close()
        stop(connect("gc-taken"))


def test_table_formatting():
    text = table("t", [{"a": 1, "bb": "x"}], ("a", "bb"))
    assert text.splitlines() == ["t", "a  bb", "-  --", "1  x "]
    assert table("t", [], ("a",)).endswith("(none)")


def test_serve_groups_describe_reset_delete(served, capsys, tmp_path):
    # serve runs Kafka's defaults: sessions of at least 6 s, a 3 s initial delay.
    m = SyncGroupMember(
        served.router,
        "cli-g",
        ["t"],
        topic_partitions={"t": 2},
        session_timeout_ms=6_000,
        heartbeat_interval_ms=1_000,
    )
    m.wait_assigned(30)
    m.commit({("t", 0): 5, ("t", 1): 9})
    try:
        listed = run_json(capsys, "groups", "--list")
        assert ("cli-g", "consumer") in {(g["group"], g["protocol_type"]) for g in listed["groups"]}
        ends = tmp_path / "ends.json"
        ends.write_text(json.dumps({"t:0": 10, "t:1": 10}))
        described = run_json(capsys, "groups", "describe", "cli-g", "--end-offsets", str(ends))
        assert [(o["partition"], o["current_offset"], o["lag"]) for o in described["offsets"]] == [
            (0, 5, 5),
            (1, 9, 1),
        ]
        assert len(described["members"]) == 1
        # COORDINATOR (ID): the Kafka listener of the partition that owns the group.
        capsys.readouterr()
        assert main(["groups", "--describe", "--group", "cli-g", "--state", "--namespace", NS]) == 0
        row = capsys.readouterr().out.splitlines()[1].split()
        owner = partition_for("cli-g", served.num_partitions)
        assert row == [
            "cli-g",
            served.infos()[owner]["kafka"],
            f"({owner})",
            "range",
            "Stable",
            "1",
        ]
        argv = ["groups", "--reset-offsets", "--group", "cli-g", "--all-topics", "--to-offset"]
        assert main([*argv, "0", "--execute", "--namespace", NS]) == 1  # the group has a member
        assert "current state is Stable" in capsys.readouterr().err
    finally:
        m.close()
    reset = run_json(
        capsys,
        "groups",
        "reset-offsets",
        "cli-g",
        "--to-latest",
        "--end-offsets",
        str(ends),
        "--execute",
    )
    assert [(o["topic"], o["partition"], o["new_offset"]) for o in reset["offsets"]] == [
        ("t", 0, 10),
        ("t", 1, 10),
    ]
    capsys.readouterr()
    assert main(["groups", "describe", "cli-g", "--namespace", NS]) == 0
    out, err = capsys.readouterr()
    assert "CURRENT-OFFSET" in out and "has no active members" in err
    deleted = run_json(capsys, "groups", "delete", "cli-g")
    assert deleted["groups"] == [{k: None for k in deleted["groups"][0]} | {"group": "cli-g"}]
    assert main(["groups", "delete", "cli-g", "--namespace", NS]) == 1  # GROUP_ID_NOT_FOUND


def test_bad_offset_files_are_clear_errors(served, capsys, tmp_path):
    # Before: a missing file (OSError) or a JSON document that is not an object ended in a
    # traceback instead of a one-line error and exit status 2.
    not_an_object = tmp_path / "list.json"
    not_an_object.write_text("[1, 2]")
    for path in (tmp_path / "missing.json", not_an_object):
        capsys.readouterr()
        assert (
            main(["groups", "describe", "any-g", "--end-offsets", str(path), "--namespace", NS])
            == 2
        )
        err = capsys.readouterr().err
        assert err.startswith("groupcoord: ") and str(path) in err and "Traceback" not in err


def test_connect_unknown_namespace_is_a_clear_error(ray_session, capsys):
    assert main(["groups", "list", "--namespace", "no-such-deployment"]) == 2
    assert "no groupcoord deployment" in capsys.readouterr().err


def test_detach_without_a_lasting_cluster_is_refused(tmp_path):
    # In a fresh process with no Ray: the embedded Ray would die with the command, and the
    # "detached" coordinator with it, so serve refuses before starting anything.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "groupcoord.actors.cli",
            "serve",
            "--detach",
            "--log-dir",
            str(tmp_path / "logs"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
    )
    assert result.returncode == 2
    assert "--detach needs a Ray cluster" in result.stderr
    assert not (tmp_path / "logs").exists()
