"""Configs: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and ListConfigResources.

``kafka-topics --describe`` asks for every topic's configs, ``kafka-configs --describe`` for
a topic's, a broker's or a group's. groupcoord answers from what it has:

* a topic (resource type 2) has no configs: groupcoord stores no records, so none of Kafka's
  log settings apply (CreateTopics accepts and ignores them, ``topics``). A topic missing from
  the catalog is UNKNOWN_TOPIC_OR_PARTITION, an illegal name INVALID_TOPIC_EXCEPTION, as Kafka;
* a broker (4) has the group coordinator's settings, each under the name of the Kafka setting
  it stands for (``CoordinatorConfig.group_min_session_timeout_ms`` is
  ``group.min.session.timeout.ms``), read-only. Kafka answers only for its own broker id or for
  "" (the cluster-wide dynamic defaults, none here); every listener of a deployment shares one
  configuration, so any broker id the listener names in Metadata is answered alike;
* a group (32) has KIP-848's group settings (``coordinator.group_config``): its own value where
  it sets one (source ``GROUP_CONFIG``), else the deployment's. Any group name is answered,
  whether or not the group exists, as Kafka does.

AlterConfigs and IncrementalAlterConfigs (``kafka-configs --alter``) change a group's settings:
after the same checks of the resource (AlterConfigs on a group, which only All grants), each
group's change goes to the topic catalog's owner (``group_change``), which checks it as Kafka
does and keeps it. A broker's change is INVALID_REQUEST, as Kafka answers a change of a setting
it cannot change while running, and a topic's (which Kafka would store) POLICY_VIOLATION; each
message names where the setting is set instead (``alter_answer``).

A broker value's source is ``DEFAULT_CONFIG`` when it is groupcoord's default, else
``STATIC_BROKER_CONFIG`` (set when the deployment started), as Kafka reports a value from its
properties file. Any other resource type is INVALID_REQUEST. ``configuration_keys`` picks
entries by name; a name groupcoord does not have is left out, as Kafka leaves out a key it does
not know.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import msgspec
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from groupcoord.coordinator import CoordinatorConfig, Errors
from groupcoord.coordinator.group_config import SET, SETTINGS, GroupConfigOp, kafka_name

from . import apis
from .apis import ApiKey
from .connection import WireRequest
from .topics import TopicChange, TopicResult
from .translate import build

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32  # ConfigResource.Type
# What ListConfigResources lists, in Kafka's order when no type is asked.
_LISTED_TYPES = (GROUP, BROKER_LOGGER, BROKER, TOPIC, CLIENT_METRICS)
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 4, 5, 8  # Kafka's ConfigSource codes
STRING, INT, LONG, LIST = 2, 3, 5, 7  # Kafka's ConfigType codes (DescribeConfigs v3+)
_MINUTE_MS = 60_000
_INT32 = re.compile(r"-?[0-9]{1,10}")  # Java's Integer.parseInt, ASCII digits only
# Kafka bounds a DescribeConfigs only by its bytes; here by count too, as CoordinatorConfig bounds
# the group APIs (shard_offsets' "Request bounds"): past it every resource is INVALID_REQUEST.
MAX_RESOURCES_PER_REQUEST = 10_000


class Synonym(msgspec.Struct, frozen=True):
    """A level a setting is set at: the name there, the value (Kafka's text) and a
    ConfigSource code."""

    name: str
    value: str
    source: int


class ConfigEntry(msgspec.Struct, frozen=True):
    """One setting as Kafka names it: ``config_type`` (a ConfigType code) and ``synonyms``,
    every level it is set at in Kafka's order of precedence, the first being the value in
    force; ``read_only`` unless it can be altered here (a group's own settings)."""

    name: str
    config_type: int
    synonyms: tuple[Synonym, ...]
    read_only: bool = True

    @property
    def value(self) -> str:
        return self.synonyms[0].value

    @property
    def source(self) -> int:
        return self.synonyms[0].source


class ConfigsAnswer(msgspec.Struct, frozen=True):
    """One resource's answer: an error (``message`` may say why) or its entries."""

    error: Errors = Errors.NONE
    message: str | None = None
    entries: tuple[ConfigEntry, ...] = ()


# Kafka's broker setting -> (CoordinatorConfig field, ConfigType). offsets.retention.minutes is
# in minutes (offsets_retention_ms divided, when it is whole minutes: ``_text``).
_BROKER_SETTINGS = {
    "group.min.session.timeout.ms": ("group_min_session_timeout_ms", INT),
    "group.max.session.timeout.ms": ("group_max_session_timeout_ms", INT),
    "group.initial.rebalance.delay.ms": ("group_initial_rebalance_delay_ms", INT),
    "group.max.size": ("group_max_size", INT),
    "offsets.retention.minutes": ("offsets_retention_ms", INT),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", LONG),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", INT),
    "group.consumer.session.timeout.ms": ("consumer_group_session_timeout_ms", INT),
    "group.consumer.heartbeat.interval.ms": ("consumer_group_heartbeat_interval_ms", INT),
    "group.consumer.max.size": ("consumer_group_max_size", INT),
    "group.consumer.assignors": ("consumer_group_assignors", LIST),
    "group.consumer.migration.policy": ("consumer_group_migration_policy", STRING),
    "group.consumer.assignment.interval.ms": ("consumer_group_assignment_interval_ms", INT),
}
_BROKER_SETTINGS.update(
    {
        kafka_name(field): (field, INT)
        for setting in SETTINGS.values()
        for field in (setting.min_field, setting.max_field)
    }
)
_DEFAULTS = CoordinatorConfig()


def broker_entries(config: CoordinatorConfig) -> tuple[ConfigEntry, ...]:
    """A broker's entries: the coordinator's settings under Kafka's names, in Kafka's text."""
    entries = []
    for name, (field, config_type) in _BROKER_SETTINGS.items():
        value = _text(name, getattr(config, field))
        if value is not None:
            default = Synonym(name, _text(name, getattr(_DEFAULTS, field)) or "", DEFAULT_CONFIG)
            levels = [default]
            if value != default.value:
                levels.insert(0, Synonym(name, value, STATIC_BROKER_CONFIG))
            entries.append(ConfigEntry(name, config_type, tuple(levels)))
    return tuple(entries)


def group_entries(
    config: CoordinatorConfig, settings: Mapping[str, int] | None = None
) -> tuple[ConfigEntry, ...]:
    """A group's entries: each of KIP-848's group settings (``coordinator.group_config``), its
    own value where ``settings`` sets one (source GROUP_CONFIG), over the broker setting it
    falls back to (as Kafka lists them)."""
    of_broker = {entry.name: entry for entry in broker_entries(config)}
    entries = []
    for name, setting in SETTINGS.items():
        levels = of_broker[kafka_name(setting.field)].synonyms
        own = (settings or {}).get(name)
        if own is not None:
            levels = (Synonym(name, str(own), GROUP_CONFIG), *levels)
        entries.append(ConfigEntry(name, INT, levels, read_only=False))
    return tuple(entries)


def _text(name: str, value: object) -> str | None:
    """Kafka's text for ``value``: a list joined by commas; None for a retention that is not a
    whole number of minutes (Kafka's setting cannot say it, so it is not reported)."""
    if name == "offsets.retention.minutes":
        assert isinstance(value, int)
        return None if value % _MINUTE_MS else str(value // _MINUTE_MS)
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def describe_configs(
    resource_type: int,
    name: str,
    *,
    config: CoordinatorConfig,
    node_ids: frozenset[int],
    topics: Mapping[str, int],
    topic_name_error: Callable[[str], str | None],
    may_access_group: Callable[[str], bool],
    group_configs: Mapping[str, Mapping[str, int]],
) -> ConfigsAnswer:
    """The answer for one resource (module docstring). ``node_ids``: the broker ids answered;
    ``topic_name_error(name)``: why a topic name is illegal, or None; ``may_access_group``:
    whether the caller may describe (or, for ``alter_answer``, alter) that group's configs
    (GROUP_AUTHORIZATION_FAILED if not); ``group_configs``: groups' own settings."""
    if resource_type == TOPIC:
        if name in topics:
            return ConfigsAnswer()
        why = topic_name_error(name)
        if why is not None:
            return ConfigsAnswer(Errors.INVALID_TOPIC_EXCEPTION, why)
        return ConfigsAnswer(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    if resource_type == BROKER:
        if name == "":
            return ConfigsAnswer()  # no cluster-wide dynamic defaults: nothing is dynamic
        if not _INT32.fullmatch(name) or not -(2**31) <= int(name) < 2**31:
            return ConfigsAnswer(
                Errors.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
            )
        if int(name) not in node_ids:
            expected = ", ".join(map(str, sorted(node_ids)))
            return ConfigsAnswer(
                Errors.INVALID_REQUEST,
                f"Unexpected broker id, expected one of {expected} or empty string, "
                f"but received {name}",
            )
        return ConfigsAnswer(entries=broker_entries(config))
    if resource_type == GROUP:
        if name == "":
            return ConfigsAnswer(Errors.INVALID_REQUEST, "Group name must not be empty")
        if not may_access_group(name):
            return ConfigsAnswer(Errors.GROUP_AUTHORIZATION_FAILED)
        return ConfigsAnswer(entries=group_entries(config, group_configs.get(name)))
    return ConfigsAnswer(
        Errors.INVALID_REQUEST,
        f"groupcoord describes the configs of topics (2), brokers (4) and groups (32), "
        f"not of resource type {resource_type}",
    )


_DUPLICATE = ConfigsAnswer(Errors.INVALID_REQUEST, "Each resource must appear at most once.")
# Why a change to a topic's or a broker's settings is refused.
_READ_ONLY = {
    TOPIC: "groupcoord keeps no topic settings: it stores no records",
    BROKER: "groupcoord's settings are read-only while it runs: set them with the flags of "
    "`groupcoord serve` (group.min.session.timeout.ms is --group-min-session-timeout-ms)",
}


def alter_answer(
    resource_type: int, name: str, checked: ConfigsAnswer, changed: TopicResult | None
) -> ConfigsAnswer:
    """The answer to a change of the settings of resource ``name``, from ``describe_configs``'
    answer for it (``checked``, asked with ``may_access_group`` saying whether the caller may
    alter the group's configs) and, for a group that passed those checks, the catalog's
    result of the change (``changed``, for ``group_change``). A topic's or a broker's change
    is refused (module docstring), saying where the setting is set instead."""
    if resource_type == GROUP and name == "":
        return ConfigsAnswer(Errors.INVALID_REQUEST, "Default group resources are not allowed.")
    if checked.error == Errors.UNKNOWN_TOPIC_OR_PARTITION:
        return ConfigsAnswer(checked.error, f"topic {name!r} does not exist")
    if checked.error != Errors.NONE:
        return checked
    if resource_type == GROUP:
        if changed is None:
            raise ValueError(f"group {name!r}: no result for its change")
        return ConfigsAnswer(changed.error, changed.message)
    error = Errors.INVALID_REQUEST if resource_type == BROKER else Errors.POLICY_VIOLATION
    return ConfigsAnswer(error, _READ_ONLY[resource_type])


def refuse_duplicates(
    asked: Sequence[tuple[int, str]], answers: Sequence[ConfigsAnswer]
) -> list[ConfigsAnswer]:
    """``answers`` to a change of the resources ``asked``, but INVALID_REQUEST for each that is
    asked more than once (Kafka's words), which then changes nothing; the others still do."""
    counts = Counter(asked)
    return [
        _DUPLICATE if counts[resource] > 1 else answer
        for resource, answer in zip(asked, answers, strict=True)
    ]


def group_change(request: WireRequest, index: int) -> TopicChange:
    """The catalog change an AlterConfigs or IncrementalAlterConfigs ``request`` asks of its
    ``index``-th resource, a group."""
    resource = request.body.resources[index]
    incremental = request.api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS
    return TopicChange(
        "alter_group_configs" if incremental else "replace_group_configs",
        resource.resource_name,
        validate_only=request.body.validate_only,
        configs=tuple(
            GroupConfigOp(c.name, int(c.config_operation) if incremental else SET, c.value)
            for c in resource.configs
        ),
    )


def alter_configs_response(request: WireRequest, answers: Sequence[ConfigsAnswer]):
    """kio's AlterConfigs or IncrementalAlterConfigs response: one result per resource of
    ``request``, from ``answers`` in the same order."""
    asked = request.body.resources
    if len(asked) != len(answers):
        raise ValueError(f"{len(asked)} resources asked, {len(answers)} answers")
    cls = apis.response_class(request.api_key, request.api_version)
    result_cls = apis.nested_class(cls, "AlterConfigsResourceResponse")
    return build(
        cls,
        responses=tuple(
            build(
                result_cls,
                error_code=ErrorCode(int(answer.error)),
                error_message=answer.message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
            for resource, answer in zip(asked, answers, strict=True)
        ),
    )


def resources(request: WireRequest) -> list[tuple[int, str]]:
    """The (resource type, name) pairs a DescribeConfigs, AlterConfigs or
    IncrementalAlterConfigs request names, in order."""
    return [(r.resource_type, r.resource_name) for r in request.body.resources]


def too_many_resources(request: WireRequest) -> ConfigsAnswer | None:
    """The answer to every resource of a request over ``MAX_RESOURCES_PER_REQUEST``, else None."""
    count = len(request.body.resources)
    if count <= MAX_RESOURCES_PER_REQUEST:
        return None
    return ConfigsAnswer(
        Errors.INVALID_REQUEST,
        f"{count} resources in one request; the most is {MAX_RESOURCES_PER_REQUEST}",
    )


def list_config_resources_response(
    request: WireRequest,
    *,
    topics: Mapping[str, int],
    node_ids: frozenset[int],
    group_configs: Mapping[str, Mapping[str, int]],
    may_describe_group: Callable[[str], bool],
):
    """kio's ListConfigResources response (``kafka-configs --describe`` of every group, topic
    or broker): for each type asked, in order, the resources whose configs may be described,
    as Kafka 4.3 lists them: the groups that set any of their own (those the caller may
    describe), the catalog's topics, the brokers Metadata names; none for client metrics, and
    none for broker loggers, which groupcoord does not have. No type asked (v1) is every one,
    in Kafka's order; v0 (ListClientMetricsResources) is client metrics alone. A type Kafka
    does not list is UNSUPPORTED_VERSION, as Kafka answers it."""
    cls = apis.response_class(request.api_key, request.api_version)
    resource_cls = apis.nested_class(cls, "ConfigResource")
    asked = tuple(request.body.resource_types) if request.api_version >= 1 else (CLIENT_METRICS,)
    if any(kind not in _LISTED_TYPES for kind in asked):
        return build(cls, error_code=ErrorCode.unsupported_version, config_resources=())
    names = {
        GROUP: sorted(g for g in group_configs if may_describe_group(g)),
        BROKER: [str(node_id) for node_id in sorted(node_ids)],
        TOPIC: sorted(topics),
    }
    return build(
        cls,
        error_code=ErrorCode.none,
        config_resources=tuple(
            build(resource_cls, resource_name=name, resource_type=i8(kind))
            for kind in dict.fromkeys(asked or _LISTED_TYPES)
            for name in names.get(kind, ())
        ),
    )


def describe_configs_response(request: WireRequest, answers: Sequence[ConfigsAnswer]):
    """kio's DescribeConfigs response: one result per resource of ``request``, from ``answers``
    in the same order, each resource's entries narrowed to its ``configuration_keys``."""
    asked = request.body.resources
    if len(asked) != len(answers):
        raise ValueError(f"{len(asked)} resources asked, {len(answers)} answers")
    cls = apis.response_class(request.api_key, request.api_version)
    result_cls = apis.nested_class(cls, "DescribeConfigsResult")
    entry_cls = apis.nested_class(cls, "DescribeConfigsResourceResult")
    synonym_cls = apis.nested_class(cls, "DescribeConfigsSynonym")
    synonyms = request.body.include_synonyms

    def entry(one: ConfigEntry):
        listed = ()
        if synonyms:  # in Kafka's order of precedence: the value in force first
            listed = tuple(
                synonym_cls(name=level.name, value=level.value, source=i8(level.source))
                for level in one.synonyms
            )
        return build(
            entry_cls,
            name=one.name,
            value=one.value,
            read_only=one.read_only,
            config_source=i8(one.source),
            is_sensitive=False,
            synonyms=listed,
            config_type=i8(one.config_type),
            documentation=None,
        )

    results = []
    for resource, answer in zip(asked, answers, strict=True):
        keys = resource.configuration_keys
        wanted = answer.entries if not keys else [e for e in answer.entries if e.name in keys]
        results.append(
            build(
                result_cls,
                error_code=ErrorCode(int(answer.error)),
                error_message=answer.message or "",  # Kafka's "no message": empty, not null
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=tuple(entry(e) for e in wanted),
            )
        )
    return build(cls, results=tuple(results))
