"""``Shard.restore`` (the snapshot fast path) gives exactly the state that replaying records
gives."""

import pytest

from groupcoord.coordinator import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    Shard,
)

from .harness import GROUP, Harness, replayed_shard


def _compacted(records):
    """Latest value per key, as a snapshot would hold it, grouped by group id."""
    latest = {}
    for record in records:
        latest[record.key] = record.value
    groups = {}
    for key, value in latest.items():
        metadata, offsets = groups.setdefault(key.group, [None, {}])
        if type(key) is GroupMetadataKey:
            groups[key.group][0] = value
        elif value is not None:
            offsets[(key.topic, key.partition)] = value
    return groups


def _scenario() -> Harness:
    h = Harness()
    ids, gen = h.join_stable(2)
    h.commit({("t", 0): 5, ("t", 1): 7}, member_id=ids[0], generation=gen)
    h.commit({("u", 0): 1}, group_id="group-0")  # a simple group
    h.leave(ids[1])
    h.commit({("t", 0): 9}, member_id=ids[0], generation=gen)
    return h


def test_restore_equals_replay():
    h = _scenario()
    replayed = replayed_shard(h.shard, h.records)
    restored = Shard(partition=0, num_partitions=2, config=h.config)
    for group_id, (metadata, offsets) in _compacted(h.records).items():
        restored.restore(group_id, metadata, offsets)
    assert restored.durable_state() == replayed.durable_state() == h.shard.durable_state()
    for group in restored.groups():
        twin = replayed.group(group.group_id)
        assert (group.state, group.generation_id, group.leader_id, list(group.members)) == (
            twin.state,
            twin.generation_id,
            twin.leader_id,
            list(twin.members),
        )


def test_restore_then_replay_tail_keeps_later_records():
    h = _scenario()
    cut = len(h.records) // 2
    shard = Shard(partition=0, num_partitions=2, config=h.config)
    for group_id, (metadata, offsets) in _compacted(h.records[:cut]).items():
        shard.restore(group_id, metadata, offsets)
    for record in h.records[cut:]:
        shard.replay(record)
    assert shard.durable_state() == h.shard.durable_state()


def test_restore_only_while_loading():
    h = Harness()
    with pytest.raises(ValueError, match="loading"):
        h.shard.restore(GROUP, None, {("t", 0): OffsetCommitValue(1)})
    assert h.shard.group(GROUP) is None


def test_restore_of_offsets_only_group_after_tombstoned_metadata():
    shard = Shard(partition=0, num_partitions=2)
    shard.replay(Record(OffsetCommitKey(GROUP, "t", 0), OffsetCommitValue(3)))
    shard.restore(GROUP, None, {("t", 1): OffsetCommitValue(4)})
    assert set(shard.group(GROUP).offsets) == {("t", 0), ("t", 1)}
