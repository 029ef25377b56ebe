"""What ``kafka-consumer-groups --reset-offsets`` would write, computed without I/O.

The scenarios are Kafka's (``GroupOffsetsResetter``): ``to-earliest`` (log-start offsets),
``to-latest`` (log-end offsets), ``to-offset N`` and ``shift-by N`` (clamped into the partition's
[start, end] range where those are known, with a note, as Kafka warns), ``to-datetime`` and
``by-duration`` (the first offset at or after a time; a partition with none falls back to its
end offset), ``to-current`` (the committed offset; a partition without one gets its end
offset) and ``from-file`` (the offsets of a CSV plan, ``parse_reset_file``, clamped like
``to-offset``). The offsets a scenario needs come in as plain mappings, looked up by the caller
(end_offsets.py); ``plan_reset`` raises ``ResetError`` naming the partition whose offset is
missing, and ``parse_topics`` / ``parse_duration_ms`` / ``parse_datetime_ms`` raise
``ValueError`` for malformed arguments.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from .offsets import MAX_OFFSET, MAX_PARTITION, decimal

SCENARIOS = (
    "to-earliest",
    "to-latest",
    "to-offset",
    "shift-by",
    "to-datetime",
    "by-duration",
    "to-current",
    "from-file",
)
# A reset plan file (--from-file) is read whole before anything is asked of the cluster.
MAX_RESET_FILE_BYTES = 64 * 1024 * 1024

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
            number = decimal(p, MAX_PARTITION)
            if number is None:
                raise ValueError(f"invalid partition {p!r} in topic arg {arg!r}")
            partitions.append((parts[0], number))
    return topics, partitions


def partitions_named(
    topic_args: Sequence[str] | None,
    committed: Mapping[tuple[str, int], int],
    catalog: Mapping[str, int],
) -> list[tuple[str, int]]:
    """The partitions named by --topic (a whole topic: the catalog's partitions, else those the
    group committed), or every committed partition when there is no --topic."""
    if not topic_args:
        return sorted(committed)
    topics, partitions = parse_topics(topic_args)
    chosen = set(partitions)
    for topic in topics:
        if topic in catalog:
            chosen |= {(topic, p) for p in range(catalog[topic])}
            continue
        known = {tp for tp in committed if tp[0] == topic}
        if not known:
            raise ResetError(
                f"topic '{topic}' is not in the topic catalog and has no committed offsets: "
                f"name its partitions (--topic {topic}:0,1,...)"
            )
        chosen |= known
    return sorted(chosen)


def outside_catalog(
    partitions: Sequence[tuple[str, int]], catalog: Mapping[str, int]
) -> list[tuple[str, int]]:
    """The ``partitions`` of catalogued topics that those topics do not have (a topic the
    catalog does not know is taken on trust, as commits to it are)."""
    return [(t, p) for t, p in partitions if t in catalog and p >= catalog[t]]


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
    planned: Mapping[tuple[str, int], int] | None = None,
) -> tuple[dict[tuple[str, int], int], list[str]]:
    """The new offset of each target partition and notes for the operator. ``value`` is the
    offset (to-offset) or the shift (shift-by); ``start`` None means "log start unknown: 0";
    ``end`` None means "log end unknown" (no upper clamp); ``at_time`` holds the offsets found
    for to-datetime/by-duration, ``planned`` the file's offsets for from-file."""
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
        elif scenario == "from-file":
            offset = _need(planned or {}, tp, "planned")
            new[tp] = _clamped(tp, offset, start_known, end_known, notes)
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


def parse_reset_file(text: str, name: str) -> dict[str | None, dict[tuple[str, int], int]]:
    """A reset plan as ``--export`` writes it and ``--from-file`` reads it, Kafka's CSV: lines
    of ``topic,partition,offset`` (one group's plan, under the key None) or
    ``group,topic,partition,offset`` (under each group), never both; blank lines are skipped and
    a later line for a partition replaces an earlier one, as in Kafka. ValueError naming
    ``name`` and the line for anything else (a header line, a negative offset, ...)."""
    plans: dict[str | None, dict[tuple[str, int], int]] = {}
    width = None
    for line, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or row == [""]:
            continue
        if len(row) not in (3, 4) or (width is not None and len(row) != width):
            expected = "3 or 4" if width is None else str(width)
            raise ValueError(
                f"{name} line {line}: expected {expected} comma-separated fields "
                f"(topic,partition,offset or group,topic,partition,offset), got {len(row)}"
            )
        width = len(row)
        group = row[0] if width == 4 else None
        topic, partition, offset = row[-3:]
        if group == "" or not topic:
            raise ValueError(f"{name} line {line}: an empty group or topic name")
        number, value = decimal(partition, MAX_PARTITION), decimal(offset, MAX_OFFSET)
        if number is None:
            raise ValueError(
                f"{name} line {line}: partition {partition!r} is not a number in 0..{MAX_PARTITION}"
            )
        if value is None:
            raise ValueError(
                f"{name} line {line}: offset {offset!r} is not a number in 0..{MAX_OFFSET}"
            )
        plans.setdefault(group, {})[(topic, number)] = value
    if not plans:
        raise ValueError(f"{name}: no offsets in the file")
    return plans


def reset_file_text(rows: Sequence[Mapping], with_group: bool) -> str:
    """The offset ``rows`` (group, topic, partition, new_offset) as a plan ``parse_reset_file``
    reads back: Kafka's ``--export`` CSV, with the group column when ``with_group``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in rows:
        fields = [row["topic"], row["partition"], row["new_offset"]]
        writer.writerow([row["group"], *fields] if with_group else fields)
    return out.getvalue()
