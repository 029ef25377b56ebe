"""What ``kafka-consumer-groups --reset-offsets`` would write, computed without I/O.

The scenarios are Kafka's (``GroupOffsetsResetter``): ``to-earliest`` (log-start offsets),
``to-latest`` (log-end offsets), ``to-offset N`` and ``shift-by N`` (clamped into the partition's
[start, end] range where those are known, with a note, as Kafka warns), ``to-datetime`` and
``by-duration`` (the first offset at or after a time; a partition with none falls back to its
end offset), and ``to-current`` (the committed offset; a partition without one gets its end
offset). The offsets a scenario needs come in as plain mappings, looked up by the caller
(end_offsets.py); ``plan_reset`` raises ``ResetError`` naming the partition whose offset is
missing, and ``parse_topics`` / ``parse_duration_ms`` / ``parse_datetime_ms`` raise
``ValueError`` for malformed arguments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from .offsets import MAX_PARTITION

SCENARIOS = (
    "to-earliest",
    "to-latest",
    "to-offset",
    "shift-by",
    "to-datetime",
    "by-duration",
    "to-current",
)

# Java's Duration.parse subset Kafka's --by-duration documents: PnDTnHnMnS (fractional seconds).
_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d{1,3})?)S)?)?",
    re.IGNORECASE,
)


class ResetError(RuntimeError):
    """A reset that cannot be computed: an offset it needs is not known. ``error`` names it in
    the CLI's JSON: a Kafka error name, or OFFSETS_UNKNOWN."""

    def __init__(self, message: str, error: str = "OFFSETS_UNKNOWN") -> None:
        super().__init__(message)
        self.error = error


def parse_topics(args: Sequence[str]) -> tuple[list[str], list[tuple[str, int]]]:
    """``--topic`` values as (whole topics, explicit partitions): ``t`` or ``t:0,1,2``."""
    topics: list[str] = []
    partitions: list[tuple[str, int]] = []
    for arg in args:
        if ":" not in arg:
            if not arg:
                raise ValueError("--topic needs a topic name")
            topics.append(arg)
            continue
        parts = arg.split(":")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ValueError(f"invalid topic arg {arg!r}, expected topic name and partitions")
        for p in parts[1].split(","):
            if not p.isdigit() or int(p) > MAX_PARTITION:
                raise ValueError(f"invalid partition {p!r} in topic arg {arg!r}")
            partitions.append((parts[0], int(p)))
    return topics, partitions


def parse_duration_ms(text: str) -> int:
    """``PnDTnHnMnS`` (e.g. ``P1DT2H``, ``PT30M``, ``PT1.5S``) in milliseconds."""
    match = _DURATION.fullmatch(text)
    if match is None or not any(match.groupdict().values()) or text.upper().endswith("T"):
        raise ValueError(f"--by-duration {text!r}: expected PnDTnHnMnS, e.g. PT1H30M or P2D")
    d, h, m = (int(match[k] or 0) for k in ("d", "h", "m"))
    seconds = float(match["s"] or 0)
    return ((d * 24 + h) * 60 + m) * 60_000 + round(seconds * 1000)


def parse_datetime_ms(text: str) -> int:
    """An ISO-8601 date-time (``2026-11-23T10:00:00.000``, optionally with ``Z`` or ``+hh:mm``)
    in epoch milliseconds; without a zone it is local time, as in Kafka."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS[.sss][Z|+hh:mm]"
        ) from None
    return round(parsed.timestamp() * 1000)


def _clamped(
    tp: tuple[str, int],
    offset: int,
    start: Mapping[tuple[str, int], int],
    end: Mapping[tuple[str, int], int],
    notes: list[str],
) -> int:
    name = f"{tp[0]}-{tp[1]}"
    if tp in end and offset > end[tp]:
        notes.append(f"new offset {offset} is above the end offset of {name}: using {end[tp]}")
        return end[tp]
    low = start.get(tp, 0)
    if offset < low:
        notes.append(f"new offset {offset} is below the start offset of {name}: using {low}")
        return low
    return offset


def plan_reset(
    scenario: str,
    targets: Sequence[tuple[str, int]],
    committed: Mapping[tuple[str, int], int],
    *,
    value: int | None = None,
    start: Mapping[tuple[str, int], int] | None = None,
    end: Mapping[tuple[str, int], int] | None = None,
    at_time: Mapping[tuple[str, int], int] | None = None,
) -> tuple[dict[tuple[str, int], int], list[str]]:
    """The new offset of each target partition and notes for the operator. ``value`` is the
    offset (to-offset) or the shift (shift-by); ``start`` None means "log start unknown: 0";
    ``end`` None means "log end unknown" (no upper clamp); ``at_time`` holds the offsets found
    for to-datetime/by-duration."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown reset scenario {scenario!r}")
    if value is None and scenario in ("to-offset", "shift-by"):
        raise ValueError(f"--{scenario} needs a value")
    value = value or 0
    notes: list[str] = []
    if start is None and scenario == "to-earliest":
        notes.append("no --start-offsets source: earliest is offset 0")
    start_known = start or {}
    end_known = end or {}
    new: dict[tuple[str, int], int] = {}
    for tp in targets:
        name = f"{tp[0]}-{tp[1]}"
        if scenario == "to-earliest":
            new[tp] = 0 if start is None else _need(start, tp, "start")
        elif scenario == "to-latest":
            new[tp] = _need(end_known, tp, "end")
        elif scenario == "to-offset":
            new[tp] = _clamped(tp, value, start_known, end_known, notes)
        elif scenario == "shift-by":
            if tp not in committed:
                raise ResetError(f"cannot shift {name}: it has no committed offset")
            new[tp] = _clamped(tp, committed[tp] + value, start_known, end_known, notes)
        elif scenario in ("to-datetime", "by-duration"):
            if tp in (at_time or {}):
                new[tp] = (at_time or {})[tp]
            else:
                notes.append(f"{name} has no record at or after that time: using its end offset")
                new[tp] = _need(end_known, tp, "end")
        elif tp in committed:  # to-current
            new[tp] = committed[tp]
        else:
            new[tp] = _need(end_known, tp, "end")
    return new, notes


def _need(offsets: Mapping[tuple[str, int], int], tp: tuple[str, int], which: str) -> int:
    if tp not in offsets:
        raise ResetError(f"no {which} offset known for {tp[0]}-{tp[1]}")
    return offsets[tp]
