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
bytes or a (kind, detail) pair.
"""

from __future__ import annotations

from dataclasses import fields
from functools import cache

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


class FrameCheckError(ValueError):
    """A length in a request body that the bytes after it cannot hold."""


def check_body(cls: type, frame: bytes, at: int) -> None:
    """Raise FrameCheckError unless every length ``cls``'s body claims from ``at`` on fits the
    bytes of ``frame`` after it."""
    _walk(_plan(cls), frame, at, len(frame))


def _uvarint(frame: bytes, at: int, end: int) -> tuple[int, int]:
    value = shift = 0
    for i in range(at, min(at + _MAX_UVARINT_BYTES, end)):
        byte = frame[i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i + 1
        shift += 7
    raise FrameCheckError(f"unreadable varint at byte {at}")


def _int(frame: bytes, at: int, size: int, end: int) -> tuple[int, int]:
    if at + size > end:
        raise FrameCheckError(f"{size}-byte length at byte {at} past the end ({end})")
    return int.from_bytes(frame[at : at + size], "big", signed=True), at + size


def _fits(count: int, at: int, end: int, what: str) -> None:
    if count > end - at:
        raise FrameCheckError(f"{what} of {count} at byte {at}: only {end - at} bytes left")


def _walk(plan: tuple, frame: bytes, at: int, end: int) -> int:
    for step in plan:
        if type(step) is int:
            at += step
            if at > end:
                raise FrameCheckError(f"field past the end ({end}) of the body")
            continue
        kind, detail = step
        if kind == "sized":  # (prefix bytes, or 0 for compact): a string or bytes
            if detail:
                size, at = _int(frame, at, detail, end)
            elif at < end and frame[at] < 0x80:  # the usual one-byte length
                size = frame[at] - 1
                at += 1
            else:
                size, at = _uvarint(frame, at, end)
                size -= 1
            if size > 0:
                _fits(size, at, end, "string or bytes")
                at += size
        elif kind == "array":  # (compact, element step)
            compact, element = detail
            if compact:
                count, at = _uvarint(frame, at, end)
                count -= 1
            else:
                count, at = _int(frame, at, 4, end)
            if count > 0:
                _fits(count, at, end, "array")
                if type(element) is int:
                    at += count * element
                    if at > end:
                        raise FrameCheckError(f"array past the end ({end}) of the body")
                elif element[0] == "struct" and not element[1][0]:
                    inner = element[1][1]
                    for _ in range(count):
                        at = _walk(inner, frame, at, end)
                else:
                    for _ in range(count):
                        at = _walk((element,), frame, at, end)
        elif kind == "struct":  # (nullable, plan)
            nullable, inner = detail
            if nullable:
                marker, at = _int(frame, at, 1, end)
                if marker < 0:
                    continue
            at = _walk(inner, frame, at, end)
        else:  # "tags": {tag: step} of a flexible entity
            count, at = _uvarint(frame, at, end)
            _fits(count, at, end, "tagged fields")
            for _ in range(count):
                tag, at = _uvarint(frame, at, end)
                size, at = _uvarint(frame, at, end)
                _fits(size, at, end, "tagged field")
                if tag in detail:
                    _walk((detail[tag],), frame, at, at + size)
                at += size
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
        steps.append(("tags", tagged))
    return tuple(steps)


def _field_step(field, flexible: bool, optional: bool) -> object:
    shape = classify_field(field)
    if isinstance(shape, EntityTupleField):
        return ("array", (flexible, ("struct", (False, _plan(shape.type_)))))
    if isinstance(shape, EntityField):
        return ("struct", (optional, _plan(shape.type_)))
    element = _primitive_step(get_schema_field_type(field), flexible)
    if isinstance(shape, PrimitiveTupleField):
        return ("array", (flexible, element))
    return element


def _primitive_step(kafka_type: str, flexible: bool) -> object:
    if kafka_type in _FIXED_BYTES:
        return _FIXED_BYTES[kafka_type]
    if kafka_type == "string":
        return ("sized", 0 if flexible else 2)
    if kafka_type in ("bytes", "records"):
        return ("sized", 0 if flexible else 4)
    raise NotImplementedError(f"no frame check for kafka type {kafka_type!r}")
