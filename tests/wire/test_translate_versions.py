"""Every version of every core API: any request kio can encode translates into a well-typed core
request (``messages.validate``), and a core answer translates into a response that encodes and
reads back with the same errors, at that version."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from groupcoord.coordinator import messages as core
from groupcoord.coordinator.errors import Errors
from groupcoord.wire import (
    SUPPORTED_VERSIONS,
    ApiKey,
    Connection,
    apis,
    offset_fetch_from_core,
    offset_fetch_to_core,
    request_to_core,
    response_from_core,
)

from .frames import request_frame, split_response

CORE_APIS = (
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP,
    ApiKey.OFFSET_COMMIT,
    ApiKey.DESCRIBE_GROUPS,
    ApiKey.LIST_GROUPS,
    ApiKey.DELETE_GROUPS,
    ApiKey.OFFSET_DELETE,
    ApiKey.OFFSET_FETCH,
)
PAIRS = [
    (key, version)
    for key in CORE_APIS
    for version in range(SUPPORTED_VERSIONS[key][0], SUPPORTED_VERSIONS[key][1] + 1)
]
E = Errors.REBALANCE_IN_PROGRESS


def sample_answer(core_request):
    """A core answer to ``core_request`` that carries ``E`` wherever the core can put an error."""
    match core_request:
        case core.JoinGroupRequest():
            return core.JoinGroupResponse(
                E,
                4,
                "consumer",
                "range",
                "m-1",
                False,
                "m-1",
                [core.JoinGroupResponseMember("m-1", None, b"meta")],
            )
        case core.SyncGroupRequest():
            return core.SyncGroupResponse(E, "consumer", "range", b"assignment")
        case core.HeartbeatRequest():
            return core.HeartbeatResponse(E)
        case core.LeaveGroupRequest():
            return core.LeaveGroupResponse(
                Errors.NONE,
                [
                    core.LeaveGroupResponseMember(m.member_id, m.group_instance_id, E)
                    for m in core_request.members
                ],
            )
        case core.OffsetCommitRequest():
            return core.OffsetCommitResponse(
                [
                    core.OffsetCommitResponsePartition(o.topic, o.partition, E)
                    for o in core_request.offsets
                ]
            )
        case core.DescribeGroupsRequest():
            return core.DescribeGroupsResponse(
                [
                    core.DescribedGroup(E, group_id, "Dead", "", "", [], -1, "")
                    for group_id in core_request.group_ids
                ]
            )
        case core.ListGroupsRequest():
            return core.ListGroupsResponse(E, [])
        case core.DeleteGroupsRequest():
            return core.DeleteGroupsResponse(
                [core.DeletableGroupResult(g, E) for g in core_request.group_ids]
            )
        case core.OffsetDeleteRequest():
            return core.OffsetDeleteResponse(
                E,
                [
                    core.OffsetDeleteResponsePartition(p.topic, p.partition, E)
                    for p in core_request.partitions
                ],
            )
        case core.OffsetFetchRequest():
            return core.OffsetFetchResponse(E, [])


def errors_in(response) -> set[ErrorCode]:
    """Every error code anywhere in a kio response."""
    found = set()
    for name in getattr(response, "__dataclass_fields__", ()):
        value = getattr(response, name)
        if isinstance(value, ErrorCode):
            found.add(value)
        elif isinstance(value, tuple):
            for item in value:
                found |= errors_in(item)
    return found


@pytest.mark.parametrize("key, version", PAIRS, ids=[f"{k.name}-v{v}" for k, v in PAIRS])
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_any_request_translates_and_its_answer_encodes(key, version, data):
    body = data.draw(st.from_type(apis.request_class(key, version)))
    conn = Connection()
    (request,) = conn.receive_data(request_frame(body))
    if key == ApiKey.OFFSET_FETCH:
        core_requests = offset_fetch_to_core(request)
        for r in core_requests:
            core.validate(r)
        response = offset_fetch_from_core(request, [sample_answer(r) for r in core_requests])
        expect_error = bool(core_requests) and (
            version >= 2 or any(t.partition_indexes for t in body.topics or ())
        )
    else:
        core_request = core.validate(request_to_core(request))
        response = response_from_core(request, sample_answer(core_request))
        expect_error = not (
            (key == ApiKey.LEAVE_GROUP and version >= 3 and not body.members)
            or (key == ApiKey.OFFSET_COMMIT and not core_request.offsets)
            or (
                key in (ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS)
                and not (core_request.group_ids)
            )
        )
    flexible = apis.request_is_flexible(key, version)
    _, decoded = split_response(
        conn.send_response(request, response),
        apis.response_class(key, version),
        header_version=1 if flexible else 0,
    )
    assert decoded == response
    assert errors_in(decoded) <= {ErrorCode.none, ErrorCode.rebalance_in_progress}
    assert (ErrorCode.rebalance_in_progress in errors_in(decoded)) == expect_error
