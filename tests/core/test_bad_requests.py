"""Hostile requests (hypothesis): always an error code or a normal answer, never an exception,
and the shard stays consistent (replay equivalence is checked after every step)."""

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.coordinator import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    LeaveGroupRequest,
    ListGroupsRequest,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
    TopicPartition,
)

from .harness import GROUP, Harness

HUGE = "x" * 40_000
strings = st.one_of(
    st.sampled_from(
        ["", GROUP, "group-0", HUGE, "\ud800", "é-grp", "😀", "consumer", "range", "member"]
    ),
    st.text(max_size=12),
)
member_ids = st.one_of(strings, st.sampled_from(["@leader", "@follower", "@pending"]))
ints = st.one_of(
    st.sampled_from(
        [-1, 0, 1, 9, 10, 500, 2**31 - 1, 2**31, -(2**31) - 1, 2**63, -(2**63) - 1, 600_001]
    ),
    st.integers(-(2**70), 2**70),
)
blobs = st.one_of(st.just(b""), st.binary(max_size=16), st.just(b"\x00" * 2_000_000))
optional = lambda s: st.one_of(st.none(), s)  # noqa: E731

protocols = st.lists(st.builds(JoinGroupRequestProtocol, strings, blobs), max_size=3)
requests = st.one_of(
    st.builds(
        JoinGroupRequest,
        strings,
        member_ids,
        strings,
        protocols,
        ints,
        ints,
        optional(strings),
        strings,
        strings,
        st.booleans(),
        optional(strings),
    ),
    st.builds(
        SyncGroupRequest,
        strings,
        ints,
        member_ids,
        st.lists(st.builds(SyncGroupRequestAssignment, member_ids, blobs), max_size=3),
        optional(strings),
        optional(strings),
        optional(strings),
    ),
    st.builds(HeartbeatRequest, strings, ints, member_ids, optional(strings)),
    st.builds(
        LeaveGroupRequest,
        strings,
        st.lists(
            st.builds(MemberIdentity, member_ids, optional(strings), optional(strings)), max_size=3
        ),
    ),
    st.builds(
        OffsetCommitRequest,
        strings,
        ints,
        member_ids,
        st.lists(
            st.builds(OffsetCommitRequestPartition, strings, ints, ints, ints, optional(strings)),
            max_size=3,
        ),
        optional(strings),
        ints,
    ),
    st.builds(
        OffsetFetchRequest,
        strings,
        optional(st.lists(st.builds(TopicPartition, strings, ints), max_size=3)),
        st.booleans(),
    ),
    st.builds(
        OffsetDeleteRequest, strings, st.lists(st.builds(TopicPartition, strings, ints), max_size=3)
    ),
    st.builds(DescribeGroupsRequest, st.lists(strings, max_size=3)),
    st.builds(ListGroupsRequest, st.lists(strings, max_size=2)),
    st.builds(DeleteGroupsRequest, st.lists(strings, max_size=3)),
)


def real_ids(request, ids):
    """Swap placeholder member ids for live ones, so some requests reach deep code paths."""
    fields = {}
    for name in request.__struct_fields__:
        value = getattr(request, name)
        if isinstance(value, str) and value in ids:
            fields[name] = ids[value]
        elif isinstance(value, list):
            fields[name] = [real_ids(v, ids) if isinstance(v, msgspec.Struct) else v for v in value]
    return msgspec.structs.replace(request, **fields) if fields else request


def error_codes(response):
    for name in response.__struct_fields__:
        value = getattr(response, name)
        if name == "error":
            yield value
        elif isinstance(value, list):
            for item in value:
                if hasattr(item, "__struct_fields__"):
                    yield from error_codes(item)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(requests, st.integers(0, 2_000)), min_size=1, max_size=6))
def test_hostile_requests_get_error_codes_not_exceptions(batch):
    h = Harness()
    (leader, follower), gen = h.join_stable(2)
    h.commit({("topic", 0): 5}, leader, gen)
    pending = h.reply(h.join(require_known=True)).member_id
    ids = {"@leader": leader, "@follower": follower, "@pending": pending}
    for request, advance_ms in batch:
        h.advance(advance_ms)
        request_id = h.send(real_ids(request, ids))
        response = h.reply(request_id)
        if response is not None:
            assert all(isinstance(code, Errors) for code in error_codes(response))


def test_empty_group_id_is_invalid_for_membership_apis_even_when_cached():
    # spec §2.2: OffsetCommit/OffsetFetch/Describe/Delete accept "" (so a simple commit can
    # create the group ""), but JoinGroup, SyncGroup, Heartbeat, LeaveGroup and OffsetDelete
    # must still answer INVALID_GROUP_ID for it.
    h = Harness()
    assert h.commit({("t", 0): 1}, group_id="") == {("t", 0): Errors.NONE}
    assert h.shard.group("") is not None
    join = h.reply(h.join(group_id=""))
    assert join.error == Errors.INVALID_GROUP_ID
    assert h.heartbeat("m", 0, group_id="") == Errors.INVALID_GROUP_ID
    assert h.reply(h.sync("m", 0, group_id="")).error == Errors.INVALID_GROUP_ID
    assert h.leave("m", group_id="").error == Errors.INVALID_GROUP_ID
    assert (
        h.call(OffsetDeleteRequest("", [TopicPartition("t", 0)])).error == Errors.INVALID_GROUP_ID
    )
    assert h.committed(group_id="") == {("t", 0): 1}  # fetch still allowed
