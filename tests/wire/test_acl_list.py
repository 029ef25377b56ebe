"""DescribeAcls without sockets: the ACL file's rules as Kafka's bindings, Kafka's filter rules,
and the answer read back with kio's decoder at every version."""

import pytest
from kio.schema.errors import ErrorCode

from groupcoord.wire import ApiKey, Connection, apis, parse_acl_file
from groupcoord.wire.acl_list import (
    ANY,
    GROUP_RESOURCE,
    LITERAL,
    MATCH,
    PREFIXED,
    AclBinding,
    bindings,
    describe_acls_response,
)

from .frames import build_nested, request_frame, split_response

ACLS = parse_acl_file(
    b"""
super_users = ["User:admin"]
[[acls]]
principal = "User:alice"
group = "app-"
pattern = "prefixed"
operations = ["Read", "Describe"]
[[acls]]
principal = "User:bob"
group = "app-orders"
operations = ["Delete"]
permission = "deny"
host = "10.0.0.9"
[[acls]]
principal = "User:*"
group = "*"
operations = ["Describe"]
""",
    toml=True,
)
READ, DELETE, DESCRIBE = 3, 6, 8
ALLOW, DENY = 3, 2
ALICE_READ = AclBinding("app-", PREFIXED, "User:alice", "*", READ, ALLOW)
ALICE_DESCRIBE = AclBinding("app-", PREFIXED, "User:alice", "*", DESCRIBE, ALLOW)
BOB_DELETE = AclBinding("app-orders", LITERAL, "User:bob", "10.0.0.9", DELETE, DENY)
ANYONE_DESCRIBE = AclBinding("*", LITERAL, "User:*", "*", DESCRIBE, ALLOW)


def listed(version: int = 3, acls=ACLS, allowed: bool = True, **filters):
    values = dict(
        resource_type_filter=ANY,
        resource_name_filter=None,
        pattern_type_filter=ANY,
        principal_filter=None,
        host_filter=None,
        operation=ANY,
        permission_type=ANY,
    )
    values.update(filters)
    conn = Connection()
    body = build_nested(apis.request_class(ApiKey.DESCRIBE_ACLS, version), values)
    (request,) = conn.receive_data(request_frame(body))
    frame = conn.send_response(request, describe_acls_response(request, acls, allowed=allowed))
    cls = apis.response_class(ApiKey.DESCRIBE_ACLS, version)
    header = 1 if apis.request_is_flexible(ApiKey.DESCRIBE_ACLS, version) else 0
    return split_response(frame, cls, header_version=header)[1]


def as_bindings(response) -> list[AclBinding]:
    assert response.error_code == ErrorCode.none
    assert {r.resource_type for r in response.resources} <= {GROUP_RESOURCE}
    return [
        AclBinding(
            r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type
        )
        for r in response.resources
        for a in r.acls
    ]


def test_each_rule_lists_one_binding_per_operation():
    assert bindings(ACLS) == [ALICE_READ, ALICE_DESCRIBE, BOB_DELETE, ANYONE_DESCRIBE]


@pytest.mark.parametrize("version", range(1, 4))
def test_everything_at_every_version(version):
    assert as_bindings(listed(version)) == bindings(ACLS)


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (
            dict(resource_type_filter=GROUP_RESOURCE),
            [ALICE_READ, ALICE_DESCRIBE, BOB_DELETE, ANYONE_DESCRIBE],
        ),
        (dict(resource_type_filter=2), []),  # topics: groupcoord has no topic ACLs
        (dict(resource_name_filter="app-orders"), [BOB_DELETE]),
        (
            dict(resource_name_filter="app-", pattern_type_filter=PREFIXED),
            [ALICE_READ, ALICE_DESCRIBE],
        ),
        (dict(resource_name_filter="app-", pattern_type_filter=LITERAL), []),
        (dict(pattern_type_filter=LITERAL), [BOB_DELETE, ANYONE_DESCRIBE]),
        # MATCH: every binding that applies to the group: prefix, literal name, wildcard.
        (
            dict(resource_name_filter="app-orders", pattern_type_filter=MATCH),
            [ALICE_READ, ALICE_DESCRIBE, BOB_DELETE, ANYONE_DESCRIBE],
        ),
        (dict(resource_name_filter="web", pattern_type_filter=MATCH), [ANYONE_DESCRIBE]),
        (dict(principal_filter="User:alice"), [ALICE_READ, ALICE_DESCRIBE]),
        (dict(host_filter="10.0.0.9"), [BOB_DELETE]),
        (dict(operation=DESCRIBE), [ALICE_DESCRIBE, ANYONE_DESCRIBE]),
        (dict(permission_type=DENY), [BOB_DELETE]),
        (dict(operation=4), []),  # Write: no group rule grants it
    ],
)
def test_filters(filters, expected):
    assert as_bindings(listed(**filters)) == expected


@pytest.mark.parametrize(
    "filters",
    [
        dict(resource_type_filter=0),
        dict(pattern_type_filter=0),
        dict(operation=0),
        dict(permission_type=0),
        dict(operation=99),
        dict(resource_type_filter=-1),
    ],
)
def test_a_filter_with_unknown_elements_is_invalid(filters):
    response = listed(**filters)
    assert (response.error_code, response.resources) == (ErrorCode.invalid_request, ())


def test_without_acls_listing_is_security_disabled():
    response = listed(acls=None)
    assert (response.error_code, response.resources) == (ErrorCode.security_disabled, ())


def test_a_caller_not_allowed_is_refused():
    response = listed(allowed=False)
    assert (response.error_code, response.resources) == (
        ErrorCode.cluster_authorization_failed,
        (),
    )
    assert response.error_message
