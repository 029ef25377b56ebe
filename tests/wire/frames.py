"""Client-side framing for the wire tests, written with kio's own writers (independent of the
``Connection`` parser under test)."""

import datetime
import io
import struct

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_int32, read_unsigned_varint

from groupcoord.coordinator import messages as core
from groupcoord.wire import apis
from groupcoord.wire.apis import ApiKey
from groupcoord.wire.translate import build

MS = datetime.timedelta(milliseconds=1)


def request_frame(
    body,
    *,
    correlation_id: int = 7,
    client_id: str | None = "test-client",
    api_version: int | None = None,
) -> bytes:
    """A whole request frame (size, header, body) for the kio request entity ``body``."""
    version = body.__version__ if api_version is None else api_version
    header_cls = RequestHeaderV2 if body.__flexible__ else RequestHeaderV1
    buffer = io.BytesIO()
    entity_writer(header_cls)(
        buffer,
        header_cls(
            request_api_key=body.__api_key__,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id=client_id,
        ),
    )
    entity_writer(type(body))(buffer, body)
    payload = buffer.getvalue()
    return struct.pack(">i", len(payload)) + payload


def split_response(frame: bytes, response_cls: type, *, header_version: int):
    """(correlation id, decoded body) of a response frame; checks the size prefix and that the
    body decodes exactly to the frame's end."""
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    correlation_id, at = read_int32(frame, 4)
    at += 4
    if header_version == 1:
        tags, n = read_unsigned_varint(frame, at)
        assert tags == 0
        at += n
    body, n = entity_reader(response_cls)(frame, at)
    assert at + n == len(frame)
    return correlation_id, body


def build_nested(cls, values: dict):
    """kio entity ``cls`` from plain values; dicts in lists become the nested entity named in
    ``values["_<field>"]``."""
    out = {}
    for name, value in values.items():
        if name.startswith("_"):
            continue
        nested = values.get("_" + name)
        if nested is not None:
            nested_cls = apis.nested_class(cls, nested)
            value = tuple(build_nested(nested_cls, v) for v in value)
        out[name] = value
    return build(cls, **out)


def core_request_of(key: int, body) -> object:
    """What ``fast_requests`` must build for kio's decoded ``body`` of a request it reads: the
    translation ``translate`` made from kio's entities before, kept here as the reference (a
    JoinGroup's client id and host are "": ``request_to_core`` adds them)."""
    if key == ApiKey.JOIN_GROUP:
        version = body.__version__
        session_timeout_ms = body.session_timeout // MS
        return core.JoinGroupRequest(
            group_id=body.group_id,
            member_id=body.member_id,
            protocol_type=body.protocol_type,
            protocols=[core.JoinGroupRequestProtocol(p.name, p.metadata) for p in body.protocols],
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=(
                body.rebalance_timeout // MS if version >= 1 else session_timeout_ms
            ),
            group_instance_id=getattr(body, "group_instance_id", None),
            require_known_member_id=version >= 4,
            reason=getattr(body, "reason", None),
        )
    if key == ApiKey.SYNC_GROUP:
        return core.SyncGroupRequest(
            group_id=body.group_id,
            generation_id=body.generation_id,
            member_id=body.member_id,
            assignments=[
                core.SyncGroupRequestAssignment(a.member_id, a.assignment) for a in body.assignments
            ],
            group_instance_id=getattr(body, "group_instance_id", None),
            protocol_type=getattr(body, "protocol_type", None),
            protocol_name=getattr(body, "protocol_name", None),
        )
    if key == ApiKey.HEARTBEAT:
        return core.HeartbeatRequest(
            body.group_id,
            body.generation_id,
            body.member_id,
            getattr(body, "group_instance_id", None),
        )
    assert key == ApiKey.OFFSET_COMMIT, key
    retention = getattr(body, "retention_time", None)
    return core.OffsetCommitRequest(
        body.group_id,
        body.generation_id_or_member_epoch,
        body.member_id,
        [
            core.OffsetCommitRequestPartition(
                topic.name,
                p.partition_index,
                p.committed_offset,
                getattr(p, "committed_leader_epoch", -1),
                p.committed_metadata,
            )
            for topic in body.topics
            for p in topic.partitions
        ],
        getattr(body, "group_instance_id", None),
        -1 if retention is None else retention // datetime.timedelta(milliseconds=1),
    )
