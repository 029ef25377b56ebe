"""The public API as the README shows it, for ``tools/typecheck.py`` (mypy); never run.

Each function is a program a user might write. mypy checks every call against the public
annotations, so an annotation that does not allow documented use fails ``make test``.
"""

from __future__ import annotations

from groupcoord.actors import (
    AdminClient,
    GroupDescription,
    GroupMember,
    RebalanceListener,
    SyncGroupMember,
    connect,
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
from groupcoord.storage import LogConfig, PartitionLog, open_partition_log, read_log


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


async def operator() -> list[GroupDescription]:
    deployment = start(num_partitions=4, log_dir="/tmp/logs", namespace="groupcoord")
    admin = AdminClient(deployment.router)
    listed = await admin.list_groups(states=["Stable"])
    described = await admin.describe_groups([g.group_id for g in listed], with_offsets=True)
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
