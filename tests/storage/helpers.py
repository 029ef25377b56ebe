"""Shared by the storage tests and the crash-test writer subprocess.

``record_at(offset)`` is a deterministic record per log offset, so any reader can check that
the record stored at an offset is exactly the one written there.
"""

from __future__ import annotations

from groupcoord.coordinator import Shard
from groupcoord.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)

GROUPS = 7


def record_at(offset: int) -> Record:
    group = f"group-{offset % GROUPS}"
    kind = offset % 101
    if kind == 0:  # now and then a group record
        member = MemberMetadataValue(
            f"m-{offset}",
            None,
            "client",
            "/10.0.0.1",
            500,
            300,
            b"sub" * (offset % 5),
            b"asg" * (offset % 3),
        )
        return Record(
            GroupMetadataKey(group),
            GroupMetadataValue("consumer", offset, "range", f"m-{offset}", offset, (member,)),
        )
    if kind == 50:  # and a group tombstone
        return Record(GroupMetadataKey(group), None)
    key = OffsetCommitKey(group, f"topic-{offset % 3}", offset % 11)
    if kind % 17 == 0:  # and offset tombstones
        return Record(key, None)
    return Record(
        key, OffsetCommitValue(offset, offset % 4, "m" * (offset % 40), 1_700_000_000_000 + offset)
    )


def records_between(start: int, end: int) -> list[Record]:
    return [record_at(offset) for offset in range(start, end)]


def state_of(records) -> dict:
    """The durable state replaying ``records`` gives (the reference every load is checked
    against)."""
    shard = Shard(0, 1)
    for record in records:
        shard.replay(record)
    return shard.durable_state()


def loaded_state(log, **kwargs) -> tuple[dict, object]:
    shard = Shard(0, 1)
    summary = log.load_into(shard, **kwargs)
    return shard.durable_state(), summary
