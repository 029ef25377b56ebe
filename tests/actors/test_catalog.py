"""The topic catalog: Kafka's naming and growth rules, and durable across reopen."""

from __future__ import annotations

import json
import os
import pickle

import pytest

from groupcoord.actors.catalog import (
    CATALOG_FILE,
    MAX_TOPIC_NAME_CHARS,
    CatalogError,
    TopicCatalog,
)
from groupcoord.coordinator import Errors


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
    [b"{", b"[]", b'{"version": "1", "topics": {}}', b'{"version": 1, "topics": {"a b": 1}}'],
)
def test_a_damaged_catalog_is_an_error_naming_the_file(tmp_path, content):
    (tmp_path / CATALOG_FILE).write_bytes(content)
    with pytest.raises(ValueError, match=CATALOG_FILE):
        TopicCatalog(str(tmp_path))


def test_the_file_is_plain_json(tmp_path):
    TopicCatalog(str(tmp_path)).create("events", 3)
    assert json.loads((tmp_path / CATALOG_FILE).read_text()) == {
        "version": 1,
        "topics": {"events": 3},
    }


def test_a_refusal_survives_pickling_with_its_kafka_code():
    # It crosses from the router actor to callers through Ray's serialization.
    try:
        raise CatalogError(Errors.INVALID_PARTITIONS, "a topic can only grow")
    except CatalogError as exc:
        again = pickle.loads(pickle.dumps(exc))
    assert (again.error, str(again)) == (Errors.INVALID_PARTITIONS, "a topic can only grow")
