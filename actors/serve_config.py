"""``groupcoord serve``'s settings: one flag per configuration field, a TOML file, early checks.

Every field of ``CoordinatorConfig`` and ``LogConfig`` is a ``serve`` flag named after it
(``group_min_session_timeout_ms`` → ``--group-min-session-timeout-ms``), its help showing the
default and the unit. ``--config FILE`` reads a TOML file whose keys are ``serve``'s long option
names, with dashes or underscores (``partitions = 8``, ``fsync-policy = "interval"``): the file
is mapped onto whatever options the parser has, not onto a fixed list, so every ``serve`` flag
can be set there. A flag given on the command line overrides the file. An unknown key or a
value of the wrong type is one ``ConfigFileError`` line naming the file and the key.

``serve_settings`` builds and checks everything (the configuration Structs' own validation,
the log directory) before Ray is started, so a bad setting fails in a fraction of a second and
starts nothing.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import tempfile
import tomllib
from collections.abc import Sequence
from typing import Any

import msgspec

from groupcoord.coordinator import CoordinatorConfig
from groupcoord.coordinator.server_assignors import SERVER_ASSIGNORS
from groupcoord.storage import LogConfig
from groupcoord.storage.config import FSYNC_POLICIES

from . import identity
from .bootstrap import log_config_for
from .router import MAX_PARTITIONS

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

# field -> (what it is, unit); the unit is also what the value counts.
COORDINATOR_HELP = {
    "group_min_session_timeout_ms": ("shortest session timeout a member may ask for", "ms"),
    "group_max_session_timeout_ms": ("longest session timeout a member may ask for", "ms"),
    "group_initial_rebalance_delay_ms": (
        "how long a new group's first rebalance waits for more members",
        "ms",
    ),
    "group_max_size": ("members per group (GROUP_MAX_SIZE_REACHED past it)", "members"),
    "offsets_retention_ms": ("how long an empty group's offsets are kept", "ms"),
    "offsets_retention_check_interval_ms": ("how often expired offsets are removed", "ms"),
    "offset_metadata_max_bytes": ("metadata string of one committed offset", "UTF-16 units"),
    "new_member_join_timeout_ms": ("how long a new member's first join may wait", "ms"),
    "string_max_chars": ("ids, names and hosts in requests", "characters"),
    "member_protocols_max_bytes": ("one member's JoinGroup protocol list", "bytes"),
    "member_protocols_max_count": ("protocols in one JoinGroup", "protocols"),
    "group_metadata_max_bytes": ("one group's metadata record", "bytes"),
    "offset_commit_max_bytes": ("the records of one OffsetCommit", "bytes"),
    "max_parked_requests": ("JoinGroup/SyncGroup calls waiting in one partition", "requests"),
    "max_groups": ("groups per partition", "groups"),
    "max_groups_per_request": ("groups in one DescribeGroups/DeleteGroups", "groups"),
    "max_members_per_request": ("members in one LeaveGroup/SyncGroup", "members"),
    "max_topics_per_request": ("topics in one OffsetCommit/Fetch/Delete", "topics"),
    "max_partitions_per_request": ("partitions in one OffsetCommit/Fetch/Delete", "partitions"),
    "consumer_group_session_timeout_ms": ("KIP-848 consumer groups: member session", "ms"),
    "consumer_group_heartbeat_interval_ms": ("KIP-848 consumer groups: heartbeat interval", "ms"),
    "consumer_group_max_size": ("KIP-848 consumer groups: members per group", "members"),
    "consumer_group_assignors": ("KIP-848 server-side assignors; the first is the default", ""),
    "consumer_group_assignment_interval_ms": (
        "KIP-848 consumer groups: least time between target assignments (0: every change)",
        "ms",
    ),
    "consumer_group_unreleased_heartbeat_interval_ms": (
        "KIP-848 consumer groups: heartbeat interval of a member waiting for released partitions",
        "ms",
    ),
    "consumer_group_min_session_timeout_ms": (
        "KIP-848 consumer groups: shortest session a group's own setting may ask for",
        "ms",
    ),
    "consumer_group_max_session_timeout_ms": (
        "KIP-848 consumer groups: longest session a group's own setting may ask for",
        "ms",
    ),
    "consumer_group_min_heartbeat_interval_ms": (
        "KIP-848 consumer groups: shortest heartbeat interval a group's own setting may ask for",
        "ms",
    ),
    "consumer_group_max_heartbeat_interval_ms": (
        "KIP-848 consumer groups: longest heartbeat interval a group's own setting may ask for",
        "ms",
    ),
    "consumer_group_min_assignment_interval_ms": (
        "KIP-848 consumer groups: shortest assignment interval a group's own setting may ask for",
        "ms",
    ),
    "consumer_group_max_assignment_interval_ms": (
        "KIP-848 consumer groups: longest assignment interval a group's own setting may ask for",
        "ms",
    ),
    "offsets_cleanup_max_offsets_per_turn": (
        "offsets the retention cleanup examines per timer turn",
        "offsets",
    ),
}
LOG_HELP = {
    "fsync_policy": ("when an append is durable: " + ", ".join(FSYNC_POLICIES), ""),
    "fsync_interval_ms": ("with --fsync-policy interval: longest time to the next fsync", "ms"),
    "segment_bytes": ("a log segment rolls past this", "bytes"),
    "max_record_bytes": ("one encoded record", "bytes"),
    "max_batch_bytes": ("one append", "bytes"),
    "snapshot_every_records": ("snapshot after this many records (0: never)", "records"),
    "snapshot_every_bytes": ("snapshot after this many bytes (0: never)", "bytes"),
    "keep_snapshots": ("snapshots kept; segments below the oldest are deleted", "snapshots"),
    "retain_until_exported": ("keep segments until the lake exporter has read them", ""),
    "freeze_loaded_state": ("gc.freeze the state after loading (faster collections)", ""),
}
# Raised by default so that the log holds the largest record the coordinator accepts
# (bootstrap.log_config_for): a fixed default here would be refused.
_FITTED = ("max_record_bytes", "max_batch_bytes")
_CHOICES = {"fsync_policy": FSYNC_POLICIES, "consumer_group_assignors": tuple(SERVER_ASSIGNORS)}
_UNITS = {"ms": "ms", "bytes": "bytes"}
_FIELD = re.compile(r"\b(?:CoordinatorConfig|LogConfig)\.(\w+)")


class ConfigFileError(ValueError):
    """A TOML file that does not map onto the options: unreadable, unknown key, wrong type."""


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _help(text: str, unit: str, default: Any) -> str:
    unit_text = f" {unit}" if unit else ""
    return f"{text} (default: {default}{unit_text})".replace("%", "%%")


def add_serve_options(serve: argparse.ArgumentParser) -> None:
    """``--config``, ``--log-level`` and a flag for every configuration field."""
    serve.add_argument(
        "--config",
        metavar="FILE",
        help="TOML file of serve options: keys are long option names (dashes or underscores); "
        "flags given here override it",
    )
    serve.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default="INFO",
        help="level of the coordinator's logs in <log-dir>/server-logs/ (default: INFO)",
    )
    coordinator = serve.add_argument_group("coordinator settings (Kafka's broker settings)")
    defaults = CoordinatorConfig()
    for name in CoordinatorConfig.__struct_fields__:
        _add_field(coordinator, name, getattr(defaults, name), COORDINATOR_HELP)
    storage = serve.add_argument_group("partition log settings")
    defaults = LogConfig()
    for name in LogConfig.__struct_fields__:
        _add_field(storage, name, getattr(defaults, name), LOG_HELP)


def _add_field(group: Any, name: str, default: Any, described: dict) -> None:
    """The flag of one configuration field, its kind taken from the field's default: a field
    added to a Struct later gets a flag (and a file key) without a change here."""
    text, unit = described.get(
        name, (name.replace("_", " "), _UNITS.get(name.rpartition("_")[2], ""))
    )
    options: dict[str, Any] = {"default": default, "choices": _CHOICES.get(name)}
    if type(default) is bool:
        options["action"] = argparse.BooleanOptionalAction
    elif type(default) is tuple:
        options.update(nargs="+", metavar="NAME")
        default = " ".join(default)
    elif type(default) is int:
        options.update(type=int, metavar="N")
    if name in _FITTED:
        options["default"], default, unit = None, "fits the largest coordinator record", ""
    group.add_argument(_flag(name), help=_help(text, unit, default), **options)


# -- the TOML file -------------------------------------------------------------------------------


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Long option name without dashes, underscored → its action (positionals and help left
    out: a file names settings, not commands)."""
    found = {}
    for action in parser._actions:  # argparse has no public list of a parser's actions
        for option in action.option_strings:
            if option.startswith("--") and action.dest not in ("help", "config"):
                found[option[2:].replace("-", "_")] = action
    return found


def _scalar(action: argparse.Action, value: Any, where: str) -> Any:
    """``value`` from the file as the option would have parsed it."""
    convert = action.type
    if type(value) is bool or isinstance(value, (dict, list)):
        raise ConfigFileError(f"{where}: expected {_kind(action)}, got {_toml_type(value)}")
    if convert in (None, str):
        if not isinstance(value, str):
            raise ConfigFileError(f"{where}: expected a string, got {_toml_type(value)}")
    elif convert is int:
        if type(value) is not int:
            raise ConfigFileError(f"{where}: expected an integer, got {_toml_type(value)}")
    elif convert is float:
        if type(value) not in (int, float):
            raise ConfigFileError(f"{where}: expected a number, got {_toml_type(value)}")
        value = float(value)
    else:  # an option's own converter takes the text a command line would give it
        try:
            value = convert(value if isinstance(value, str) else str(value))
        except (ValueError, TypeError, argparse.ArgumentTypeError) as exc:
            raise ConfigFileError(f"{where}: {exc}") from None
    if action.choices is not None and value not in action.choices:
        choices = ", ".join(map(str, action.choices))
        raise ConfigFileError(f"{where}: {value!r} is not one of {choices}")
    return value


def _kind(action: argparse.Action) -> str:
    return {int: "an integer", float: "a number"}.get(action.type, "a string")


def _toml_type(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(value), "a table" if isinstance(value, dict) else "an array"
    )


def _value(action: argparse.Action, value: Any, where: str) -> Any:
    if action.nargs == 0:  # store_true, store_false, BooleanOptionalAction, count...
        if isinstance(action, argparse._StoreConstAction | argparse.BooleanOptionalAction):
            if type(value) is not bool:
                raise ConfigFileError(f"{where}: expected true or false, got {_toml_type(value)}")
            if isinstance(action, argparse.BooleanOptionalAction):
                return value
            return action.const if value else action.default
        raise ConfigFileError(f"{where}: cannot be set from a file")
    if isinstance(action, argparse._AppendAction) or action.nargs in ("*", "+"):
        if not isinstance(value, list):
            raise ConfigFileError(f"{where}: expected an array, got {_toml_type(value)}")
        return [_scalar(action, v, where) for v in value]
    if action.nargs not in (None, "?"):
        raise ConfigFileError(f"{where}: cannot be set from a file")
    return _scalar(action, value, where)


def file_defaults(parser: argparse.ArgumentParser, path: str) -> dict[str, Any]:
    """``{dest: value}`` from the TOML file at ``path`` for ``parser``'s options;
    ConfigFileError (one line naming the file and the key) for anything that does not fit."""
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except OSError as exc:
        raise ConfigFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, RecursionError) as exc:  # arrays nested too deep
        raise ConfigFileError(f"{path}: not TOML: {exc}") from None
    options = _options(parser)
    defaults = {}
    for key, value in raw.items():
        action = options.get(key.replace("-", "_"))
        where = f"{path}: {key}"
        if action is None:
            raise ConfigFileError(f"{where}: unknown setting (see {parser.prog} --help)")
        defaults[action.dest] = _value(action, value, where)
    return defaults


def parse_with_config(
    parser: argparse.ArgumentParser, command: str, argv: Sequence[str]
) -> argparse.Namespace:
    """Parse ``argv``; when it runs ``command`` with ``--config FILE``, the file's settings
    become that subcommand's defaults and ``argv`` is parsed again, so command-line flags win."""
    args = parser.parse_args(argv)
    path = getattr(args, "config", None)
    if path is None or getattr(args, "command", None) != command:
        return args
    (sub,) = [
        a.choices[command]
        for a in parser._actions
        if isinstance(a, argparse._SubParsersAction) and command in a.choices
    ]
    sub.set_defaults(**file_defaults(sub, path))
    return parser.parse_args(argv)


# -- building and checking the settings -----------------------------------------------------------


class ServeSettings(msgspec.Struct, frozen=True):
    config: CoordinatorConfig
    log_config: LogConfig
    log_dir: str
    log_level: int


def serve_settings(args: argparse.Namespace) -> ServeSettings:
    """The checked configuration ``serve`` runs with; ValueError (one line) for a bad value,
    an unusable log directory or one whose ``deployment.json`` records another partition count
    or namespace. Creates the log directory when it is missing, nothing else."""
    if not 1 <= args.partitions <= MAX_PARTITIONS:  # the router would refuse it after Ray started
        raise ValueError(f"--partitions must be in [1, {MAX_PARTITIONS}], got {args.partitions}")
    try:
        config = CoordinatorConfig(**_fields(args, CoordinatorConfig))
        fields = _fields(args, LogConfig)
        fitted = log_config_for(config)  # storage's defaults, raised to hold the largest record
        for name in _FITTED:
            if fields[name] is None:
                fields[name] = getattr(fitted, name)
        log_config = log_config_for(config, LogConfig(**fields))
    except ValueError as exc:  # the Structs' own checks: say it with the flags' names
        raise ValueError(_FIELD.sub(lambda m: _flag(m[1]), str(exc))) from None
    log_dir = usable_log_dir(args.log_dir)
    identity.check(log_dir, args.partitions, args.namespace)  # deployment.json agrees
    return ServeSettings(config, log_config, log_dir, getattr(logging, args.log_level))


def _fields(args: argparse.Namespace, struct: type) -> dict[str, Any]:
    """The Struct's fields as parsed (a list, from ``nargs`` or the file, becomes a tuple)."""
    values = {name: getattr(args, name) for name in struct.__struct_fields__}
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


def usable_log_dir(path: str) -> str:
    """``path``, absolute, once it is a directory this process can write (created if
    missing); ValueError saying what is wrong with it otherwise."""
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"--log-dir {path} is a file, not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--log-dir {path} cannot be created: {exc.strerror or exc}") from None
    try:  # a probe, not os.access: root passes that even on a read-only file system
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise ValueError(f"--log-dir {path} is not writable: {exc.strerror or exc}") from None
    return path
