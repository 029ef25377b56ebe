"""Requests a client sends back to back, in one write, are answered one at a time and in order.

A listener answers one request of a connection at a time (Kafka clients match answers by
order): the rest wait in the connection's buffer and are released by the answer before them.
Commits make the first answer wait for the log, so the requests behind it are still buffered
when it is written.
"""

from __future__ import annotations

import socket
import struct

import pytest

from groupcoord.wire import apis
from groupcoord.wire.apis import ApiKey
from tests.kafka.rawwire import make
from tests.wire.frames import request_frame, split_response

from .kafka_inproc import WirePartition

TOPICS = {"events": 2}
IO_TIMEOUT_S = 10
COMMIT_VERSION = 8  # flexible: response header v1
FETCH_VERSION = 7


@pytest.fixture(scope="module", params=["asyncio", "uvloop"])
def port(tmp_path_factory, request):
    partition = WirePartition(
        str(tmp_path_factory.mktemp("wire-order")), TOPICS, loop=request.param
    )
    address = partition.start()
    yield int(address.rsplit(":", 1)[1])
    partition.stop()


def _frame(api_key: ApiKey, version: int, correlation_id: int, **values) -> bytes:
    return request_frame(
        make(apis.request_class(api_key, version), values), correlation_id=correlation_id
    )


def _commit(correlation_id: int, offset: int) -> bytes:
    partition = {
        "partition_index": 0,
        "committed_offset": offset,
        "committed_leader_epoch": -1,
        "committed_metadata": "",
    }
    return _frame(
        ApiKey.OFFSET_COMMIT,
        COMMIT_VERSION,
        correlation_id,
        group_id="ordered",
        generation_id_or_member_epoch=-1,  # a simple group: no member, no generation
        member_id="",
        group_instance_id=None,
        topics=[{"name": "events", "partitions": [partition]}],
    )


def _fetch(correlation_id: int) -> bytes:
    return _frame(
        ApiKey.OFFSET_FETCH,
        FETCH_VERSION,
        correlation_id,
        group_id="ordered",
        topics=[{"name": "events", "partition_indexes": [0]}],
        require_stable=False,
    )


def _read_frame(sock: socket.socket) -> bytes:
    size = sock.recv(4, socket.MSG_WAITALL)
    return size + sock.recv(struct.unpack(">i", size)[0], socket.MSG_WAITALL)


def test_requests_in_one_write_are_answered_in_order(port):
    with socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S) as sock:
        sock.settimeout(IO_TIMEOUT_S)
        sock.sendall(_commit(1, 10) + _commit(2, 20) + _fetch(3) + _commit(4, 30))
        commit_cls = apis.response_class(ApiKey.OFFSET_COMMIT, COMMIT_VERSION)
        fetch_cls = apis.response_class(ApiKey.OFFSET_FETCH, FETCH_VERSION)
        answers = [
            split_response(_read_frame(sock), commit_cls, header_version=1),
            split_response(_read_frame(sock), commit_cls, header_version=1),
            split_response(_read_frame(sock), fetch_cls, header_version=1),
            split_response(_read_frame(sock), commit_cls, header_version=1),
        ]
    assert [correlation_id for correlation_id, _ in answers] == [1, 2, 3, 4]
    for _, commit in (answers[0], answers[1], answers[3]):
        assert [p.error_code for t in commit.topics for p in t.partitions] == [0]
    # The fetch, answered after the second commit and before the third, reads the second.
    fetched = answers[2][1]
    assert fetched.error_code == 0
    assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [20]
