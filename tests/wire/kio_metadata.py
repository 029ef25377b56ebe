"""Metadata's answer built as kio's entities, as groupcoord built it before ``fast_metadata``:
kept here as the reference the direct encoder is held to (tests/wire/test_fast_metadata.py)."""

import uuid
from collections.abc import Mapping, Sequence

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.static.protocol import Payload

from groupcoord.wire import apis
from groupcoord.wire.builders import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ZERO_TOPIC_ID,
    Node,
    answered_operations,
)
from groupcoord.wire.connection import EncodedResponse, WireRequest
from groupcoord.wire.translate import build


def kio_metadata_response(
    request: WireRequest,
    *,
    brokers: Sequence[Node],
    leader_id: int,
    partitions: Mapping[str, int],
    cluster_id: str | None = None,
    topic_ids: Mapping[str, uuid.UUID] | None = None,
    operations: tuple[int, int] = (AUTHORIZED_OPERATIONS_OMITTED, AUTHORIZED_OPERATIONS_OMITTED),
) -> Payload:
    """Answer Metadata from the topic catalog ``partitions`` ({topic: partition count}) and
    ``topic_ids`` ({topic: id}; a topic without one has the zero id): every partition is led
    by ``leader_id``; unknown topics get UNKNOWN_TOPIC_OR_PARTITION, a topic asked by an
    unknown id (v10+) UNKNOWN_TOPIC_ID (nothing is created). No topics asked (v0: an empty
    list; v1+: null) means all of them. ``operations``, the (topic, cluster) authorized
    operations of the caller (``acl.catalog_authorized_operations``), are answered where the
    request asks for them (v8+; the cluster's up to v10), on every topic, as Kafka does."""
    cls = apis.response_class(request.api_key, request.api_version)
    version = request.api_version
    topic_operations, cluster_operations = answered_operations(request, operations)
    broker_cls = apis.nested_class(cls, "MetadataResponseBroker")
    topic_cls = apis.nested_class(cls, "MetadataResponseTopic")
    partition_cls = apis.nested_class(cls, "MetadataResponsePartition")
    ids = topic_ids or {}
    names_by_id = {topic_id: name for name, topic_id in ids.items()}
    asked = request.body.topics
    if asked is None or (version == 0 and not asked):
        names: list[str | None] = sorted(partitions)
    else:
        # A topic asked by id only (v10+) has a null name.
        names = [
            t.name if t.name is not None else names_by_id.get(getattr(t, "topic_id", None))
            for t in asked
        ]

    def topic(name: str | None):
        count = partitions.get(name) if name is not None else None
        if count is None:
            # A topic asked by an id no topic has: its name is null in the answer, which only
            # v12+ can say ("" before).
            error = (
                ErrorCode.unknown_topic_or_partition
                if name is not None
                else ErrorCode.unknown_topic_id
            )
            return build(
                topic_cls,
                error_code=error,
                topic_id=ZERO_TOPIC_ID,
                name=name if name is not None or version >= 12 else "",
                is_internal=False,
                partitions=(),
                topic_authorized_operations=topic_operations,
            )
        return build(
            topic_cls,
            error_code=ErrorCode.none,
            name=name,
            topic_id=ids.get(name, ZERO_TOPIC_ID),
            is_internal=False,
            partitions=tuple(
                build(
                    partition_cls,
                    error_code=ErrorCode.none,
                    partition_index=index,
                    leader_id=leader_id,
                    leader_epoch=-1,
                    replica_nodes=(leader_id,),
                    isr_nodes=(leader_id,),
                    offline_replicas=(),
                )
                for index in range(count)
            ),
            topic_authorized_operations=topic_operations,
        )

    return build(
        cls,
        brokers=tuple(
            build(broker_cls, node_id=b.node_id, host=b.host, port=b.port, rack=None)
            for b in brokers
        ),
        cluster_id=cluster_id,
        controller_id=leader_id,
        topics=tuple(topic(name) for name in names),
        cluster_authorized_operations=cluster_operations,
    )


def decoded(request: WireRequest, encoded: EncodedResponse) -> Payload:
    """kio's reading of an encoded Metadata answer to ``request`` (it must be read whole)."""
    cls = apis.response_class(request.api_key, request.api_version)
    body, size = entity_reader(cls)(encoded.body, 0)
    assert size == len(encoded.body)
    return body
