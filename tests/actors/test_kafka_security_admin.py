"""Admin requests to a secured listener (one partition in this process, no Ray): what a
principal's ACLs let it see. DescribeGroups and Metadata name the operations a principal may do,
a group's configs need DescribeConfigs on it (AlterConfigs to change them), and only super
users may list the ACLs.
"""

from __future__ import annotations

import struct

import pytest
from confluent_kafka import KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_acls.v3.response import DescribeAclsResponse
from kio.schema.describe_configs.v4.request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from kio.schema.describe_configs.v4.response import DescribeConfigsResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from ..wire.frames import request_frame, split_response
from .kafka_security import (
    connect,
    consumer_for,
    read_answer,
    sasl_config,
    scram_login,
)

pytestmark = pytest.mark.usefixtures("free_clients")


def test_described_groups_and_topics_carry_the_operations_the_acls_grant(sasl_plaintext):
    """Asked for them, DescribeGroups answers the operations the caller's ACLs grant on each
    group, Kafka's bitfield that librdkafka reads: Read (with Describe) for alice, Describe for
    bob, every group operation for the super user; Metadata those on each topic."""
    served, address = sasl_plaintext
    admin = sasl_config(address, "admin", "SCRAM-SHA-512")
    consumer = consumer_for(admin, "app-described")
    consumer.commit(offsets=[TopicPartition("events", 0, 1)], asynchronous=False)
    consumer.close()

    def operations(user: str) -> set[str]:
        client = AdminClient(sasl_config(address, user, "SCRAM-SHA-512"))
        futures = client.describe_consumer_groups(
            ["app-described"], include_authorized_operations=True, request_timeout=10
        )
        described = futures["app-described"].result()
        return {op.name for op in described.authorized_operations}

    assert operations("alice") == {"READ", "DESCRIBE"}
    assert operations("bob") == {"DESCRIBE"}
    assert operations("admin") == {
        "READ",
        "DESCRIBE",
        "DELETE",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
    }

    def topic_operations(user: str) -> set[str]:
        client = AdminClient(sasl_config(address, user, "SCRAM-SHA-512"))
        futures = client.describe_topics(
            TopicCollection(["events"]), include_authorized_operations=True, request_timeout=10
        )
        return {op.name for op in futures["events"].result().authorized_operations}

    # No topic ACLs here: changing a topic needs a super user, nothing else is refused.
    assert topic_operations("alice") == {"READ", "WRITE", "DESCRIBE", "DESCRIBE_CONFIGS"}
    assert topic_operations("admin") == {
        "READ",
        "WRITE",
        "CREATE",
        "DELETE",
        "ALTER",
        "DESCRIBE",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
    }


def test_a_groups_configs_need_describe_configs_on_the_group(sasl_plaintext):
    """DescribeConfigs answers a topic's and a broker's configs to any authenticated principal
    (groupcoord has no topic ACLs), a group's only where the ACLs grant DescribeConfigs on it
    (All, or a super user): alice, with Read on app- groups, is refused that one resource."""
    served, address = sasl_plaintext
    asked = (
        (32, "app-configs", None),
        (2, "events", None),
        (4, "0", ("group.max.size",)),
    )
    request = DescribeConfigsRequest(
        resources=tuple(
            DescribeConfigsResource(
                resource_type=i8(kind), resource_name=name, configuration_keys=keys
            )
            for kind, name, keys in asked
        ),
        include_synonyms=False,
        include_documentation=False,
    )

    def described(user: str) -> list[tuple[ErrorCode, int]]:
        with connect(address) as sock:
            scram_login(sock, user)
            sock.sendall(request_frame(request))
            frame = read_answer(sock)
        _, body = split_response(
            struct.pack(">i", len(frame)) + frame, DescribeConfigsResponse, header_version=1
        )
        return [(result.error_code, len(result.configs)) for result in body.results]

    assert described("alice") == [
        (ErrorCode.group_authorization_failed, 0),
        (ErrorCode.none, 0),
        (ErrorCode.none, 1),
    ]
    assert described("admin") == [(ErrorCode.none, 3), (ErrorCode.none, 0), (ErrorCode.none, 1)]


def test_a_groups_settings_change_only_with_alter_configs_on_the_group(sasl_plaintext):
    """IncrementalAlterConfigs of a group needs AlterConfigs on it (All, or a super user), as
    in Kafka: alice, with Read on app- groups, is refused and changes nothing; admin's change
    is kept by the catalog and shown to him."""
    served, address = sasl_plaintext
    interval = "consumer.heartbeat.interval.ms"

    def alter(user: str):  # the result: the client is alive while it waits for it
        client = AdminClient(sasl_config(address, user, "SCRAM-SHA-512"))
        entry = ConfigEntry(interval, "6000", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(
            ConfigResource.Type.GROUP, "app-tuned", incremental_configs=[entry]
        )
        (future,) = client.incremental_alter_configs([resource], request_timeout=20).values()
        return future.result(timeout=30)

    with pytest.raises(KafkaException, match="GROUP_AUTHORIZATION_FAILED"):
        alter("alice")
    assert "app-tuned" not in served.catalog.group_configs()
    assert alter("admin") is None
    assert served.catalog.group_configs()["app-tuned"] == {interval: 6000}


def test_acls_are_listed_to_super_users(sasl_plaintext):
    """librdkafka's describe_acls reads the ACL file's rules as Kafka bindings (one per
    operation) for a super user; anyone else is refused CLUSTER_AUTHORIZATION_FAILED."""
    served, address = sasl_plaintext
    every = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )

    def listed(user: str):
        client = AdminClient(sasl_config(address, user, "SCRAM-SHA-512"))
        return client.describe_acls(every, request_timeout=10).result()

    found = {
        (b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.operation.name)
        for b in listed("admin")
    }
    assert found == {
        ("GROUP", "app-", "PREFIXED", "User:alice", "READ"),
        ("GROUP", "app-", "PREFIXED", "User:bob", "DESCRIBE"),
    }
    # librdkafka answers an empty list for a refused DescribeAcls: the error, read raw.
    refused = DescribeAclsRequest(
        resource_type_filter=i8(1),
        resource_name_filter=None,
        pattern_type_filter=i8(1),
        principal_filter=None,
        host_filter=None,
        operation=i8(1),
        permission_type=i8(1),
    )
    with connect(address) as sock:
        scram_login(sock, "alice")
        sock.sendall(request_frame(refused))
        frame = read_answer(sock)
    _, body = split_response(
        struct.pack(">i", len(frame)) + frame, DescribeAclsResponse, header_version=1
    )
    assert (body.error_code, body.resources) == (ErrorCode.cluster_authorization_failed, ())
