"""Group ACLs as Kafka's authorizer applies them, pure (no files, no sockets).

An ``AclFile`` lists allow and deny rules: a principal (``User:alice``, or ``User:*`` for
everyone), a group pattern (a literal name, ``*`` for every group, or a prefix), the operations
(``Read``, ``Describe``, ``Delete``, or ``All``) and the client host (``*``: any). It also names
super users, who may do anything, and ``allow_everyone_if_no_acl_found`` (Kafka's broker setting
of that name; False here, as in Kafka).

``Authorizer.allowed`` decides one (principal, host, operation, group) the way Kafka's
``StandardAuthorizer`` does for the group resource: a super user is allowed; else any matching
deny rule denies; else a matching allow rule allows, where allowing Read or Delete also allows
Describe (a deny of Describe does not deny Read); else, when no rule at all names the group,
``allow_everyone_if_no_acl_found`` decides. A rule names a group when its literal name equals
the group, it is the literal ``*``, or its prefix starts the group id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import msgspec

READ, DESCRIBE, DELETE, ALL = "Read", "Describe", "Delete", "All"
OPERATIONS = (READ, DESCRIBE, DELETE, ALL)
# A group's config operations: no rule here names them, so only All (or being a super user, or
# no rule naming the group with allow_everyone_if_no_acl_found) grants them, as in Kafka.
DESCRIBE_CONFIGS, ALTER_CONFIGS = "DescribeConfigs", "AlterConfigs"
# Kafka's AclOperation code of each operation a group has (AclEntry.supportedOperations), the bits
# of the authorized_operations field of DescribeGroups and ConsumerGroupDescribe.
GROUP_OPERATION_CODES = {READ: 3, DELETE: 6, DESCRIBE: 8, DESCRIBE_CONFIGS: 10, ALTER_CONFIGS: 11}
# Operations whose allow rules imply Describe (Kafka: Read, Write, Delete, Alter).
_IMPLY_DESCRIBE = frozenset((READ, DELETE, ALL))
WILDCARD = "*"


class AclRule(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One rule: ``permission`` ("allow" or "deny") of ``operations`` on the groups that
    ``group`` names (``pattern`` "literal" or "prefixed") for ``principal`` from ``host``."""

    principal: str
    group: str
    operations: tuple[str, ...]
    pattern: Literal["literal", "prefixed"] = "literal"
    permission: Literal["allow", "deny"] = "allow"
    host: str = WILDCARD

    def __post_init__(self) -> None:
        kind, _, name = self.principal.partition(":")
        if kind != "User" or not name:
            raise ValueError(f"principal must be User:<name> or User:*, got {self.principal!r}")
        if not self.group:
            raise ValueError('group must not be empty (use "*" for every group)')
        if not self.operations:
            raise ValueError("operations must name at least one of " + ", ".join(OPERATIONS))
        for op in self.operations:
            if op not in OPERATIONS:
                raise ValueError(f"unknown operation {op!r}: expected {', '.join(OPERATIONS)}")

    def names(self, group: str) -> bool:
        if self.pattern == "prefixed":
            return group.startswith(self.group)
        return self.group in (group, WILDCARD)

    def matches(self, principal: str, host: str) -> bool:
        return self.principal in (principal, "User:*") and self.host in (host, WILDCARD)


class AclFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The contents of an ACL file (JSON or TOML, see ``parse_acl_file``)."""

    acls: tuple[AclRule, ...] = ()
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False

    def __post_init__(self) -> None:
        for user in self.super_users:
            kind, _, name = user.partition(":")
            if kind != "User" or not name or name == WILDCARD:
                raise ValueError(f"super_users entries must be User:<name>, got {user!r}")


def parse_acl_file(data: bytes, toml: bool) -> AclFile:
    """Decode and check an ACL file (TOML when ``toml``, else JSON): ValueError with the
    reason for anything malformed."""
    try:
        if toml:
            return msgspec.toml.decode(data, type=AclFile)
        return msgspec.json.decode(data, type=AclFile)
    except msgspec.DecodeError as exc:  # ValidationError included; __post_init__'s too
        raise ValueError(str(exc)) from None
    except RecursionError:  # the TOML or JSON reader's, for brackets nested past its limit
        raise ValueError("nested too deep") from None


class Authorizer:
    """Decides group operations from an ``AclFile`` (see the module docstring)."""

    def __init__(self, acls: AclFile) -> None:
        self.acls = acls
        self._super_users = frozenset(acls.super_users)

    def allowed(self, principal: str, host: str, operation: str, group: str) -> bool:
        if operation not in GROUP_OPERATION_CODES:
            raise ValueError(f"not a group operation: {operation!r}")
        if principal in self._super_users:
            return True
        rules = [rule for rule in self.acls.acls if rule.names(group)]
        if not rules:
            return self.acls.allow_everyone_if_no_acl_found
        mine = [rule for rule in rules if rule.matches(principal, host)]
        if any(
            rule.permission == "deny" and (operation in rule.operations or ALL in rule.operations)
            for rule in mine
        ):
            return False
        granting = {operation, ALL} | (_IMPLY_DESCRIBE if operation == DESCRIBE else set())
        return any(
            rule.permission == "allow" and not granting.isdisjoint(rule.operations) for rule in mine
        )

    def is_super_user(self, principal: str) -> bool:
        return principal in self._super_users


def authorized_operations(allowed: Callable[[str], bool]) -> int:
    """Kafka's bitfield of the group operations ``allowed(operation)`` grants: what DescribeGroups
    and ConsumerGroupDescribe answer when asked for a group's authorized operations (every
    operation where no authorizer is set, as a broker without one answers)."""
    return sum(1 << code for operation, code in GROUP_OPERATION_CODES.items() if allowed(operation))


# Kafka's AclOperation codes (Read 3, Write 4, Create 5, Delete 6, Alter 7, Describe 8,
# ClusterAction 9, DescribeConfigs 10, AlterConfigs 11, IdempotentWrite 12) of the operations a
# topic and the cluster have, and of those that change them: with ACLs, a super user's alone
# here, as groupcoord has no topic ACLs (its catalog changes need a super user).
_TOPIC_CODES, _TOPIC_CHANGES = (3, 4, 5, 6, 7, 8, 10, 11), frozenset((5, 6, 7, 11))
_CLUSTER_CODES, _CLUSTER_CHANGES = (5, 7, 8, 9, 10, 11, 12), frozenset((5, 7, 9, 11))


def catalog_authorized_operations(authorizer: Authorizer | None, principal: str) -> tuple[int, int]:
    """Kafka's (topic, cluster) bitfields of what ``principal`` may do, for Metadata asked for
    them: every operation without an authorizer (as a broker without one answers) or for a
    super user; else every one but the changes (create, delete, alter, alter configs, cluster
    actions)."""
    everything = authorizer is None or authorizer.is_super_user(principal)

    def bits(codes: tuple[int, ...], changes: frozenset[int]) -> int:
        return sum(1 << code for code in codes if everything or code not in changes)

    return bits(_TOPIC_CODES, _TOPIC_CHANGES), bits(_CLUSTER_CODES, _CLUSTER_CHANGES)
