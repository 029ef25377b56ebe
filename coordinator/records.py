"""Durable records: the `__consumer_offsets` key/value pairs (spec §7.2, DESIGN.md "Records").

A ``Record(key, value)`` with ``value=None`` is a tombstone. Every change to durable state is one
of these, and ``Shard.replay`` is the only code that turns them into state.

Evolution rule (msgspec): fields are only appended, each with a default, so an old reader decodes
a new record and a new reader decodes an old one. ``RECORD_TYPES`` gives each key type the
number that the storage envelope carries (Kafka's key versions: 1 = offset, 2 = group, 3-8 =
KIP-848's consumer-group records of ``consumer_records``), so a reader that meets a number it does
not know skips the record.
"""

from __future__ import annotations

import msgspec

from .consumer_records import CONSUMER_RECORD_TYPES


class OffsetCommitKey(msgspec.Struct, frozen=True):
    group: str
    topic: str
    partition: int


class OffsetCommitValue(msgspec.Struct, frozen=True):
    offset: int
    leader_epoch: int = -1  # -1: none
    metadata: str = ""
    commit_timestamp_ms: int = 0
    expire_timestamp_ms: int | None = None  # None (or < 0): no explicit expiry


class GroupMetadataKey(msgspec.Struct, frozen=True):
    group: str


class MemberMetadataValue(msgspec.Struct, frozen=True):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # metadata of the group's selected protocol
    assignment: bytes


class GroupMetadataValue(msgspec.Struct, frozen=True):
    protocol_type: str  # "" when unset
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = -1  # -1: unknown
    members: tuple[MemberMetadataValue, ...] = ()


class Record(msgspec.Struct, frozen=True, gc=False):
    # Untracked by the cyclic collector (gc=False): a commit's records outlive its answer
    # (queued, then unfolded in the log), and tracked they made a partition's collections
    # scan them; a record cannot be in a cycle (frozen, built from frozen parts).
    # tests/core/test_records_untracked.py.
    # ``key`` is also any key type of ``consumer_records`` (its value: the matching value type).
    key: OffsetCommitKey | GroupMetadataKey
    value: OffsetCommitValue | GroupMetadataValue | None


# record type number (in the storage envelope) -> (key type, value type)
RECORD_TYPES: dict[int, tuple[type, type]] = {
    1: (OffsetCommitKey, OffsetCommitValue),
    2: (GroupMetadataKey, GroupMetadataValue),
    **CONSUMER_RECORD_TYPES,
}
RECORD_TYPE_OF: dict[type, int] = {key: number for number, (key, _) in RECORD_TYPES.items()}
