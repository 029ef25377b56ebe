"""Every supported (api key, version): a request written by kio's encoder comes out of
``Connection.receive_data`` equal, and a response from ``send_response`` decodes equal with kio's
decoder, under the header version Kafka prescribes."""

import datetime
import zoneinfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.produce.v8.request import ProduceRequest
from kio.schema.produce.v8.response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)

from groupcoord.wire import SUPPORTED_VERSIONS, ApiKey, Connection, WireRequest, apis
from groupcoord.wire.fast_requests import DECODERS

from .frames import core_request_of, request_frame, split_response

PAIRS = [
    (key, version)
    for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
    for version in range(low, high + 1)
]
SETTINGS = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def test_every_pair_is_covered():
    assert len(PAIRS) == sum(high - low + 1 for low, high in SUPPORTED_VERSIONS.values())
    assert {key for key, _ in PAIRS} == set(ApiKey)


@pytest.mark.parametrize("key, version", PAIRS, ids=[f"{k.name}-v{v}" for k, v in PAIRS])
@SETTINGS
@given(data=st.data())
def test_request_and_response_round_trip(key, version, data):
    request_body = data.draw(st.from_type(apis.request_class(key, version)))
    correlation_id = data.draw(st.integers(-(2**31), 2**31 - 1))
    client_id = data.draw(st.none() | st.text(max_size=20))
    conn = Connection()
    (request,) = conn.receive_data(
        request_frame(request_body, correlation_id=correlation_id, client_id=client_id)
    )
    assert isinstance(request, WireRequest), request
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (
        key,
        version,
        correlation_id,
        client_id,
    )
    if key in DECODERS:  # read straight into the core's request
        assert request.body == core_request_of(key, request_body)
    else:
        assert request.body == request_body

    response_cls = apis.response_class(key, version)
    response_body = data.draw(st.from_type(response_cls))
    frame = conn.send_response(request, response_body)
    header_version = 1 if request_body.__flexible__ and key != ApiKey.API_VERSIONS else 0
    assert (correlation_id, response_body) == split_response(
        frame, response_cls, header_version=header_version
    )


def test_a_time_in_any_zone_is_written_as_its_instant():
    # An ambiguous local time (a daylight saving fold): the wire carries its instant, which a
    # client reads back in UTC. (Python never compares such a time equal to another zone's.)
    local = datetime.datetime(1995, 9, 23, 23, 0, tzinfo=zoneinfo.ZoneInfo("Europe/Tiraspol"))
    partition = PartitionProduceResponse(
        index=0, error_code=ErrorCode.none, base_offset=0, log_append_time=local, record_errors=()
    )
    body = ProduceResponse(
        responses=(TopicProduceResponse(name="t", partition_responses=(partition,)),)
    )
    conn = Connection()
    (request,) = conn.receive_data(
        request_frame(
            ProduceRequest(
                transactional_id=None, acks=0, timeout=datetime.timedelta(0), topic_data=()
            )
        )
    )
    _, decoded = split_response(
        conn.send_response(request, body), ProduceResponse, header_version=0
    )
    written = decoded.responses[0].partition_responses[0].log_append_time
    assert written == datetime.datetime(1995, 9, 23, 20, 0, tzinfo=datetime.UTC)
    assert written.timestamp() == local.timestamp()
