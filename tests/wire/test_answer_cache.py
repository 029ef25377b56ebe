"""Cached answers: the same bytes as answers built per request; Metadata's rebuilt whenever the
listener's view changes, and bounded."""

import struct
import uuid

import pytest

from groupcoord.actors.catalog import MAX_CATALOG_PARTITIONS, MAX_PARTITIONS_PER_TOPIC
from groupcoord.wire import (
    SUPPORTED_VERSIONS,
    ApiKey,
    Connection,
    Node,
    answer_cache,
    apis,
    metadata_response,
)
from groupcoord.wire.answer_cache import MAX_ENTRIES, MetadataAnswers, api_versions_answer
from groupcoord.wire.builders import ZERO_TOPIC_ID
from groupcoord.wire.connection import EncodedResponse, encode_response
from tests.kafka.rawwire import make

from .frames import request_frame
from .kio_metadata import decoded, kio_metadata_response

NODES = [Node(0, "p0.local", 9092), Node(1, "p1.local", 9093)]
FLAGS = dict(
    allow_auto_topic_creation=True,
    include_cluster_authorized_operations=False,
    include_topic_authorized_operations=False,
)


def metadata_request(version: int, topics, correlation_id: int = 1, **flags):
    values = {**FLAGS, "topics": topics, **flags}
    body = make(apis.request_class(ApiKey.METADATA, version), values)
    (request,) = Connection().receive_data(request_frame(body, correlation_id=correlation_id))
    return request


def view(catalog, ids, brokers=NODES, operations=(3576, 8096)):
    return dict(
        brokers=brokers,
        leader_id=0,
        partitions=catalog,
        cluster_id="gc",
        topic_ids=ids,
        operations=operations,
    )


def built(request, **view_values) -> bytes:
    return encode_response(request, kio_metadata_response(request, **view_values))


@pytest.mark.parametrize("version", range(SUPPORTED_VERSIONS[ApiKey.METADATA][1] + 1))
@pytest.mark.parametrize("asked", ["all", "one", "unknown"])
def test_answers_are_the_bytes_built_per_request(version, asked):
    catalog = {"events": 64, "clicks": 3}
    ids = {"events": uuid.uuid4(), "clicks": uuid.uuid4()}
    topics = {
        "all": () if version == 0 else None,
        "one": [{"name": "events", "topic_id": ZERO_TOPIC_ID}],
        "unknown": [{"name": "nothing-here", "topic_id": ZERO_TOPIC_ID}],
    }[asked]
    answers = MetadataAnswers()
    for correlation_id in (7, 8):  # the second from the cache, under its own correlation id
        request = metadata_request(version, topics, correlation_id)
        frame = encode_response(request, answers.answer(request, **view(catalog, ids)))
        assert frame == built(request, **view(catalog, ids))
    assert len(answers) == 1


def test_a_changed_view_is_answered_afresh():
    catalog = {"events": 2}
    ids = {"events": uuid.uuid4()}
    answers = MetadataAnswers()
    request = metadata_request(12, None)
    first = answers.answer(request, **view(catalog, ids))
    assert answers.answer(request, **view(catalog, ids)) is first
    catalog["events"] = 5  # grown in place: the copy in the cache tells
    grown = answers.answer(request, **view(catalog, ids))
    assert grown is not first
    assert encode_response(request, grown) == built(request, **view(catalog, ids))
    ids["clicks"], catalog["clicks"] = uuid.uuid4(), 1
    assert answers.answer(request, **view(catalog, ids)) is not grown
    moved = [Node(0, "p0.local", 19092), NODES[1]]
    again = answers.answer(request, **view(catalog, ids, moved))
    assert encode_response(request, again) == built(request, **view(catalog, ids, moved))


class Uncomparable(dict):
    """A catalog that counts how often it is compared."""

    compared = 0

    def __eq__(self, other):
        Uncomparable.compared += 1
        return dict.__eq__(self, other)

    __hash__ = None


def test_a_numbered_catalog_is_checked_by_its_number_not_compared():
    # Before, every answer from the cache compared the whole catalog with the one it was built
    # from: 4.5 ms at 90,000 topics for an answer naming one topic.
    catalog = Uncomparable(events=2)
    ids = {"events": uuid.uuid4()}
    answers = MetadataAnswers()
    request = metadata_request(12, [{"name": "events", "topic_id": ZERO_TOPIC_ID}])
    first = answers.answer(request, **view(catalog, ids), catalog_version=4)
    Uncomparable.compared = 0
    assert answers.answer(request, **view(catalog, ids), catalog_version=4) is first
    assert Uncomparable.compared == 0
    grown = Uncomparable(events=5)  # catalog 5: a new answer
    again = answers.answer(request, **view(grown, ids), catalog_version=5)
    assert again is not first
    assert encode_response(request, again) == built(request, **view(grown, ids))
    # Not numbered (a negative number, as a view that has none): compared by value.
    unnumbered = answers.answer(request, **view(grown, ids), catalog_version=-1)
    assert answers.answer(request, **view(grown, ids), catalog_version=-1) is unnumbered
    assert Uncomparable.compared > 0


@pytest.mark.parametrize("version", [8, 10, 11, 12])
def test_authorized_operations_are_answered_when_asked_for_each_caller(version):
    """Kafka fills them in only when asked (the cluster's up to v10), on every topic named,
    known or not; two callers with different rights get their own answers from the cache."""
    catalog, ids = {"events": 2}, {"events": uuid.uuid4()}
    topics = [{"name": n, "topic_id": ZERO_TOPIC_ID} for n in ("events", "nothing-here")]
    answers = MetadataAnswers()
    request = metadata_request(version, topics)
    plain = answers.answer(request, **view(catalog, ids))
    assert encode_response(request, plain) == built(request, **view(catalog, ids))
    for flags in (
        dict(include_topic_authorized_operations=True),
        dict(include_cluster_authorized_operations=True),
    ):
        request = metadata_request(version, topics, **flags)
        for operations in ((3576, 8096), (280, 4352)):
            encoded = answers.answer(request, **view(catalog, ids, operations=operations))
            frame = encode_response(request, encoded)
            assert frame == built(request, **view(catalog, ids, operations=operations))
    theirs = view(catalog, ids, operations=(280, 4352))
    asked = metadata_request(version, topics, include_topic_authorized_operations=True)
    described = decoded(asked, metadata_response(asked, **theirs))
    assert [t.topic_authorized_operations for t in described.topics] == [280, 280]
    asked = metadata_request(version, topics, include_cluster_authorized_operations=True)
    cluster = decoded(asked, metadata_response(asked, **theirs))
    omitted = -(2**31)
    assert [t.topic_authorized_operations for t in cluster.topics] == [omitted, omitted]
    assert getattr(cluster, "cluster_authorized_operations", omitted) == (
        4352 if version <= 10 else omitted
    )


def test_the_cache_is_bounded_in_entries_and_bytes(monkeypatch):
    catalog = {f"t{n}": 1 for n in range(MAX_ENTRIES + 5)}
    answers = MetadataAnswers()
    for name in catalog:
        answers.answer(
            metadata_request(12, [{"name": name, "topic_id": ZERO_TOPIC_ID}]), **view(catalog, {})
        )
    assert len(answers) == MAX_ENTRIES
    monkeypatch.setattr(answer_cache, "MAX_CACHED_BYTES", 20_000)
    answers = MetadataAnswers()
    asked = [metadata_request(12, [{"name": n, "topic_id": ZERO_TOPIC_ID}]) for n in ("a", "b")]
    catalog = {"a": 500, "b": 500}  # ~13 kB an answer: one fits the budget, two do not
    first = answers.answer(asked[0], **view(catalog, {}))
    assert answers.answer(asked[0], **view(catalog, {})) is first  # kept
    second = answers.answer(asked[1], **view(catalog, {}))
    assert len(answers) == 1 and answers.answer(asked[1], **view(catalog, {})) is second
    assert answers.answer(asked[0], **view(catalog, {})) is not first  # it made room
    huge = metadata_request(12, None)
    answer = answers.answer(huge, **view({"big": 1_000}, {}))  # over the whole budget
    assert len(answer.body) > answer_cache.MAX_CACHED_BYTES
    assert answers.answer(huge, **view({"big": 1_000}, {})) is not answer  # built again


def test_an_answer_naming_every_partition_of_the_largest_catalog_is_kept():
    # Before: answers over 256 KiB (about 10,000 partitions) were built per request, so every
    # all-topics Metadata of a big catalog held the listener's loop for its whole build.
    topics = MAX_CATALOG_PARTITIONS // MAX_PARTITIONS_PER_TOPIC
    catalog = {f"topic-{n}": MAX_PARTITIONS_PER_TOPIC for n in range(topics)}
    answers = MetadataAnswers()
    request = metadata_request(12, None)
    answer = answers.answer(request, **view(catalog, {}))
    assert len(answer.body) > 20 * MAX_CATALOG_PARTITIONS  # every partition is in it
    assert answers.answer(request, **view(catalog, {})) is answer


def api_versions_request(version: int, name: str = "librdkafka") -> object:
    values = dict(client_software_name=name, client_software_version="2.3.0")
    body = make(apis.request_class(ApiKey.API_VERSIONS, version), values)
    (request,) = Connection().receive_data(request_frame(body, correlation_id=9))
    return request


@pytest.mark.parametrize("version", range(SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1] + 1))
def test_api_versions_are_encoded_once_per_version_with_the_same_bytes(version):
    request = api_versions_request(version)
    answer = api_versions_answer(request)
    assert api_versions_answer(api_versions_request(version)) is answer
    expected = encode_response(request, apis.api_versions_response(request))
    assert encode_response(request, answer) == expected


def test_api_versions_refusals_are_built_per_request():
    bad_name = api_versions_request(3, name="my client")  # not Kafka's software name pattern
    # v9: above our range, answered in v0 (a flexible header, then a body we cannot know)
    header = struct.pack(">hhih", 18, 9, 99, -1) + b"\x00"
    frame = header + b"future body bytes"
    (above,) = Connection().receive_data(struct.pack(">i", len(frame)) + frame)
    for request in (bad_name, above):
        answer = api_versions_answer(request)
        assert type(answer) is not EncodedResponse
        assert answer == apis.api_versions_response(request)
        assert encode_response(request, answer) != encode_response(
            request, api_versions_answer(api_versions_request(request.body_version))
        )
