"""Offset reset planning and the file/Python offsets sources, without Ray (Kafka's rules from
GroupOffsetsResetter: clamping, shift-by without a commit, to-current, time fallbacks)."""

from __future__ import annotations

import json

import pytest

from groupcoord.actors import end_offsets_source, start_offsets_source
from groupcoord.actors.offset_reset import (
    ResetError,
    parse_datetime_ms,
    parse_duration_ms,
    parse_topics,
    plan_reset,
)

T0, T1 = ("t", 0), ("t", 1)


def test_to_offset_and_shift_by_are_clamped_into_the_known_range():
    start, end = {T0: 5, T1: 0}, {T0: 50}
    new, notes = plan_reset("to-offset", [T0, T1], {}, value=100, start=start, end=end)
    assert new == {T0: 50, T1: 100}  # T1's end is unknown: nothing to clamp to
    assert any("above the end offset of t-0" in n for n in notes)
    new, notes = plan_reset("shift-by", [T0], {T0: 7}, value=-10, start=start, end=end)
    assert new == {T0: 5} and any("below the start offset of t-0" in n for n in notes)
    with pytest.raises(ResetError, match="cannot shift t-1: it has no committed offset"):
        plan_reset("shift-by", [T1], {T0: 7}, value=1)


def test_earliest_latest_current_and_time_scenarios():
    new, notes = plan_reset("to-earliest", [T0], {})
    assert new == {T0: 0} and notes == ["no --start-offsets source: earliest is offset 0"]
    assert plan_reset("to-earliest", [T0], {}, start={T0: 3})[0] == {T0: 3}
    with pytest.raises(ResetError, match="no start offset known for t-1"):
        plan_reset("to-earliest", [T1], {}, start={T0: 3})
    with pytest.raises(ResetError, match="no end offset known for t-1"):
        plan_reset("to-latest", [T0, T1], {}, end={T0: 9})
    # to-current: the commit, else the end offset (Kafka's resetToCurrent).
    assert plan_reset("to-current", [T0, T1], {T0: 4}, end={T1: 8})[0] == {T0: 4, T1: 8}
    # No record at or after the time: the end offset, with a note.
    new, notes = plan_reset("to-datetime", [T0, T1], {}, at_time={T0: 2}, end={T1: 8})
    assert new == {T0: 2, T1: 8} and "t-1 has no record" in notes[0]


def test_argument_parsers():
    assert parse_topics(["a", "b:0,2", "c:1"]) == (["a"], [("b", 0), ("b", 2), ("c", 1)])
    for bad in ("b:x", "b:1:2", "b:", ":1", "b:-1"):
        with pytest.raises(ValueError):
            parse_topics([bad])
    assert parse_duration_ms("P1DT2H3M4.5S") == ((24 + 2) * 60 + 3) * 60_000 + 4_500
    assert parse_duration_ms("PT30M") == 1_800_000
    for bad in ("P", "PT", "1H", "PT1X", ""):
        with pytest.raises(ValueError, match="PnDTnHnMnS"):
            parse_duration_ms(bad)
    assert parse_datetime_ms("1970-01-01T00:00:01.500Z") == 1500
    assert parse_datetime_ms("1970-01-01T01:00:00+01:00") == 0
    with pytest.raises(ValueError, match="--to-datetime"):
        parse_datetime_ms("yesterday")


def test_file_and_python_sources(tmp_path):
    ends = tmp_path / "ends.json"
    ends.write_text(json.dumps({"t:0": 10, "my:topic:3": 7}))
    for spec in (str(ends), f"file:{ends}"):
        assert end_offsets_source(spec)([T0, T1, ("my:topic", 3)]) == {T0: 10, ("my:topic", 3): 7}
    python = end_offsets_source("python:tests.actors.offsets_sources:ends")
    assert python([T0, T1]) == {T0: 40}  # what it does not know is absent
    assert start_offsets_source("python:tests.actors.offsets_sources:ends")([T1]) == {}
    with pytest.raises(ValueError, match="not an int >= 0"):
        end_offsets_source("python:tests.actors.offsets_sources:negative")([T0])
    for spec, why in [
        ("python:tests.actors.offsets_sources:nope", "has no attribute"),
        ("python:tests.actors.offsets_sources:NOT_CALLABLE", "not callable"),
        ("python:no_such_module_x:f", "No module named"),
        ("python:justmodule", "python:module:function"),
        ("kafka:localhost", "kafka:HOST:PORT"),
    ]:
        with pytest.raises(ValueError, match=why):
            end_offsets_source(spec)


@pytest.mark.parametrize(
    "content, why",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"t0": 1}', "entries must look like"),
        ('{"t:0": -3}', "entries must look like"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_a_bad_offsets_file_is_named_in_the_error(tmp_path, content, why):
    path = tmp_path / "ends.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ValueError, match=why) as caught:
        end_offsets_source(str(path))
    assert str(caught.value).startswith(f"{path}: ")
    with pytest.raises(ValueError, match="cannot read the offsets file") as caught:
        end_offsets_source(str(tmp_path / "missing.json"))
    assert str(tmp_path / "missing.json") in str(caught.value)
