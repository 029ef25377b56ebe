"""The public API as the README shows it, for ``tools/typecheck.py`` (mypy); never run.

Each function is a program a user might write. mypy checks every call against the public
annotations, so an annotation that does not allow documented use fails ``make test``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from groupcoord.actors import (
    AdminClient,
    EndOffsetsFn,
    GroupDescription,
    GroupMember,
    HttpConfig,
    LagWindowConfig,
    RebalanceListener,
    SyncGroupMember,
    WireConfig,
    connect,
    end_offsets_source,
    start,
    stop,
)
from groupcoord.coordinator import (
    CoordinatorConfig,
    Errors,
    GroupState,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetFetchRequest,
    Shard,
    Step,
    TopicPartition,
    partition_for,
)
from groupcoord.storage import LogConfig, PartitionLog, load, open_partition_log, read_log
from groupcoord.wire import (
    ApiKey,
    Connection,
    Node,
    ProtocolError,
    api_versions_response,
    find_coordinator_response,
    request_to_core,
    response_from_core,
)


def core_shard() -> list[object]:
    shard = Shard(partition=0, num_partitions=1, config=CoordinatorConfig())
    shard.on_loaded(now_ms=0)
    step: Step = shard.handle(
        0,
        "req-1",
        JoinGroupRequest(
            "orders",
            "",
            "consumer",
            [JoinGroupRequestProtocol("range", b"")],
            session_timeout_ms=10_000,
            rebalance_timeout_ms=30_000,
        ),
    )
    commit = OffsetCommitRequest("orders", -1, "", [OffsetCommitRequestPartition("events", 0, 42)])
    fetch = OffsetFetchRequest("orders", [TopicPartition("events", 0)])
    replies = [response for _, response in step.replies]
    replies += [r for _, r in shard.handle(1, "req-2", commit).replies]
    replies += [r for _, r in shard.handle(2, "req-3", fetch).replies]
    deadline: int | None = shard.next_deadline_ms()
    wake: int | None = shard.next_wake_ms()  # never after it: a poll there may fire nothing
    if wake is not None:
        shard.on_timer(wake)
    if deadline is not None:
        shard.on_timer(deadline)
    assert partition_for("orders", 50) >= 0 and int(Errors.NONE) == 0
    assert GroupState.STABLE.value == "Stable"
    return replies


def storage_log(directory: str) -> int:
    log: PartitionLog = open_partition_log(directory, LogConfig(fsync_policy="always"))
    with log:
        end: int = log.end_offset
    return end + sum(1 for _ in read_log(directory))


async def consumer() -> None:
    deployment = connect("groupcoord")
    member = GroupMember(
        deployment.router,
        "my-group",
        ["events"],
        topic_partitions={"events": 8},
        assignors=("cooperative-sticky", "range"),
        group_instance_id=None,
        listener=RebalanceListener(),
    )
    member.start()
    partitions = await member.wait_assigned(timeout_s=30)
    await member.commit({("events", p): 42 for _, p in partitions})
    member.commit_async({("events", p): 43 for _, p in partitions})
    committed = await member.committed()
    assert all(offset >= 0 for offset in committed.values())
    await member.close()


async def kip848_consumer() -> None:
    deployment = connect("groupcoord")
    member = GroupMember(
        deployment.router,
        "my-group",
        ["events"],
        group_protocol="consumer",
        server_assignor="uniform",
        listener=RebalanceListener(),
    )
    member.start()
    partitions = await member.wait_assigned(timeout_s=30)
    await member.commit({tp: 42 for tp in partitions})
    await member.close()
    blocking = SyncGroupMember(
        deployment.router, "other-group", group_protocol="consumer", topic_regex="events-.*"
    )
    owned: frozenset[tuple[str, int]] = blocking.wait_assigned(timeout_s=30)
    blocking.commit({tp: 1 for tp in owned})
    blocking.close()


async def operator() -> list[GroupDescription]:
    deployment = start(num_partitions=4, log_dir="/tmp/logs", namespace="groupcoord")
    admin = AdminClient(deployment.router)
    listed = await admin.list_groups(states=["Stable"])
    described = await admin.describe_groups([g.group_id for g in listed], with_offsets=True)
    ends: EndOffsetsFn = end_offsets_source("file:/tmp/ends.json")
    lagging = await admin.describe_groups(["my-group"], end_offsets=ends)
    lags: list[int | None] = [o.lag for d in lagging for o in d.offsets]
    assert all(lag is None or lag >= 0 for lag in lags)
    await admin.reset_offsets("my-group", to_latest=ends, partitions=[("events", 0)])
    await admin.reset_offsets("my-group", to_offset=0)
    await admin.delete_groups(["my-group"])
    stop(deployment)
    return list(described)


def blocking_consumer() -> None:
    deployment = connect("groupcoord")
    member = SyncGroupMember(
        deployment.router, "my-group", ["events"], topic_partitions=lambda topic: 8
    )
    for topic, partition in member.wait_assigned(timeout_s=30):
        member.commit({(topic, partition): 1})
    member.close()


def storage_load(directory: str) -> int:
    shard = Shard(partition=0, num_partitions=1, config=CoordinatorConfig())
    summary = load(directory, shard, progress=lambda p: print(p.phase, p.records))
    with open_partition_log(directory) as log:
        log.load_into(Shard(partition=0, num_partitions=1), progress=None)
        log.maybe_snapshot()
    return summary.records


def kafka_listeners() -> str | None:
    deployment = start(
        num_partitions=2,
        log_dir="/tmp/logs",
        wire=WireConfig(host="127.0.0.1", bootstrap_port=9092, partition_ports=19092),
    )
    deployment.wait_ready(60.0)
    bootstrap: str | None = deployment.kafka
    stop(deployment)
    return bootstrap


def live_lag_http() -> str | None:
    def end_offsets(asked: Sequence[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
        return {tp: 1_000 for tp in asked}

    http = HttpConfig(
        port=8000,
        end_offsets=end_offsets,
        lag_windows=LagWindowConfig(window=15, min_distance_ms=1_000),
    )
    deployment = start(num_partitions=2, log_dir="/tmp/logs", http=http)
    address: str | None = deployment.http  # Burrow's API: http://<address>/v3/kafka
    stop(deployment)
    return address


def blocking_committer() -> dict[tuple[str, int], int]:
    deployment = connect("groupcoord")
    member = SyncGroupMember(
        deployment.router, "my-group", ["events"], topic_partitions={"events": 8}
    )
    partitions = member.wait_assigned(timeout_s=30)
    member.commit({("events", p): 42 for _, p in partitions})
    member.commit_async({tp: 43 for tp in partitions}, callback=lambda exc: print(exc))
    committed = member.committed([("events", 0)])
    member.close()
    return committed


def _node_of(group_id: str) -> Node | None:
    return Node(node_id=0, host="127.0.0.1", port=9092)


def wire_gateway(shard: Shard, data: bytes) -> bytes:
    connection = Connection(max_frame_bytes=1 << 20)
    out = b""
    for item in connection.receive_data(data):
        if isinstance(item, ProtocolError):
            return out
        if item.api_key == ApiKey.API_VERSIONS:
            out += connection.send_response(item, api_versions_response(item))
        elif item.api_key == ApiKey.FIND_COORDINATOR:
            out += connection.send_response(item, find_coordinator_response(item, _node_of))
        else:
            step = shard.handle(0, item.correlation_id, request_to_core(item, client_host="h"))
            for _, response in step.replies:
                out += connection.send_response(item, response_from_core(item, response))
    return out
