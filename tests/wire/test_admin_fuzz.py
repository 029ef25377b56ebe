"""Arbitrary admin requests (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
ListConfigResources, DescribeAcls, DescribeCluster) through Connection and the pure builders
that answer them: any resource type, name, key or filter code a client can put on the wire gets
an answer that encodes and reads back, with one result per resource asked; never an
exception."""

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.coordinator import CoordinatorConfig, Errors
from groupcoord.coordinator.group_config import GroupConfigError, altered
from groupcoord.wire import ApiKey, Connection, apis, describe_cluster_response, parse_acl_file
from groupcoord.wire.acl_list import describe_acls_response
from groupcoord.wire.configs import (
    GROUP,
    alter_answer,
    alter_configs_response,
    describe_configs,
    describe_configs_response,
    group_change,
    list_config_resources_response,
    resources,
)
from groupcoord.wire.topics import TopicResult

from .frames import build_nested, request_frame, split_response

INT8 = st.integers(-128, 127)
TEXT = st.text(max_size=40)
ACLS = parse_acl_file(
    b'{"acls": [{"principal": "User:a", "group": "g-", "pattern": "prefixed",'
    b' "operations": ["Read", "All"]}]}',
    toml=False,
)


def exchange(api: ApiKey, version: int, values: dict, answer):
    conn = Connection()
    body = build_nested(apis.request_class(api, version), values)
    (request,) = conn.receive_data(request_frame(body))
    frame = conn.send_response(request, answer(request))
    header = 1 if apis.request_is_flexible(api, version) else 0
    return split_response(frame, apis.response_class(api, version), header_version=header)[1]


def checked(kind: int, name: str):
    return describe_configs(
        kind,
        name,
        config=CoordinatorConfig(),
        node_ids=frozenset({0, 1}),
        topics={"t": 1},
        topic_name_error=lambda n: None if n.isascii() and n else "illegal",
        may_access_group=lambda group: group.startswith("g"),
        group_configs={"g1": {"consumer.session.timeout.ms": 50_000}},
    )


def catalog_result(request, index: int) -> TopicResult:
    """What the catalog answers the group change of ``request``'s ``index``-th resource."""
    change = group_change(request, index)
    replace = change.kind == "replace_group_configs"
    try:
        altered({}, change.configs, replace=replace, config=CoordinatorConfig())
    except GroupConfigError as exc:
        return TopicResult(exc.error, str(exc))
    return TopicResult(Errors.NONE)


@settings(max_examples=150, deadline=None)
@given(
    version=st.integers(1, 4),
    asked=st.lists(st.tuples(INT8, TEXT, st.none() | st.lists(TEXT, max_size=3)), max_size=5),
    synonyms=st.booleans(),
)
def test_any_describe_configs(version, asked, synonyms):
    values = {
        "resources": [
            {
                "resource_type": k,
                "resource_name": n,
                "configuration_keys": None if c is None else tuple(c),
            }
            for k, n, c in asked
        ],
        "_resources": "DescribeConfigsResource",
        "include_synonyms": synonyms,
    }

    def answer(request):
        return describe_configs_response(request, [checked(k, n) for k, n in resources(request)])

    response = exchange(ApiKey.DESCRIBE_CONFIGS, version, values, answer)
    assert [(r.resource_type, r.resource_name) for r in response.results] == [
        (k, n) for k, n, _ in asked
    ]


@settings(max_examples=100, deadline=None)
@given(
    incremental=st.booleans(),
    version=st.integers(0, 1),
    asked=st.lists(
        st.tuples(
            st.sampled_from([GROUP, 2, 4]) | INT8,
            st.sampled_from(["g1", "g2", ""]) | TEXT,
            st.lists(
                st.tuples(
                    st.sampled_from(["consumer.session.timeout.ms"]) | TEXT,
                    st.none() | st.sampled_from(["50000", "1"]) | TEXT,
                    INT8,
                ),
                max_size=3,
            ),
        ),
        max_size=5,
    ),
)
def test_any_alter_configs(incremental, version, asked):
    api = ApiKey.INCREMENTAL_ALTER_CONFIGS if incremental else ApiKey.ALTER_CONFIGS
    values = {
        "resources": [
            {
                "resource_type": k,
                "resource_name": n,
                "configs": [
                    {"name": key, "value": value, "config_operation": op}
                    for key, value, op in settings
                ],
                "_configs": "AlterableConfig",
            }
            for k, n, settings in asked
        ],
        "_resources": "AlterConfigsResource",
        "validate_only": False,
    }

    def answer(request):
        answers = []
        for index, (k, n) in enumerate(resources(request)):
            ok = checked(k, n)
            result = catalog_result(request, index) if k == GROUP and n and ok.error == 0 else None
            answers.append(alter_answer(k, n, ok, result))
        return alter_configs_response(request, answers)

    response = exchange(api, version, values, answer)
    assert len(response.responses) == len(asked)
    for r, (kind, name, _) in zip(response.responses, asked, strict=True):
        assert r.error_code != 0 or (kind == GROUP and name.startswith("g"))  # only groups change


@settings(max_examples=150, deadline=None)
@given(
    version=st.integers(1, 3),
    codes=st.tuples(INT8, INT8, INT8, INT8),
    texts=st.tuples(st.none() | TEXT, st.none() | TEXT, st.none() | TEXT),
    allowed=st.booleans(),
)
def test_any_describe_acls_filter(version, codes, texts, allowed):
    kind, pattern, operation, permission = codes
    name, principal, host = texts
    values = dict(
        resource_type_filter=kind,
        resource_name_filter=name,
        pattern_type_filter=pattern,
        principal_filter=principal,
        host_filter=host,
        operation=operation,
        permission_type=permission,
    )
    response = exchange(
        ApiKey.DESCRIBE_ACLS,
        version,
        values,
        lambda request: describe_acls_response(request, ACLS, allowed=allowed),
    )
    if response.error_code != 0:
        assert response.resources == ()


@settings(max_examples=60, deadline=None)
@given(version=st.integers(0, 2), endpoint_type=INT8, operations=st.booleans())
def test_any_describe_cluster(version, endpoint_type, operations):
    values = dict(
        include_cluster_authorized_operations=operations,
        endpoint_type=endpoint_type,
        include_fenced_brokers=True,
    )
    response = exchange(
        ApiKey.DESCRIBE_CLUSTER,
        version,
        values,
        lambda request: describe_cluster_response(
            request, brokers=[], controller_id=-1, cluster_id="gc", cluster_operations=8096
        ),
    )
    assert (response.error_code == 0) == (version == 0 or endpoint_type == 1)


@settings(max_examples=100, deadline=None)
@given(version=st.integers(0, 1), types=st.lists(INT8, max_size=6))
def test_any_list_config_resources(version, types):
    values = {"resource_types": types} if version >= 1 else {}

    def answer(request):
        return list_config_resources_response(
            request,
            topics={"t": 1},
            node_ids=frozenset({0, 1}),
            group_configs={"g1": {"consumer.session.timeout.ms": 50_000}, "h": {}},
            may_describe_group=lambda group: group.startswith("g"),
        )

    response = exchange(ApiKey.LIST_CONFIG_RESOURCES, version, values, answer)
    names = {r.resource_name for r in response.config_resources}
    assert names <= {"t", "0", "1", "g1"}  # never a group the caller may not describe
