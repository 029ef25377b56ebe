"""Bad input through the actor surface gets errors; the actors stay up and keep serving."""

from __future__ import annotations

import pytest
import ray

from groupcoord.actors import stop
from groupcoord.coordinator import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    Errors,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetFetchRequest,
)

from .helpers import start_deployment


@pytest.fixture(scope="module")
def deployment(ray_session, tmp_path_factory):
    d = start_deployment(tmp_path_factory.mktemp("logs-bad"), "gc-bad", num_partitions=1)
    yield d
    stop(d)


def call(deployment, request):
    (handle,) = deployment.partitions()
    return ray.get(handle.handle.remote(request))


@pytest.mark.parametrize(
    "bad",
    [
        "junk",
        None,
        12,
        b"\x00" * 10,
        {"group_id": "g"},
        OffsetCommitRequest("g", "gen", "", []),
        OffsetFetchRequest(["g"], None),
        DescribeGroupsRequest("not-a-list"),
    ],
)
def test_ill_typed_requests_raise_value_error(deployment, bad):
    before = deployment.infos()[0]
    with pytest.raises(ValueError):
        call(deployment, bad)
    after = deployment.infos()[0]
    assert (after["pid"], after["epoch"], after["durable_records"]) == (
        before["pid"],
        before["epoch"],
        before["durable_records"],
    )


def test_huge_payloads_get_kafka_errors(deployment):
    pid = deployment.infos()[0]["pid"]
    huge = JoinGroupRequest(
        "g", "", "consumer", [JoinGroupRequestProtocol("range", b"x" * 3_000_000)], 10_000, 10_000
    )
    assert call(deployment, huge).error == Errors.INVALID_REQUEST
    for chars, error in (
        (10_000, Errors.OFFSET_METADATA_TOO_LARGE),
        (100_000, Errors.INVALID_REQUEST),
    ):  # over Kafka's int16 string
        metadata = OffsetCommitRequest(
            "g", -1, "", [OffsetCommitRequestPartition("t", 0, 1, -1, "m" * chars)]
        )
        assert call(deployment, metadata).partitions[0].error == error
    long_id = DescribeGroupsRequest(["g" * 100_000])
    assert call(deployment, long_id).groups[0].error == Errors.INVALID_GROUP_ID
    assert (
        call(
            deployment,
            OffsetCommitRequest("g", -1, "", [OffsetCommitRequestPartition("t", 0, 2**63)]),
        )
        .partitions[0]
        .error
        == Errors.INVALID_REQUEST
    )  # beyond Kafka's int64
    with pytest.raises(ValueError):  # beyond any encoding
        call(
            deployment,
            OffsetCommitRequest("g", -1, "", [OffsetCommitRequestPartition("t", 0, 2**70)]),
        )
    assert deployment.infos()[0]["pid"] == pid


def test_unknown_groups(deployment):
    assert call(deployment, DescribeGroupsRequest(["nobody"])).groups[0].group_state == "Dead"
    assert call(deployment, OffsetFetchRequest("nobody", None)).partitions == []
    assert (
        call(deployment, DeleteGroupsRequest(["nobody"])).results[0].error
        == Errors.GROUP_ID_NOT_FOUND
    )


def test_router_refuses_bad_arguments(deployment):
    router = deployment.router
    with pytest.raises(ValueError):
        ray.get(router.find_coordinator.remote(123))
    with pytest.raises(ValueError):
        ray.get(router.list_groups.remote("Stable"))
    partition, handle = ray.get(router.find_coordinator.remote("still-fine"))
    assert partition == 0
    assert (
        ray.get(handle.handle.remote(OffsetFetchRequest("still-fine", None))).error == Errors.NONE
    )
