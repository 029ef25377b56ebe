"""Raw Kafka frames over blocking sockets, for the in-process listener tests: requests written
with kio's classes (``tests.wire.frames``), answers read whole."""

from __future__ import annotations

import socket
import struct

from groupcoord.wire import apis
from groupcoord.wire.apis import ApiKey
from tests.kafka.rawwire import make
from tests.wire.frames import request_frame

COMMIT_VERSION = 8  # flexible: response header v1


def frame(api_key: ApiKey, version: int, correlation_id: int, **values) -> bytes:
    """A request frame of ``api_key`` at ``version`` with the body ``values``."""
    return request_frame(
        make(apis.request_class(api_key, version), values), correlation_id=correlation_id
    )


def simple_commit(correlation_id: int, group_id: str, topic: str, offset: int) -> bytes:
    """An OffsetCommit (``COMMIT_VERSION``) of ``topic``'s partition 0 at ``offset`` from no
    member: a simple group's, which needs no join first."""
    partition = {
        "partition_index": 0,
        "committed_offset": offset,
        "committed_leader_epoch": -1,
        "committed_metadata": "",
    }
    return frame(
        ApiKey.OFFSET_COMMIT,
        COMMIT_VERSION,
        correlation_id,
        group_id=group_id,
        generation_id_or_member_epoch=-1,  # a simple group: no member, no generation
        member_id="",
        group_instance_id=None,
        topics=[{"name": topic, "partitions": [partition]}],
    )


def read_exact(sock: socket.socket, count: int) -> bytes:
    # Not MSG_WAITALL: a socket with a timeout is non-blocking underneath, and returns less.
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, f"closed after {len(data)} of {count} bytes"
        data += chunk
    return bytes(data)


def read_frame(sock: socket.socket) -> bytes:
    """One whole answer frame, its size prefix included (as ``split_response`` takes it)."""
    size = read_exact(sock, 4)
    return size + read_exact(sock, struct.unpack(">i", size)[0])
