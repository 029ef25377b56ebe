"""DescribeAcls: the ACL file's rules as Kafka's ACL bindings (``kafka-acls --list``).

Kafka keeps one binding per (resource, pattern, principal, host, operation, permission); an
``AclRule`` here names several operations at once, so each rule lists as one binding per
operation. Every rule is about groups (resource type GROUP): groupcoord has no topic or cluster
ACLs. A filter matches as Kafka's ``AclBindingFilter`` does:

* resource type ANY or GROUP; pattern type ANY (any pattern, the name compared as is), LITERAL or
  PREFIXED (that pattern only, the name compared as is), or MATCH (the bindings that apply to
  the named group: its literal name, the literal ``*``, and every prefix it starts with);
* a null name, principal or host matches any; operation and permission ANY match any.

A filter with an UNKNOWN (0) element, or a code Kafka does not define, is INVALID_REQUEST; a
listener without ACLs answers SECURITY_DISABLED, as a broker without an authorizer does. Who may
list is the caller's to decide (``KafkaGateway``: super users only; CLUSTER_AUTHORIZATION_FAILED
for others).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from . import apis
from .acl import ALL, GROUP_OPERATION_CODES, WILDCARD, AclFile
from .connection import WireRequest
from .translate import build

# Kafka's codes: ResourceType, PatternType, AclOperation, AclPermissionType.
ANY, GROUP_RESOURCE = 1, 3
MATCH, LITERAL, PREFIXED = 2, 3, 4
_RESOURCE_TYPES = range(1, 8)  # ANY .. USER
_PATTERN_TYPES = range(1, 5)  # ANY, MATCH, LITERAL, PREFIXED
_OPERATIONS = range(1, 15)  # ANY .. DESCRIBE_TOKENS
_PERMISSIONS = range(1, 4)  # ANY, DENY, ALLOW
OPERATION_CODES = {ALL: 2, **GROUP_OPERATION_CODES}  # AclOperation.ALL is 2
PERMISSION_CODES = {"deny": 2, "allow": 3}
PATTERN_CODES = {"literal": LITERAL, "prefixed": PREFIXED}


class AclBinding(msgspec.Struct, frozen=True):
    """One Kafka ACL binding on a group resource, in Kafka's codes."""

    group: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


def bindings(acls: AclFile) -> list[AclBinding]:
    """Every binding the file's rules make, one per rule and operation, in the file's order."""
    return [
        AclBinding(
            rule.group,
            PATTERN_CODES[rule.pattern],
            rule.principal,
            rule.host,
            OPERATION_CODES[operation],
            PERMISSION_CODES[rule.permission],
        )
        for rule in acls.acls
        for operation in dict.fromkeys(rule.operations)
    ]


def filter_is_valid(body) -> bool:
    """Whether every element of a DescribeAcls filter is a code Kafka defines, none UNKNOWN."""
    return (
        body.resource_type_filter in _RESOURCE_TYPES
        and body.pattern_type_filter in _PATTERN_TYPES
        and body.operation in _OPERATIONS
        and body.permission_type in _PERMISSIONS
    )


def matches(body, binding: AclBinding) -> bool:
    """Whether a (valid) DescribeAcls filter ``body`` matches ``binding``."""
    if body.resource_type_filter not in (ANY, GROUP_RESOURCE):
        return False
    name, pattern = body.resource_name_filter, body.pattern_type_filter
    if pattern == MATCH:
        if name is not None and not (
            binding.group == name
            or (binding.pattern_type == LITERAL and binding.group == WILDCARD)
            or (binding.pattern_type == PREFIXED and name.startswith(binding.group))
        ):
            return False
    else:
        if pattern != ANY and pattern != binding.pattern_type:
            return False
        if name is not None and name != binding.group:
            return False
    return (
        body.principal_filter in (None, binding.principal)
        and body.host_filter in (None, binding.host)
        and body.operation in (ANY, binding.operation)
        and body.permission_type in (ANY, binding.permission)
    )


def describe_acls_response(request: WireRequest, acls: AclFile | None, *, allowed: bool):
    """kio's DescribeAcls answer from the ACL file ``acls`` (None: the listener has none): the
    matching bindings, grouped by resource in the file's order; CLUSTER_AUTHORIZATION_FAILED
    unless the caller is ``allowed`` to list them."""
    cls = apis.response_class(request.api_key, request.api_version)
    body = request.body
    if acls is None:
        return _refused(cls, ErrorCode.security_disabled, "No ACLs are configured on this listener")
    if not allowed:
        return _refused(
            cls, ErrorCode.cluster_authorization_failed, "Listing ACLs needs a super user"
        )
    if not filter_is_valid(body):
        return _refused(
            cls, ErrorCode.invalid_request, "The filter has an UNKNOWN or undefined code"
        )
    by_resource: dict[tuple[str, int], list[AclBinding]] = {}
    for binding in bindings(acls):
        if matches(body, binding):
            by_resource.setdefault((binding.group, binding.pattern_type), []).append(binding)
    resource_cls = apis.nested_class(cls, "DescribeAclsResource")
    acl_cls = apis.nested_class(cls, "AclDescription")
    return build(
        cls,
        error_code=ErrorCode.none,
        error_message=None,
        resources=tuple(
            build(
                resource_cls,
                resource_type=i8(GROUP_RESOURCE),
                resource_name=group,
                pattern_type=i8(pattern),
                acls=_descriptions(acl_cls, listed),
            )
            for (group, pattern), listed in by_resource.items()
        ),
    )


def _descriptions(acl_cls: type, listed: Sequence[AclBinding]) -> tuple:
    return tuple(
        acl_cls(
            principal=b.principal,
            host=b.host,
            operation=i8(b.operation),
            permission_type=i8(b.permission),
        )
        for b in listed
    )


def _refused(cls: type, error: ErrorCode, message: str):
    return build(cls, error_code=error, error_message=message, resources=())
