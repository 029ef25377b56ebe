"""``groupcoord serve``'s settings: a flag per configuration field, the TOML file mapped onto
whatever options serve has, and every check done before Ray starts (no Ray needed here)."""

from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
import sys

import pytest

from groupcoord.actors.cli import main, parser
from groupcoord.actors.identity import claim
from groupcoord.actors.serve_config import (
    ConfigFileError,
    add_serve_options,
    parse_with_config,
    serve_settings,
)
from groupcoord.coordinator import CoordinatorConfig
from groupcoord.storage import LogConfig, open_partition_log


def serve_actions() -> dict[str, argparse.Action]:
    (sub,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {o: a for a in sub.choices["serve"]._actions for o in a.option_strings}


def write(tmp_path, text: str) -> str:
    path = tmp_path / "serve.toml"
    path.write_text(text)
    return str(path)


def test_every_configuration_field_is_a_flag_whose_help_shows_its_default():
    actions = serve_actions()
    for struct in (CoordinatorConfig, LogConfig):
        for field in struct.__struct_fields__:
            action = actions["--" + field.replace("_", "-")]
            assert action.help and "default: " in action.help, field
    assert "(default: 6000 ms)" in actions["--group-min-session-timeout-ms"].help
    assert "(default: always)" in actions["--fsync-policy"].help


def test_the_file_sets_any_serve_option_and_flags_override_it(tmp_path, capsys):
    path = write(
        tmp_path,
        'partitions = 3\nkafka-host = "127.0.0.2"\nfsync_policy = "interval"\n'
        "group-max-size = 50\nretain-until-exported = true\ndetach = true\n"
        'log-level = "debug"\nready_timeout = 5\nconsumer-group-assignors = ["range"]\n'
        f'log-dir = "{tmp_path / "logs"}"\n',
    )
    args = parse_with_config(
        parser(),
        "serve",
        ["serve", "--config", path, "--partitions", "2", "--no-freeze-loaded-state"],
    )
    assert (args.partitions, args.kafka_host, args.fsync_policy) == (2, "127.0.0.2", "interval")
    assert args.group_max_size == 50 and args.retain_until_exported is True
    assert args.ready_timeout == 5.0 and args.log_level == "DEBUG"
    assert args.detach is True and args.freeze_loaded_state is False
    assert serve_settings(args).config.consumer_group_assignors == ("range",)


def test_options_added_by_anyone_get_file_support(tmp_path):
    # The mapping reads the parser, so an option another module adds to serve works at once.
    top = argparse.ArgumentParser(prog="groupcoord")
    serve = top.add_subparsers(dest="command").add_parser("serve", prog="groupcoord serve")
    add_serve_options(serve)
    serve.add_argument("--http-port", type=int, default=None)
    serve.add_argument("--users-file", type=os.path.abspath)
    serve.add_argument("--tag", action="append")
    path = write(tmp_path, 'http_port = 8080\nusers-file = "u.json"\ntag = ["a", "b"]\n')
    args = parse_with_config(top, "serve", ["serve", "--config", path, "--http-port", "9"])
    assert args.http_port == 9 and args.users_file == os.path.abspath("u.json")
    assert args.tag == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope = 1", "nope: unknown setting (see groupcoord serve --help)"),
        ('partitions = "4"', "partitions: expected an integer, got a string"),
        ("partitions = true", "partitions: expected an integer, got a boolean"),
        ("retain-until-exported = 1", "retain-until-exported: expected true or false"),
        ('fsync-policy = "sometimes"', "fsync-policy: 'sometimes' is not one of always"),
        ("kafka-host = 1", "kafka-host: expected a string, got an integer"),
        ("partitions = ", "not TOML"),
        ("partitions = " + "[" * 50_000, "not TOML"),  # before: tomllib's RecursionError
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_key(tmp_path, capsys, text, message):
    path = write(tmp_path, text + "\n")
    with pytest.raises(ConfigFileError):
        parse_with_config(parser(), "serve", ["serve", "--config", path])
    assert main(["serve", "--config", path, "--log-dir", str(tmp_path / "logs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"groupcoord: {path}: ") and message in err
    assert not (tmp_path / "logs").exists()


def test_settings_are_built_and_checked_by_the_configuration_structs(tmp_path):
    args = parser().parse_args(
        ["serve", "--log-dir", str(tmp_path / "new"), "--group-initial-rebalance-delay-ms", "0"]
        + ["--fsync-policy", "never", "--segment-bytes", "65536", "--log-level", "warning"]
    )
    settings = serve_settings(args)
    assert settings.config == CoordinatorConfig(group_initial_rebalance_delay_ms=0)
    assert (settings.log_config.fsync_policy, settings.log_config.segment_bytes) == ("never", 65536)
    # Raised to hold the largest record the coordinator accepts, as start() would.
    assert settings.log_config.max_record_bytes > LogConfig().max_record_bytes
    assert settings.log_level == logging.WARNING and os.path.isdir(settings.log_dir)
    for argv, message in [
        (["--group-max-size", "0"], "--group-max-size must be >= 1, got 0"),
        (["--segment-bytes", "5"], "--segment-bytes must be in [4096"),
        (["--max-record-bytes", "100"], "--max-record-bytes (100) is below the largest"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            serve_settings(parser().parse_args(["serve", "--log-dir", str(tmp_path), *argv]))
    # The log root's deployment.json is checked too, before Ray, without writing anything.
    claim(str(tmp_path), 2, "groupcoord")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(ValueError, match="start it with --partitions 2 --namespace groupcoord"):
        serve_settings(parser().parse_args(["serve", "--log-dir", str(tmp_path)]))
    assert sorted(os.listdir(tmp_path)) == before


def test_one_partitions_directory_is_not_taken_for_a_log_root(tmp_path):
    # A new, empty deployment nested in a partition's log would look to every consumer as if
    # its committed offsets were gone.
    one = os.path.join(tmp_path, "partition-1")
    with open_partition_log(one):
        pass
    before = sorted(os.listdir(one))
    message = f"{one} is one partition's log (it holds epoch.json), not a log root: use {tmp_path}"
    with pytest.raises(ValueError, match=re.escape(message)):
        serve_settings(parser().parse_args(["serve", "--log-dir", one]))
    with pytest.raises(ValueError, match=re.escape(message)):
        claim(one, 4, "groupcoord")  # start(), which claims the root, refuses it too
    assert sorted(os.listdir(one)) == before


def test_a_bad_log_dir_fails_before_ray_starts(tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("keep")
    for log_dir, message in [
        (a_file, "is a file, not a directory"),
        (a_file / "sub", "cannot be created: Not a directory"),
    ]:
        result = subprocess.run(
            [sys.executable, "-m", "groupcoord.actors.cli", "serve", "--log-dir", str(log_dir)],
            capture_output=True,
            text=True,
            timeout=120,
            env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
        )
        assert result.returncode == 2
        # One line, and no progress line: serve never got as far as starting Ray.
        assert result.stderr == f"groupcoord: --log-dir {log_dir} {message}\n"
        assert result.stdout == ""
    assert a_file.read_text() == "keep" and os.listdir(tmp_path) == ["a-file"]


@pytest.mark.parametrize("partitions", ["0", "-3", "1001"])
def test_a_bad_partition_count_fails_before_ray_starts(tmp_path, capsys, partitions):
    # In-process: were Ray started, the progress lines ("starting an embedded Ray") would show.
    log_dir = tmp_path / "logs"
    assert main(["serve", "--partitions", partitions, "--log-dir", str(log_dir)]) == 2
    err = capsys.readouterr().err
    assert err == f"groupcoord: --partitions must be in [1, 1000], got {partitions}\n"
    assert not log_dir.exists()


def test_a_crashed_first_starts_temporary_file_is_removed_on_the_next_start(tmp_path):
    # create_atomically writes deployment.json.<pid>-<random>.tmp first; a crash left it there.
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead = tmp_path / f"deployment.json.{int(done.stdout)}-0123456789ab.tmp"
    alive = tmp_path / f"deployment.json.{os.getpid()}-0123456789ab.tmp"  # a racing start's
    other = tmp_path / "notes.1-ab.tmp"
    for path in (dead, alive, other):
        path.write_text("{")
    claim(str(tmp_path), 2, "groupcoord")
    assert not dead.exists() and alive.exists() and other.exists()
    claim(str(tmp_path), 2, "groupcoord")  # a later start, the identity on disk: the same
    assert alive.exists() and (tmp_path / "deployment.json").exists()
