"""One log root, one deployment: restarts with other settings, a second coordinator, partitions
that cannot load (issue #9 items 4, 6 and 8), against the session's real Ray."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest
import ray
from ray.exceptions import GetTimeoutError

from groupcoord.actors import SyncGroupMember, connect, start, stop
from groupcoord.actors import identity as identity_module
from groupcoord.actors.cli import main
from groupcoord.actors.http_actor import HTTP_ACTOR_NAME
from groupcoord.actors.http_service import HttpConfig
from groupcoord.actors.identity import IDENTITY_FILE, claim
from groupcoord.actors.partition_actor import MAX_LOAD_RESTARTS, partition_actor_name
from groupcoord.actors.router import ROUTER_NAME
from groupcoord.storage import open_partition_log, partition_dir

from .helpers import TEST_CONFIG, start_deployment


def named_actors(namespace: str, num_partitions: int) -> list[str]:
    """The names of this deployment's actors Ray still knows."""
    names = [ROUTER_NAME, HTTP_ACTOR_NAME, *map(partition_actor_name, range(num_partitions))]
    alive = []
    for name in names:
        try:
            ray.get_actor(name, namespace=namespace)
            alive.append(name)
        except ValueError:
            pass
    return alive


def no_router(namespace: str) -> bool:
    return ROUTER_NAME not in named_actors(namespace, 0)


def test_restart_with_another_partition_count_or_namespace_is_refused(ray_session, tmp_path):
    # Before: after stopping a 2-partition deployment, start(3, same log dir) started happily and
    # moved groups onto partitions that never saw them (offsets "lost"); nothing was recorded.
    ns = "gc-identity"
    deployment = start_deployment(tmp_path, ns, num_partitions=2)
    member = SyncGroupMember(
        deployment.router,
        "kept-g",
        ["t"],
        topic_partitions={"t": 1},
        session_timeout_ms=2_000,
        heartbeat_interval_ms=200,
    )
    member.wait_assigned(30)
    member.commit({("t", 0): 41})
    member.close()
    stop(deployment)
    identity = json.loads((tmp_path / IDENTITY_FILE).read_text())
    assert identity["num_partitions"] == 2 and identity["namespace"] == ns
    assert identity["cluster_id"] == deployment.cluster_id != ""

    with pytest.raises(
        ValueError, match="with 2 partitions in namespace 'gc-identity', not 3"
    ) as refused:
        start(3, str(tmp_path), namespace=ns, config=TEST_CONFIG)
    assert "--partitions 2 --namespace gc-identity" in str(refused.value)
    assert "\n" not in str(refused.value) and no_router(ns)
    with pytest.raises(ValueError, match="not 2 in 'gc-elsewhere'"):
        start(2, str(tmp_path), namespace="gc-elsewhere", config=TEST_CONFIG)
    assert no_router("gc-elsewhere")
    assert json.loads((tmp_path / IDENTITY_FILE).read_text()) == identity

    again = start_deployment(tmp_path, ns, num_partitions=2)  # the same settings: served
    try:
        assert again.cluster_id == deployment.cluster_id
        reader = SyncGroupMember(
            again.router,
            "kept-g",
            ["t"],
            topic_partitions={"t": 1},
            session_timeout_ms=2_000,
            heartbeat_interval_ms=200,
        )
        try:
            assert reader.committed()[("t", 0)] == 41
        finally:
            reader.close()
    finally:
        stop(again)


def test_serve_with_another_partition_count_is_one_line_and_exit_2(ray_session, tmp_path, capsys):
    ns = "gc-identity-cli"
    common = ["--namespace", ns, "--log-dir", str(tmp_path), "--detach"]
    assert main(["serve", "--partitions", "2", *common]) == 0
    stop(connect(ns))
    capsys.readouterr()
    assert main(["serve", "--partitions", "3", *common]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--partitions 2" in err and no_router(ns)


def test_two_first_starts_on_one_root_agree_on_its_identity(tmp_path, monkeypatch):
    # Two `serve`s started at once on an empty --log-dir: both looked, found no identity, and
    # each wrote its own. Before: the later rename replaced the earlier one's, so the first
    # ran under an id the directory no longer held (the lake's cluster id changed on restart).
    first = claim(str(tmp_path), 2, "ns")
    real_check = identity_module.check
    looks = []

    def looked_before_the_first_wrote(*args):
        looks.append(args)
        return None if len(looks) == 1 else real_check(*args)

    monkeypatch.setattr(identity_module, "check", looked_before_the_first_wrote)
    second = claim(str(tmp_path), 2, "ns")
    assert second == first == identity_module.read_identity(str(tmp_path))
    assert [name for name in os.listdir(tmp_path) if name.endswith(".tmp")] == []


def test_a_root_from_before_deployment_json_is_checked_by_its_partition_dirs(tmp_path):
    for n in range(4):
        os.makedirs(partition_dir(str(tmp_path), n))
    with pytest.raises(ValueError, match="holds the logs of 4 partitions"):
        claim(str(tmp_path), 8, "ns")
    assert not (tmp_path / IDENTITY_FILE).exists()
    assert claim(str(tmp_path), 4, "ns").num_partitions == 4
    (tmp_path / IDENTITY_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="unreadable"):
        claim(str(tmp_path), 4, "ns")


def test_a_second_deployment_in_the_namespace_with_another_log_dir_is_refused(
    ray_session, tmp_path
):
    # Before: start() with another log dir returned the running deployment (get_if_exists) as if
    # it were the one asked for, and serve reported success on a log dir nobody writes.
    ns = "gc-second"
    first = start_deployment(tmp_path / "a", ns)
    try:
        with pytest.raises(ValueError, match="already runs a groupcoord deployment with logs in"):
            start(2, str(tmp_path / "b"), namespace=ns, config=TEST_CONFIG)
        assert not (tmp_path / "b").exists()
        assert (
            start(2, str(tmp_path / "a"), namespace=ns, config=TEST_CONFIG).router == first.router
        )  # the same one: harmless
    finally:
        stop(first)


def test_a_log_dir_written_by_another_process_fails_fast_naming_it(ray_session, tmp_path):
    # Before: the partitions waited on the lock forever and serve's wait_ready timed out (here
    # after 60 s) with a TimeoutError carrying every partition's info on one huge line.
    ns = "gc-locked"
    claim(str(tmp_path), 2, ns)  # as the other serve did when it started
    holder = open_partition_log(partition_dir(str(tmp_path), 0))  # a live writer: this process
    try:
        with pytest.raises(RuntimeError) as refused:
            start_deployment(tmp_path, ns)
        message = str(refused.value)
        assert message.startswith(
            f"partition-0 is being written by pid {os.getpid()} on host {socket.gethostname()}"
        )
        assert "\n" not in message and len(message) < 400 and no_router(ns)
    finally:
        holder.close()


def corrupt_epoch(log_dir, partition: int) -> None:
    directory = partition_dir(str(log_dir), partition)
    os.makedirs(directory)
    with open(os.path.join(directory, "epoch.json"), "w") as f:
        f.write("garbage")


def test_a_damaged_partition_is_reported_not_waited_for(ray_session, tmp_path, capsys):
    # Before: the damaged partition retried forever as "loading": serve's wait_ready ran to
    # its timeout, requests got COORDINATOR_LOAD_IN_PROGRESS and `groups list` retried until
    # its own deadline; nothing said which partition was broken or why.
    ns = "gc-damaged"
    claim(str(tmp_path), 2, ns)
    corrupt_epoch(tmp_path, 1)
    deployment = start(2, str(tmp_path), namespace=ns, config=TEST_CONFIG)
    try:
        with pytest.raises(RuntimeError, match="partition 1 load_failed .CorruptLogError"):
            deployment.wait_ready(30)
        info = deployment.infos()[1]
        assert info["load_failure"] == "corrupt" and "unreadable epoch file" in info["load_error"]
        capsys.readouterr()
        assert main(["status", "--namespace", ns]) == 1
        out = capsys.readouterr().out
        assert "load_failed" in out and "CorruptLogError" in out and "serving" in out
        assert main(["groups", "list", "--namespace", ns]) == 1  # the operation failed
        err = capsys.readouterr().err
        assert "partition 1 load_failed" in err and "groupcoord status" in err
    finally:
        stop(deployment)


def test_a_partition_that_cannot_open_its_log_restarts_a_bounded_number_of_times(
    ray_session, tmp_path
):
    # Before: an OSError on open was retried forever in the same process, silently "loading".
    # Now each process tries a few times and exits for Ray's restart, MAX_LOAD_RESTARTS times
    # in a row; then it stays up as load_failed, where status shows it.
    ns = "gc-unopenable"
    (tmp_path / "partition-1").write_text("a file where the partition's directory should be")
    deployment = start(2, str(tmp_path), namespace=ns, config=TEST_CONFIG)
    try:
        handle = deployment.partitions()[1]
        seen_pids = set()
        for _ in range(600):
            try:
                info = ray.get(handle.info.remote(), timeout=10)
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                continue  # between two incarnations
            seen_pids.add(info["pid"])
            if info["state"] == "load_failed" and info["load_restarts"] == MAX_LOAD_RESTARTS:
                break
            time.sleep(0.1)
        assert info["load_restarts"] == MAX_LOAD_RESTARTS, info
        assert info["load_failure"] == "io" and "partition-1" in info["load_error"]
        assert len(seen_pids) >= 2  # it was restarted in new processes
    finally:
        stop(deployment)


def test_an_address_naming_another_cluster_than_the_connected_one_is_an_error(ray_session):
    # Before: connect()/start() ignored `address` once the process was connected to Ray and
    # answered from the connected cluster, whatever cluster was asked for.
    current = ray_session.get_runtime_context().gcs_address
    host, _, port = current.rpartition(":")
    other = f"{host}:{int(port) + 1}"
    with pytest.raises(ValueError, match=f"connected to the Ray cluster at {current}, not {other}"):
        connect("gc-anything", address=other)
    with pytest.raises(LookupError, match=f"on the Ray cluster at {current}"):
        connect("gc-anything", address=current)  # the same cluster: looked in


def test_stop_kills_every_actor_even_when_closing_one_fails(ray_session, tmp_path):
    # Before: stop() raised at the first close that failed (a timeout, or an actor Ray was
    # restarting) and killed nothing, leaving the detached actors serving after "stopped".
    ns = "gc-stop-fails"
    deployment = start(2, str(tmp_path), namespace=ns, config=TEST_CONFIG, http=HttpConfig())
    deployment.wait_ready(60)
    assert len(named_actors(ns, 2)) == 4
    with pytest.raises(GetTimeoutError):
        stop(deployment, timeout_s=1e-6)  # no close can answer in time
    for _ in range(100):  # kills are asynchronous
        if not named_actors(ns, 2):
            break
        time.sleep(0.1)
    assert named_actors(ns, 2) == []
