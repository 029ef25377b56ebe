"""Kafka's primitive encodings, for the direct writers (``fast_responses``, ``fast_metadata``):
big-endian integers, and strings, byte strings and array lengths in their classic form (int16
or int32 length) or, in flexible versions, compact form (unsigned varint of length + 1, 0 for
null), each entity then ending with a tagged-field section (empty here: ``NO_TAGS``)."""

from __future__ import annotations

import struct

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
NO_TAGS = b"\0"
NULL_STRING = I16.pack(-1)
_SMALL_UVARINTS = tuple(bytes((value,)) for value in range(0x80))  # one byte each


def string(value: str | None, flexible: bool) -> bytes:
    """A (nullable) string: int16 length, or a compact length (+1, 0 for null) when flexible."""
    if value is None:
        return b"\0" if flexible else NULL_STRING
    encoded = value.encode()
    return (uvarint(len(encoded) + 1) if flexible else I16.pack(len(encoded))) + encoded


def byte_string(value: bytes, flexible: bool) -> bytes:
    return (uvarint(len(value) + 1) if flexible else I32.pack(len(value))) + value


def array_size(count: int, flexible: bool) -> bytes:
    return uvarint(count + 1) if flexible else I32.pack(count)


def uvarint(value: int) -> bytes:
    """Kafka's unsigned varint (compact lengths, +1 so that 0 means null)."""
    if value < 0x80:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
