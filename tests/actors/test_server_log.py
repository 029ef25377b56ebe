"""What an operator reads: the coordinator's log files under ``<log_dir>/server-logs/`` (every
rebalance with its cause, members removed and why, loads) and ``wait_assigned`` returning the
partitions a cooperative newcomer gets in the follow-up round; real actors on a real local Ray."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re

import pytest

from groupcoord.actors import SyncGroupMember, connect, stop
from groupcoord.actors.cli import main
from groupcoord.actors.server_log import server_log_path
from groupcoord.coordinator import partition_for

from .helpers import HEARTBEAT_MS, REBALANCE_MS, SESSION_MS, TEST_CONFIG, member, wait_until

NS = "gc-server-log"
SERVED: dict[str, str] = {}  # serve's stdout and stderr


@pytest.fixture(scope="module")
def deployment(ray_session, tmp_path_factory):
    # Started by the CLI, in this process (its Ray outlives the command, so --detach is fine),
    # with the tests' short timeouts from a TOML file.
    log_dir = tmp_path_factory.mktemp("logs-server-log")
    config = log_dir.parent / "server-log.toml"
    config.write_text(
        f"group-min-session-timeout-ms = {TEST_CONFIG.group_min_session_timeout_ms}\n"
        f"group_initial_rebalance_delay_ms = {TEST_CONFIG.group_initial_rebalance_delay_ms}\n"
        'log-level = "INFO"\npartitions = 2\n'
    )
    argv = ["serve", "--namespace", NS, "--log-dir", str(log_dir), "--config", str(config)]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        assert main([*argv, "--detach", "--json"]) == 0
    SERVED.update(stdout=stdout.getvalue(), stderr=stderr.getvalue())
    d = connect(NS)
    yield d
    stop(d)


def test_serve_reports_progress_on_stderr_and_one_document_on_stdout(deployment):
    document = json.loads(SERVED["stdout"])  # --json: nothing else on stdout
    assert document["log_dir"] == deployment.log_dir
    lines = SERVED["stderr"].splitlines()
    assert all(line.startswith("groupcoord: ") for line in lines), lines
    logs = os.path.join(deployment.log_dir, "server-logs")
    assert f"groupcoord: starting 2 partitions; coordinator logs in {logs}/" in SERVED["stderr"]
    loaded = [line for line in lines if " loaded " in line]
    assert len(loaded) == 2 and loaded[-1].endswith("(2/2 serving)"), lines
    assert re.search(r"partition \d loaded 0 groups in \d+\.\d{3}s \(1/2 serving\)", loaded[0])


def lines_of(deployment, group: str) -> list[str]:
    path = server_log_path(deployment.log_dir, f"partition-{partition_for(group, 2)}")
    with open(path, encoding="utf-8") as f:
        return [line for line in f if f"group={group} " in line]


def test_rebalances_are_logged_with_their_cause(deployment):
    async def scenario():
        a = member(deployment.router, "logged")
        await a.wait_assigned(30)
        b = member(deployment.router, "logged")
        await wait_until(lambda: a.stable and b.stable and b.assignment, what="b joined")
        b_id = b.member_id
        b._task.cancel()  # stops heartbeating without leaving: its session expires
        await wait_until(
            lambda: any(
                f"{b_id}: session timeout" in line for line in lines_of(deployment, "logged")
            ),
            timeout_s=SESSION_MS / 1000 + 20,
            what="the session expiry in the log file",
        )
        await a.close()
        await b.close(leave=False)
        return b_id

    b_id = asyncio.run(scenario())
    lines = lines_of(deployment, "logged")
    rebalances = [line for line in lines if "event=rebalance " in line]
    assert any(f"detail=new member {b_id} joined" in line for line in rebalances), lines
    assert any("detail=session timeout" in line for line in rebalances), lines
    assert any(f"event=member_removed detail={b_id}: session timeout" in line for line in lines)
    assert all(line.split()[0].endswith("Z") for line in lines)  # ISO-8601 UTC timestamps
    for n in range(2):
        with open(server_log_path(deployment.log_dir, f"partition-{n}"), encoding="utf-8") as f:
            assert f"partition {n} (epoch " in f.read()  # its load, with the time it took
    infos = deployment.infos()
    assert [i["server_log"] for i in infos] == [
        server_log_path(deployment.log_dir, f"partition-{n}") for n in range(2)
    ]
    assert os.path.isfile(server_log_path(deployment.log_dir, "router"))


def test_a_cooperative_newcomer_waits_for_its_partitions_and_commits_them(deployment):
    # The first round gives the newcomer nothing (the old owner must revoke first, KIP-429);
    # wait_assigned returns only after the follow-up round has handed the partitions over.
    options = dict(
        topic_partitions={"t": 4},
        assignors=("cooperative-sticky",),
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        rebalance_timeout_ms=REBALANCE_MS,
    )

    async def scenario():
        a = member(
            deployment.router, "coop-wait", topics={"t": 4}, assignors=("cooperative-sticky",)
        )
        assert len(await a.wait_assigned(30)) == 4
        # The blocking variant, in a thread, so that a keeps heartbeating on this loop.
        newcomer = await asyncio.to_thread(
            SyncGroupMember, deployment.router, "coop-wait", ["t"], **options
        )
        try:
            owned = await asyncio.to_thread(newcomer.wait_assigned, 30)
            assert len(owned) == 2 and not owned & a.assignment
            await asyncio.to_thread(newcomer.commit, {tp: 5 for tp in owned})
            assert await asyncio.to_thread(newcomer.committed, owned) == {tp: 5 for tp in owned}
        finally:
            await asyncio.to_thread(newcomer.close)
            await a.close()

    asyncio.run(scenario())
