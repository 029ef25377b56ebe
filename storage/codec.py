"""The on-disk format of the partition log: record envelopes and framed batches.

Theory of operation
-------------------
A record travels as an *envelope*, the msgpack array ``[record_type, key, value]``: the type
number comes from ``coordinator.records.RECORD_TYPES``, key and value are the msgpack encodings
of the coordinator's Structs (maps keyed by field name, so fields can be appended with
defaults), and a tombstone's value is nil. A reader that meets a type number it does not know
skips that envelope with a warning; the record still occupies its log offset. The envelope
and its encoding are the core's (``coordinator.record_size``), so the size every limit uses
is the size stored here.

Envelopes are grouped into *batches*. A batch is a fixed 38-byte little-endian header followed by
its payload, the msgpack array of its envelopes::

    magic     4s  b"GCB\\x01" (format version 1)
    crc       u32 zlib CRC-32 of every header byte after this field, then the payload
    length    u32 payload bytes
    base      u64 log offset of the first record (record i has offset base + i)
    count     u32 records in the batch
    append    u64 log offset of the first record of the append() this batch belongs to
    epoch     u32 the writer's incarnation epoch
    flags     u16 bit 0: last batch of its append

``append`` and the last-batch flag let recovery tell a torn final append (truncate it) from damage
followed by later appends (acknowledged data is gone: a clear error). See ``segments``.

Decoding takes a fast path (one msgspec call per batch into tagged array-like envelope Structs)
and falls back to a per-envelope path only when a batch holds a type this reader does not know.
"""

from __future__ import annotations

import logging
import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple, Union

import msgspec

from groupcoord.coordinator.record_size import encode_record as encode_core_record
from groupcoord.coordinator.record_size import envelope
from groupcoord.coordinator.records import RECORD_TYPE_OF, RECORD_TYPES, Record

from .config import RecordTooLargeError

log = logging.getLogger("groupcoord.storage")

MAGIC = b"GCB\x01"
HEADER = struct.Struct("<4sIIQIQIH")
HEADER_BYTES = HEADER.size  # 38
FLAG_LAST_IN_APPEND = 1
_ARRAY_HEADER_MAX_BYTES = 5  # a msgpack array header (``array_header``) at its longest
# A header claiming a bigger payload than this is damage, whatever the writer's config was.
MAX_PAYLOAD_BYTES = 128 << 20

_encoder = msgspec.msgpack.Encoder()
_VALUE_TYPES = {number: value_type for number, (_, value_type) in RECORD_TYPES.items()}
_SPECS = {key_type: (number, value_type) for number, (key_type, value_type) in RECORD_TYPES.items()}


class BatchHeader(NamedTuple):
    crc: int
    length: int
    base_offset: int
    count: int
    append_offset: int
    epoch: int
    flags: int

    @property
    def end_offset(self) -> int:
        return self.base_offset + self.count


class RecordFormatError(ValueError):
    """A CRC-valid payload that does not decode: a format this reader cannot read."""


# -- envelopes -----------------------------------------------------------------------------------


def envelope_of(record: Record) -> tuple:
    """The envelope of one record as a (type, key, value) tuple, ready for msgspec to encode
    (``coordinator.record_size.envelope``, checked). ValueError when the record is not a
    well-typed Record."""
    if type(record) is not Record:
        raise ValueError(f"expected a Record, got {type(record).__name__}")
    key, value = record.key, record.value
    record_type = RECORD_TYPE_OF.get(type(key))
    if record_type is None:
        raise ValueError(f"unknown record key type {type(key).__name__}")
    if value is not None and type(value) is not _VALUE_TYPES[record_type]:
        raise ValueError(
            f"{type(key).__name__} needs a {_VALUE_TYPES[record_type].__name__} value "
            f"or None, got {type(value).__name__}"
        )
    return envelope(record)


def envelopes_of(records: Sequence[Record]) -> list[tuple]:
    """``envelope_of`` for many records: the same checks, inlined (this is the append hot path)."""
    spec_of = _SPECS.get
    envelopes = []
    add = envelopes.append
    key_type = spec = None  # a batch is mostly runs of one record type: look each run up once
    for record in records:
        if type(record) is not Record:
            return [envelope_of(r) for r in records]  # raises the precise ValueError
        key, value = record.key, record.value
        if type(key) is not key_type:
            key_type, spec = type(key), spec_of(type(key))
        if spec is None or (value is not None and type(value) is not spec[1]):
            return [envelope_of(r) for r in records]
        add((spec[0], key, value))  # record_size.envelope, inlined
    return envelopes


def encode_record(record: Record) -> bytes:
    """The envelope of one record, encoded (``coordinator.record_size.encode_record``, whose
    length is the size every limit uses). ValueError when the record is not well typed."""
    envelope_of(record)
    return encode_core_record(record)


def encode_payload(envelopes: list[tuple]) -> bytes:
    """A whole batch payload (array header + envelopes) in one msgspec call."""
    return _encoder.encode(envelopes)


def _envelope_struct(number: int, key_type: type, value_type: type) -> type:
    # Tagged array-like Structs encode as [tag, key, value]: exactly the envelope layout.
    return msgspec.defstruct(
        f"Envelope{number}",
        [("key", key_type), ("value", value_type | None)],
        array_like=True,
        frozen=True,
        tag=number,
    )


_ENVELOPES = tuple(_envelope_struct(n, k, v) for n, (k, v) in sorted(RECORD_TYPES.items()))
_fast_decoder = msgspec.msgpack.Decoder(list[Union[_ENVELOPES]])  # noqa: UP007 (a tuple)


class _RawEnvelope(msgspec.Struct, array_like=True, frozen=True):
    record_type: int
    key: msgspec.Raw
    value: msgspec.Raw


_raw_decoder = msgspec.msgpack.Decoder(list[_RawEnvelope])
_type_decoders = {
    n: (msgspec.msgpack.Decoder(k), msgspec.msgpack.Decoder(v | None))
    for n, (k, v) in RECORD_TYPES.items()
}
_warned_types: set[int] = set()


def decode_records(payload: bytes | memoryview) -> list[Record | None]:
    """The records of one batch payload, in offset order; ``None`` marks a skipped unknown type.

    Raises RecordFormatError when the payload is not a list of envelopes of known shape.
    """
    try:
        return [Record(e.key, e.value) for e in _fast_decoder.decode(payload)]
    except (msgspec.MsgspecError, RecursionError):
        pass  # an unknown type, or damage: take the careful path
    try:
        envelopes = _raw_decoder.decode(payload)
    except msgspec.MsgspecError as exc:
        raise RecordFormatError(f"undecodable batch payload: {exc}") from None
    except RecursionError:  # msgspec's, for arrays or maps nested past its depth limit; a
        # payload read this far decodes record by record below at no greater depth
        raise RecordFormatError("undecodable batch payload: nested too deep") from None
    records: list[Record | None] = []
    for index, env in enumerate(envelopes):
        try:
            records.append(decode_parts(env.record_type, env.key, env.value))
        except msgspec.MsgspecError as exc:
            raise RecordFormatError(f"record {index} of type {env.record_type}: {exc}") from None
    return records


def decode_parts(
    record_type: int, key: bytes | msgspec.Raw, value: bytes | msgspec.Raw
) -> Record | None:
    """One record from its type number and encoded key and value; None (with a warning, once
    per type) for a type this reader does not know. msgspec.MsgspecError when undecodable."""
    decoders = _type_decoders.get(record_type)
    if decoders is None:
        if record_type not in _warned_types:
            _warned_types.add(record_type)
            log.warning(
                "skipping records of unknown type %d (written by a newer version?)", record_type
            )
        return None
    return Record(decoders[0].decode(key), decoders[1].decode(value))


# -- batches -------------------------------------------------------------------------------------


def array_header(count: int) -> bytes:
    """The msgpack array header for ``count`` items (payload = header + envelopes)."""
    if count < 16:
        return bytes((0x90 | count,))
    if count < 1 << 16:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


def frame_batch(
    envelopes: Sequence[bytes],
    base_offset: int,
    append_offset: int,
    epoch: int,
    last_in_append: bool,
) -> bytes:
    """One framed batch (header + payload) holding the encoded ``envelopes``."""
    payload = array_header(len(envelopes)) + b"".join(envelopes)
    return b"".join(
        frame_parts(payload, len(envelopes), base_offset, append_offset, epoch, last_in_append)
    )


def encode_each(records: Sequence[Record], max_record_bytes: int) -> list[bytes]:
    """Each record's envelope, encoded as the core encodes it (so "too large" here means what
    the Shard's limits mean), for records ``envelopes_of`` has checked; ``RecordTooLargeError``
    naming the first one over ``max_record_bytes``."""
    encoded = [encode_core_record(record) for record in records]
    for index, data in enumerate(encoded):
        if len(data) > max_record_bytes:
            key = records[index].key
            raise RecordTooLargeError(
                f"record {index} of the append ({type(key).__name__} of "
                f"group {key.group!r}) encodes to {len(data)} bytes > "
                f"max_record_bytes={max_record_bytes}; nothing was written"
            )
    return encoded


def frame_batches(
    envelopes: Sequence[bytes], max_batch_bytes: int, base_offset: int, epoch: int
) -> list[bytes]:
    """One append of encoded ``envelopes`` from ``base_offset`` on, framed as batches of at
    most ``max_batch_bytes`` each (a batch holds at least one envelope); the last is flagged
    as the append's last."""
    budget = max_batch_bytes - HEADER_BYTES - _ARRAY_HEADER_MAX_BYTES
    frames, batch, batch_bytes = [], [], 0
    base = base_offset
    for encoded in envelopes:
        if batch and batch_bytes + len(encoded) > budget:
            frames.append(frame_batch(batch, base, base_offset, epoch, False))
            base += len(batch)
            batch, batch_bytes = [], 0
        batch.append(encoded)
        batch_bytes += len(encoded)
    frames.append(frame_batch(batch, base, base_offset, epoch, True))
    return frames


def frame_parts(
    payload: bytes,
    count: int,
    base_offset: int,
    append_offset: int,
    epoch: int,
    last_in_append: bool,
) -> tuple[bytes, bytes]:
    """(header, payload) of one batch, for a vectored write that copies nothing."""
    flags = FLAG_LAST_IN_APPEND if last_in_append else 0
    rest = HEADER.pack(
        MAGIC, 0, len(payload), base_offset, count, append_offset, epoch & 0xFFFFFFFF, flags
    )[8:]
    crc = zlib.crc32(payload, zlib.crc32(rest))
    return MAGIC + crc.to_bytes(4, "little") + rest, payload


def read_header(buf: bytes | memoryview, pos: int) -> BatchHeader | None:
    """The header at ``pos`` if the bytes there look like one (magic, sane sizes), else None.

    Says nothing about the CRC or whether the payload is complete: see ``batch_problem``.
    """
    if len(buf) - pos < HEADER_BYTES:
        return None
    magic, *fields = HEADER.unpack_from(buf, pos)
    header = BatchHeader(*fields)
    if (
        magic != MAGIC
        or header.length > MAX_PAYLOAD_BYTES
        or header.count == 0
        or header.count > header.length
        or header.append_offset > header.base_offset
    ):
        return None
    return header


def batch_problem(
    buf: bytes | memoryview, pos: int, expected_offset: int | None, verify_crc: bool = True
) -> tuple[BatchHeader | None, str | None]:
    """Check the batch at ``pos``: (header, None) when valid, else (header or None, reason)."""
    available = len(buf) - pos
    if available < HEADER_BYTES:
        return None, f"short header ({available} of {HEADER_BYTES} bytes)"
    header = read_header(buf, pos)
    if header is None:
        return None, "bad batch header"
    end = pos + HEADER_BYTES + header.length
    if end > len(buf):
        return header, f"short payload ({len(buf) - pos - HEADER_BYTES} of {header.length} bytes)"
    if verify_crc:
        view = memoryview(buf)
        if zlib.crc32(view[pos + 8 : end]) != header.crc:
            return header, "CRC mismatch"
    if expected_offset is not None and header.base_offset != expected_offset:
        return header, f"base offset {header.base_offset}, expected {expected_offset}"
    return header, None
