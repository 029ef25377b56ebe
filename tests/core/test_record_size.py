"""The size of a record (coordinator/record_size.py): one function, used by the Shard's limit.

The log and bootstrap sides are tested with a real log in tests/actors/test_record_size.py and
tests/storage/test_record_size.py; the harness checks after every step of every scenario that no
record is larger than ``largest_record_bytes`` of the shard's config.
"""

import random

import pytest

from groupcoord.coordinator import (
    CoordinatorConfig,
    Errors,
    GroupState,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
)
from groupcoord.coordinator.record_size import (
    largest_record_bytes,
    offset_records_bytes_at_most,
    record_bytes,
)
from groupcoord.coordinator.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from groupcoord.coordinator.validation import commit_chars

from .harness import GROUP, PROTOCOLS, Harness


def test_record_bytes_counts_the_whole_envelope_not_just_the_value():
    value = OffsetCommitValue(5, -1, "meta", 7)
    record = Record(OffsetCommitKey("g" * 300, "t", 0), value)
    tombstone = Record(OffsetCommitKey("g" * 300, "t", 0), None)
    assert record_bytes(record) > record_bytes(tombstone) > 300


def test_largest_record_bytes_is_at_least_the_group_limit_and_the_widest_offset_record():
    config = CoordinatorConfig(
        string_max_chars=100, offset_metadata_max_bytes=150, group_metadata_max_bytes=1_000
    )
    widest = Record(
        OffsetCommitKey("\U0010ffff" * 100, "\U0010ffff" * 100, 2**31 - 1),
        OffsetCommitValue(
            2**63 - 1, 2**31 - 1, "\U0010ffff" * 50 + "\uffff" * 50, 2**63 - 1, 2**63 - 1
        ),
    )
    # 4-byte characters where they fit in 150 UTF-16 units and 100 characters: 50 of them,
    # and 50 3-byte ones; neither all-3-byte (300 bytes) nor all-4-byte (75 chars) is wider.
    assert largest_record_bytes(config) == record_bytes(widest) > 1_000
    assert largest_record_bytes(CoordinatorConfig(group_metadata_max_bytes=8 << 20)) == 8 << 20


def _stable_static(h: Harness):
    rid = h.join(instance_id="instance", protocols=PROTOCOLS)
    h.advance_until_answered([rid])
    response = h.reply(rid)
    h.sync(
        response.member_id,
        response.generation_id,
        {response.member_id: b"a"},
        instance_id="instance",
    )
    assert h.state() == GroupState.STABLE
    return response.member_id


def test_static_rejoin_whose_group_record_would_be_too_large_rebalances_and_writes_nothing():
    h = Harness(group_metadata_max_bytes=4_096)
    _stable_static(h)
    persisted, written = h.shard.group(GROUP).persisted, len(h.records)
    # Same protocol, bigger metadata: Kafka would store the group at once (spec §2.3.1), but
    # that record would be over the limit, so the Shard rebalances instead of writing it.
    generation = h.shard.group(GROUP).generation_id
    rid = h.join(instance_id="instance", protocols=[("range", b"x" * 5_000)])
    h.advance_until_answered([rid])  # a new join phase (its only member joined)
    response = h.reply(rid)
    assert response.error == Errors.NONE and response.generation_id == generation + 1
    assert h.state() == GroupState.COMPLETING_REBALANCE
    assert h.records[written:] == [] and h.shard.group(GROUP).persisted is persisted
    # The leader's sync of a record over the limit is refused, as any other.
    sync = h.sync(
        response.member_id,
        response.generation_id,
        {response.member_id: b""},
        instance_id="instance",
    )
    assert h.reply(sync).error == Errors.UNKNOWN_SERVER_ERROR
    assert all(type(r.key) is not GroupMetadataKey for r in h.records[written:])


def test_static_rejoin_within_the_limit_is_still_stored_at_once():
    h = Harness(group_metadata_max_bytes=4_096)
    _stable_static(h)
    written = len(h.records)
    rid = h.join(instance_id="instance", protocols=[("range", b"x" * 100)])
    assert h.reply(rid).error == Errors.NONE and h.state() == GroupState.STABLE
    assert [type(r.key) for r in h.records[written:]] == [GroupMetadataKey]


def _offset_records_bytes(h: Harness, partitions) -> int:
    return sum(
        record_bytes(
            Record(OffsetCommitKey(GROUP, t, p), OffsetCommitValue(7, -1, metadata, h.now, None))
        )
        for t, p, metadata in partitions
    )


@pytest.mark.parametrize("extra_bytes", [0, 1])
def test_offset_commit_size_limit_is_the_size_of_its_records(extra_bytes):
    # Metadata of 3-byte characters: a count of characters would see a third of the bytes.
    h = Harness(offset_commit_max_bytes=20_000)
    partitions = [("t", p, "\u20ac" * 1_250) for p in range(5)]
    pad = 20_000 + extra_bytes - _offset_records_bytes(h, partitions)
    partitions[4] = ("t", 4, "\u20ac" * 1_250 + "m" * pad)
    assert _offset_records_bytes(h, partitions) == 20_000 + extra_bytes
    errors = h.commit({(t, p): (7, -1, m) for t, p, m in partitions})
    if extra_bytes:
        assert set(errors.values()) == {Errors.INVALID_COMMIT_OFFSET_SIZE} and h.records == []
    else:
        assert set(errors.values()) == {Errors.NONE}
        assert sum(record_bytes(r) for r in h.records) == 20_000


def test_the_cheap_offset_record_bound_is_never_below_the_size():
    rng = random.Random(5)
    alphabet = ["a", "\u00e9", "\u20ac", "\U0001f600"]
    for _ in range(500):
        strings = [
            "".join(rng.choice(alphabet) for _ in range(rng.randrange(300))) for _ in range(3)
        ]
        record = Record(
            OffsetCommitKey(strings[0], strings[1], rng.choice([0, 2**31 - 1, -1])),
            OffsetCommitValue(
                rng.choice([0, 2**63 - 1, -(2**63)]),
                rng.choice([-1, 2**31 - 1]),
                strings[2],
                rng.choice([0, 2**63 - 1]),
                rng.choice([None, 2**64 - 1]),
            ),
        )
        bound = offset_records_bytes_at_most(strings[0], 1, len(strings[1]) + len(strings[2]))
        assert bound >= record_bytes(record)


def test_a_commits_bound_from_its_characters_is_never_below_its_records_size():
    rng = random.Random(6)
    for _ in range(200):
        group = "g" * rng.randrange(50)
        partitions = [
            OffsetCommitRequestPartition(
                "t\u20ac" * rng.randrange(20),
                p,
                2**63 - 1,
                -1,
                rng.choice([None, "", "m\U0001f600"]),
            )
            for p in range(rng.randrange(1, 30))
        ]
        request = OffsetCommitRequest(group, 1, "member", partitions, retention_time_ms=10)
        chars = commit_chars(request, CoordinatorConfig())
        assert chars == sum(len(p.topic) + len(p.committed_metadata or "") for p in partitions)
        records = [
            Record(
                OffsetCommitKey(group, p.topic, p.partition),
                OffsetCommitValue(
                    p.committed_offset, -1, p.committed_metadata or "", 2**62, 2**63 - 1
                ),
            )
            for p in partitions
        ]
        bound = offset_records_bytes_at_most(group, len(partitions), chars)
        assert bound >= sum(record_bytes(r) for r in records)
