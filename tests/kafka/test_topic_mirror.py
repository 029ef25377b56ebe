"""``groupcoord topics mirror`` against the real broker as the upstream cluster: its topics and
partition counts reach groupcoord's catalog, and Kafka clients asking groupcoord see them; a dry
run changes nothing; ``--every-s`` keeps mirroring until interrupted; a deployment served with
``--mirror-from`` mirrors by itself."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import pytest
import ray
from confluent_kafka.admin import NewPartitions, NewTopic

from groupcoord.actors import start, stop
from groupcoord.actors.catalog_mirror import MirrorConfig
from groupcoord.actors.cli import main
from groupcoord.actors.topic_mirror import upstream_topics
from tests.actors.helpers import wait_restarted
from tests.kafka.admin import ADMIN_TIMEOUT_S, admin_client, create_topic, unique_name
from tests.kafka.javakafka import free_ports

pytestmark = pytest.mark.timeout(300)

MIRROR_WAIT_S = 60.0


def _mirror(args: list[str], capsys) -> tuple[int, dict[str, dict]]:
    capsys.readouterr()
    code = main(["topics", "mirror", *args, "--json"])
    return code, {row["topic"]: row for row in json.loads(capsys.readouterr().out)["mirror"]}


def test_a_mirror_creates_and_grows_and_keeps_the_rest(
    broker_bootstrap, groupcoord_listeners, capsys
):
    router = groupcoord_listeners.deployment.router
    grown, new, same, fewer = (create_topic(broker_bootstrap, n) for n in (3, 2, 2, 1))
    for topic, here in ((grown, 1), (same, 2), (fewer, 4)):
        ray.get(router.create_topic.remote(topic, here))
    only_here = unique_name("mirror-only-here")
    ray.get(router.create_topic.remote(only_here, 5))
    args = [
        "--from",
        f"kafka:{broker_bootstrap}",
        "--topic-pattern",
        "|".join(re.escape(t) for t in (grown, new, same, fewer)),
        "--namespace",
        groupcoord_listeners.deployment.namespace,
    ]
    code, rows = _mirror([*args, "--dry-run"], capsys)
    assert code == 0
    assert (rows[new]["action"], rows[new]["result"]) == ("create", "valid")
    assert (rows[grown]["action"], rows[grown]["result"]) == ("grow", "valid")
    catalog = ray.get(router.topics.remote())
    assert new not in catalog and catalog[grown] == 1  # nothing changed

    code, rows = _mirror(args, capsys)
    assert code == 0
    shown = {t: (rows[t]["upstream"], rows[t]["before"], rows[t]["action"]) for t in rows}
    assert {t: shown[t] for t in (grown, new, same, fewer, only_here)} == {
        grown: (3, 1, "grow"),
        new: (2, None, "create"),
        same: (2, 2, "same"),
        fewer: (1, 4, "kept"),
        only_here: (None, 5, "kept"),
    }
    assert rows[grown]["result"] == rows[new]["result"] == "done"
    assert rows[fewer]["result"] == "fewer upstream: a topic never shrinks"
    assert rows[only_here]["result"] == "not mirrored: mirroring never deletes"
    catalog = ray.get(router.topics.remote())
    assert [catalog[t] for t in (grown, new, same, fewer, only_here)] == [3, 2, 2, 4, 5]
    # Kafka clients asking groupcoord see the mirrored counts.
    admin = admin_client(groupcoord_listeners.bootstrap)
    topics = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
    assert [len(topics[t].partitions) for t in (grown, new)] == [3, 2]

    code, rows = _mirror(args, capsys)  # again: nothing left to do
    assert code == 0 and not [t for t, r in rows.items() if r["action"] in ("create", "grow")]


def test_mirroring_every_few_seconds_follows_the_upstream_cluster(
    broker_bootstrap, groupcoord_listeners, ray_session
):
    prefix = unique_name("mirror-every")
    router = groupcoord_listeners.deployment.router
    command = [
        *(sys.executable, "-m", "groupcoord.actors.cli", "topics", "mirror"),
        *("--from", f"kafka:{broker_bootstrap}", "--topic-pattern", f"{re.escape(prefix)}.*"),
        *("--every-s", "1", "--json", "--namespace", groupcoord_listeners.deployment.namespace),
        *("--address", ray_session.get_runtime_context().gcs_address),
    ]
    mirror = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(mirror.stdout.readline())  # every topic; none upstream matches yet
        assert first["at"].endswith("Z")
        assert {r["action"] for r in first["mirror"]} <= {"kept"}
        topic = f"{prefix}-a"
        admin = admin_client(broker_bootstrap)
        new_topic = NewTopic(topic, num_partitions=2, replication_factor=1)
        futures = admin.create_topics([new_topic], request_timeout=ADMIN_TIMEOUT_S)
        futures[topic].result(timeout=ADMIN_TIMEOUT_S)
        created = json.loads(mirror.stdout.readline())
        assert [(r["topic"], r["action"], r["result"]) for r in created["mirror"]] == [
            (topic, "create", "done")
        ]
        futures = admin.create_partitions([NewPartitions(topic, 5)])
        futures[topic].result(timeout=ADMIN_TIMEOUT_S)
        deadline = time.monotonic() + MIRROR_WAIT_S
        while ray.get(router.topics.remote()).get(topic) != 5:
            assert time.monotonic() < deadline, "the growth was not mirrored"
            time.sleep(0.2)
        # The router restarts (Ray restarts it): the mirror says so and goes on.
        router_pid = ray.get(router.describe.remote())["pid"]
        ray.kill(router, no_restart=False)
        wait_restarted(lambda: ray.get(router.describe.remote(), timeout=10), router_pid)
        later = f"{prefix}-b"
        new_topic = NewTopic(later, num_partitions=3, replication_factor=1)
        futures = admin.create_topics([new_topic], request_timeout=ADMIN_TIMEOUT_S)
        futures[later].result(timeout=ADMIN_TIMEOUT_S)
        while ray.get(router.topics.remote()).get(later) != 3:
            assert time.monotonic() < deadline + MIRROR_WAIT_S, "not mirrored after a restart"
            time.sleep(0.2)
        mirror.send_signal(signal.SIGINT)
        assert mirror.wait(30) == 0, mirror.stderr.read()
    finally:
        if mirror.poll() is None:
            mirror.kill()
            mirror.wait(30)


def test_an_unreachable_upstream_is_a_connection_error_and_nothing_on_stderr(capfd):
    # Before: librdkafka wrote a line to stderr (fd 2, past Python) for every connection
    # attempt, around the command's one-line error.
    (port,) = free_ports(1)
    with pytest.raises(ConnectionError, match="cluster unreachable"):
        upstream_topics(f"127.0.0.1:{port}", timeout_s=1.0)
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "--from kafka:HOST:PORT"),
        (["--from", "kafka:nohostport"], "expected kafka:HOST:PORT"),
        (["--from", "file:x.json"], "--from kafka:HOST:PORT"),
        (["--from", "kafka:h:1", "--every-s", "0"], "--every-s must be in [1, 86400]"),
        (["t", "--from", "kafka:h:1"], "takes no topic name"),
        (["--from", "kafka:h:1", "--topic-pattern", "ev(ents"], "--topic-pattern 'ev(ents'"),
    ],
)
def test_a_bad_mirror_command_line_is_one_line_and_exit_2(args, says, capsys):
    assert main(["topics", "mirror", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err  # one line, said before Ray was looked for


def test_a_deployment_served_with_a_mirror_follows_the_upstream_cluster(
    broker_bootstrap, ray_session, tmp_path, capsys
):
    """``serve --mirror-from``: the router mirrors by itself, round after round, and again
    after Ray restarts it; ``groupcoord status`` says how the last round went."""
    prefix = unique_name("served-mirror")
    deployment = start(
        1,
        str(tmp_path / "logs"),
        namespace="gc-served-mirror",
        mirror=MirrorConfig(broker_bootstrap, every_s=1, topic_pattern=f"{re.escape(prefix)}.*"),
    )
    admin = admin_client(broker_bootstrap)
    router = deployment.router

    def upstream_create(topic: str, partitions: int) -> None:
        new_topic = NewTopic(topic, num_partitions=partitions, replication_factor=1)
        futures = admin.create_topics([new_topic], request_timeout=ADMIN_TIMEOUT_S)
        futures[topic].result(timeout=ADMIN_TIMEOUT_S)

    def mirrored(topic: str, partitions: int) -> None:
        deadline = time.monotonic() + MIRROR_WAIT_S
        while ray.get(router.topics.remote()).get(topic) != partitions:
            assert time.monotonic() < deadline, f"{topic} not mirrored with {partitions}"
            time.sleep(0.2)

    try:
        deployment.wait_ready(60)
        upstream_create(f"{prefix}-a", 2)
        mirrored(f"{prefix}-a", 2)
        futures = admin.create_partitions([NewPartitions(f"{prefix}-a", 4)])
        futures[f"{prefix}-a"].result(timeout=ADMIN_TIMEOUT_S)
        mirrored(f"{prefix}-a", 4)
        state = ray.get(router.describe.remote())["mirror"]
        assert state["from"] == f"kafka:{broker_bootstrap}" and state["rounds"] >= 2
        assert state["last"]["error"] is None and state["last"]["refused"] == 0
        capsys.readouterr()
        assert main(["status", "--namespace", "gc-served-mirror"]) == 0
        (line,) = [s for s in capsys.readouterr().out.splitlines() if s.startswith("topic catalog")]
        assert line.startswith(f"topic catalog mirrored from kafka:{broker_bootstrap} every 1 s:")
        assert re.search(
            r": \d+ rounds, the last at \S+Z: \d+ created, \d+ grown, 0 refused$", line
        )
        router_pid = ray.get(router.describe.remote())["pid"]
        ray.kill(router, no_restart=False)
        wait_restarted(lambda: ray.get(router.describe.remote(), timeout=10), router_pid)
        upstream_create(f"{prefix}-b", 3)
        mirrored(f"{prefix}-b", 3)
        assert ray.get(router.topics.remote())[f"{prefix}-a"] == 4  # kept in the catalog
    finally:
        stop(deployment)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--mirror-every-s", "5"], "--mirror-every-s needs --mirror-from"),
        (["--mirror-every-s", "0"], "--mirror-every-s needs --mirror-from"),  # was ignored
        (["--mirror-from", "file:x"], "--mirror-from takes kafka:HOST:PORT"),
        (["--mirror-from", "kafka:h:1", "--mirror-every-s", "0.5"], "must be in [1, 86400]"),
        (["--mirror-from", "kafka:h:1", "--mirror-topic-pattern", "("], "--topic-pattern '('"),
    ],
)
def test_a_bad_serve_mirror_is_one_line_before_ray(args, says, capsys, tmp_path):
    assert main(["serve", "--log-dir", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err, err
