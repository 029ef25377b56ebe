"""Offset reset planning and the file/Python offsets sources, without Ray (Kafka's rules from
GroupOffsetsResetter: clamping, shift-by without a commit, to-current, time fallbacks), and the
CSV reset plans of ``--export`` / ``--from-file`` (Kafka's format, as its tool writes it)."""

from __future__ import annotations

import json

import pytest

from groupcoord.actors import end_offsets_source, start_offsets_source
from groupcoord.actors.offset_reset import (
    ResetError,
    parse_datetime_ms,
    parse_duration_ms,
    parse_reset_file,
    parse_topics,
    plan_reset,
    reset_file_text,
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
    for bad in ("b:x", "b:1:2", "b:", ":1", "b:-1", "b:²", "b: 1", f"b:{2**31}"):
        with pytest.raises(ValueError, match="invalid (partition|topic arg)"):  # not int()'s
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
        ("kafka:localhost:abc", "kafka:HOST:PORT"),  # before: librdkafka's timeout said it
        ("kafka:localhost:9092,:9093", "kafka:HOST:PORT"),
        ("kafka:localhost:70000", "kafka:HOST:PORT"),
        ("kafka:localhost:0", "kafka:HOST:PORT"),
        ("kafka:", "kafka:HOST:PORT"),
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
        ('{"t:²": 3}', "entries must look like"),
        ('{"t:0": 9223372036854775808}', "entries must look like"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[" * 50_000, "not valid JSON"),  # before: json's RecursionError
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


def test_from_file_offsets_are_clamped_like_to_offset():
    new, notes = plan_reset("from-file", [T0, T1], {}, planned={T0: 90, T1: 2}, end={T0: 50})
    assert new == {T0: 50, T1: 2} and any("above the end offset of t-0" in n for n in notes)


def test_a_reset_plan_round_trips_through_its_csv():
    rows = [
        {"group": "g,1", "topic": "t", "partition": 0, "new_offset": 5},  # a comma: quoted
        {"group": "g,1", "topic": "u", "partition": 3, "new_offset": 0},
        {"group": 'say "hi"', "topic": "t", "partition": 1, "new_offset": 7},
    ]
    text = reset_file_text(rows, with_group=True)
    assert text.splitlines()[0] == '"g,1",t,0,5'
    assert parse_reset_file(text, "plan.csv") == {
        "g,1": {("t", 0): 5, ("u", 3): 0},
        'say "hi"': {("t", 1): 7},
    }
    one = reset_file_text(rows[:2], with_group=False)
    assert one == "t,0,5\nu,3,0\n"  # what Kafka's tool writes for one --group
    assert parse_reset_file(one, "plan.csv") == {None: {("t", 0): 5, ("u", 3): 0}}
    # Blank lines and CRLF endings pass; a later line for a partition wins, as in Kafka.
    assert parse_reset_file("t,0,1\r\n\r\nt,0,4\r\n", "p") == {None: {("t", 0): 4}}


@pytest.mark.parametrize(
    "content, why",
    [
        ("", "no offsets in the file"),
        ("\n\n", "no offsets in the file"),
        ("topic,partition,offset\nt,0,1\n", "line 1: partition 'partition' is not a number"),
        ("t,0\n", "line 1: expected 3 or 4 comma-separated fields"),
        ("g,t,0,1,2\n", "line 1: expected 3 or 4"),
        ("t,0,1\ng,t,0,1\n", "line 2: expected 3 comma-separated fields"),
        ("t,0,-4\n", "line 1: offset '-4' is not a number"),
        ("t,²,4\n", "line 1: partition '²' is not a number"),
        (f"t,{2**31},4\n", "is not a number in 0..2147483647"),
        (f"t,0,{2**63}\n", "offset '9223372036854775808' is not a number"),
        (",0,4\n", "line 1: an empty group or topic name"),
        (",t,0,4\n", "line 1: an empty group or topic name"),
    ],
)
def test_a_bad_reset_plan_is_named_with_its_line(content, why):
    with pytest.raises(ValueError, match=why) as caught:
        parse_reset_file(content, "plan.csv")
    assert str(caught.value).startswith("plan.csv")
