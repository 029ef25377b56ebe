"""The topic catalog: Kafka's naming and growth rules, and durable across reopen."""

from __future__ import annotations

import json
import os
import pickle
import re
import uuid

import pytest

from groupcoord.actors import catalog as catalog_module
from groupcoord.actors import catalog_file
from groupcoord.actors.catalog import (
    CATALOG_FILE,
    MAX_CATALOG_PARTITIONS,
    MAX_PARTITIONS_PER_TOPIC,
    MAX_TOPIC_NAME_CHARS,
    CatalogError,
    TopicCatalog,
)
from groupcoord.coordinator import CoordinatorConfig, Errors
from groupcoord.coordinator.group_config import DELETE, SET, GroupConfigError, GroupConfigOp
from groupcoord.wire.topics import TopicChange


def test_changes_survive_a_reopen_and_bump_the_version(tmp_path):
    catalog = TopicCatalog(str(tmp_path))
    assert (catalog.version, catalog.topics()) == (0, {})
    catalog.create("events", 4)
    catalog.create("orders.v2", 1)
    catalog.alter("events", 6)
    catalog.delete("orders.v2")
    again = TopicCatalog(str(tmp_path))
    assert (again.version, again.topics()) == (4, {"events": 6})
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


@pytest.mark.parametrize(
    "name", ["", ".", "..", "a b", "tópico", "x" * (MAX_TOPIC_NAME_CHARS + 1), "a/b", None, 7]
)
def test_illegal_names_are_refused_and_change_nothing(tmp_path, name):
    catalog = TopicCatalog(str(tmp_path))
    with pytest.raises(ValueError):
        catalog.create(name, 1)
    assert catalog.version == 0 and not os.path.exists(tmp_path / CATALOG_FILE)


@pytest.mark.parametrize("partitions", [0, -1, 1.5, True, "3", 100_001])
def test_bad_partition_counts_are_refused(tmp_path, partitions):
    with pytest.raises(ValueError, match="partitions"):
        TopicCatalog(str(tmp_path)).create("events", partitions)


def test_a_topic_only_grows_and_exists_once(tmp_path):
    catalog = TopicCatalog(str(tmp_path))
    catalog.create("events", 4)
    with pytest.raises(ValueError, match="already exists"):
        catalog.create("events", 8)
    for smaller_or_same in (4, 3):
        with pytest.raises(ValueError, match="only grow"):
            catalog.alter("events", smaller_or_same)
    with pytest.raises(ValueError, match="unknown topic"):
        catalog.alter("nope", 9)
    assert TopicCatalog(str(tmp_path)).topics() == {"events": 4}


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b"[]", b'{"version": "1", "topics": {}}', b'{"version": 1, "topics": {"a b": 1}}'],
)
def test_a_damaged_catalog_is_an_error_naming_the_file(tmp_path, content):
    (tmp_path / CATALOG_FILE).write_bytes(content)
    with pytest.raises(ValueError, match=CATALOG_FILE):
        TopicCatalog(str(tmp_path))


def test_the_file_is_plain_json(tmp_path):
    topic_id = TopicCatalog(str(tmp_path)).create("events", 3)
    assert json.loads((tmp_path / CATALOG_FILE).read_text()) == {
        "version": 1,
        "topics": {"events": 3},
        "ids": {"events": str(topic_id)},
        "group_configs": {},
    }


def test_every_topic_gets_a_random_id_that_survives_a_reopen(tmp_path):
    catalog = TopicCatalog(str(tmp_path))
    first = catalog.create("events", 4)
    (created,) = catalog.apply([TopicChange("create", "orders", 1)])
    catalog.alter("events", 6)
    assert first.version == 4 and created.topic_id.version == 4 and first != created.topic_id
    assert catalog.topic_ids() == {"events": first, "orders": created.topic_id}
    assert _written_ids(tmp_path) == catalog.topic_ids()
    # Validating assigns nothing; a topic created again after a delete is a new topic.
    (validated,) = catalog.apply([TopicChange("create", "more", 1, validate_only=True)])
    assert validated.error == Errors.NONE and validated.topic_id is None
    catalog.delete("events")
    assert "events" not in _written_ids(tmp_path)
    assert catalog.create("events", 1) not in (first, None)
    assert TopicCatalog(str(tmp_path)).topic_ids() == catalog.topic_ids()  # a reopen


def _written_ids(tmp_path) -> dict:
    """The topic ids in the catalog file (read without opening a catalog, which would claim
    it from the one under test)."""
    ids = catalog_file.read_catalog(str(tmp_path / CATALOG_FILE))["ids"]
    return {name: uuid.UUID(text) for name, text in ids.items()}


def test_a_catalog_written_before_topic_ids_gets_them_once(tmp_path):
    path = tmp_path / CATALOG_FILE
    path.write_text(json.dumps({"version": 3, "topics": {"events": 2, "orders": 1}}))
    opened = TopicCatalog(str(tmp_path))
    ids = opened.topic_ids()
    assert sorted(ids) == ["events", "orders"] and len(set(ids.values())) == 2
    assert opened.version == 4 and opened.topics() == {"events": 2, "orders": 1}
    on_disk = json.loads(path.read_text())
    assert on_disk["ids"] == {name: str(i) for name, i in ids.items()}
    again = TopicCatalog(str(tmp_path))
    assert (again.version, again.topic_ids()) == (4, ids)


@pytest.mark.parametrize("topic_id", ["nope", 7, "00000000-0000-0000-0000-000000000000"])
def test_a_damaged_topic_id_is_an_error_naming_the_file(tmp_path, topic_id):
    (tmp_path / CATALOG_FILE).write_text(
        json.dumps({"version": 1, "topics": {"events": 1}, "ids": {"events": topic_id}})
    )
    with pytest.raises(ValueError, match=CATALOG_FILE):
        TopicCatalog(str(tmp_path))


def test_a_refusal_survives_pickling_with_its_kafka_code():
    # It crosses from the router actor to callers through Ray's serialization.
    try:
        raise CatalogError(Errors.INVALID_PARTITIONS, "a topic can only grow")
    except CatalogError as exc:
        again = pickle.loads(pickle.dumps(exc))
    assert (again.error, str(again)) == (Errors.INVALID_PARTITIONS, "a topic can only grow")


# -- groups' own settings -------------------------------------------------------------------------

SESSION = "consumer.session.timeout.ms"


def _set(name: str, value: str | None, op: int = SET) -> GroupConfigOp:
    return GroupConfigOp(name, op, value)


def test_a_groups_settings_survive_a_reopen_apart_from_the_group(tmp_path):
    catalog = TopicCatalog(str(tmp_path))
    catalog.create("events", 2)
    catalog.configure_group("g", [_set(SESSION, "50000")], replace=False)
    assert catalog.version == 2
    again = TopicCatalog(str(tmp_path))
    assert again.group_configs() == {"g": {SESSION: 50_000}}
    assert (again.version, again.topics()) == (2, {"events": 2})
    again.configure_group("g", [_set(SESSION, None, DELETE)], replace=False)
    assert TopicCatalog(str(tmp_path)).group_configs() == {}  # a group setting nothing: gone


def test_a_change_that_changes_nothing_writes_nothing(tmp_path):
    catalog = TopicCatalog(str(tmp_path))
    catalog.configure_group("g", [_set(SESSION, "50000")], replace=False, validate_only=True)
    catalog.configure_group("g", [_set(SESSION, None, DELETE)], replace=False)
    assert catalog.version == 0 and not os.path.exists(tmp_path / CATALOG_FILE)


def test_the_deployments_bounds_apply(tmp_path):
    roomy = TopicCatalog(str(tmp_path), CoordinatorConfig(consumer_group_min_session_timeout_ms=1))
    roomy.configure_group("g", [_set(SESSION, "6000")], replace=False)
    with pytest.raises(GroupConfigError, match="greater than or equal to"):
        TopicCatalog(str(tmp_path)).configure_group("g", [_set(SESSION, "6000")], replace=False)


def test_refused_group_changes_are_answered_with_kafkas_codes_and_change_nothing(tmp_path):
    catalog = TopicCatalog(str(tmp_path))
    results = catalog.apply(
        [
            TopicChange("alter_group_configs", "g", configs=(_set(SESSION, "1"),)),
            TopicChange("alter_group_configs", "", configs=(_set(SESSION, "50000"),)),
            TopicChange("replace_group_configs", "g", configs=(_set("no.such", "1"),)),
            TopicChange("alter_group_configs", "h", configs=(_set(SESSION, "50000"),)),
        ]
    )
    assert [r.error for r in results] == [
        Errors.INVALID_CONFIG,
        Errors.INVALID_REQUEST,
        Errors.INVALID_CONFIG,
        Errors.NONE,
    ]
    assert results[1].message == "Default group resources are not allowed."
    assert catalog.group_configs() == {"h": {SESSION: 50_000}}


def test_the_groups_with_settings_are_bounded_in_number_and_id_characters(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog_module, "MAX_CONFIGURED_GROUPS", 2)
    catalog = TopicCatalog(str(tmp_path))
    for group in ("a", "b"):
        catalog.configure_group(group, [_set(SESSION, "50000")], replace=False)
    with pytest.raises(CatalogError, match="already have settings"):
        catalog.configure_group("c", [_set(SESSION, "50000")], replace=False)
    catalog.configure_group("a", [_set(SESSION, "55000")], replace=False)  # a group that has some
    assert sorted(catalog.group_configs()) == ["a", "b"]
    monkeypatch.setattr(catalog_module, "MAX_CONFIGURED_GROUPS", 3)
    monkeypatch.setattr(catalog_module, "MAX_CONFIGURED_GROUP_ID_CHARS", 4)
    with pytest.raises(CatalogError, match="total 5 characters"):
        catalog.configure_group("ccc", [_set(SESSION, "50000")], replace=False)
    catalog.configure_group("cc", [_set(SESSION, "50000")], replace=False)


@pytest.mark.parametrize(
    "group_configs", [[], {"g": {"no.such": 1}}, {"g": {SESSION: "50000"}}, {"g": 5}]
)
def test_damaged_group_settings_are_an_error_naming_the_file(tmp_path, group_configs):
    (tmp_path / CATALOG_FILE).write_text(
        json.dumps({"version": 1, "topics": {}, "group_configs": group_configs})
    )
    with pytest.raises(ValueError, match=CATALOG_FILE) as refused:
        TopicCatalog(str(tmp_path))
    assert re.search("group.configs", str(refused.value)), refused.value  # says what is wrong


def test_the_changes_of_one_request_are_written_once(tmp_path, monkeypatch):
    # A CreateTopics of thousands of topics: one new version of the file, not one each (that
    # rewrote a growing file per topic: quadratic, minutes of the router at 10,000).
    catalog = TopicCatalog(str(tmp_path))
    writes = []
    real = catalog_file.write_atomically
    monkeypatch.setattr(
        catalog_file,
        "write_atomically",
        lambda path, *a, **kw: (path == catalog.path and writes.append(path), real(path, *a, **kw)),
    )
    real_append = catalog_file.append_durably
    monkeypatch.setattr(
        catalog_file,
        "append_durably",
        lambda fd, data: (writes.append("append"), real_append(fd, data)),
    )
    changes = [TopicChange("create", f"t{i}", 1) for i in range(2_000)]
    changes.append(TopicChange("alter_group_configs", "g", configs=(_set(SESSION, "50000"),)))
    changes.append(TopicChange("create", "t0", 1))  # refused: the others still apply
    results = catalog.apply(changes)
    assert [r.error for r in results].count(Errors.NONE) == 2_001
    assert results[-1].error == Errors.TOPIC_ALREADY_EXISTS
    assert len(writes) == 1 and catalog.version == 1
    again = TopicCatalog(str(tmp_path))
    assert len(again.topics()) == 2_000 and again.group_configs() == {"g": {SESSION: 50_000}}
    assert again.apply([TopicChange("create", "t0", 1)])[0].error == Errors.TOPIC_ALREADY_EXISTS
    assert len(writes) == 1  # nothing applied: nothing written


def test_the_partitions_of_all_topics_together_are_bounded(tmp_path):
    # Found by a fuzzer: CreateTopics of random topics of up to 100,000 partitions each filled
    # a catalog whose every all-topics Metadata answer then held a partition's loop for
    # seconds (and would have for hours: nothing bounded the total). Each change that would
    # pass the bound is refused with INVALID_PARTITIONS, the others apply.
    catalog = TopicCatalog(str(tmp_path))
    full = MAX_CATALOG_PARTITIONS // MAX_PARTITIONS_PER_TOPIC
    results = catalog.apply(
        [TopicChange("create", f"big{i}", MAX_PARTITIONS_PER_TOPIC) for i in range(full)]
        + [TopicChange("create", "one.more", 1), TopicChange("create", "none", 1)]
    )
    assert [r.error for r in results] == [Errors.NONE] * full + [Errors.INVALID_PARTITIONS] * 2
    assert "the most it holds is 200000" in results[-1].message
    catalog.delete("big0")
    catalog.create("small", 3)
    catalog.create("other", 1)
    with pytest.raises(CatalogError, match="more partitions would make") as refused:
        catalog.alter("small", MAX_PARTITIONS_PER_TOPIC)  # growing counts too
    assert refused.value.error == Errors.INVALID_PARTITIONS
    catalog.alter("small", MAX_PARTITIONS_PER_TOPIC - 1)  # to the bound exactly
    again = TopicCatalog(str(tmp_path))  # the count is read back
    assert sum(again.topics().values()) == MAX_CATALOG_PARTITIONS
    assert again.apply([TopicChange("create", "x", 1)])[0].error == Errors.INVALID_PARTITIONS
    again.delete("small")
    assert again.apply([TopicChange("create", "x", 1)])[0].error == Errors.NONE


@pytest.mark.parametrize("which", ["rewrite", "append"])
def test_a_failed_write_leaves_the_catalog_as_it_was(tmp_path, monkeypatch, which):
    catalog = TopicCatalog(str(tmp_path))
    catalog.create("kept", 1)  # the first write after opening rewrites; later ones append
    catalog.configure_group("h", [_set(SESSION, "50000")], replace=False)
    if which == "rewrite":
        catalog = TopicCatalog(str(tmp_path))  # a new owner's first write rewrites both files

    def full_disk(log_or_path, data):
        if which == "append":  # part of the line reached the file
            log_or_path.write(data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(catalog_file, "write_atomically", full_disk)
    monkeypatch.setattr(catalog_file, "append_durably", full_disk)
    with pytest.raises(OSError):
        catalog.apply(
            [
                TopicChange("create", "lost", 1),
                TopicChange("delete", "kept"),
                TopicChange("alter_group_configs", "g", configs=(_set(SESSION, "50000"),)),
                TopicChange("alter_group_configs", "h", configs=(_set(SESSION, None, DELETE),)),
            ]
        )
    kept = (2, {"kept": 1}, {"h": {SESSION: 50_000}})
    assert (catalog.version, catalog.topics(), catalog.group_configs()) == kept
    assert set(catalog.topic_ids()) == {"kept"}
    ids = catalog.topic_ids()
    # A crash now: what was acknowledged is read back, a line cut short is dropped.
    again = TopicCatalog(str(tmp_path))
    assert (again.version, again.topics(), again.group_configs()) == kept
    assert again.topic_ids() == ids
    monkeypatch.undo()
    again.create("more", 1)
    assert TopicCatalog(str(tmp_path)).topics() == {"kept": 1, "more": 1}


def test_a_replaced_owner_changes_nothing_and_says_so(tmp_path):
    # Two routers on one log directory: one cut off (a stalled node Ray declared dead) and
    # the one Ray started in its place. The first must not overwrite what the second wrote.
    stale = TopicCatalog(str(tmp_path))
    stale.create("events", 2)
    current = TopicCatalog(str(tmp_path))
    current.create("orders", 3)
    before = catalog_file.read_catalog(str(tmp_path / CATALOG_FILE))
    results = stale.apply([TopicChange("create", "audit", 1), TopicChange("grow", "events", 4)])
    assert [r.error for r in results] == [Errors.NOT_CONTROLLER] * 2
    assert all("replaced" in r.message for r in results)
    with pytest.raises(CatalogError) as refused:
        stale.create("audit", 1)
    assert refused.value.error == Errors.NOT_CONTROLLER
    assert catalog_file.read_catalog(str(tmp_path / CATALOG_FILE)) == before
    assert stale.topics() == {"events": 2}  # its memory is unchanged too
    current.create("audit", 1)  # the owner carries on
    assert catalog_file.read_catalog(str(tmp_path / CATALOG_FILE))["topics"] == {
        "events": 2,
        "orders": 3,
        "audit": 1,
    }


@pytest.mark.parametrize("owner", [b"{oops", b"[1]", b"[" * 50_000])
def test_a_damaged_owner_file_is_claimed_over(tmp_path, owner):
    # Before: brackets nested deep made the claim raise RecursionError: no router could start.
    TopicCatalog(str(tmp_path)).create("events", 1)
    (tmp_path / catalog_module.OWNER_FILE).write_bytes(owner)
    again = TopicCatalog(str(tmp_path))
    assert again.topics() == {"events": 1}
    again.create("orders", 1)


def test_a_snapshot_is_copied_once_per_version_and_read_only(tmp_path, monkeypatch):
    # The bootstrap listener reads the catalog for every Metadata request it answers; before,
    # each read copied it whole (3 ms at 90,000 topics).
    catalog = TopicCatalog(str(tmp_path))
    catalog.create("a", 2)
    first = catalog.snapshot()
    assert catalog.snapshot() is first
    assert (first.version, dict(first.topics), set(first.topic_ids)) == (1, {"a": 2}, {"a"})
    with pytest.raises(TypeError):
        first.topics["b"] = 1  # type: ignore[index]
    catalog.configure_group("g", [_set(SESSION, "50000")], replace=False)
    second = catalog.snapshot()
    assert second is not first and dict(second.group_configs) == {"g": {SESSION: 50_000}}
    assert dict(first.topics) == {"a": 2}  # a snapshot never changes

    def full_disk(log_or_path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(catalog_file, "append_durably", full_disk)
    with pytest.raises(OSError):
        catalog.create("lost", 1)
    assert catalog.snapshot() is second  # a failed change leaves the catalog, and its version
    monkeypatch.undo()
    catalog.alter("a", 3)
    assert dict(catalog.snapshot().topics) == {"a": 3}
