"""The direct Heartbeat, OffsetCommit, JoinGroup and SyncGroup encoders write exactly what kio's
writer writes for ``response_from_core``'s answer, at every supported version, for any core
answer."""

import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.coordinator import messages as core
from groupcoord.coordinator.errors import Errors
from groupcoord.wire import (
    SUPPORTED_VERSIONS,
    ApiKey,
    Connection,
    EncodedResponse,
    apis,
    fast_response,
    response_from_core,
)
from groupcoord.wire.connection import encode_response

from .frames import build_nested, request_frame

# Every field any version of the two requests has; each version keeps its own (``build``).
REQUEST_VALUES = dict(
    group_id="g",
    session_timeout=datetime.timedelta(seconds=10),
    rebalance_timeout=datetime.timedelta(seconds=10),
    protocol_type="consumer",
    protocols=(),
    assignments=(),
    generation_id=3,
    generation_id_or_member_epoch=3,
    member_id="m",
    group_instance_id=None,
    retention_time=datetime.timedelta(milliseconds=-1),
    topics=(),
)


def versions(key: ApiKey):
    low, high = SUPPORTED_VERSIONS[key]
    return range(low, high + 1)


def wire_request(key: ApiKey, version: int):
    body = build_nested(apis.request_class(key, version), REQUEST_VALUES)
    (request,) = Connection().receive_data(request_frame(body))
    return request


errors = st.sampled_from(list(Errors))
commit_partitions = st.lists(
    st.builds(
        core.OffsetCommitResponsePartition,
        topic=st.sampled_from(["events", "clicks", "ünïcode-tøpic", "x" * 300]),
        partition=st.integers(0, 2**31 - 1),
        error=errors,
    ),
    max_size=40,
)


names = st.sampled_from(["", "m-1", "ünïcode-mémber", "x" * 300])
join_answers = st.builds(
    core.JoinGroupResponse,
    error=errors,
    generation_id=st.integers(-(2**31), 2**31 - 1),
    protocol_type=st.none() | st.sampled_from(["consumer", ""]),
    protocol_name=st.none() | st.sampled_from(["range", "cooperative-sticky", ""]),
    leader=names,
    skip_assignment=st.booleans(),
    member_id=names,
    members=st.lists(
        st.builds(
            core.JoinGroupResponseMember,
            member_id=names,
            group_instance_id=st.none() | names,
            metadata=st.binary(max_size=300),
        ),
        max_size=20,
    ),
)
sync_answers = st.builds(
    core.SyncGroupResponse,
    error=errors,
    protocol_type=st.none() | st.sampled_from(["consumer", ""]),
    protocol_name=st.none() | st.sampled_from(["range", ""]),
    assignment=st.binary(max_size=300),
)


def assert_same_bytes(request, answer) -> None:
    fast = fast_response(request, answer)
    assert isinstance(fast, EncodedResponse)
    assert encode_response(request, fast) == encode_response(
        request, response_from_core(request, answer)
    )


@pytest.mark.parametrize("version", versions(ApiKey.HEARTBEAT))
def test_heartbeat_answers(version):
    request = wire_request(ApiKey.HEARTBEAT, version)
    for error in Errors:
        assert_same_bytes(request, core.HeartbeatResponse(error))


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_COMMIT))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(partitions=commit_partitions)
def test_offset_commit_answers(version, partitions):
    request = wire_request(ApiKey.OFFSET_COMMIT, version)
    assert_same_bytes(request, core.OffsetCommitResponse(partitions))


def test_other_answers_take_the_kio_path():
    request = wire_request(ApiKey.HEARTBEAT, 4)
    assert fast_response(request, core.LeaveGroupResponse(Errors.NONE, [])) is None
    fetch = wire_request(ApiKey.OFFSET_COMMIT, 9)
    assert fast_response(fetch, core.HeartbeatResponse(Errors.NONE)) is None


def test_an_encoded_answer_of_another_api_or_version_is_refused():
    conn = Connection()
    (request,) = conn.receive_data(
        request_frame(build_nested(apis.request_class(ApiKey.HEARTBEAT, 4), REQUEST_VALUES))
    )
    for wrong in (
        EncodedResponse(ApiKey.HEARTBEAT, 3, b"\0\0\0\0\0\0"),
        EncodedResponse(ApiKey.OFFSET_COMMIT, 4, b"\0\0\0\0\0\0"),
    ):
        with pytest.raises(ValueError, match="expected an answer to api 12 v4"):
            conn.send_response(request, wrong)
    right = fast_response(request, core.HeartbeatResponse(Errors.NONE))
    assert conn.send_response(request, right) == encode_response(request, right)


@pytest.mark.parametrize("version", versions(ApiKey.JOIN_GROUP))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=join_answers)
def test_join_group_answers(version, answer):
    assert_same_bytes(wire_request(ApiKey.JOIN_GROUP, version), answer)


@pytest.mark.parametrize("version", versions(ApiKey.SYNC_GROUP))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=sync_answers)
def test_sync_group_answers(version, answer):
    assert_same_bytes(wire_request(ApiKey.SYNC_GROUP, version), answer)


list_answers = st.builds(
    core.ListGroupsResponse,
    error=errors,
    groups=st.lists(
        st.builds(
            core.ListedGroup,
            group_id=names,
            protocol_type=st.sampled_from(["consumer", "", "connect"]),
            group_state=st.sampled_from(["Stable", "Empty", "PreparingRebalance", "Dead"]),
            group_type=st.sampled_from(["classic", "consumer"]),
        ),
        max_size=30,
    ),
)


@pytest.mark.parametrize("version", versions(ApiKey.LIST_GROUPS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=list_answers, types_filter=st.sampled_from([(), ("consumer",), ("Classic",)]))
def test_list_groups_answers(version, answer, types_filter):
    values = {"states_filter": (), "types_filter": types_filter}
    body = build_nested(apis.request_class(ApiKey.LIST_GROUPS, version), values)
    (request,) = Connection().receive_data(request_frame(body))
    assert_same_bytes(request, answer)
