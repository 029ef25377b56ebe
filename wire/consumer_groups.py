"""KIP-848 on the wire: ConsumerGroupHeartbeat (api key 68) and ConsumerGroupDescribe (69),
translated between kio's messages and the core's (``coordinator.consumer_messages``).

Kafka's schemas name a partition's topic by topic id; the core names it by topic name. The
caller passes the topic catalog's ids (``{topic: uuid}``), and the mapping goes both ways here:

- A heartbeat's owned partitions whose topic id the catalog does not know are left out: Kafka's
  coordinator compares owned partitions with the member's assignment by topic id, and an id no
  topic has can never match one, so it changes nothing there either.
- An assignment or description naming a topic the catalog no longer has (deleted meanwhile) is
  answered without that topic: the client could not map its id to a name either.
- The request header's version goes to the core as ``api_version``: v0 lets the coordinator
  generate a member id, v1 requires the client's own (the core applies the rule).
- ConsumerGroupDescribe v1 adds each member's type (Kafka's ``MemberType``): CLASSIC (0) for a
  classic member served inside the consumer group, CONSUMER (1) for the others.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta
from kio.static.protocol import Payload

from groupcoord.coordinator import consumer_messages as cm

from . import apis
from .apis import ApiKey
from .connection import WireRequest
from .translate import build, millis

# Kafka's MemberType of a member that speaks the classic protocol, and of one that speaks the
# consumer (KIP-848) protocol.
CLASSIC_MEMBER_TYPE = 0
CONSUMER_MEMBER_TYPE = 1


def consumer_heartbeat_to_core(
    request: WireRequest, topic_ids: Mapping[str, uuid.UUID], *, client_host: str = ""
) -> cm.ConsumerGroupHeartbeatRequest:
    """The core's heartbeat for a decoded ConsumerGroupHeartbeat (topic ids -> names)."""
    body = request.body
    names = {topic_id: name for name, topic_id in topic_ids.items()}
    owned = body.topic_partitions
    return cm.ConsumerGroupHeartbeatRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=millis(body.rebalance_timeout),
        subscribed_topic_names=(
            None if body.subscribed_topic_names is None else list(body.subscribed_topic_names)
        ),
        subscribed_topic_regex=getattr(body, "subscribed_topic_regex", None),
        server_assignor=body.server_assignor,
        topic_partitions=(
            None
            if owned is None
            else [
                cm.ConsumerGroupHeartbeatTopicPartitions(names[tp.topic_id], list(tp.partitions))
                for tp in owned
                if tp.topic_id in names
            ]
        ),
        client_id=request.client_id or "",
        client_host=client_host,
        api_version=request.api_version,
    )


def consumer_heartbeat_from_core(
    request: WireRequest,
    response: cm.ConsumerGroupHeartbeatResponse,
    topic_ids: Mapping[str, uuid.UUID],
) -> Payload:
    """kio's ConsumerGroupHeartbeat response for the core's answer (topic names -> ids)."""
    cls = apis.response_class(ApiKey.CONSUMER_GROUP_HEARTBEAT, request.api_version)
    assignment = None
    if response.assignment is not None:
        tp_cls = apis.nested_class(cls, "TopicPartitions")
        assignment = apis.nested_class(cls, "Assignment")(
            topic_partitions=tuple(
                tp_cls(topic_id=topic_ids[tp.topic], partitions=tuple(tp.partitions))
                for tp in response.assignment.topic_partitions
                if tp.topic in topic_ids
            )
        )
    return build(
        cls,
        error_code=ErrorCode(int(response.error_code)),
        error_message=response.error_message,
        member_id=response.member_id,
        member_epoch=response.member_epoch,
        heartbeat_interval=_ms(response.heartbeat_interval_ms),
        assignment=assignment,
    )


def consumer_describe_to_core(request: WireRequest) -> cm.ConsumerGroupDescribeRequest:
    body = request.body
    return cm.ConsumerGroupDescribeRequest(
        group_ids=list(body.group_ids),
        include_authorized_operations=body.include_authorized_operations,
    )


def consumer_describe_from_core(
    request: WireRequest,
    response: cm.ConsumerGroupDescribeResponse,
    topic_ids: Mapping[str, uuid.UUID],
) -> Payload:
    """kio's ConsumerGroupDescribe response for the core's answer (topic names -> ids)."""
    cls = apis.response_class(ApiKey.CONSUMER_GROUP_DESCRIBE, request.api_version)
    tp_cls = apis.nested_class(cls, "TopicPartitions")
    assignment_cls = apis.nested_class(cls, "Assignment")
    member_cls = apis.nested_class(cls, "Member")
    group_cls = apis.nested_class(cls, "DescribedGroup")

    def assignment(a: cm.ConsumerGroupDescribeAssignment):
        return assignment_cls(
            topic_partitions=tuple(
                tp_cls(
                    topic_id=topic_ids[tp.topic_name],
                    topic_name=tp.topic_name,
                    partitions=tuple(tp.partitions),
                )
                for tp in a.topic_partitions
                if tp.topic_name in topic_ids
            )
        )

    return build(
        cls,
        groups=tuple(
            build(
                group_cls,
                error_code=ErrorCode(int(g.error_code)),
                error_message=g.error_message,
                group_id=g.group_id,
                group_state=g.group_state,
                group_epoch=g.group_epoch,
                assignment_epoch=g.assignment_epoch,
                assignor_name=g.assignor_name,
                members=tuple(
                    build(
                        member_cls,
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=tuple(m.subscribed_topic_names),
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        assignment=assignment(m.assignment),
                        target_assignment=assignment(m.target_assignment),
                        member_type=(
                            CLASSIC_MEMBER_TYPE if m.uses_classic_protocol else CONSUMER_MEMBER_TYPE
                        ),
                    )
                    for m in g.members
                ),
                authorized_operations=g.authorized_operations,
            )
            for g in response.groups
        ),
    )


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))
