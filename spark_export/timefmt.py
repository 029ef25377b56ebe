"""Times as the report shows and takes them: instants in ISO-8601 UTC, durations in units.

Every instant the lake stores is epoch milliseconds (``commit_timestamp_ms``); people read and
type ``2026-11-23T13:45:00Z``. Durations read as ``2.5s``, ``3m20s``, ``4h05m``, ``2d03h``.
"""

from __future__ import annotations

import datetime

UTC = datetime.UTC
_UNITS_MS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000))


def iso_utc(ms: int | None) -> str | None:
    """``2026-11-23T13:45:00Z`` (milliseconds shown only when there are any)."""
    if ms is None:
        return None
    when = datetime.datetime.fromtimestamp(ms / 1000, UTC)
    spec = "milliseconds" if ms % 1000 else "seconds"
    return when.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds of an ISO-8601 time (``Z`` or an offset; none means UTC), or of a
    plain integer, taken as epoch milliseconds already."""
    text = text.strip()
    if text.isascii() and text.isdigit():  # isdigit alone takes "²", which int() refuses
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not an ISO-8601 time: {text!r} (like 2026-11-23T13:45:00Z)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return round(when.timestamp() * 1000)


def duration_text(ms: float | None) -> str | None:
    """A duration in its two largest units (``3m20s``), or ``850ms`` / ``2.5s`` when short."""
    if ms is None:
        return None
    sign, ms = ("-", -ms) if ms < 0 else ("", ms)
    if ms < 1_000:
        return f"{sign}{ms:.0f}ms"
    if ms < 60_000:
        return f"{sign}{ms / 1000:.1f}s".replace(".0s", "s")
    ms = round(ms / 1000) * 1000
    # Minutes are the last stop: ms >= 60_000 here.
    for (unit, size), (small_unit, small_size) in zip(_UNITS_MS, _UNITS_MS[1:], strict=False):
        if ms >= size or unit == "m":
            return f"{sign}{int(ms // size)}{unit}{int(ms % size // small_size):02d}{small_unit}"
