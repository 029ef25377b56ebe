"""The Metadata answer, written straight from the topic catalog.

Metadata is the one answer whose size grows with the catalog: asked for every topic, it names
every partition, and the catalog holds up to ``catalog.MAX_CATALOG_PARTITIONS`` (200,000).
Built as kio's entities and written by kio's Python writer, an answer of 200,000 partitions
held a listener's event loop for 1-3 s on this project's 2-core machine (the live fuzzer's
stall). Every partition of the answer is the same but for its index (one leader, sole replica
and in-sync replica: ``builders``' module docstring), so each topic's partition array is one
``struct`` pack per partition here, and the whole answer about 20 times cheaper.

What the answer says (``metadata_response``): every partition led by ``leader_id``; unknown
topics get UNKNOWN_TOPIC_OR_PARTITION, a topic asked by an unknown id (v10+) UNKNOWN_TOPIC_ID
(nothing is created). No topics asked (v0: an empty list; v1+: null) means all of them.

The bytes follow Kafka's MetadataResponse schema, versions 0-12:

============================= ========= ==================================================
field                         versions  notes
============================= ========= ==================================================
throttle time                 3+
brokers: id, host, port       0+        rack (nullable) from v1
cluster id (nullable)         2+
controller id                 1+
topics: error, name           0+        name nullable from v12
  topic id                    10+       the zero uuid when unknown
  is internal                 1+
  partitions: error, index,   0+        leader epoch from v7, offline replicas from v5
  leader, replicas, isr
  topic authorized operations 8+
cluster authorized operations 8-10
============================= ========= ==================================================

From v9 the answer is flexible: compact (uvarint length + 1) arrays and strings, and an empty
tagged-field section after every entity. tests/wire/test_fast_metadata.py holds these bytes to
kio's writer for every version.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from kio.schema.errors import ErrorCode

from .apis import ApiKey
from .builders import AUTHORIZED_OPERATIONS_OMITTED, Node, answered_operations
from .connection import EncodedResponse, WireRequest
from .encoding import I16, I32, NO_TAGS, array_size, string

FLEXIBLE_FROM = 9
_NO_THROTTLE = I32.pack(0)
_ZERO_UUID = bytes(16)


def metadata_response(
    request: WireRequest,
    *,
    brokers: Sequence[Node],
    leader_id: int,
    partitions: Mapping[str, int],
    cluster_id: str | None = None,
    topic_ids: Mapping[str, uuid.UUID] | None = None,
    operations: tuple[int, int] = (AUTHORIZED_OPERATIONS_OMITTED, AUTHORIZED_OPERATIONS_OMITTED),
) -> EncodedResponse:
    """The encoded answer to the Metadata ``request`` from the topic catalog ``partitions``
    ({topic: partition count}) and ``topic_ids`` ({topic: id}; a topic without one has the
    zero id). ``operations``, the (topic, cluster) authorized operations of the caller
    (``acl.catalog_authorized_operations``), are answered where the request asks for them
    (v8+; the cluster's up to v10), on every topic, as Kafka does."""
    version = request.api_version
    topic_operations, cluster_operations = answered_operations(request, operations)
    ids = topic_ids or {}
    asked = request.body.topics
    if asked is None or (version == 0 and not asked):
        names: list[str | None] = sorted(partitions)
    else:
        names_by_id = {topic_id: name for name, topic_id in ids.items()}
        # A topic asked by id only (v10+) has a null name.
        names = [
            t.name if t.name is not None else names_by_id.get(getattr(t, "topic_id", None))
            for t in asked
        ]
    flexible = version >= FLEXIBLE_FROM
    out = [_NO_THROTTLE] if version >= 3 else []
    out.append(array_size(len(brokers), flexible))
    for broker in brokers:
        out.append(I32.pack(broker.node_id))
        out.append(string(broker.host, flexible))
        out.append(I32.pack(broker.port))
        if version >= 1:
            out.append(string(None, flexible))  # rack
        if flexible:
            out.append(NO_TAGS)
    if version >= 2:
        out.append(string(cluster_id, flexible))
    if version >= 1:
        out.append(I32.pack(leader_id))  # the controller, as Kafka's Metadata names it
    out.append(array_size(len(names), flexible))
    partition_entry = _partition_entry(version, leader_id)
    for name in names:
        count = partitions.get(name) if name is not None else None
        if count is None:
            # A topic asked by an id no topic has: its name is null in the answer, which only
            # v12+ can say ("" before).
            if name is None:
                error, name = ErrorCode.unknown_topic_id, None if version >= 12 else ""
            else:
                error = ErrorCode.unknown_topic_or_partition
            topic_id, count = None, 0
        else:
            error, topic_id = ErrorCode.none, ids.get(name)
        out.append(I16.pack(error))
        out.append(string(name, flexible))
        if version >= 10:
            out.append(_ZERO_UUID if topic_id is None else topic_id.bytes)
        if version >= 1:
            out.append(b"\0")  # is internal: never
        out.append(array_size(count, flexible))
        out.append(b"".join(map(partition_entry, range(count))))
        if version >= 8:
            out.append(I32.pack(topic_operations))
        if flexible:
            out.append(NO_TAGS)
    if 8 <= version <= 10:
        out.append(I32.pack(cluster_operations))
    if flexible:
        out.append(NO_TAGS)
    return EncodedResponse(ApiKey.METADATA, version, b"".join(out))


def _partition_entry(version: int, leader_id: int):
    """index -> one partition's bytes at ``version``: error none, led by ``leader_id``, its
    sole replica and in-sync replica, no offline replicas."""
    flexible = version >= FLEXIBLE_FROM
    one_node = array_size(1, flexible) + I32.pack(leader_id)
    epoch = I32.pack(-1) if version >= 7 else b""
    no_nodes = array_size(0, flexible) if version >= 5 else b""
    tail = I32.pack(leader_id) + epoch + one_node + one_node + no_nodes
    if flexible:
        tail += NO_TAGS
    head, pack_index = I16.pack(ErrorCode.none), I32.pack
    return lambda index: head + pack_index(index) + tail
