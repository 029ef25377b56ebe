"""Requests at the actor boundary: type checks, and error responses of the right shape.

The trust boundary of every actor call is ``groupcoord.coordinator.messages.validate``: it
returns the request if it is a well-typed groupcoord request and raises ``ValueError`` otherwise.
``error_response`` answers a request as a whole with one error, where the Shard is not asked.
"""

from __future__ import annotations

from groupcoord.coordinator import consumer_messages as cm
from groupcoord.coordinator import messages as m
from groupcoord.coordinator.errors import Errors


def error_response(request, error: Errors):
    """The response Kafka would send for ``request`` failing as a whole with ``error``."""
    kind = type(request)
    if kind is m.JoinGroupRequest:
        return m.JoinGroupResponse(error, -1, None, None, "", False, request.member_id, [])
    if kind is m.SyncGroupRequest:
        return m.SyncGroupResponse(error, None, None, b"")
    if kind is m.HeartbeatRequest:
        return m.HeartbeatResponse(error)
    if kind is m.LeaveGroupRequest:
        return m.LeaveGroupResponse(error, [])
    if kind is m.OffsetCommitRequest:
        return m.OffsetCommitResponse(
            [m.OffsetCommitResponsePartition(p.topic, p.partition, error) for p in request.offsets]
        )
    if kind is m.OffsetFetchRequest:
        return m.OffsetFetchResponse(error, [])
    if kind is m.OffsetDeleteRequest:
        return m.OffsetDeleteResponse(error, [])
    if kind is m.DescribeGroupsRequest:
        return m.DescribeGroupsResponse(
            [m.DescribedGroup(error, g, "", "", "", [], -1, "") for g in request.group_ids]
        )
    if kind is m.ListGroupsRequest:
        return m.ListGroupsResponse(error, [])
    if kind is m.DeleteGroupsRequest:
        return m.DeleteGroupsResponse([m.DeletableGroupResult(g, error) for g in request.group_ids])
    if kind is cm.ConsumerGroupHeartbeatRequest:
        return cm.ConsumerGroupHeartbeatResponse(error)
    if kind is cm.ConsumerGroupDescribeRequest:
        return cm.ConsumerGroupDescribeResponse(
            [
                cm.DescribedConsumerGroup(error, None, g, "", -1, -1, "", [])
                for g in request.group_ids
            ]
        )
    raise ValueError(f"not a groupcoord request: {kind.__name__}")


def response_error(response) -> Errors:
    """The error a response carries as a whole (the first partition's or group's if none)."""
    error = _error_of(response)
    if error is not None:
        return error
    for name in ("partitions", "groups", "results"):
        items = getattr(response, name, None)
        if items:
            return _error_of(items[0])
    return Errors.NONE


def _error_of(item) -> Errors | None:
    # The classic messages say ``error``; KIP-848's, as Kafka's schemas, ``error_code``.
    error = getattr(item, "error", None)
    return getattr(item, "error_code", None) if error is None else error
