"""The Kafka APIs groupcoord speaks, their version ranges, and the ApiVersions answer.

One table, ``SUPPORTED_VERSIONS``, says which (api key, version) pairs a listener accepts; the
kio classes for each pair come from kio's index, so the schemas are Kafka's own. The ranges cover
what current clients negotiate (librdkafka 2.x, kafka-python 2.x, aiokafka, the Java client 3.x and
4.x): a client picks the highest version both sides support, so only the floor matters for old
clients. Versions are left out where their meaning needs state groupcoord does not keep:
OffsetCommit v10 and OffsetFetch v10 (KIP-848's topic ids), Fetch v13+ (partitions by topic
id: Fetch is answered by topic name, v12 and below), ListOffsets v11 (it only admits tiered
storage's earliest-pending-upload offset, KIP-1023); Metadata v13 adds nothing a coordinator
can fill. Every other version Kafka 4.3 announces for these APIs is here (DescribeGroups v6 too:
a missing group is GROUP_ID_NOT_FOUND, ``translate``), and DescribeConfigs v1-4 answers what
admin tools read of topics, brokers and groups (``configs``), DescribeCluster v0-2 what
Metadata says of the cluster (``builders``), DescribeAcls v1-3 the ACL file's rules
(``acl_list``); AlterConfigs and IncrementalAlterConfigs change a group's own settings and
say why a topic's or a broker's do not change, and ListConfigResources lists what
DescribeConfigs describes (``configs``). Produce is listed (v3-12: v13 names
topics by id) only so that librdkafka fetches (see ``builders``); every Produce is refused.
OffsetCommit v0-1, OffsetFetch v0, ListOffsets v0, Fetch v0-3 and Produce v0-2 are gone from
Kafka 4's schemas (KIP-896) and so from kio; no current client needs them.
"""

from __future__ import annotations

import datetime
import re
import sys
from enum import IntEnum
from functools import cache
from typing import TYPE_CHECKING

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32Timedelta, i64
from kio.static.protocol import Payload

if TYPE_CHECKING:
    from .connection import WireRequest


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DESCRIBE_ACLS = 29
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    INCREMENTAL_ALTER_CONFIGS = 44
    OFFSET_DELETE = 47
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    LIST_CONFIG_RESOURCES = 74


# api key -> (min version, max version), both inclusive.
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 12),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 10),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DESCRIBE_ACLS: (1, 3),  # v0 is gone from Kafka 4 (KIP-896)
    ApiKey.DESCRIBE_CONFIGS: (1, 4),  # v0 is gone from Kafka 4 (KIP-896)
    ApiKey.ALTER_CONFIGS: (0, 2),  # a group's settings (configs); others refused
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),  # as AlterConfigs
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),  # KIP-848 (consumer_groups)
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    ApiKey.LIST_CONFIG_RESOURCES: (0, 1),  # v0: ListClientMetricsResources (configs)
}

# Kafka's features (KIP-584) groupcoord has: name -> (lowest supported, highest supported,
# finalized level), which ``kafka-features describe`` shows. group.version 1 is KIP-848's
# consumer protocol, served (consumer_groups). Kafka's others (metadata, KRaft, transactions,
# share and streams groups) describe machinery groupcoord does not have: not announced.
FEATURES = {"group.version": (0, 1, 1)}
ZERO_MS = i32Timedelta.parse(datetime.timedelta(0))


def is_supported(api_key: int, api_version: int) -> bool:
    bounds = SUPPORTED_VERSIONS.get(api_key)  # type: ignore[call-overload]
    return bounds is not None and bounds[0] <= api_version <= bounds[1]


@cache
def request_class(api_key: int, api_version: int) -> type:
    """kio's request class for a supported (key, version); KeyError for any other pair."""
    if not is_supported(api_key, api_version):
        raise KeyError((api_key, api_version))
    return load_request_schema(api_key, api_version)


@cache
def response_class(api_key: int, api_version: int) -> type:
    """kio's response class for a supported (key, version); KeyError for any other pair."""
    if not is_supported(api_key, api_version):
        raise KeyError((api_key, api_version))
    return load_response_schema(api_key, api_version)


@cache
def reader(cls: type):
    return entity_reader(cls)


@cache
def writer(cls: type):
    return entity_writer(cls)


def request_is_flexible(api_key: int, api_version: int) -> bool:
    """Whether a request uses request header v2 (compact strings, tagged fields).

    ApiVersions is answered even at versions above our range (KIP-511), so its rule is spelled
    out: Kafka's schema makes v3 the first flexible version.
    """
    if api_key == ApiKey.API_VERSIONS:
        return api_version >= 3
    return request_class(api_key, api_version).__flexible__


def response_header_version(api_key: int, api_version: int) -> int:
    """1 (with tagged fields) for flexible requests, else 0; ApiVersions always gets 0 (KIP-511:
    a client that does not yet know our versions must be able to read the answer)."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if request_is_flexible(api_key, api_version) else 0


# Kafka's ApiVersionsRequest.SOFTWARE_NAME_VERSION_PATTERN, for v3+ client software fields.
_SOFTWARE_NAME_OR_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_versions_response(request: WireRequest) -> Payload:
    """Kafka's answer to an ApiVersions request: every supported range, at the request's version.

    Two errors, as Kafka's ``ApiVersionsRequest``: a version above ours is answered in v0 with
    UNSUPPORTED_VERSION and only ApiVersions' own range, so the client retries at our maximum
    (KIP-511); a v3+ request whose client software name or version is not of the form
    ``[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?`` gets INVALID_REQUEST and no ranges.
    """
    refusal = api_versions_refusal(request)
    return refusal if refusal is not None else api_versions_ranges(request.body_version)


def api_versions_refusal(request: WireRequest) -> Payload | None:
    """``api_versions_response``'s answer when it is one of the two errors, else None."""
    cls = response_class(ApiKey.API_VERSIONS, request.body_version)
    timing = {} if request.body_version == 0 else {"throttle_time": ZERO_MS}
    if request.unsupported_api_versions:
        low, high = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]
        item = _api_version_item(cls)
        return cls(
            error_code=ErrorCode.unsupported_version,
            api_keys=(item(api_key=ApiKey.API_VERSIONS, min_version=low, max_version=high),),
            **timing,
        )
    body = request.body
    if request.body_version >= 3 and not (
        _SOFTWARE_NAME_OR_VERSION.fullmatch(body.client_software_name)
        and _SOFTWARE_NAME_OR_VERSION.fullmatch(body.client_software_version)
    ):
        return cls(error_code=ErrorCode.invalid_request, api_keys=(), **timing)
    return None


def api_versions_ranges(version: int) -> Payload:
    """The ApiVersions answer at ``version`` listing every supported range (no error) and, from
    v3, the features (``FEATURES``; a supported range from 0 only from v4, as Kafka answers)."""
    cls = response_class(ApiKey.API_VERSIONS, version)
    timing = {} if version == 0 else {"throttle_time": ZERO_MS}
    item = _api_version_item(cls)
    features = {}
    if version >= 3:
        supported = nested_class(cls, "SupportedFeatureKey")
        finalized = nested_class(cls, "FinalizedFeatureKey")
        features = dict(
            supported_features=tuple(
                supported(name=name, min_version=low, max_version=high)
                for name, (low, high, _) in FEATURES.items()
                if low > 0 or version >= 4
            ),
            finalized_features_epoch=i64(0),  # they never change
            finalized_features=tuple(
                finalized(name=name, max_version_level=level, min_version_level=level)
                for name, (_, _, level) in FEATURES.items()
            ),
        )
    return cls(
        error_code=ErrorCode.none,
        api_keys=tuple(
            item(api_key=int(key), min_version=low, max_version=high)
            for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
        ),
        **timing,
        **features,
    )


def nested_class(cls: type, name: str) -> type:
    """A nested entity class (``"JoinGroupResponseMember"``) of the same version as ``cls``:
    kio defines each version's nested entities in the module of its request or response."""
    return getattr(sys.modules[cls.__module__], name)


def _api_version_item(response_cls: type) -> type:
    return nested_class(response_cls, "ApiVersion")
