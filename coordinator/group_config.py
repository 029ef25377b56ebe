"""A group's own settings: Kafka's group configs (KIP-848), each overriding the deployment's.

    group setting                     the deployment's value (CoordinatorConfig)
    consumer.session.timeout.ms       consumer_group_session_timeout_ms
    consumer.heartbeat.interval.ms    consumer_group_heartbeat_interval_ms
    consumer.assignment.interval.ms   consumer_group_assignment_interval_ms

They apply to consumer groups (KIP-848 members); a classic member brings its own session
timeout. A group's settings are a mapping {name: int} holding only what it sets.

Changes arrive as Kafka's admin requests state them, and ``altered`` checks them as Kafka 4.3
does, with its error codes and messages: IncrementalAlterConfigs sets or deletes names one by
one (APPEND and SUBTRACT are for list settings, which a group has none of); AlterConfigs
replaces the whole set. A set value is Java's ``Integer.parseInt`` of the trimmed text, at least
Kafka's floor for the name, and within the deployment's bounds
(``CoordinatorConfig.consumer_group_min_session_timeout_ms`` and the like, Kafka's
``group.consumer.min.session.timeout.ms``...). Deleting a name the group does not set, or one
that does not exist, changes nothing and is not an error, as in Kafka.

Who keeps them: the topic catalog (actors/catalog.py), the deployment's one owner of metadata,
as Kafka keeps group configs in its metadata log rather than with the group. So they exist
apart from the group: set before it first joins, kept when it is deleted. Every shard gets a
copy (``Shard.update_group_configs``) and reads a group's value at each heartbeat, so a change
reaches a member at its next heartbeat, as in Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import msgspec

from .config import CoordinatorConfig
from .errors import Errors

SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
ASSIGNMENT_INTERVAL = "consumer.assignment.interval.ms"
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # Kafka's AlterConfigOp.OpType codes
_OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
# Java's Integer.parseInt over String.trim()'s result: ASCII digits, one optional sign.
_INT = re.compile(r"[+-]?[0-9]+")
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class Setting(msgspec.Struct, frozen=True):
    """Where a group setting's deployment value and bounds live (``CoordinatorConfig`` fields),
    and Kafka's floor for any value of it (its ConfigDef's ``atLeast``)."""

    field: str
    min_field: str
    max_field: str
    at_least: int


SETTINGS = {
    SESSION_TIMEOUT: Setting(
        "consumer_group_session_timeout_ms",
        "consumer_group_min_session_timeout_ms",
        "consumer_group_max_session_timeout_ms",
        1,
    ),
    HEARTBEAT_INTERVAL: Setting(
        "consumer_group_heartbeat_interval_ms",
        "consumer_group_min_heartbeat_interval_ms",
        "consumer_group_max_heartbeat_interval_ms",
        1,
    ),
    ASSIGNMENT_INTERVAL: Setting(
        "consumer_group_assignment_interval_ms",
        "consumer_group_min_assignment_interval_ms",
        "consumer_group_max_assignment_interval_ms",
        0,
    ),
}


class GroupConfigOp(msgspec.Struct, frozen=True):
    """One change of an IncrementalAlterConfigs (``op``: SET, DELETE, APPEND or SUBTRACT) or,
    with ``op`` SET, one entry of an AlterConfigs."""

    name: str
    op: int
    value: str | None


class GroupConfigError(ValueError):
    """A refused change; ``error`` is the Kafka code an admin client gets, the message Kafka's."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error

    def __reduce__(self):  # it crosses processes: rebuild with both fields
        return (GroupConfigError, (self.error, str(self)))


def kafka_name(field: str) -> str:
    """The Kafka broker setting a ``CoordinatorConfig`` field of consumer groups stands for:
    ``consumer_group_min_session_timeout_ms`` is ``group.consumer.min.session.timeout.ms``."""
    return "group.consumer." + field.removeprefix("consumer_group_").replace("_", ".")


def group_setting(settings: Mapping[str, int] | None, name: str, config: CoordinatorConfig) -> int:
    """The value of setting ``name`` for a group with ``settings`` (None: it sets nothing)."""
    if settings:
        value = settings.get(name)
        if value is not None:
            return value
    return getattr(config, SETTINGS[name].field)


def altered(
    current: Mapping[str, int],
    ops: Sequence[GroupConfigOp],
    *,
    replace: bool,
    config: CoordinatorConfig,
) -> dict[str, int]:
    """A group's settings after ``ops``, from ``current`` (``replace``: AlterConfigs, the
    whole set replaced); GroupConfigError, as Kafka answers, when any of them is refused."""
    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        raise GroupConfigError(Errors.INVALID_REQUEST, "Error due to duplicate config keys")
    settings = {} if replace else dict(current)
    for op in ops:
        name = op.name
        if op.op in _OP_NAMES:
            raise GroupConfigError(
                Errors.INVALID_CONFIG,
                f"Can't {_OP_NAMES[op.op]} to key {name} because its type is not LIST.",
            )
        if op.op == DELETE:
            settings.pop(name, None)
            continue
        if op.op != SET:
            raise GroupConfigError(
                Errors.INVALID_REQUEST, f"unknown config operation {op.op} for {name}"
            )
        if op.value is None:
            raise GroupConfigError(Errors.INVALID_REQUEST, f"Null value not supported for : {name}")
        settings[name] = _checked(name, op.value, config)
    return settings


def _checked(name: str, text: str, config: CoordinatorConfig) -> int:
    setting = SETTINGS.get(name)
    if setting is None:
        raise GroupConfigError(Errors.INVALID_CONFIG, f"Unknown group config name: {name}")
    trimmed = text.strip("".join(map(chr, range(33))))  # Java's trim: every char <= ' '
    value = int(trimmed) if _INT.fullmatch(trimmed) else None
    if value is None or not _INT32_MIN <= value <= _INT32_MAX:
        raise GroupConfigError(
            Errors.INVALID_CONFIG,
            f"Invalid value {text} for configuration {name}: Not a number of type INT",
        )
    if value < setting.at_least:
        raise GroupConfigError(
            Errors.INVALID_CONFIG,
            f"Invalid value {text} for configuration {name}: "
            f"Value must be at least {setting.at_least}",
        )
    if value < getattr(config, setting.min_field):
        raise GroupConfigError(
            Errors.INVALID_CONFIG,
            f"{name} must be greater than or equal to {kafka_name(setting.min_field)}",
        )
    if value > getattr(config, setting.max_field):
        raise GroupConfigError(
            Errors.INVALID_CONFIG,
            f"{name} must be less than or equal to {kafka_name(setting.max_field)}",
        )
    return value


def checked_configs(raw: object) -> dict[str, dict[str, int]]:
    """``raw`` as {group id: {setting: int}}, copied (a group setting nothing left out);
    ValueError if it is not that shape or
    names a setting groups do not have (values are not range-checked: the bounds may have
    moved since they were set, and a stored value stays in force)."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"group configs must be a mapping, got {type(raw).__name__}")
    configs = {}
    for group_id, settings in raw.items():
        if not isinstance(group_id, str) or not isinstance(settings, Mapping):
            raise ValueError(f"group configs: bad entry {group_id!r}: {settings!r}")
        for name, value in settings.items():
            if name not in SETTINGS or type(value) is not int:
                raise ValueError(f"group configs of {group_id!r}: bad setting {name!r}: {value!r}")
        if settings:
            configs[group_id] = dict(settings)
    return configs
