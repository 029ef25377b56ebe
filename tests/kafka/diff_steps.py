"""The steps of the differential scenarios (test_differential.py), one constructor per
request: each fills in what a plain consumer would send (protocol type "consumer", the
subscription to T, the member's current id and generation), and a scenario overrides only what
it is about. Names ("G", "T"...) are placeholders for the run's fresh group ids and topics.
"""

from __future__ import annotations

from groupcoord.coordinator.group_config import SET
from groupcoord.wire import ApiKey
from tests.kafka.differential import (
    METADATA_FLAGS,
    Step,
    consumer_member_id,
    epoch,
    generation,
    member_id,
    name,
    owned,
    subscription,
)

G, G2, G3, T, T2 = name("G"), name("G2"), name("G3"), name("T"), name("T2")
CONSUMER = "consumer"
SESSION_MS = 10_000
REBALANCE_MS = 3_000
# A member that does not rejoin is removed after the rebalance timeout: short, to keep it quick.
SHORT_REBALANCE_MS = 800


def join(label: str, member: str, *, background: bool = False, group: str = "G", **fields):
    body = dict(
        group_id=name(group),
        member_id=member_id(),
        protocol_type=CONSUMER,
        protocols=[{"name": "range", "metadata": subscription(T)}],
        session_timeout=SESSION_MS,
        rebalance_timeout=REBALANCE_MS,
    )
    return Step(label, member, ApiKey.JOIN_GROUP, body | fields, group, background)


def sync(label: str, member: str, *, background: bool = False, **fields):
    body = dict(
        group_id=G,
        generation_id=generation(),
        member_id=member_id(),
        protocol_type=CONSUMER,
        protocol_name="range",
        assignments=[],
    )
    return Step(label, member, ApiKey.SYNC_GROUP, body | fields, background=background)


def heartbeat(label: str, member: str, **fields):
    body = dict(group_id=G, generation_id=generation(), member_id=member_id())
    return Step(label, member, ApiKey.HEARTBEAT, body | fields)


def leave(label: str, member: str, members: list[dict], group: str = "G"):
    body = dict(group_id=name(group), member_id=member_id(), members=members)
    return Step(label, member, ApiKey.LEAVE_GROUP, body, group)


def commit(
    label: str,
    member: str,
    offsets: dict[str, dict[int, int]],
    metadata: str | None = None,
    **fields,
):
    body = dict(
        group_id=G,
        generation_id_or_member_epoch=generation(),
        member_id=member_id(),
        topics=[
            {
                "name": name(topic),
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": o,
                        "committed_metadata": f"m{o}" if metadata is None else metadata,
                    }
                    for p, o in parts.items()
                ],
            }
            for topic, parts in offsets.items()
        ],
    )
    return Step(label, member, ApiKey.OFFSET_COMMIT, body | fields)


def fetch(label: str, groups: dict[str, dict[str, list[int]] | None], require_stable=False):
    """OffsetFetch of {group: {topic: partitions} or None (all)}; one group unless v8+."""

    def topics(asked):
        if asked is None:
            return None
        return [{"name": name(t), "partition_indexes": ps} for t, ps in asked.items()]

    (first, first_topics), *_ = groups.items()
    body = dict(
        group_id=name(first),
        topics=topics(first_topics),
        groups=[{"group_id": name(g), "topics": topics(t)} for g, t in groups.items()],
        require_stable=require_stable,
    )
    return Step(label, "admin", ApiKey.OFFSET_FETCH, body, first)


def describe(label: str, *groups: str, operations: bool = False):
    """DescribeGroups of ``groups``; ``operations``: asking for their authorized operations."""
    body = dict(groups=[name(g) for g in groups], include_authorized_operations=operations)
    return Step(label, "admin", ApiKey.DESCRIBE_GROUPS, body)


def list_groups(label: str, states: list[str] | None = None, types: list[str] | None = None):
    body = dict(states_filter=states or [], types_filter=types or [])
    return Step(label, "admin", ApiKey.LIST_GROUPS, body)


def find_coordinator(label: str, key_type: int):
    body = dict(key=G, key_type=key_type, coordinator_keys=[G])
    return Step(label, "admin", ApiKey.FIND_COORDINATOR, body)


def delete_groups(label: str, *groups: str):
    return Step(label, "admin", ApiKey.DELETE_GROUPS, dict(groups_names=[name(g) for g in groups]))


def offset_delete(label: str, partitions: dict[str, list[int]], group: str = "G"):
    body = dict(
        group_id=name(group),
        topics=[
            {"name": name(t), "partitions": [{"partition_index": p} for p in ps]}
            for t, ps in partitions.items()
        ],
    )
    return Step(label, "admin", ApiKey.OFFSET_DELETE, body, group)


def create_topics(label: str, topics: dict[str, int]):
    body = dict(
        topics=[
            {
                "name": name(t),
                "num_partitions": n,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            for t, n in topics.items()
        ],
        timeout=10_000,
        validate_only=False,
    )
    return Step(label, "admin", ApiKey.CREATE_TOPICS, body)


def metadata(label: str, *topics: str, operations: bool = False):
    """Metadata of ``topics``; ``operations``: asking for the topics' and the cluster's
    authorized operations."""
    body = dict(topics=[{"name": name(t), "topic_id": None} for t in topics], **METADATA_FLAGS)
    if operations:
        body |= dict(
            include_cluster_authorized_operations=True, include_topic_authorized_operations=True
        )
    return Step(label, "admin", ApiKey.METADATA, body)


def consumer_heartbeat(label: str, member: str, **fields):
    """A KIP-848 consumer's full heartbeat: its id and epoch, subscription to T, the
    server-side assignor left to the group, the partitions it owns."""
    body = dict(
        group_id=G,
        member_id=consumer_member_id(),
        member_epoch=epoch(),
        instance_id=None,
        rack_id=None,
        rebalance_timeout=REBALANCE_MS,
        subscribed_topic_names=[T],
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=owned(),
    )
    return Step(label, member, ApiKey.CONSUMER_GROUP_HEARTBEAT, body | fields)


def consumer_describe(label: str, *groups: str, operations: bool = False):
    """ConsumerGroupDescribe of ``groups``; ``operations`` as ``describe``'s."""
    body = dict(group_ids=[name(g) for g in groups], include_authorized_operations=operations)
    return Step(label, "admin", ApiKey.CONSUMER_GROUP_DESCRIBE, body)


def member(of: str, instance: str | None = None, reason: str | None = None) -> dict:
    return {"member_id": member_id(of), "group_instance_id": instance, "reason": reason}


def describe_configs(label: str, *resources: tuple, synonyms: bool = False):
    """DescribeConfigs of ``resources``, each (resource type, name, configuration keys or None
    for all); ``synonyms``: asking for each entry's synonyms."""
    body = dict(
        resources=[
            {"resource_type": kind, "resource_name": named, "configuration_keys": keys}
            for kind, named, keys in resources
        ],
        include_synonyms=synonyms,
        include_documentation=False,
    )
    return Step(label, "admin", ApiKey.DESCRIBE_CONFIGS, body)


def describe_cluster(label: str, *, operations: bool = False, endpoint_type: int = 1):
    """DescribeCluster; ``operations``: asking for the cluster's authorized operations;
    ``endpoint_type`` (v1+): 1 brokers, 2 controllers (KIP-919)."""
    body = dict(
        include_cluster_authorized_operations=operations,
        endpoint_type=endpoint_type,
        include_fenced_brokers=True,
    )
    return Step(label, "admin", ApiKey.DESCRIBE_CLUSTER, body)


def describe_acls(label: str, **filters):
    """DescribeAcls with every filter element ANY (or null) but ``filters``."""
    body = dict(
        resource_type_filter=1,
        resource_name_filter=None,
        pattern_type_filter=1,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    return Step(label, "admin", ApiKey.DESCRIBE_ACLS, body | filters)


def alter_configs(label: str, *resources: tuple, validate_only: bool = True):
    """IncrementalAlterConfigs of ``resources``, each (resource type, name, {setting: value})
    set, or {setting: (operation, value)} for another operation (DELETE, APPEND...);
    ``validate_only`` (the default) so that Kafka's settings stay as they are."""

    def config(key: str, value) -> dict:
        operation, value = value if isinstance(value, tuple) else (SET, value)
        return {"name": key, "config_operation": operation, "value": value}

    body = dict(
        resources=[
            {
                "resource_type": kind,
                "resource_name": named,
                "configs": [config(key, value) for key, value in settings.items()],
            }
            for kind, named, settings in resources
        ],
        validate_only=validate_only,
    )
    return Step(label, "admin", ApiKey.INCREMENTAL_ALTER_CONFIGS, body)


def replace_configs(label: str, *resources: tuple, validate_only: bool = False):
    """AlterConfigs of ``resources``, each (resource type, name, {setting: value}): the
    resource's whole set of settings replaced by these."""
    body = dict(
        resources=[
            {
                "resource_type": kind,
                "resource_name": named,
                "configs": [{"name": key, "value": value} for key, value in settings.items()],
            }
            for kind, named, settings in resources
        ],
        validate_only=validate_only,
    )
    return Step(label, "admin", ApiKey.ALTER_CONFIGS, body)
