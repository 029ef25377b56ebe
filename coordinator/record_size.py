"""The size of a record: one definition for the core's limits, the log's limit and bootstrap.

A record is stored as its *envelope*, the msgpack array ``[record_type, key, value]`` (the type
number from ``RECORD_TYPES``; key and value encoded as maps keyed by field name; nil for a
tombstone). ``encode_record`` is that encoding and ``record_bytes`` its length: the Shard bounds
group records with it (``group_metadata_max_bytes``), the log refuses a record over
``max_record_bytes`` by it, and bootstrap sizes ``max_record_bytes`` with ``largest_record_bytes``.
If these three measured differently, a record could pass the Shard and fail the append, and the
partition would fail again on every retry of the same request.

Pure computation (msgspec, no I/O): storage builds its batches from these same envelopes.
"""

from __future__ import annotations

import msgspec

from .config import CoordinatorConfig
from .records import (
    RECORD_TYPE_OF,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)

_encoder = msgspec.msgpack.Encoder()

INT32_MAX, INT64_MAX = 2**31 - 1, 2**63 - 1
# The most UTF-8 bytes one Python character can take (code points above U+FFFF), and one
# UTF-16 unit (U+0800..U+FFFF: 3 bytes for 1 unit; above U+FFFF: 4 bytes for 2 units).
_WIDEST_CHAR = "\U0010ffff"
_WIDEST_UNIT_CHAR = "\uffff"


def envelope(record: Record) -> tuple:
    """The envelope of a well-typed record: ``(record_type, key, value)``.
    KeyError for a key type that has no record type number."""
    return (RECORD_TYPE_OF[type(record.key)], record.key, record.value)


def encode_record(record: Record) -> bytes:
    """The bytes the log stores for ``record`` (its encoded envelope)."""
    return _encoder.encode(envelope(record))


def record_bytes(record: Record) -> int:
    """The size of ``record``: the length of its encoded envelope."""
    return len(encode_record(record))


# An offset record's bytes besides its three strings, at their largest: the widest numbers, and
# msgpack's 5-byte string headers where an empty string has a 1-byte one.
_OFFSET_RECORD_FIXED_BYTES = (
    record_bytes(
        Record(
            OffsetCommitKey("", "", INT32_MAX),
            OffsetCommitValue(INT64_MAX, INT32_MAX, "", INT64_MAX, INT64_MAX),
        )
    )
    + 3 * 4
)


def offset_records_bytes_at_most(group_id: str, count: int, chars: int) -> int:
    """An upper bound of the summed ``record_bytes`` of ``count`` offset records of one group
    whose topics and metadata hold ``chars`` characters in all (``validation.commit_chars``),
    without encoding them (a character is at most 4 UTF-8 bytes): limits check this first and
    measure exactly only when it is over."""
    return count * (_OFFSET_RECORD_FIXED_BYTES + 4 * len(group_id)) + 4 * chars


def largest_record_bytes(config: CoordinatorConfig) -> int:
    """The largest record a Shard running ``config`` can write.

    Group records with members are refused above ``group_metadata_max_bytes``; the others are
    bounded by the request checks: an offset record by ``string_max_chars`` (group id, topic)
    and ``offset_metadata_max_bytes`` (metadata, in UTF-16 units), an Empty group record by
    ``string_max_chars`` (group id, protocol type). Each is built at its widest and measured.
    """
    chars, units = config.string_max_chars, config.offset_metadata_max_bytes
    longest = _WIDEST_CHAR * chars
    # Metadata: at most ``chars`` characters and ``units`` UTF-16 units. The most bytes is a
    # vertex of that polygon: all 3-byte characters, all 4-byte ones, or the mix filling both.
    candidates = [_WIDEST_UNIT_CHAR * min(chars, units), _WIDEST_CHAR * min(chars, units // 2)]
    if chars <= units <= 2 * chars:
        candidates.append(_WIDEST_CHAR * (units - chars) + _WIDEST_UNIT_CHAR * (2 * chars - units))
    metadata = max(candidates, key=lambda s: len(s.encode("utf-8")))
    offset = Record(
        OffsetCommitKey(longest, longest, INT32_MAX),
        OffsetCommitValue(INT64_MAX, INT32_MAX, metadata, INT64_MAX, INT64_MAX),
    )
    empty_group = Record(
        GroupMetadataKey(longest), GroupMetadataValue(longest, INT32_MAX, None, None, INT64_MAX, ())
    )
    return max(config.group_metadata_max_bytes, record_bytes(offset), record_bytes(empty_group))
