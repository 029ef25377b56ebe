"""Group ACLs (wire/acl.py), pure: Kafka's allow/deny precedence, Describe implied by Read and
Delete, literal, wildcard and prefixed patterns, wildcard principals, hosts, super users, the
no-ACL default, and the checks on an ACL file."""

import json

import pytest

from groupcoord.wire.acl import (
    AclFile,
    AclRule,
    Authorizer,
    authorized_operations,
    parse_acl_file,
)


def _authorizer(*rules: AclRule, **options) -> Authorizer:
    return Authorizer(AclFile(acls=rules, **options))


def test_allow_rules_grant_their_operation_and_read_or_delete_imply_describe():
    auth = _authorizer(
        AclRule("User:alice", "orders", ("Read",)),
        AclRule("User:bob", "orders", ("Delete",)),
        AclRule("User:carol", "orders", ("Describe",)),
    )
    table = {
        (user, op): auth.allowed(f"User:{user}", "10.0.0.1", op, "orders")
        for user in ("alice", "bob", "carol", "dave")
        for op in ("Read", "Describe", "Delete")
    }
    assert table == {
        ("alice", "Read"): True,
        ("alice", "Describe"): True,
        ("alice", "Delete"): False,
        ("bob", "Read"): False,
        ("bob", "Describe"): True,
        ("bob", "Delete"): True,
        ("carol", "Read"): False,
        ("carol", "Describe"): True,
        ("carol", "Delete"): False,
        ("dave", "Read"): False,
        ("dave", "Describe"): False,
        ("dave", "Delete"): False,
    }


def test_deny_wins_over_allow_but_denying_describe_leaves_read():
    auth = _authorizer(
        AclRule("User:*", "*", ("All",)),
        AclRule("User:mallory", "payments", ("Read",), permission="deny"),
        AclRule("User:eve", "payments", ("Describe",), permission="deny"),
    )
    assert auth.allowed("User:alice", "h", "Read", "payments")
    assert not auth.allowed("User:mallory", "h", "Read", "payments")
    assert auth.allowed("User:mallory", "h", "Read", "other")
    assert not auth.allowed("User:eve", "h", "Describe", "payments")
    assert auth.allowed("User:eve", "h", "Read", "payments")


def test_patterns_principals_and_hosts():
    auth = _authorizer(
        AclRule("User:alice", "team-a-", ("Read",), pattern="prefixed"),
        AclRule("User:*", "shared", ("Describe",)),
        AclRule("User:bob", "lab", ("Read",), host="192.168.1.5"),
    )
    assert auth.allowed("User:alice", "h", "Read", "team-a-orders")
    assert not auth.allowed("User:alice", "h", "Read", "team-b-orders")
    assert not auth.allowed("User:alice", "h", "Read", "team-a")  # shorter than the prefix
    assert auth.allowed("User:anyone", "h", "Describe", "shared")
    assert not auth.allowed("User:anyone", "h", "Read", "shared")
    assert auth.allowed("User:bob", "192.168.1.5", "Read", "lab")
    assert not auth.allowed("User:bob", "192.168.1.6", "Read", "lab")


def test_super_users_and_the_no_acl_default():
    auth = _authorizer(AclRule("User:alice", "a", ("Read",)), super_users=("User:root",))
    assert auth.allowed("User:root", "h", "Delete", "anything")
    assert auth.is_super_user("User:root") and not auth.is_super_user("User:alice")
    assert not auth.allowed("User:ANONYMOUS", "h", "Read", "unnamed")  # Kafka's default
    lenient = _authorizer(
        AclRule("User:alice", "a", ("Read",)), allow_everyone_if_no_acl_found=True
    )
    assert lenient.allowed("User:ANONYMOUS", "h", "Read", "unnamed")
    assert not lenient.allowed("User:bob", "h", "Read", "a")  # the group has rules


def test_acl_files_in_json_and_toml_decode_to_the_same_rules():
    as_json = json.dumps(
        {
            "super_users": ["User:admin"],
            "acls": [
                {
                    "principal": "User:alice",
                    "group": "app-",
                    "pattern": "prefixed",
                    "operations": ["Read"],
                },
                {
                    "principal": "User:*",
                    "group": "*",
                    "operations": ["Describe"],
                    "permission": "deny",
                    "host": "10.0.0.9",
                },
            ],
        }
    ).encode()
    as_toml = b"""
super_users = ["User:admin"]

[[acls]]
principal = "User:alice"
group = "app-"
pattern = "prefixed"
operations = ["Read"]

[[acls]]
principal = "User:*"
group = "*"
operations = ["Describe"]
permission = "deny"
host = "10.0.0.9"
"""
    assert parse_acl_file(as_json, toml=False) == parse_acl_file(as_toml, toml=True)
    assert parse_acl_file(as_json, toml=False).acls[0] == AclRule(
        "User:alice", "app-", ("Read",), pattern="prefixed"
    )


@pytest.mark.parametrize(
    "document, complaint",
    [
        ('{"acls": [{"principal": "alice", "group": "g", "operations": ["Read"]}]}', "User:"),
        ('{"acls": [{"principal": "User:a", "group": "g", "operations": ["Write"]}]}', "Write"),
        ('{"acls": [{"principal": "User:a", "group": "", "operations": ["Read"]}]}', "empty"),
        ('{"acls": [{"principal": "User:a", "group": "g", "operations": []}]}', "at least"),
        (
            '{"acls": [{"principal": "User:a", "group": "g", "operations": ["Read"], '
            '"permission": "maybe"}]}',
            "permission",
        ),
        (
            '{"acls": [{"principal": "User:a", "group": "g", "operations": ["Read"], '
            '"pattern": "regex"}]}',
            "pattern",
        ),
        ('{"acl": []}', "acl"),
        ('{"super_users": ["admin"]}', "super_users"),
        ('{"acls": [', "truncated|malformed|Input"),
        ("[1, 2]", "object"),
    ],
)
def test_bad_acl_files_are_refused_with_the_reason(document, complaint):
    with pytest.raises(ValueError, match=complaint):
        parse_acl_file(document.encode(), toml=False)


def test_authorized_operations_are_kafkas_bitfield_of_what_the_acls_grant():
    """Kafka's AclOperation codes: Read 3, Delete 6, Describe 8, DescribeConfigs 10, AlterConfigs
    11. The config operations have no rule of their own: All grants them, as in Kafka."""
    read, delete, describe, configs = 1 << 3, 1 << 6, 1 << 8, (1 << 10) | (1 << 11)
    auth = _authorizer(
        AclRule("User:alice", "orders", ("Read",)),
        AclRule("User:bob", "orders", ("Delete",)),
        AclRule("User:carol", "orders", ("All",)),
        AclRule("User:carol", "orders", ("Delete",), permission="deny"),
        super_users=("User:root",),
    )
    lenient = _authorizer(allow_everyone_if_no_acl_found=True)

    def bits(authorizer, user, group="orders"):
        return authorized_operations(lambda op: authorizer.allowed(user, "h", op, group))

    assert bits(auth, "User:alice") == read | describe
    assert bits(auth, "User:bob") == delete | describe
    assert bits(auth, "User:carol") == read | describe | configs
    assert bits(auth, "User:dave") == 0
    assert bits(auth, "User:root") == read | delete | describe | configs == 3400
    assert bits(lenient, "User:anyone", "unnamed") == 3400
    assert authorized_operations(lambda op: True) == 3400  # no authorizer: a broker's answer


def test_only_group_operations_are_decided():
    with pytest.raises(ValueError, match="All"):
        _authorizer().allowed("User:a", "h", "All", "g")
