"""The on-disk format is pinned by golden bytes: a format change must show up here first."""

import logging

import msgspec
import pytest

from groupcoord.coordinator import Shard
from groupcoord.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from groupcoord.storage import (
    CorruptLogError,
    LogConfig,
    RecordFormatError,
    decode_records,
    encode_record,
    open_partition_log,
    read_log,
)
from groupcoord.storage.codec import HEADER_BYTES, array_header, batch_problem, frame_batch

MEMBER = MemberMetadataValue("m-1", "i-1", "c", "/1.2.3.4", 300000, 10000, b"\x00\x01", b"\x02")

# Version 1 of every record type (envelope [type, key, value]), as written to disk.
GOLDEN_V1 = {
    "offset_commit": (
        Record(OffsetCommitKey("g", "t", 3), OffsetCommitValue(42, 5, "meta", 1700000000000, None)),
        "930183a567726f7570a167a5746f706963a174a9706172746974696f6e0385a66f66667365742aac6c6561"
        "6465725f65706f636805a86d65746164617461a46d657461b3636f6d6d69745f74696d657374616d705f6d"
        "73cf0000018bcfe56800b36578706972655f74696d657374616d705f6d73c0",
    ),
    "offset_commit_expiring": (
        Record(
            OffsetCommitKey("g", "t", 3),
            OffsetCommitValue(42, -1, "", 1700000000000, 1700000600000),
        ),
        "930183a567726f7570a167a5746f706963a174a9706172746974696f6e0385a66f66667365742aac6c6561"
        "6465725f65706f6368ffa86d65746164617461a0b3636f6d6d69745f74696d657374616d705f6d73cf0000"
        "018bcfe56800b36578706972655f74696d657374616d705f6d73cf0000018bcfee8fc0",
    ),
    "offset_tombstone": (
        Record(OffsetCommitKey("g", "t", 3), None),
        "930183a567726f7570a167a5746f706963a174a9706172746974696f6e03c0",
    ),
    "group_metadata": (
        Record(
            GroupMetadataKey("g"),
            GroupMetadataValue("consumer", 7, "range", "m-1", 1700000000000, (MEMBER,)),
        ),
        "930281a567726f7570a16786ad70726f746f636f6c5f74797065a8636f6e73756d6572aa67656e65726174"
        "696f6e07a870726f746f636f6ca572616e6765a66c6561646572a36d2d31ba63757272656e745f73746174"
        "655f74696d657374616d705f6d73cf0000018bcfe56800a76d656d626572739188a96d656d6265725f6964"
        "a36d2d31b167726f75705f696e7374616e63655f6964a3692d31a9636c69656e745f6964a163ab636c6965"
        "6e745f686f7374a82f312e322e332e34b4726562616c616e63655f74696d656f75745f6d73ce000493e0b2"
        "73657373696f6e5f74696d656f75745f6d73cd2710ac737562736372697074696f6ec4020001aa61737369"
        "676e6d656e74c40102",
    ),
    "group_tombstone": (Record(GroupMetadataKey("g"), None), "930281a567726f7570a167c0"),
}

# Two tombstones framed as a batch: base offset 10, append offset 9, epoch 3, last of its append.
GOLDEN_BATCH = (
    "4743420159a0303d2c0000000a0000000000000002000000090000000000000003000000010092930183"
    "a567726f7570a167a5746f706963a174a9706172746974696f6e03c0930281a567726f7570a167c0"
)


@pytest.mark.parametrize("name", sorted(GOLDEN_V1))
def test_envelope_bytes_are_pinned(name):
    record, golden = GOLDEN_V1[name]
    assert encode_record(record).hex() == golden


@pytest.mark.parametrize("name", sorted(GOLDEN_V1))
def test_golden_bytes_decode_to_the_record(name):
    record, golden = GOLDEN_V1[name]
    assert decode_records(array_header(1) + bytes.fromhex(golden)) == [record]


def test_batch_frame_is_pinned_and_valid():
    records = [GOLDEN_V1["offset_tombstone"][0], GOLDEN_V1["group_tombstone"][0]]
    frame = frame_batch([encode_record(r) for r in records], 10, 9, 3, True)
    assert frame.hex() == GOLDEN_BATCH
    header, problem = batch_problem(frame, 0, 10)
    assert problem is None
    assert (header.base_offset, header.count, header.append_offset, header.epoch, header.flags) == (
        10,
        2,
        9,
        3,
        1,
    )
    assert decode_records(frame[HEADER_BYTES:]) == records


def test_every_flipped_bit_of_a_batch_is_detected():
    frame = bytes.fromhex(GOLDEN_BATCH)
    for position in range(len(frame)):
        for bit in (0, 3, 7):
            damaged = bytearray(frame)
            damaged[position] ^= 1 << bit
            assert batch_problem(bytes(damaged), 0, 10)[1] is not None, (position, bit)


def test_older_writer_without_later_fields_decodes_with_defaults():
    # A v0 offset value, written before leader_epoch and the other fields were appended.
    old = msgspec.msgpack.encode([1, {"group": "g", "topic": "t", "partition": 0}, {"offset": 9}])
    assert decode_records(array_header(1) + old) == [
        Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(9))
    ]


def test_newer_writer_with_appended_fields_decodes():
    new = msgspec.msgpack.encode(
        [1, {"group": "g", "topic": "t", "partition": 0}, {"offset": 9, "future_field": [1, 2]}]
    )
    assert decode_records(array_header(1) + new) == [
        Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(9))
    ]


# Arrays nested deeper than msgspec decodes (it raises RecursionError), in an envelope of an
# unknown type (skipped over as raw bytes) and in a field a newer writer appended to a known
# record's value (skipped while the whole batch is decoded at once, the usual path).
NESTED_TOO_DEEP = b"\x91" * 100_000 + b"\xc0"
UNKNOWN_NESTED = b"\x93\x63" + msgspec.msgpack.encode({"group": "g"}) + NESTED_TOO_DEEP
KNOWN_NESTED = (
    b"\x93\x01"
    + msgspec.msgpack.encode({"group": "g", "topic": "t", "partition": 0})
    + b"\x82"
    + msgspec.msgpack.encode("offset")
    + b"\x01"
    + msgspec.msgpack.encode("future_field")
    + NESTED_TOO_DEEP
)


@pytest.mark.parametrize("envelope", [UNKNOWN_NESTED, KNOWN_NESTED], ids=["unknown", "known"])
def test_a_payload_nested_too_deep_is_a_format_error_and_its_log_corrupt(tmp_path, envelope):
    with pytest.raises(RecordFormatError, match="nested too deep"):
        decode_records(array_header(1) + envelope)
    # Behind a valid CRC, as a crafted file would be: the log refuses to load it, as it does
    # any other undecodable payload, rather than failing with another exception.
    known = GOLDEN_V1["offset_commit"][0]
    with open_partition_log(str(tmp_path)) as log:
        log.append([known])
        frame = frame_batch([envelope], 1, 1, log.epoch, True)
    with open(tmp_path / "00000000000000000000.log", "ab") as f:
        f.write(frame)
    with pytest.raises(CorruptLogError, match="nested too deep"):
        list(read_log(str(tmp_path)))
    with open_partition_log(str(tmp_path)) as log:  # a partition's load
        with pytest.raises(CorruptLogError, match="nested too deep"):
            log.load_into(Shard(0, 1))


def test_unknown_record_type_is_skipped_with_a_warning_and_keeps_its_offset(tmp_path, caplog):
    known = GOLDEN_V1["offset_commit"][0]
    unknown = msgspec.msgpack.encode([99, {"anything": 1}, [1, 2, 3]])
    with open_partition_log(str(tmp_path)) as log:
        log.append([known])
        frame = frame_batch([unknown, encode_record(known)], 1, 1, log.epoch, True)
        with open(tmp_path / "00000000000000000000.log", "ab") as f:  # as a newer writer would
            f.write(frame)
    with caplog.at_level(logging.WARNING, logger="groupcoord.storage"):
        entries = list(read_log(str(tmp_path)))
    assert [(e.offset, e.record) for e in entries] == [(0, known), (2, known)]
    with open_partition_log(str(tmp_path)) as log:  # the writer continues after it
        assert log.end_offset == 3 and log.truncated is None


def test_known_type_with_a_malformed_value_is_a_format_error():
    bad = msgspec.msgpack.encode(
        [1, {"group": "g", "topic": "t", "partition": 0}, {"offset": "nine"}]
    )
    with pytest.raises(RecordFormatError, match="record 0 of type 1"):
        decode_records(array_header(1) + bad)
    with pytest.raises(RecordFormatError):
        decode_records(b"\xc1garbage")


@pytest.mark.parametrize(
    "bad",
    [
        "not a record",
        Record(OffsetCommitKey("g", "t", 0), GroupMetadataValue("", 0, None, None)),
        Record(GroupMetadataKey("g"), OffsetCommitValue(1)),
    ],
)
def test_encode_rejects_malformed_records(bad):
    with pytest.raises(ValueError):
        encode_record(bad)


@pytest.mark.parametrize(
    "field, value",
    [
        ("fsync_policy", "sometimes"),
        ("fsync_interval_ms", 0),
        ("segment_bytes", 100),
        ("max_record_bytes", 10),
        ("max_batch_bytes", 100),
        ("snapshot_every_records", -1),
        ("snapshot_every_bytes", -5),
        ("keep_snapshots", 0),
        ("retain_until_exported", 1),
        ("freeze_loaded_state", "yes"),
        ("segment_bytes", 4096.0),
    ],
)
def test_log_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        LogConfig(**{field: value})


def test_log_config_batch_must_hold_a_maximal_record():
    with pytest.raises(ValueError, match="max_batch_bytes"):
        LogConfig(max_record_bytes=1 << 20, max_batch_bytes=1 << 20)
    assert LogConfig(max_record_bytes=1 << 20, max_batch_bytes=2 << 20).max_batch_bytes == 2 << 20
