"""The direct Metadata encoder writes exactly what kio's writer writes for the answer built as
kio's entities (``kio_metadata``, the builder it replaced), at every supported version, for any
catalog, any topics asked (by name, by id, none) and any authorized operations. How much
quicker it is: bench/large_answers.py."""

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.wire import SUPPORTED_VERSIONS, ApiKey, Connection, Node, apis, metadata_response
from groupcoord.wire.builders import ZERO_TOPIC_ID
from groupcoord.wire.connection import encode_body
from tests.kafka.rawwire import make

from .frames import request_frame
from .kio_metadata import decoded, kio_metadata_response

LOW, HIGH = SUPPORTED_VERSIONS[ApiKey.METADATA]
NAMES = ["events", "clicks", "ünïcode-tøpic", "x" * 249, "a", "b.c_d-e"]


def metadata_request(version: int, topics, **flags):
    values = {
        "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
        "topics": topics,
        **flags,
    }
    body = make(apis.request_class(ApiKey.METADATA, version), values)
    (request,) = Connection().receive_data(request_frame(body))
    return request


@st.composite
def cases(draw):
    version = draw(st.integers(LOW, HIGH))
    catalog = draw(st.dictionaries(st.sampled_from(NAMES), st.integers(0, 300), max_size=5))
    ids = {name: draw(st.one_of(st.none(), st.uuids())) for name in catalog}
    ids = {name: topic_id for name, topic_id in ids.items() if topic_id is not None}
    kinds = ["all", "names", "ids"] if version >= 10 else ["all", "names"]
    asked_kind = draw(st.sampled_from(kinds))
    if asked_kind == "all":
        topics = () if version == 0 else draw(st.sampled_from([None, ()] if version else [()]))
    elif asked_kind == "names":
        names = draw(st.lists(st.sampled_from([*NAMES, "unknown-topic"]), max_size=4))
        topics = [{"name": n, "topic_id": ZERO_TOPIC_ID} for n in names]
    else:  # by id: known ones, and one no topic has
        known = draw(st.lists(st.sampled_from(sorted(ids.values()) or [uuid.uuid4()]), max_size=3))
        topics = [{"name": None, "topic_id": i} for i in [*known, uuid.uuid4()]]
    flags = {}
    if version >= 8:
        flags["include_topic_authorized_operations"] = draw(st.booleans())
        if version <= 10:
            flags["include_cluster_authorized_operations"] = draw(st.booleans())
    brokers = [
        Node(n, draw(st.sampled_from(["localhost", "p.example.com", "ø.local"])), 9092 + n)
        for n in range(draw(st.integers(0, 3)))
    ]
    view = dict(
        brokers=brokers,
        leader_id=draw(st.integers(-1, 2**31 - 1)),
        partitions=catalog,
        cluster_id=draw(st.sampled_from([None, "", "gc-3", "ü" * 40])),
        topic_ids=ids,
        operations=(draw(st.integers(-(2**31), 2**31 - 1)), draw(st.integers(0, 2**31 - 1))),
    )
    return metadata_request(version, topics, **flags), view


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_the_direct_answer_is_kios_bytes(case):
    request, view = case
    encoded = metadata_response(request, **view)
    assert encoded.api_key == ApiKey.METADATA and encoded.api_version == request.api_version
    assert encoded.body == encode_body(kio_metadata_response(request, **view))


def test_every_version_reads_back_as_asked():
    catalog, ids = {"events": 3, "clicks": 1}, {"events": uuid.uuid4()}
    for version in range(LOW, HIGH + 1):
        request = metadata_request(version, () if version == 0 else None)
        view = dict(brokers=[Node(2, "h", 9)], leader_id=2, partitions=catalog, topic_ids=ids)
        answer = decoded(request, metadata_response(request, **view))
        named = [(t.name, len(t.partitions)) for t in answer.topics]
        assert named == [("clicks", 1), ("events", 3)]
        assert [p.partition_index for p in answer.topics[1].partitions] == [0, 1, 2]
        assert {p.leader_id for t in answer.topics for p in t.partitions} == {2}


def test_a_topic_of_many_partitions_is_kios_bytes_at_every_version():
    # 20,000 partitions: an array length of three varint bytes in the flexible versions.
    catalog = {"big": 20_000, "small": 1}
    ids = {"big": uuid.uuid4()}
    for version in range(LOW, HIGH + 1):
        request = metadata_request(version, () if version == 0 else None)
        view = dict(brokers=[Node(0, "h", 9)], leader_id=0, partitions=catalog, topic_ids=ids)
        expected = encode_body(kio_metadata_response(request, **view))
        assert metadata_response(request, **view).body == expected
