"""What a new user meets first: every ``--help`` says what each option is for, and bad input
that needs no deployment (a file where a directory belongs, a Ray address nothing listens on)
is one line on stderr and exit 2, before Ray starts. In-process and Ray-free."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys

import pytest

from groupcoord.actors.cli import main, parser


def subparsers() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


@pytest.mark.parametrize("command", ["serve", "status", "topics", "users", "demo"])
def test_every_option_and_argument_of_a_command_has_help(command):
    commands = subparsers()
    command_parser = commands[command]
    assert command_parser.description, f"groupcoord {command} --help says nothing about itself"
    undocumented = [
        a.dest
        for a in command_parser._actions
        if not isinstance(a, argparse._HelpAction) and not a.help
    ]
    assert undocumented == []


def test_demo_with_a_file_as_log_dir_fails_before_ray(tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("keep")
    assert main(["demo", "--log-dir", str(a_file), "--no-lake"]) == 2
    err = capsys.readouterr().err
    assert err == f"groupcoord: --log-dir {a_file} is a file, not a directory\n"
    assert a_file.read_text() == "keep"


def closed_port() -> int:
    with socket.socket() as s:  # bound, never listening: a connection is refused
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("argv", [["status"], ["serve", "--partitions", "1"]])
def test_an_address_nothing_listens_on_is_one_line_and_exit_2(tmp_path, argv):
    # A fresh process: this session's own Ray connection would answer first in-process.
    address = f"127.0.0.1:{closed_port()}"
    extra = ["--log-dir", str(tmp_path / "logs")] if argv[0] == "serve" else []
    result = subprocess.run(
        [sys.executable, "-m", "groupcoord.actors.cli", *argv, "--address", address, *extra],
        capture_output=True,
        text=True,
        timeout=60,  # before: ray.init retried for over a minute, printing its warnings
        env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
    )
    assert result.returncode == 2 and result.stdout == ""
    lines = [
        line
        for line in result.stderr.splitlines()
        if not line.startswith("groupcoord: connecting to")  # the progress line before it
    ]
    assert len(lines) == 1 and lines[0].startswith(f"groupcoord: no Ray cluster at {address}")


@pytest.mark.parametrize("port", ["70000", "²"])
def test_an_address_whose_port_is_no_port_is_one_line_and_exit_2(port):
    # Before: 70000 was tried as port 4464 (getaddrinfo wraps it), and "²" passed isdigit()
    # to fail in int() with its own message.
    address = f"127.0.0.1:{port}"
    result = subprocess.run(
        [sys.executable, "-m", "groupcoord.actors.cli", "status", "--address", address],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == (
        f"groupcoord: {address}: expected HOST:PORT, the port a number in 0..65535"
    ), result.stderr


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--bogus"], "--bogus"),
        (["--describe", "--list"], "--describe --list"),
        (["--group", "g"], "--group g"),
    ],
)
def test_groups_without_one_action_names_what_it_was_given(capsys, argv, named):
    assert main(["groups", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"got: {named})" in err
    assert "give exactly one action: --list, --describe" in err


def test_users_with_a_file_as_log_dir_names_it(tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("keep")
    assert main(["users", "add", "bob", "--password", "pw", "--log-dir", str(a_file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"users file {a_file}/users.json" in err
    assert "Not a directory" in err or "not a directory" in err
    assert a_file.read_text() == "keep"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["topics", "create"], "groupcoord: topics create needs a topic name"),
        (["topics", "alter", "t"], "groupcoord: topics alter needs --partitions N"),
        (["topics", "delete"], "groupcoord: topics delete needs a topic name"),
    ],
)
def test_a_topics_command_missing_its_arguments_fails_before_ray(capsys, argv, says):
    # Before: said only after looking for Ray and connecting to the deployment.
    assert main(argv) == 2
    assert capsys.readouterr().err == says + "\n"
