"""DescribeConfigs without sockets: a client's request bytes at each version through Connection,
``wire.configs``' answers, and the response bytes read back with kio's decoder."""

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from groupcoord.coordinator import CoordinatorConfig, Errors
from groupcoord.coordinator.group_config import DELETE, SET, GroupConfigOp
from groupcoord.wire import ApiKey, Connection, apis
from groupcoord.wire.configs import (
    BROKER,
    DEFAULT_CONFIG,
    GROUP,
    GROUP_CONFIG,
    INT,
    LIST,
    MAX_RESOURCES_PER_REQUEST,
    STATIC_BROKER_CONFIG,
    TOPIC,
    alter_answer,
    alter_configs_response,
    broker_entries,
    describe_configs,
    describe_configs_response,
    group_change,
    group_entries,
    list_config_resources_response,
    refuse_duplicates,
    resources,
    too_many_resources,
)
from groupcoord.wire.topics import TopicResult

from .frames import build_nested, request_frame, split_response

CONFIG = CoordinatorConfig(group_initial_rebalance_delay_ms=0, consumer_group_max_size=50)
TOPICS = {"orders": 3}
GROUP_CONFIGS = {"tuned": {"consumer.session.timeout.ms": 50_000}}
VERSIONS = range(1, 5)
RESOURCE = "DescribeConfigsResource"  # kio's nested entity of the request


def answer(resource_type: int, name: str, *, config=CONFIG, allowed=True):
    return describe_configs(
        resource_type,
        name,
        config=config,
        node_ids=frozenset({0, 1}),
        topics=TOPICS,
        topic_name_error=lambda n: None if n.isalnum() else f"illegal topic name {n!r}",
        may_access_group=lambda group: allowed,
        group_configs=GROUP_CONFIGS,
    )


def round_trip(version: int, asked: list[dict], answers=None, **flags):
    """The decoded response a client at ``version`` reads for ``asked`` (the module's answer
    for each resource unless ``answers`` is given)."""
    conn = Connection()
    cls = apis.request_class(ApiKey.DESCRIBE_CONFIGS, version)
    body = build_nested(cls, {"resources": asked, "_resources": RESOURCE, **flags})
    (request,) = conn.receive_data(request_frame(body, client_id="admin"))
    if answers is None:
        answers = [answer(kind, name) for kind, name in resources(request)]
    frame = conn.send_response(request, describe_configs_response(request, answers))
    response_cls = apis.response_class(ApiKey.DESCRIBE_CONFIGS, version)
    header = 1 if apis.request_is_flexible(ApiKey.DESCRIBE_CONFIGS, version) else 0
    return split_response(frame, response_cls, header_version=header)[1]


def resource(kind: int, name: str, keys=None) -> dict:
    keys = None if keys is None else tuple(keys)
    return {"resource_type": kind, "resource_name": name, "configuration_keys": keys}


def test_broker_entries_name_kafkas_settings_with_their_values_and_sources():
    entries = {e.name: e for e in broker_entries(CONFIG)}
    delay = entries["group.initial.rebalance.delay.ms"]
    assert (delay.value, delay.source) == ("0", STATIC_BROKER_CONFIG)
    assert delay.synonyms[-1].value == "3000"  # the default it overrides
    minimum = entries["group.min.session.timeout.ms"]
    assert (minimum.value, minimum.config_type, minimum.source) == ("6000", INT, DEFAULT_CONFIG)
    assert entries["group.consumer.assignors"].value == "uniform,range"
    assert entries["group.consumer.assignors"].config_type == LIST
    assert entries["offsets.retention.minutes"].value == str(7 * 24 * 60)
    assert entries["group.consumer.max.size"].value == "50"


def test_a_retention_of_no_whole_minutes_is_left_out():
    names = {e.name for e in broker_entries(CoordinatorConfig(offsets_retention_ms=90_500))}
    assert "offsets.retention.minutes" not in names
    assert "offsets.retention.check.interval.ms" in names


def test_group_entries_are_the_deployments_kip848_settings():
    config = CoordinatorConfig(consumer_group_heartbeat_interval_ms=500)
    entries = {e.name: (e.value, e.source) for e in group_entries(config)}
    assert entries == {
        "consumer.session.timeout.ms": ("45000", DEFAULT_CONFIG),
        "consumer.heartbeat.interval.ms": ("500", STATIC_BROKER_CONFIG),
        "consumer.assignment.interval.ms": ("0", DEFAULT_CONFIG),
    }


@pytest.mark.parametrize(
    ("kind", "name", "error"),
    [
        (TOPIC, "orders", Errors.NONE),
        (TOPIC, "missing", Errors.UNKNOWN_TOPIC_OR_PARTITION),
        (TOPIC, "bad/name", Errors.INVALID_TOPIC_EXCEPTION),
        (BROKER, "", Errors.NONE),
        (BROKER, "1", Errors.NONE),
        (BROKER, "7", Errors.INVALID_REQUEST),
        (BROKER, "one", Errors.INVALID_REQUEST),
        (BROKER, "²", Errors.INVALID_REQUEST),  # a digit to str.isdigit, not to int()
        (BROKER, "9" * 5000, Errors.INVALID_REQUEST),  # past int32 (and int()'s digit limit)
        (BROKER, "2147483648", Errors.INVALID_REQUEST),
        (GROUP, "g", Errors.NONE),
        (GROUP, "", Errors.INVALID_REQUEST),
        (8, "1", Errors.INVALID_REQUEST),  # broker loggers
        (16, "metrics", Errors.INVALID_REQUEST),  # client metrics
    ],
)
def test_each_resource_kind_and_its_errors(kind, name, error):
    got = answer(kind, name)
    assert got.error == error
    assert (got.message is None) == (error in (Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION))
    expect_entries = (kind, name) in ((BROKER, "1"), (GROUP, "g"))
    assert bool(got.entries) == expect_entries
    if error != Errors.NONE:
        assert got.entries == ()


def test_a_group_the_caller_may_not_describe_is_refused():
    got = answer(GROUP, "g", allowed=False)
    assert (got.error, got.entries) == (Errors.GROUP_AUTHORIZATION_FAILED, ())


@pytest.mark.parametrize("version", VERSIONS)
def test_answers_read_back_at_every_version(version):
    asked = [
        resource(BROKER, "0", ["group.initial.rebalance.delay.ms", "no.such.setting"]),
        resource(TOPIC, "missing"),
        resource(GROUP, "g"),
        resource(TOPIC, "orders"),
    ]
    response = round_trip(version, asked, include_synonyms=True)
    broker, missing, group, topic = response.results
    assert [(r.resource_type, r.resource_name) for r in response.results] == [
        (a["resource_type"], a["resource_name"]) for a in asked
    ]
    (delay,) = broker.configs
    assert (delay.name, delay.value, delay.read_only, delay.config_source) == (
        "group.initial.rebalance.delay.ms",
        "0",
        True,
        STATIC_BROKER_CONFIG,
    )
    # In Kafka's order of precedence: the value in force, then the default it overrides.
    assert [(s.value, s.source) for s in delay.synonyms] == [
        ("0", STATIC_BROKER_CONFIG),
        ("3000", DEFAULT_CONFIG),
    ]
    if version >= 3:
        assert delay.config_type == INT
    assert (broker.error_code, broker.error_message) == (ErrorCode.none, "")
    assert (missing.error_code, missing.configs) == (ErrorCode.unknown_topic_or_partition, ())
    assert {c.name for c in group.configs} == {
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "consumer.assignment.interval.ms",
    }
    assert (topic.error_code, topic.configs) == (ErrorCode.none, ())


def test_synonyms_only_when_asked():
    response = round_trip(4, [resource(BROKER, "1", ["group.max.size"])])
    (entry,) = response.results[0].configs
    assert entry.synonyms == ()


@pytest.mark.parametrize("keys", [None, []])
def test_no_keys_means_every_entry(keys):
    response = round_trip(2, [resource(BROKER, "1", keys)])
    assert len(response.results[0].configs) == len(broker_entries(CONFIG))


def test_a_request_over_the_resource_bound_is_refused_whole():
    refused = too_many_resources(_request_of(MAX_RESOURCES_PER_REQUEST + 1))
    assert refused is not None and refused.error == Errors.INVALID_REQUEST
    assert too_many_resources(_request_of(MAX_RESOURCES_PER_REQUEST)) is None


def _request_of(count: int):
    conn = Connection()
    cls = apis.request_class(ApiKey.DESCRIBE_CONFIGS, 4)
    body = build_nested(cls, {"resources": [resource(BROKER, "1")] * count, "_resources": RESOURCE})
    (request,) = conn.receive_data(request_frame(body, client_id="admin"))
    return request


def test_answers_must_match_the_resources_asked():
    request = _request_of(2)
    with pytest.raises(ValueError, match="2 resources asked, 1 answers"):
        describe_configs_response(request, [answer(BROKER, "1")])


def test_a_groups_own_setting_is_in_force_over_the_deployments():
    config = CoordinatorConfig(consumer_group_heartbeat_interval_ms=500)
    entries = {e.name: e for e in group_entries(config, {"consumer.heartbeat.interval.ms": 6000})}
    heartbeat = entries["consumer.heartbeat.interval.ms"]
    assert (heartbeat.value, heartbeat.source, heartbeat.read_only) == ("6000", GROUP_CONFIG, False)
    # As Kafka lists them: the group's own, then the broker setting it falls back to, at each
    # level that sets it.
    assert [(s.name, s.value, s.source) for s in heartbeat.synonyms] == [
        ("consumer.heartbeat.interval.ms", "6000", GROUP_CONFIG),
        ("group.consumer.heartbeat.interval.ms", "500", STATIC_BROKER_CONFIG),
        ("group.consumer.heartbeat.interval.ms", "5000", DEFAULT_CONFIG),
    ]
    session = entries["consumer.session.timeout.ms"]
    assert [(s.name, s.value, s.source) for s in session.synonyms] == [
        ("group.consumer.session.timeout.ms", "45000", DEFAULT_CONFIG)
    ]
    assert not session.read_only


def test_a_described_group_has_its_own_settings_exist_it_or_not():
    tuned = {e.name: e.value for e in answer(GROUP, "tuned").entries}
    other = {e.name: e.value for e in answer(GROUP, "other").entries}
    assert tuned["consumer.session.timeout.ms"] == "50000"
    assert other["consumer.session.timeout.ms"] == "45000"


def test_the_bounds_of_groups_settings_are_broker_settings():
    entries = {e.name: e.value for e in broker_entries(CONFIG)}
    assert entries["group.consumer.min.session.timeout.ms"] == "45000"
    assert entries["group.consumer.max.heartbeat.interval.ms"] == "15000"
    assert entries["group.consumer.max.assignment.interval.ms"] == "15000"


@pytest.mark.parametrize(
    ("kind", "name", "error"),
    [
        (TOPIC, "orders", Errors.POLICY_VIOLATION),
        (TOPIC, "missing", Errors.UNKNOWN_TOPIC_OR_PARTITION),
        (TOPIC, "bad/name", Errors.INVALID_TOPIC_EXCEPTION),
        (BROKER, "1", Errors.INVALID_REQUEST),  # as Kafka refuses a static setting
        (BROKER, "7", Errors.INVALID_REQUEST),
        (GROUP, "", Errors.INVALID_REQUEST),  # Kafka: "Default group resources are not allowed."
        (8, "1", Errors.INVALID_REQUEST),
    ],
)
def test_every_change_but_a_groups_is_refused_saying_why(kind, name, error):
    refused = alter_answer(kind, name, answer(kind, name), None)
    assert refused.error == error
    assert refused.message  # every refusal says why
    assert refused.entries == ()


def test_a_groups_change_is_answered_with_the_catalogs_result():
    result = TopicResult(Errors.INVALID_CONFIG, "Unknown group config name: x")
    answered = alter_answer(GROUP, "g", answer(GROUP, "g"), result)
    assert (answered.error, answered.message) == (Errors.INVALID_CONFIG, result.message)
    assert alter_answer(GROUP, "g", answer(GROUP, "g"), TopicResult(Errors.NONE)).error == 0
    with pytest.raises(ValueError, match="no result"):
        alter_answer(GROUP, "g", answer(GROUP, "g"), None)


def test_a_group_change_is_checked_against_the_acls_first():
    refused = alter_answer(GROUP, "g", answer(GROUP, "g", allowed=False), None)
    assert refused.error == Errors.GROUP_AUTHORIZATION_FAILED


def _alter_request(api: ApiKey, version: int, asked: list[dict], validate_only=False):
    for one in asked:
        one["_configs"] = "AlterableConfig"
    conn = Connection()
    cls = apis.request_class(api, version)
    body = build_nested(
        cls,
        {"resources": asked, "_resources": "AlterConfigsResource", "validate_only": validate_only},
    )
    (request,) = conn.receive_data(request_frame(body, client_id="admin"))
    return conn, request


@pytest.mark.parametrize("version", range(2))
def test_an_incremental_change_of_a_group_keeps_each_operation(version):
    settings = [
        {"name": "consumer.session.timeout.ms", "value": "50000", "config_operation": SET},
        {"name": "consumer.heartbeat.interval.ms", "value": None, "config_operation": DELETE},
    ]
    asked = [{"resource_type": GROUP, "resource_name": "g", "configs": settings}]
    _, request = _alter_request(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, asked, True)
    change = group_change(request, 0)
    assert (change.kind, change.name, change.validate_only) == ("alter_group_configs", "g", True)
    assert change.configs == (
        GroupConfigOp("consumer.session.timeout.ms", SET, "50000"),
        GroupConfigOp("consumer.heartbeat.interval.ms", DELETE, None),
    )


@pytest.mark.parametrize("version", range(3))
def test_an_alter_configs_of_a_group_replaces_its_settings(version):
    settings = [{"name": "consumer.session.timeout.ms", "value": "50000"}]
    asked = [{"resource_type": GROUP, "resource_name": "g", "configs": settings}]
    _, request = _alter_request(ApiKey.ALTER_CONFIGS, version, asked)
    change = group_change(request, 0)
    assert (change.kind, change.validate_only) == ("replace_group_configs", False)
    assert change.configs == (GroupConfigOp("consumer.session.timeout.ms", SET, "50000"),)


@pytest.mark.parametrize(
    ("api", "version"),
    [(ApiKey.ALTER_CONFIGS, v) for v in range(3)]
    + [(ApiKey.INCREMENTAL_ALTER_CONFIGS, v) for v in range(2)],
)
def test_refusals_read_back_at_every_version(api, version):
    setting = {"name": "group.max.size", "value": "10", "config_operation": 0}
    asked = [  # (config_operation is IncrementalAlterConfigs' only: left out of the others)
        {"resource_type": BROKER, "resource_name": "1", "configs": [setting]},
        {"resource_type": TOPIC, "resource_name": "missing", "configs": []},
    ]
    conn, request = _alter_request(api, version, asked)
    answers = [
        alter_answer(kind, name, answer(kind, name), None) for kind, name in resources(request)
    ]
    frame = conn.send_response(request, alter_configs_response(request, answers))
    header = 1 if apis.request_is_flexible(api, version) else 0
    response = split_response(frame, apis.response_class(api, version), header_version=header)[1]
    assert [(r.error_code, r.resource_type, r.resource_name) for r in response.responses] == [
        (ErrorCode.invalid_request, BROKER, "1"),
        (ErrorCode.unknown_topic_or_partition, TOPIC, "missing"),
    ]
    assert all(r.error_message for r in response.responses)


def _list(version: int, types, allowed=lambda group: True):
    conn = Connection()
    cls = apis.request_class(ApiKey.LIST_CONFIG_RESOURCES, version)
    body = cls(resource_types=tuple(i8(t) for t in types)) if version >= 1 else cls()
    (request,) = conn.receive_data(request_frame(body, client_id="admin"))
    response = list_config_resources_response(
        request,
        topics=TOPICS | {"audit": 1},
        node_ids=frozenset({1, 0, 10}),
        group_configs=GROUP_CONFIGS | {"other": {"consumer.session.timeout.ms": 50_000}},
        may_describe_group=allowed,
    )
    frame = conn.send_response(request, response)
    response_cls = apis.response_class(ApiKey.LIST_CONFIG_RESOURCES, version)
    answer = split_response(frame, response_cls, header_version=1)[1]
    return answer.error_code, [
        (getattr(r, "resource_type", None), r.resource_name) for r in answer.config_resources
    ]


def test_listed_config_resources_are_what_describe_configs_answers():
    assert _list(1, [GROUP]) == (ErrorCode.none, [(GROUP, "other"), (GROUP, "tuned")])
    assert _list(1, [TOPIC, BROKER]) == (
        ErrorCode.none,
        [(TOPIC, "audit"), (TOPIC, "orders"), (BROKER, "0"), (BROKER, "1"), (BROKER, "10")],
    )
    # None asked: every type, in Kafka's order (groups, broker loggers, brokers, topics).
    code, listed = _list(1, [])
    assert [kind for kind, _ in listed] == [GROUP, GROUP, BROKER, BROKER, BROKER, TOPIC, TOPIC]
    assert _list(1, [8, 16]) == (ErrorCode.none, [])  # no broker loggers, no client metrics
    assert _list(0, []) == (ErrorCode.none, [])  # ListClientMetricsResources: client metrics


def test_listed_groups_are_those_the_caller_may_describe():
    assert _list(1, [GROUP], allowed=lambda group: group == "tuned")[1] == [(GROUP, "tuned")]


@pytest.mark.parametrize("kind", [3, 99, -1])
def test_a_type_kafka_does_not_list_is_unsupported_version(kind):
    assert _list(1, [GROUP, kind]) == (ErrorCode.unsupported_version, [])


def test_a_resource_named_twice_in_one_change_is_refused_each_time():
    asked = [(GROUP, "g"), (GROUP, "h"), (GROUP, "g"), (TOPIC, "orders")]
    answers = refuse_duplicates(asked, [answer(kind, name) for kind, name in asked])
    assert [a.error for a in answers] == [
        Errors.INVALID_REQUEST,
        Errors.NONE,
        Errors.INVALID_REQUEST,
        Errors.NONE,
    ]
    assert answers[0].message == "Each resource must appear at most once."  # Kafka's words
