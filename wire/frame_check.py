"""Every length a request body claims, checked against the bytes that follow, before kio reads it.

kio 0.6's reader is native code that reserves room for an array as soon as it reads the array's
length prefix: a 20-byte frame claiming 2^31 - 1 elements makes it ask for tens of gigabytes,
and a failed allocation aborts the whole process (Rust's default), so one hostile frame would
kill a partition actor. Kafka's own generated readers refuse an array longer than the bytes
left in the frame ("Tried to allocate a collection of size ..."); ``check_body`` applies that
rule, and the same to strings and bytes, by walking the body along kio's schema for the
request's class: fixed-size fields skipped, every length prefix (legacy or compact, arrays,
strings, bytes, nullable structs, and the known tagged fields inside their tag's bytes)
compared with what remains. It reads no values; kio does, once the lengths are known to fit.

A plan per class is built once (``_plan``) and cached: a tuple of steps, each a fixed size in
bytes or a (kind, detail) pair. The walk costs 1.5 to 2 times kio's own read of the same body.
"""

from __future__ import annotations

from dataclasses import fields
from functools import cache
from struct import Struct

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

_FIXED_BYTES = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_MAX_UVARINT_BYTES = 5  # an unsigned 32-bit varint
_I16 = Struct(">h")
_I32 = Struct(">i")
# A step's kind, compared by identity in the walk.
_SIZED, _TAGS, _ARRAY, _STRUCT = "sized", "tags", "array", "struct"


class FrameCheckError(ValueError):
    """A length in a request body that the bytes after it cannot hold."""


def check_body(cls: type, frame: bytes, at: int) -> None:
    """Raise FrameCheckError unless every length ``cls``'s body claims from ``at`` on fits the
    bytes of ``frame`` after it."""
    _walk(_plan(cls), frame, at, len(frame))


def read_uvarint(frame: bytes, at: int, end: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes at ``at`` (before ``end``), and the byte after it."""
    value = shift = 0
    for i in range(at, min(at + _MAX_UVARINT_BYTES, end)):
        byte = frame[i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i + 1
        shift += 7
    raise FrameCheckError(f"unreadable varint at byte {at}")


def _length(frame: bytes, at: int, prefix: Struct, end: int) -> tuple[int, int]:
    """A legacy (fixed-size, signed) length prefix at ``at``, and the byte after it."""
    after = at + prefix.size
    if after > end:
        raise FrameCheckError(f"{prefix.size}-byte length at byte {at} past the end ({end})")
    return prefix.unpack_from(frame, at)[0], after


def _past(count: int, at: int, end: int, what: str) -> FrameCheckError:
    return FrameCheckError(f"{what} of {count} at byte {at}: only {end - at} bytes left")


def _walk(plan: tuple, frame: bytes, at: int, end: int) -> int:
    # The hot loop of every request (an OffsetCommit of 64 partitions walks ~200 steps), so the
    # common cases come first and are inlined: one-byte compact lengths, no tagged fields.
    for step in plan:
        if type(step) is int:
            at += step
            if at > end:
                raise FrameCheckError(f"field past the end ({end}) of the body")
            continue
        kind, detail = step
        if kind is _SIZED:  # detail: the legacy prefix (a Struct), or None for compact
            if detail is not None:
                size, at = _length(frame, at, detail, end)
            elif at < end and frame[at] < 0x80:  # the usual one-byte length
                size = frame[at] - 1
                at += 1
            else:
                size, at = read_uvarint(frame, at, end)
                size -= 1
            if size > 0:
                if size > end - at:
                    raise _past(size, at, end, "string or bytes")
                at += size
        elif kind is _TAGS:  # detail: {tag: step} of a flexible entity
            if at < end and frame[at] == 0:  # the usual: none
                at += 1
                continue
            count, at = read_uvarint(frame, at, end)
            if count > end - at:
                raise _past(count, at, end, "tagged fields")
            for _ in range(count):
                tag, at = read_uvarint(frame, at, end)
                size, at = read_uvarint(frame, at, end)
                if size > end - at:
                    raise _past(size, at, end, "tagged field")
                if tag in detail:
                    _walk((detail[tag],), frame, at, at + size)
                at += size
        elif kind is _ARRAY:  # detail: (compact, element step)
            compact, element = detail
            if compact:
                count, at = read_uvarint(frame, at, end)
                count -= 1
            else:
                count, at = _length(frame, at, _I32, end)
            if count > 0:
                if count > end - at:
                    raise _past(count, at, end, "array")
                if type(element) is int:
                    at += count * element
                    if at > end:
                        raise FrameCheckError(f"array past the end ({end}) of the body")
                elif element[0] is _STRUCT and not element[1][0]:
                    inner = element[1][1]
                    for _ in range(count):
                        at = _walk(inner, frame, at, end)
                else:
                    for _ in range(count):
                        at = _walk((element,), frame, at, end)
        else:  # _STRUCT, detail: (nullable, plan)
            nullable, inner = detail
            if nullable:
                if at >= end:
                    raise FrameCheckError(f"struct marker past the end ({end}) of the body")
                null = frame[at] >= 0x80  # a negative int8
                at += 1
                if null:
                    continue
            at = _walk(inner, frame, at, end)
    return at


@cache
def _plan(cls: type) -> tuple:
    flexible = bool(getattr(cls, "__flexible__", False))
    steps: list = []
    tagged: dict[int, object] = {}
    for field in fields(cls):
        tag = get_field_tag(field)
        step = _field_step(field, flexible, optional=tag is None and is_optional(field))
        if tag is None:
            if type(step) is int and steps and type(steps[-1]) is int:
                steps[-1] += step  # neighbouring fixed-size fields: one step
            else:
                steps.append(step)
        else:
            tagged[int(tag)] = step
    if flexible:
        steps.append((_TAGS, tagged))
    return tuple(steps)


def _field_step(field, flexible: bool, optional: bool) -> object:
    shape = classify_field(field)
    if isinstance(shape, EntityTupleField):
        return (_ARRAY, (flexible, (_STRUCT, (False, _plan(shape.type_)))))
    if isinstance(shape, EntityField):
        return (_STRUCT, (optional, _plan(shape.type_)))
    element = _primitive_step(get_schema_field_type(field), flexible)
    if isinstance(shape, PrimitiveTupleField):
        return (_ARRAY, (flexible, element))
    return element


def _primitive_step(kafka_type: str, flexible: bool) -> object:
    if kafka_type in _FIXED_BYTES:
        return _FIXED_BYTES[kafka_type]
    if kafka_type == "string":
        return (_SIZED, None if flexible else _I16)
    if kafka_type in ("bytes", "records"):
        return (_SIZED, None if flexible else _I32)
    raise NotImplementedError(f"no frame check for kafka type {kafka_type!r}")
