"""The log measures a record with the core's size function (coordinator/record_size.py): a
one-record append stores exactly a batch header, a one-byte array header and ``record_bytes``,
and the log's ``max_record_bytes`` admits a record of exactly that size and refuses one more."""

from __future__ import annotations

import os

import pytest

from groupcoord.coordinator.record_size import record_bytes
from groupcoord.coordinator.records import OffsetCommitKey, OffsetCommitValue, Record
from groupcoord.storage import HEADER_BYTES, LogConfig, open_partition_log
from groupcoord.storage.config import RecordTooLargeError
from groupcoord.storage.segments import list_segments

from .helpers import record_at


def _segment_bytes(path: str) -> int:
    return sum(os.path.getsize(segment.path) for segment in list_segments(path))


def test_a_one_record_append_stores_exactly_record_bytes_plus_framing(tmp_path):
    log = open_partition_log(str(tmp_path))
    try:
        for offset in range(0, 404, 3):  # offsets, tombstones and group records
            record = record_at(offset)
            before = _segment_bytes(str(tmp_path))
            log.append([record])
            assert _segment_bytes(str(tmp_path)) - before == HEADER_BYTES + 1 + record_bytes(record)
    finally:
        log.close()


@pytest.mark.parametrize("extra_bytes", [0, 1])
def test_max_record_bytes_is_measured_by_record_bytes(tmp_path, extra_bytes):
    limit = 4_096
    probe = Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, metadata="m" * 1_000))
    metadata = "m" * (1_000 + limit + extra_bytes - record_bytes(probe))
    record = Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(1, metadata=metadata))
    assert record_bytes(record) == limit + extra_bytes
    # Two records so the append takes the per-record path, not the one-encode fast path.
    small = Record(OffsetCommitKey("g", "t", 1), OffsetCommitValue(2))
    log = open_partition_log(
        str(tmp_path), LogConfig(max_record_bytes=limit, max_batch_bytes=4 * limit)
    )
    try:
        if extra_bytes:
            with pytest.raises(RecordTooLargeError, match=f"{limit + 1} bytes"):
                log.append([record, small])
        else:
            assert log.append([record, small]) == 2
    finally:
        log.close()
