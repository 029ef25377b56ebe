"""FindCoordinator, Metadata, ListOffsets, Fetch and Produce answers at every supported version,
encoded by Connection and read back with kio's decoder."""

import datetime
import uuid

import pytest
from kio.schema.errors import ErrorCode

from groupcoord.wire import (
    SUPPORTED_VERSIONS,
    ApiKey,
    Connection,
    Node,
    apis,
    describe_cluster_response,
    fetch_response,
    find_coordinator_response,
    list_offsets_response,
    metadata_response,
    produce_expects_response,
    produce_response,
)
from groupcoord.wire.builders import PRODUCE_REFUSED, ZERO_TOPIC_ID

from .frames import build_nested, request_frame, split_response

CATALOG = {"events": 2, "clicks": 1}
TOPIC_IDS = {"events": uuid.uuid4(), "clicks": uuid.uuid4()}
NODE = Node(3, "coordinator-3.local", 9095)


def versions(key: ApiKey):
    low, high = SUPPORTED_VERSIONS[key]
    return range(low, high + 1)


# Request flags the tests do not vary.
FLAGS = dict(
    allow_auto_topic_creation=True,
    include_cluster_authorized_operations=False,
    include_topic_authorized_operations=False,
)


def exchange(api: ApiKey, version: int, answer, **values):
    values = {**FLAGS, **values}
    conn = Connection()
    body = build_nested(apis.request_class(api, version), values)
    (request,) = conn.receive_data(request_frame(body))
    frame = conn.send_response(request, answer(request))
    flexible = apis.request_is_flexible(api, version)
    return split_response(
        frame, apis.response_class(api, version), header_version=1 if flexible else 0
    )[1]


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CLUSTER))
@pytest.mark.parametrize("operations", [False, True])
def test_describe_cluster(version, operations):
    def answer(request):
        return describe_cluster_response(
            request,
            brokers=[NODE, Node(4, "coordinator-4.local", 9096)],
            controller_id=3,
            cluster_id="gc",
            cluster_operations=8096,
        )

    described = exchange(
        ApiKey.DESCRIBE_CLUSTER,
        version,
        answer,
        include_cluster_authorized_operations=operations,
        endpoint_type=1,
        include_fenced_brokers=True,
    )
    assert described.error_code == ErrorCode.none
    assert (described.cluster_id, described.controller_id) == ("gc", 3)
    assert [(b.broker_id, b.host, b.port) for b in described.brokers] == [
        (3, "coordinator-3.local", 9095),
        (4, "coordinator-4.local", 9096),
    ]
    if version >= 2:
        assert not any(b.is_fenced for b in described.brokers)
    assert described.cluster_authorized_operations == (8096 if operations else -(2**31))


@pytest.mark.parametrize("version", range(1, 3))
@pytest.mark.parametrize(
    ("endpoint_type", "error"),
    [(2, ErrorCode.mismatched_endpoint_type), (0, ErrorCode.unsupported_endpoint_type)],
)
def test_describe_cluster_answers_for_brokers_only(version, endpoint_type, error):
    def answer(request):
        return describe_cluster_response(
            request, brokers=[NODE], controller_id=3, cluster_id="gc", cluster_operations=8096
        )

    described = exchange(
        ApiKey.DESCRIBE_CLUSTER,
        version,
        answer,
        include_cluster_authorized_operations=True,
        endpoint_type=endpoint_type,
        include_fenced_brokers=False,
    )
    assert (described.error_code, described.endpoint_type) == (error, 1)
    assert (described.brokers, described.controller_id) == ((), -1)
    assert described.error_message


@pytest.mark.parametrize("version", versions(ApiKey.FIND_COORDINATOR))
def test_find_coordinator(version):
    def coordinator_for(group_id):
        return NODE if group_id == "orders" else None

    def answer(request):
        return find_coordinator_response(request, coordinator_for)

    if version < 4:
        found = exchange(ApiKey.FIND_COORDINATOR, version, answer, key="orders", key_type=0)
        assert (found.error_code, found.node_id, found.host, found.port) == (
            ErrorCode.none,
            3,
            "coordinator-3.local",
            9095,
        )
        if version >= 1:  # Kafka 4.3 names the success "NONE" (Errors.NONE.message()) in v1-3
            assert found.error_message == "NONE"
        missing = exchange(ApiKey.FIND_COORDINATOR, version, answer, key="nobody", key_type=0)
        assert (missing.error_code, missing.node_id) == (ErrorCode.coordinator_not_available, -1)
    else:
        found = exchange(
            ApiKey.FIND_COORDINATOR,
            version,
            answer,
            key_type=0,
            coordinator_keys=("orders", "nobody"),
        )
        assert [(c.key, c.error_code, c.node_id, c.host, c.port) for c in found.coordinators] == [
            ("orders", ErrorCode.none, 3, "coordinator-3.local", 9095),
            ("nobody", ErrorCode.coordinator_not_available, -1, "", -1),
        ]
        assert found.coordinators[0].error_message == ""  # Kafka 4.3's, from v4
    if version >= 1:
        values = dict(key="txn-1") if version < 4 else dict(coordinator_keys=("txn-1",))
        refused = exchange(ApiKey.FIND_COORDINATOR, version, answer, key_type=1, **values)
        error = refused.error_code if version < 4 else refused.coordinators[0].error_code
        assert error == ErrorCode.invalid_request


@pytest.mark.parametrize("version", versions(ApiKey.METADATA))
def test_metadata(version):
    def answer(request):
        return metadata_response(
            request,
            brokers=[NODE],
            leader_id=3,
            partitions=CATALOG,
            cluster_id="gc",
            topic_ids=TOPIC_IDS,
        )

    every = exchange(
        ApiKey.METADATA,
        version,
        answer,
        topics=() if version == 0 else None,
        allow_auto_topic_creation=True,
    )
    assert [(b.node_id, b.host, b.port) for b in every.brokers] == [
        (3, "coordinator-3.local", 9095)
    ]
    assert [
        (
            t.name,
            t.error_code,
            [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in t.partitions],
        )
        for t in every.topics
    ] == [
        ("clicks", ErrorCode.none, [(0, 3, (3,), (3,))]),
        ("events", ErrorCode.none, [(0, 3, (3,), (3,)), (1, 3, (3,), (3,))]),
    ]
    if version >= 2:
        assert every.cluster_id == "gc"
    if version >= 10:
        assert {t.name: t.topic_id for t in every.topics} == TOPIC_IDS

    topic = dict(name="nope") if version < 10 else dict(name="nope", topic_id=ZERO_TOPIC_ID)
    named = exchange(
        ApiKey.METADATA,
        version,
        answer,
        allow_auto_topic_creation=True,
        _topics="MetadataRequestTopic",
        topics=[topic, {**topic, "name": "clicks"}],
    )
    assert [(t.name, t.error_code, len(t.partitions)) for t in named.topics] == [
        ("nope", ErrorCode.unknown_topic_or_partition, 0),
        ("clicks", ErrorCode.none, 1),
    ]
    if version >= 1:
        none = exchange(ApiKey.METADATA, version, answer, topics=(), allow_auto_topic_creation=True)
        assert none.topics == ()
    if version >= 10:
        by_id = exchange(
            ApiKey.METADATA,
            version,
            answer,
            _topics="MetadataRequestTopic",
            topics=[
                dict(name=None, topic_id=uuid.uuid4()),
                dict(name=None, topic_id=TOPIC_IDS["events"]),
            ],
        )
        assert [(t.name, t.topic_id, t.error_code, len(t.partitions)) for t in by_id.topics] == [
            (None if version >= 12 else "", ZERO_TOPIC_ID, ErrorCode.unknown_topic_id, 0),
            ("events", TOPIC_IDS["events"], ErrorCode.none, 2),
        ]


@pytest.mark.parametrize("version", versions(ApiKey.LIST_OFFSETS))
def test_list_offsets(version):
    def answer(request):
        return list_offsets_response(request, partitions=CATALOG, end_offsets={("events", 1): 42})

    listed = exchange(
        ApiKey.LIST_OFFSETS,
        version,
        answer,
        replica_id=-1,
        isolation_level=0,
        timeout=datetime.timedelta(seconds=1),
        _topics="ListOffsetsTopic",
        topics=[
            dict(
                name="events",
                _partitions="ListOffsetsPartition",
                partitions=[
                    dict(partition_index=0, timestamp=-2, current_leader_epoch=-1),
                    dict(partition_index=1, timestamp=-1, current_leader_epoch=-1),
                    dict(partition_index=0, timestamp=1_700_000_000_000, current_leader_epoch=-1),
                    dict(partition_index=5, timestamp=-1, current_leader_epoch=-1),
                ],
            )
        ],
    )
    assert [(p.partition_index, p.error_code, p.offset) for p in listed.topics[0].partitions] == [
        (0, ErrorCode.none, 0),
        (1, ErrorCode.none, 42),
        (0, ErrorCode.none, -1),
        (5, ErrorCode.unknown_topic_or_partition, -1),
    ]


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
def test_fetch_is_answered_empty(version):
    def answer(request):
        return fetch_response(request, partitions=CATALOG, end_offsets={("events", 0): 10})

    partitions = [
        dict(
            partition=0,
            fetch_offset=4,
            partition_max_bytes=1 << 20,
            log_start_offset=-1,
            current_leader_epoch=-1,
            last_fetched_epoch=-1,
        ),
        dict(
            partition=1,
            fetch_offset=99,
            partition_max_bytes=1 << 20,
            log_start_offset=-1,
            current_leader_epoch=-1,
            last_fetched_epoch=-1,
        ),
    ]
    fetched = exchange(
        ApiKey.FETCH,
        version,
        answer,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=(),
        rack_id="",
        _topics="FetchTopic",
        topics=[
            dict(topic="events", _partitions="FetchPartition", partitions=partitions),
            dict(topic="gone", _partitions="FetchPartition", partitions=partitions[:1]),
        ],
    )
    assert [
        (
            t.topic,
            [(p.partition_index, p.error_code, p.high_watermark, p.records) for p in t.partitions],
        )
        for t in fetched.responses
    ] == [
        ("events", [(0, ErrorCode.none, 10, b""), (1, ErrorCode.none, 99, b"")]),
        ("gone", [(0, ErrorCode.unknown_topic_or_partition, -1, None)]),
    ]
    if version >= 7:
        assert fetched.session_id == 0


def produce_values(acks: int) -> dict:
    partitions = [dict(index=0, records=b"batch"), dict(index=7, records=None)]
    return dict(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=30),
        _topic_data="TopicProduceData",
        topic_data=[
            dict(name="events", _partition_data="PartitionProduceData", partition_data=partitions),
            dict(
                name="gone", _partition_data="PartitionProduceData", partition_data=partitions[:1]
            ),
        ],
    )


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
def test_produce_is_refused_per_partition(version):
    def answer(request):
        assert produce_expects_response(request)
        return produce_response(request, partitions=CATALOG)

    produced = exchange(ApiKey.PRODUCE, version, answer, **produce_values(-1))
    answers = [
        (t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
        for t in produced.responses
    ]
    assert answers == [
        (
            "events",
            [(0, ErrorCode.invalid_request, -1), (7, ErrorCode.unknown_topic_or_partition, -1)],
        ),
        ("gone", [(0, ErrorCode.unknown_topic_or_partition, -1)]),
    ]
    if version >= 8:
        messages = [p.error_message for p in produced.responses[0].partition_responses]
        assert messages == [PRODUCE_REFUSED, None]


def test_produce_without_acks_expects_no_answer():
    body = build_nested(apis.request_class(ApiKey.PRODUCE, 9), produce_values(0))
    (request,) = Connection().receive_data(request_frame(body))
    assert not produce_expects_response(request)
