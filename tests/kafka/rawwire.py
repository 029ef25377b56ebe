"""A raw Kafka wire client for the differential tests: one blocking socket per connection,
requests and responses encoded with kio's classes (the codec groupcoord's own wire layer uses),
at whatever version the caller names.

Requests are given as plain values: ``client.send(ApiKey.JOIN_GROUP, 9, group_id="g", ...)``,
nested entities as dicts, durations as integer milliseconds, and fields the version does not
have are left out (as ``groupcoord.wire.translate.build`` does), so one call site serves every
version. Responses come back as kio entities; ``plain`` turns them into dicts of plain values
for comparison.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import io
import socket
import struct
import time
import typing
import uuid
from functools import cache

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_int32, read_unsigned_varint
from kio.static.primitive import i32Timedelta, i64Timedelta

from groupcoord.wire import ApiKey

SOCKET_TIMEOUT_S = 30.0
COORDINATOR_TIMEOUT_S = 60.0
_NOT_YET = (ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress)
_SIZE = struct.Struct(">i")
_TIMEDELTAS = {"timedelta_i32": i32Timedelta, "timedelta_i64": i64Timedelta}


def parse_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


@cache
def _fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


@cache
def _hints(cls: type) -> dict[str, object]:
    return typing.get_type_hints(cls)


def _nested_entity(cls: type, name: str) -> type | None:
    """The entity class of a field holding nested entities (``X``, ``tuple[X, ...]``, optional
    or not), else None."""
    pending = [_hints(cls)[name]]
    while pending:  # through Optional[...] and tuple[X, ...]
        hint = pending.pop()
        if dataclasses.is_dataclass(hint):
            return hint
        pending.extend(typing.get_args(hint))
    return None


def make(cls: type, values: dict) -> object:
    """kio entity ``cls`` from plain values; keys the class does not have are left out."""
    out = {}
    for name, value in values.items():
        field = _fields(cls).get(name)
        if field is None:
            continue
        nested = _nested_entity(cls, name)
        kafka_type = field.metadata.get("kafka_type")
        if nested is not None and isinstance(value, list):
            value = tuple(make(nested, v) for v in value)
        elif nested is not None and isinstance(value, dict):
            value = make(nested, value)
        elif kafka_type in _TIMEDELTAS and isinstance(value, int):
            value = _TIMEDELTAS[kafka_type].parse(datetime.timedelta(milliseconds=value))
        elif isinstance(value, list):
            value = tuple(value)
        out[name] = value
    return cls(**out)


def plain(entity: object) -> object:
    """A kio entity as plain values: dicts, lists, ints (durations in ms), error names, str
    uuids (None for the zero id, as kio reads it), bytes."""
    if dataclasses.is_dataclass(entity):
        return {f.name: plain(getattr(entity, f.name)) for f in dataclasses.fields(entity)}
    if isinstance(entity, tuple | list):
        return [plain(v) for v in entity]
    if isinstance(entity, datetime.timedelta):
        return entity // datetime.timedelta(milliseconds=1)
    if isinstance(entity, enum.Enum):
        return entity.name
    if isinstance(entity, uuid.UUID):
        return str(entity)
    if isinstance(entity, bool | bytes | str) or entity is None:
        return entity
    if isinstance(entity, int):
        return int(entity)
    raise TypeError(f"unexpected value {entity!r}")


class RawConnection:
    """One blocking connection; ``send`` writes one request and reads its response."""

    def __init__(self, address: str, client_id: str = "gc-diff") -> None:
        self.address = address
        self.client_id = client_id
        self._sock = socket.create_connection(parse_address(address), timeout=SOCKET_TIMEOUT_S)
        self._correlation_id = 0

    def close(self) -> None:
        self._sock.close()

    def send(self, api_key: int, version: int, **values) -> object:
        request_cls = load_request_schema(api_key, version)
        body = make(request_cls, values)
        self._correlation_id += 1
        header_cls = RequestHeaderV2 if request_cls.__flexible__ else RequestHeaderV1
        buffer = io.BytesIO()
        entity_writer(header_cls)(
            buffer,
            header_cls(
                request_api_key=api_key,
                request_api_version=version,
                correlation_id=self._correlation_id,
                client_id=self.client_id,
            ),
        )
        entity_writer(request_cls)(buffer, body)
        payload = buffer.getvalue()
        self._sock.sendall(_SIZE.pack(len(payload)) + payload)
        frame = self._read_frame()
        correlation_id, at = read_int32(frame, 0)
        if correlation_id != self._correlation_id:
            raise ValueError(f"correlation id {correlation_id}, expected {self._correlation_id}")
        # ApiVersions answers with header v0 whatever its version (KIP-511).
        if request_cls.__flexible__ and api_key != ApiKey.API_VERSIONS:
            tags, n = read_unsigned_varint(frame, at)
            if tags:
                raise ValueError("tagged fields in a response header")
            at += n
        response, _ = entity_reader(load_response_schema(api_key, version))(frame, at)
        return response

    def _read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._read_exactly(_SIZE.size))
        return self._read_exactly(size)

    def _read_exactly(self, count: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < count:
            chunk = self._sock.recv(count - len(chunks))
            if not chunk:
                raise ConnectionError(f"{self.address} closed the connection")
            chunks += chunk
        return bytes(chunks)


def api_versions(address: str) -> dict[int, tuple[int, int]]:
    """{api key: (min, max)} as the server at ``address`` announces them (ApiVersions v3)."""
    connection = RawConnection(address)
    try:
        answer = connection.send(
            ApiKey.API_VERSIONS,
            3,
            client_software_name="gc-diff",
            client_software_version="1.0",
        )
    finally:
        connection.close()
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}


def coordinator_address(
    address: str, group_id: str, version: int, timeout_s: float = COORDINATOR_TIMEOUT_S
) -> str:
    """FindCoordinator at ``address``: the address of ``group_id``'s coordinator, asking again
    while the answer is a retriable "not yet" (a broker creating its offsets topic, a
    partition not yet serving) for up to ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    connection = RawConnection(address)
    try:
        while True:
            answer = connection.send(
                ApiKey.FIND_COORDINATOR,
                version,
                key=group_id,
                key_type=0,
                coordinator_keys=[group_id],
            )
            found = answer.coordinators[0] if version >= 4 else answer
            if found.error_code == ErrorCode.none:
                return f"{found.host}:{found.port}"
            if found.error_code not in _NOT_YET or time.monotonic() > deadline:
                raise ConnectionError(
                    f"FindCoordinator({group_id!r}) at {address}: {found.error_code!r}"
                )
            time.sleep(0.1)
    finally:
        connection.close()
