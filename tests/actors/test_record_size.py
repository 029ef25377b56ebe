"""One size function (issue #9 item 3): the Shard's group-record limit, the log's record limit and
bootstrap's log configuration agree on what the size of a record is.

Ray-free: a real Shard (through the core's harness) and a real PartitionLog on disk, configured
by bootstrap's ``log_config_for``. Sizes are measured with storage's own encoder, i.e. the bytes
the log stores for a record.
"""

from __future__ import annotations

import asyncio

import pytest

from groupcoord.actors.bootstrap import log_config_for
from groupcoord.actors.runtime import PartitionRuntime
from groupcoord.coordinator import (
    CoordinatorConfig,
    Errors,
    GroupState,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    Shard,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from groupcoord.coordinator.records import GroupMetadataKey, Record
from groupcoord.coordinator.routing import partition_for
from groupcoord.storage import LogConfig, encode_record, open_partition_log
from tests.core.harness import GROUP, Harness

LIMIT_BYTES = 2 * 1024 * 1024  # above storage's default max_record_bytes, so bootstrap uses it


def _stored_bytes(record: Record) -> int:
    return len(encode_record(record))


def _leader_ready_to_sync(harness: Harness) -> tuple[str, int]:
    """One member in CompletingRebalance; returns (member id, generation)."""
    request_id = harness.join()
    harness.advance_until_answered([request_id])
    response = harness.reply(request_id)
    assert response.error == Errors.NONE
    return response.member_id, response.generation_id


def _assignment_for_record_bytes(harness: Harness, leader: str, target_bytes: int) -> bytes:
    """An assignment that makes the group record the leader's sync writes exactly
    ``target_bytes`` long (msgpack's bin32 header is fixed-size in this range)."""
    group = harness.shard.group(GROUP)
    probe = b"\x00" * (1 << 20)
    size = _stored_bytes(Record(GroupMetadataKey(GROUP), group.metadata_value({leader: probe})))
    assignment = b"\x00" * (len(probe) + target_bytes - size)
    record = Record(GroupMetadataKey(GROUP), group.metadata_value({leader: assignment}))
    assert _stored_bytes(record) == target_bytes
    return assignment


@pytest.mark.parametrize("extra_bytes", [0, 1])
def test_group_record_at_the_limit_is_appended_and_one_byte_more_is_refused(tmp_path, extra_bytes):
    harness = Harness(group_metadata_max_bytes=LIMIT_BYTES)
    log = open_partition_log(str(tmp_path), log_config_for(harness.config))
    try:
        log.load_into(Shard(0, 2))
        leader, generation = _leader_ready_to_sync(harness)
        log.append(harness.records)
        written = len(harness.records)
        assignment = _assignment_for_record_bytes(harness, leader, LIMIT_BYTES + extra_bytes)
        request_id = harness.sync(leader, generation, {leader: assignment})
        response = harness.reply(request_id)
        new_records = harness.records[written:]
        # Whatever the Shard accepted, the log appends (else: a failed partition, reloaded
        # into the same state, failing again on the client's retry of the same sync).
        log.append(new_records)
        if extra_bytes == 0:
            # Accepted by the Shard and, the same size by the same measure, by the log.
            assert response.error == Errors.NONE
            assert harness.state() == GroupState.STABLE
            assert [_stored_bytes(r) for r in new_records] == [LIMIT_BYTES]
        else:
            # Refused by the Shard (Kafka's storeGroup failure: UNKNOWN_SERVER_ERROR to the
            # sync, then a rebalance); no record, so nothing can fail the append.
            assert response.error == Errors.UNKNOWN_SERVER_ERROR
            assert new_records == []
            assert harness.state() == GroupState.PREPARING_REBALANCE
            assert harness.shard.group(GROUP).persisted is None
    finally:
        log.close()


def test_the_widest_offset_record_the_shard_accepts_is_appended(tmp_path):
    # Python counts characters, the log bytes: 4-byte characters in the group id and topic
    # (which the old hand estimate of bootstrap counted as 3) make the largest offset record.
    config = CoordinatorConfig(string_max_chars=200_000, group_metadata_max_bytes=1_000_000)
    group_id = next(
        g
        for g in ("\U0010ffff" * (200_000 - 1) + c for c in "abcdefgh")
        if partition_for(g, 1) == 0
    )
    shard = Shard(0, 1, config)
    shard.on_loaded(0)
    step = shard.handle(
        0,
        1,
        OffsetCommitRequest(
            group_id,
            -1,
            "",
            [
                OffsetCommitRequestPartition(
                    "\U0010ffff" * 200_000,
                    0,
                    2**63 - 1,
                    2**31 - 1,
                    "\uffff" * config.offset_metadata_max_bytes,
                )
            ],
        ),
    )
    assert [p.error for p in step.replies[0][1].partitions] == [Errors.NONE]
    assert _stored_bytes(step.records[0]) > 1 << 20  # beyond storage's default limit
    log = open_partition_log(str(tmp_path), log_config_for(config))
    try:
        log.load_into(Shard(0, 1, config))
        log.append(step.records)
    finally:
        log.close()


def test_an_explicit_log_config_below_the_largest_record_is_refused():
    config = CoordinatorConfig(group_metadata_max_bytes=LIMIT_BYTES)
    with pytest.raises(ValueError, match="max_record_bytes"):
        log_config_for(
            config, LogConfig(max_record_bytes=LIMIT_BYTES - 1, max_batch_bytes=2 * LIMIT_BYTES)
        )
    assert log_config_for(
        config, LogConfig(max_record_bytes=LIMIT_BYTES, max_batch_bytes=2 * LIMIT_BYTES)
    )


def test_a_group_record_over_the_limit_does_not_fail_the_partition(tmp_path):
    # The crash loop of issue #9 item 3, end to end: a group record whose *value* fits
    # group_metadata_max_bytes but whose record (with its 1,000-character key) does not.
    config = CoordinatorConfig(
        group_metadata_max_bytes=LIMIT_BYTES, group_initial_rebalance_delay_ms=0
    )
    group_id = "g" * 1_000
    fatal: list = []

    async def scenario():
        runtime = PartitionRuntime(
            0,
            1,
            config,
            lambda: open_partition_log(str(tmp_path), log_config_for(config)),
            on_fatal=fatal.append,
        )
        runtime.start()
        while runtime.state == "loading":
            await asyncio.sleep(0.005)
        joined = await runtime.handle(
            JoinGroupRequest(
                group_id,
                "",
                "consumer",
                [JoinGroupRequestProtocol("range", b"")],
                10_000,
                10_000,
                require_known_member_id=False,
            )
        )
        assert joined.error == Errors.NONE
        assignment = b"\x00" * (LIMIT_BYTES - 500)  # the value fits, the record does not
        synced = await runtime.handle(
            SyncGroupRequest(
                group_id,
                joined.generation_id,
                joined.member_id,
                [SyncGroupRequestAssignment(joined.member_id, assignment)],
            )
        )
        other = await runtime.handle(
            OffsetCommitRequest("other", -1, "", [OffsetCommitRequestPartition("t", 0, 5)])
        )
        state = runtime.state
        await runtime.close()
        return synced.error, other.partitions[0].error, state

    synced, other, state = asyncio.run(scenario())
    assert (synced, other, state) == (Errors.UNKNOWN_SERVER_ERROR, Errors.NONE, "serving")
    assert fatal == []
