"""A real ``groupcoord serve`` process: the address it prints, the CLI choosing between several
Ray clusters on one machine, and stopping it with SIGTERM (issue #9 items 7 and 9)."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

NS = "gc-serve-process"
CLI = [sys.executable, "-m", "groupcoord.actors.cli"]
READY_S, STOP_S, CLI_S = 180, 90, 120
COMMIT = """
import sys
from groupcoord.actors import SyncGroupMember, connect
member = SyncGroupMember(connect(sys.argv[1]).router, "kept-g", ["t"], topic_partitions={"t": 1},
                         session_timeout_ms=6_000, heartbeat_interval_ms=1_000)
member.wait_assigned(60)
member.commit({("t", 0): 7})      # returns once acknowledged
member.close()
"""


def cli_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    # A driver given an explicit address uses Ray's token only when told to (Ray's policy).
    env["RAY_AUTH_MODE"] = "token"
    env.update(extra)
    return env


class Serve:
    """``groupcoord serve`` in the foreground, as a child process."""

    def __init__(self, log_dir) -> None:
        self.stderr = tempfile.TemporaryFile("w+")  # a file: a full pipe would block serve
        self.process = subprocess.Popen(
            [
                *CLI,
                "serve",
                "--partitions",
                "2",
                "--namespace",
                NS,
                "--log-dir",
                str(log_dir),
                "--ready-timeout",
                "120",
            ],
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=cli_env(),
        )
        self.lines: list[str] = []
        # A reader thread: select() on the pipe cannot see lines already in Python's buffer.
        lines: queue.Queue = queue.Queue()
        threading.Thread(
            target=lambda: [*map(lines.put, self.process.stdout), lines.put("")], daemon=True
        ).start()
        deadline = time.monotonic() + READY_S  # a bound, in case serve never says it
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=1.0)
            except queue.Empty:
                continue
            if not line:  # serve exited
                break
            self.lines.append(line)
            found = re.search(r"clients use --address (\S+) --namespace", line)
            if found:
                self.address = found.group(1)
                return
        raise AssertionError(f"serve never printed its address: {self.finish(signal.SIGKILL)}")

    def finish(self, signum: int | None = None) -> tuple[int, str, str]:
        if signum is not None:
            self.process.send_signal(signum)
        try:
            self.process.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.stderr.seek(0)
        return self.process.returncode, "".join(self.lines), self.stderr.read()


def cli(*argv, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *argv, "--namespace", NS],
        capture_output=True,
        text=True,
        timeout=CLI_S,
        env=cli_env(**env),
    )


def test_serve_prints_its_address_the_cli_names_the_cluster_and_sigterm_stops_cleanly(
    ray_session, tmp_path
):
    # Before: SIGTERM hit Ray's own handler (a C++ stack on stderr, exit -15) and nothing was
    # closed; the CLI auto-detected whichever Ray cluster Ray listed first and said nothing.
    first = Serve(tmp_path)
    try:
        # This pytest session's Ray and serve's: auto-detection must refuse to guess.
        guessed = cli("groups", "list")
        assert guessed.returncode == 2, guessed
        assert "Ray clusters run on this machine" in guessed.stderr
        assert first.address in guessed.stderr and "--address" in guessed.stderr

        committed = subprocess.run(
            [sys.executable, "-c", COMMIT, NS],
            capture_output=True,
            text=True,
            timeout=CLI_S,
            env=cli_env(RAY_ADDRESS=first.address),
        )
        assert committed.returncode == 0, committed.stderr
        described = cli("groups", "describe", "kept-g", "--json", "--address", first.address)
        assert f"Ray at {first.address} (--address), namespace '{NS}'" in described.stderr
        assert [o["current_offset"] for o in json.loads(described.stdout)["offsets"]] == [7]

        listed = cli("groups", "list", "--json", RAY_ADDRESS=first.address)
        assert listed.returncode == 0, listed.stderr
        assert f"Ray at {first.address} (RAY_ADDRESS)" in listed.stderr
        assert isinstance(json.loads(listed.stdout)["groups"], list)  # stdout: JSON only

        elsewhere = ray_session.get_runtime_context().gcs_address  # a cluster without it
        missing = cli("groups", "list", "--address", elsewhere)
        assert missing.returncode == 2
        assert (
            f"no groupcoord deployment in namespace '{NS}' on the Ray cluster at "
            f"{elsewhere}" in missing.stderr
        )
        # Only groupcoord's own lines: not Ray's "Connecting to existing Ray cluster" INFO.
        for result in (described, listed, missing):
            lines = result.stderr.splitlines()
            assert all(line.startswith("groupcoord: ") for line in lines), result.stderr
    finally:
        code, out, err = first.finish(signal.SIGTERM)
    assert code == 0, err
    assert "closing the partitions" in err and "stopped" in err
    for noise in ("Traceback", "SIGTERM received", "logging.cc", "*** "):
        assert noise not in err, err

    second = Serve(tmp_path)  # the locks were released
    try:
        described = cli("groups", "describe", "kept-g", "--json", "--address", second.address)
        assert described.returncode == 0, described.stderr
        assert [o["current_offset"] for o in json.loads(described.stdout)["offsets"]] == [7]
    finally:
        code, _, err = second.finish(signal.SIGINT)
    assert code == 0 and "Traceback" not in err, err
