"""The topic catalog's files (``actors.catalog_file``): a change appends its line instead of
rewriting the catalog, the log is compacted once it outgrows the snapshot, and reading
survives every crash point (a line cut short, a snapshot newer than the log's first lines)
while refusing damage with the line's number."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.actors import catalog_file
from groupcoord.actors.catalog import CATALOG_FILE, TopicCatalog
from groupcoord.actors.catalog_file import CHANGES_SUFFIX, read_catalog
from groupcoord.wire.topics import TopicChange


def _lines(tmp_path) -> list[dict]:
    text = (tmp_path / (CATALOG_FILE + CHANGES_SUFFIX)).read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_a_change_to_a_large_catalog_appends_only_its_own_line(tmp_path):
    # Before: each change rewrote the whole file (7 MB at 90,000 topics, half a second of
    # the router's loop on a slow day), so a storm of single creates was quadratic.
    catalog = TopicCatalog(str(tmp_path))
    catalog.apply([TopicChange("create", f"t{i}", 1) for i in range(20_000)])
    snapshot = (tmp_path / CATALOG_FILE).read_bytes()
    for i in range(30):
        catalog.create(f"more{i}", 2)
    catalog.alter("t7", 3)
    catalog.delete("t8")
    assert (tmp_path / CATALOG_FILE).read_bytes() == snapshot  # not rewritten
    lines = _lines(tmp_path)
    assert [line["version"] for line in lines] == list(range(2, 34))
    assert lines[0]["topics"] == {"more0": 2} and set(lines[0]["ids"]) == {"more0"}
    assert lines[-1] == {
        "version": 33,
        "topics": {"t8": None},
        "ids": {"t8": None},
        "group_configs": {},
    }
    again = TopicCatalog(str(tmp_path))
    assert again.version == 33 and again.topics() == catalog.topics()
    assert again.topic_ids() == catalog.topic_ids()
    assert again.topics()["t7"] == 3 and "t8" not in again.topics()


def test_the_log_is_compacted_once_it_outgrows_the_snapshot(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog_file, "COMPACT_MIN_BYTES", 0)
    catalog = TopicCatalog(str(tmp_path))
    for i in range(40):
        catalog.create(f"topic-{i}", 1)
        snapshot = (tmp_path / CATALOG_FILE).stat().st_size
        log = (tmp_path / (CATALOG_FILE + CHANGES_SUFFIX)).stat().st_size
        assert log <= snapshot  # amortised: the bytes written stay proportional to changes
    assert 1 < json.loads((tmp_path / CATALOG_FILE).read_text())["version"] <= 40
    again = TopicCatalog(str(tmp_path))
    assert again.version == 40 and len(again.topics()) == 40


def test_lines_the_snapshot_already_holds_are_skipped_and_a_cut_line_dropped(tmp_path):
    # A crash between a compaction's new snapshot and its new log; then one cut short in an
    # append (a change never acknowledged).
    (tmp_path / CATALOG_FILE).write_text(json.dumps({"version": 5, "topics": {"a": 2}}))
    lines = [
        {"version": 4, "topics": {"a": 1}},
        {"version": 5, "topics": {"a": 2}},
        {"version": 6, "topics": {"b": 1}, "ids": {"b": "9f1c2a52-3c1d-4a8b-9b6a-2f0c7f1a1b2c"}},
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines) + '{"version": 7, "topi'
    (tmp_path / (CATALOG_FILE + CHANGES_SUFFIX)).write_text(text)
    state = read_catalog(str(tmp_path / CATALOG_FILE))
    assert (state["version"], state["topics"]) == (6, {"a": 2, "b": 1})
    catalog = TopicCatalog(str(tmp_path))  # gives "a" its id: version 7, a rewrite
    assert catalog.version == 7 and catalog.topics() == {"a": 2, "b": 1}
    assert str(catalog.topic_ids()["b"]) == "9f1c2a52-3c1d-4a8b-9b6a-2f0c7f1a1b2c"
    catalog.create("c", 1)
    assert TopicCatalog(str(tmp_path)).topics() == {"a": 2, "b": 1, "c": 1}


@pytest.mark.parametrize(
    "log, why",
    [
        ('{"version": 2, "topics": {}}\n{oops\n{"version": 3}\n', "line 2: unreadable"),
        ('{"version": 2}\n{"version": 4}\n', "line 2: version 4 follows 2: versions are missing"),
        ('{"version": 2}\n[1]\n', "line 2: expected"),
        ('{"version": 2, "topics": [1]}\n', "line 1: expected"),
        ('{"version": 2, "topics": {"a b": 1}}\n', "illegal topic name"),
    ],
)
def test_a_damaged_log_is_an_error_naming_its_line(tmp_path, log, why):
    (tmp_path / CATALOG_FILE).write_text(json.dumps({"version": 1, "topics": {}}))
    (tmp_path / (CATALOG_FILE + CHANGES_SUFFIX)).write_text(log)
    with pytest.raises(ValueError, match=why) as refused:
        TopicCatalog(str(tmp_path))
    assert CATALOG_FILE in str(refused.value)


def test_a_replaced_owner_that_still_appends_writes_where_no_reader_looks(tmp_path):
    # The owner check before each write is the first defence (test_catalog); an owner
    # stalled between that check and its append must still not reach the new owner's log.
    stale = TopicCatalog(str(tmp_path))
    stale.create("events", 2)
    stale.create("orders", 1)  # an append, through the log stale's rewrite put in place
    current = TopicCatalog(str(tmp_path))
    current.create("audit", 1)  # a new owner's first write: a new snapshot and a new log
    stale.check_owner = lambda: None  # stalled past its check
    stale.create("lost", 1)
    assert "lost" not in TopicCatalog(str(tmp_path)).topics()
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    snapshot=st.one_of(st.none(), st.binary(max_size=200), st.sampled_from([b"[" * 50_000])),
    log=st.one_of(
        st.binary(max_size=300),
        st.lists(
            st.sampled_from(
                [
                    '{"version": 2}',
                    '{"version": 3, "topics": {"t": 1}}',
                    '{"version": 2, "ids": {"t": null}}',
                    "[" * 50_000,
                    "",
                    '{"version": 2, "topics": {"t": 0}}',
                ]
            ),
            max_size=4,
        ).map(lambda lines: "\n".join(lines).encode()),
    ),
)
def test_any_damage_opens_or_is_a_value_error(tmp_path_factory, snapshot, log):
    # The router opens the catalog as it starts: damage must be one line naming the file,
    # never another exception (json.loads raises RecursionError for brackets nested deep).
    directory = tmp_path_factory.mktemp("damaged")
    if snapshot is not None:
        (directory / CATALOG_FILE).write_bytes(snapshot)
    (directory / (CATALOG_FILE + CHANGES_SUFFIX)).write_bytes(log)
    try:
        catalog = TopicCatalog(str(directory))
    except ValueError as exc:
        assert CATALOG_FILE in str(exc)
    else:
        assert all(1 <= count for count in catalog.topics().values())
