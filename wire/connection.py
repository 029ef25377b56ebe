"""One client connection's protocol state, without sockets (h11-style).

A listener feeds every byte it reads to ``receive_data`` and gets back the requests that became
complete, or a ``ProtocolError`` after which it closes the connection; it writes whatever
``send_response`` returns. Nothing here reads a clock or touches a socket.

Framing is Kafka's: an int32 size, then that many bytes holding the request header (v1: api key,
version, correlation id, nullable client id; v2 for flexible versions adds tagged fields) and the
body. Like a Kafka broker, the connection closes on anything it cannot answer: a negative size,
a frame over ``max_frame_bytes`` (Kafka's ``socket.request.max.bytes``), an unknown api key, a
version outside ``SUPPORTED_VERSIONS`` (Kafka's ``InvalidRequestException`` path), a body that
does not decode. Bytes left after a decoded body are ignored, as Kafka's generated readers do:
librdkafka's admin client sends three of them after a Metadata v12 request. The one exception
is ApiVersions at a version above ours: it is answered in v0 with UNSUPPORTED_VERSION (KIP-511),
see ``apis.api_versions_response``. After a SaslHandshake v0 the listener sets
``raw_sasl_tokens``: frames are then bare SASL tokens (Kafka's pre-KIP-152 exchange), released
as SaslAuthenticate v0 requests and answered with bare tokens, until it clears it.

Bounds. Like a broker, which mutes a connection while a request is being handled, a connection
releases at most ``max_in_flight_requests`` requests that have not been answered; while that many
are out, ``wants_data`` is False and the listener stops reading (TCP pushes back on the client).
Bytes not yet parsed are held up to ``max_buffered_bytes``: at most one partial frame while
requests are being released, plus what one read delivered while they are not. Responses leave in
request order whatever order they are produced in (Kafka clients match them by order).
"""

from __future__ import annotations

import io
import struct
from collections import deque

import msgspec
from kio.serial.readers import (
    read_unsigned_varint,
)

from . import apis
from .fast_requests import DECODERS
from .frame_check import check_body

MIB = 1024 * 1024
# The core's largest request-sized limits are 8 MiB (a group's metadata record, one OffsetCommit),
# so 10 MiB admits every request the core could accept. Kafka's default is 100 MiB; decoded
# Python objects take up to ~9x a frame's bytes (~19x once translated for the core: a JoinGroup
# packed with empty protocols, test_fuzz.py), hence a tighter default here. Listeners bound
# their connections: one connection in flight holds at most about 20x max_frame_bytes.
DEFAULT_MAX_FRAME_BYTES = 10 * MIB
# The most one read should deliver (asyncio reads at most 256 KiB at a time).
MAX_READ_BYTES = 1 * MIB
_SIZE = struct.Struct(">i")
# A request header's fixed part: api key, api version, correlation id, client id size.
_HEADER = struct.Struct(">hhih")
_SIZE_ID = struct.Struct(">ii")  # frame size, then a v0 response header (correlation id)
_SIZE_ID_TAGS = struct.Struct(">iiB")  # ... a v1 header: correlation id, no tagged fields


# The per-request objects are frozen msgspec Structs, not frozen dataclasses: a frozen dataclass
# sets each field through object.__setattr__, ~1 µs for a WireRequest, made for every request.
class WireRequest(msgspec.Struct, frozen=True):
    """A decoded request. ``body`` is kio's request entity for (api_key, body_version), or for
    the apis of ``fast_requests.DECODERS`` (OffsetCommit, Heartbeat, JoinGroup, SyncGroup) the
    core's request.

    ``body_version`` differs from ``api_version`` only for an ApiVersions request above our range:
    Kafka treats it as an (empty) v0 request and answers in v0. ``sequence`` numbers a
    connection's requests in arrival order.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: object
    body_version: int
    frame_bytes: int
    sequence: int = 0
    # A bare SASL token (after SaslHandshake v0), presented as a SaslAuthenticate v0 request;
    # its answer is written as a bare token too (size, bytes), without a response header.
    raw_sasl_token: bool = False

    @property
    def unsupported_api_versions(self) -> bool:
        return self.body_version != self.api_version


class EncodedResponse(msgspec.Struct, frozen=True):
    """A response body already encoded for (``api_key``, ``api_version``), such as
    ``fast_responses`` writes; ``send_response`` frames it as it would kio's entity."""

    api_key: int
    api_version: int
    body: bytes


class ProtocolError(msgspec.Struct, frozen=True):
    """The connection must be closed; ``reason`` is for the log."""

    reason: str


class Connection:
    """The protocol state of one client connection (see the module docstring)."""

    def __init__(
        self,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_buffered_bytes: int | None = None,
        max_in_flight_requests: int = 1,
    ) -> None:
        if max_frame_bytes < 10:  # the shortest header: key, version, correlation id, null id
            raise ValueError(f"max_frame_bytes must be >= 10, got {max_frame_bytes}")
        if max_in_flight_requests < 1:
            raise ValueError(f"max_in_flight_requests must be >= 1, got {max_in_flight_requests}")
        if max_buffered_bytes is None:
            max_buffered_bytes = max_frame_bytes + _SIZE.size + MAX_READ_BYTES
        if max_buffered_bytes < max_frame_bytes + _SIZE.size:
            raise ValueError(
                "max_buffered_bytes must hold one whole frame and its size, got "
                f"{max_buffered_bytes} for max_frame_bytes={max_frame_bytes}"
            )
        self.max_frame_bytes = max_frame_bytes
        self.max_buffered_bytes = max_buffered_bytes
        self.max_in_flight_requests = max_in_flight_requests
        self._buffer = bytearray()
        self._in_flight: deque[WireRequest] = deque()  # released, unanswered, in request order
        self._answered: dict[int, bytes] = {}  # sequence -> frame, waiting for its turn
        self._next_sequence = 0
        self.error: ProtocolError | None = None
        self.raw_sasl_tokens = False

    @property
    def closed(self) -> bool:
        return self.error is not None

    @property
    def wants_data(self) -> bool:
        """False while the listener should not read: closed, or the in-flight limit reached."""
        return not self.closed and len(self._in_flight) < self.max_in_flight_requests

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)

    def receive_data(self, data: bytes) -> list[WireRequest | ProtocolError]:
        """Take bytes read from the client; return the requests now complete (in order), ending
        with a ``ProtocolError`` if the connection must close. Call with ``b""`` after answering
        to release requests that were held back by the in-flight limit. After an error, every
        call returns ``[]``."""
        if self.closed:
            return []
        if not self._buffer and len(data) >= _SIZE.size and self.wants_data:
            # The usual read: one whole frame, nothing buffered before it (no copy through
            # the buffer).
            (size,) = _SIZE.unpack_from(data)
            if len(data) == _SIZE.size + size and 0 <= size <= self.max_frame_bytes:
                parsed = self._parse(data[_SIZE.size :])
                if type(parsed) is WireRequest:
                    self._in_flight.append(parsed)
                return [parsed]
        if len(self._buffer) + len(data) > self.max_buffered_bytes:
            return [
                self._fail(
                    f"more than {self.max_buffered_bytes} bytes buffered "
                    "(the listener must stop reading while wants_data is False)"
                )
            ]
        self._buffer += data
        out: list[WireRequest | ProtocolError] = []
        while len(self._in_flight) < self.max_in_flight_requests:
            if len(self._buffer) < _SIZE.size:
                break
            (size,) = _SIZE.unpack_from(self._buffer)
            if size < 0 or size > self.max_frame_bytes:
                out.append(self._fail(f"frame size {size} outside 0..{self.max_frame_bytes}"))
                break
            if len(self._buffer) < _SIZE.size + size:
                break
            frame = bytes(self._buffer[_SIZE.size : _SIZE.size + size])
            del self._buffer[: _SIZE.size + size]
            parsed = self._parse(frame)
            out.append(parsed)
            if isinstance(parsed, ProtocolError):
                break
            self._in_flight.append(parsed)
        return out

    def send_response(self, request: WireRequest, response: object) -> bytes:
        """Encode ``response`` (kio's response entity for the request's key and body version,
        or an ``EncodedResponse`` of that key and version) and return the bytes to write now:
        this response and any later ones it was holding up, or ``b""`` while an earlier
        request is still unanswered. ``ValueError`` for a request that is not awaiting an
        answer here or a response of the wrong type."""
        if self.closed:
            return b""
        in_flight = self._in_flight
        oldest = bool(in_flight) and in_flight[0] is request  # the usual case: answered in order
        if (
            not (oldest or any(r is request for r in in_flight))
            or request.sequence in self._answered
        ):
            raise ValueError(f"request {request.correlation_id} is not awaiting a response")
        if type(response) is EncodedResponse:
            if response.api_key != request.api_key or response.api_version != request.body_version:
                raise ValueError(
                    f"expected an answer to api {request.api_key} v{request.body_version}, got "
                    f"one encoded for api {response.api_key} v{response.api_version}"
                )
        else:
            expected = apis.response_class(request.api_key, request.body_version)
            if type(response) is not expected:
                raise ValueError(
                    f"expected a {expected.__module__}.{expected.__name__}, "
                    f"got {type(response).__name__}"
                )
        frame = encode_response(request, response)
        if oldest and not self._answered:  # nothing later was held back: write this one alone
            in_flight.popleft()
            return frame
        self._answered[request.sequence] = frame
        ready = []
        while self._in_flight and self._in_flight[0].sequence in self._answered:
            ready.append(self._answered.pop(self._in_flight.popleft().sequence))
        return b"".join(ready)

    def _fail(self, reason: str) -> ProtocolError:
        self.error = ProtocolError(reason)
        self._buffer = bytearray()
        return self.error

    def _parse(self, frame: bytes) -> WireRequest | ProtocolError:
        if self.raw_sasl_tokens:
            return self._raw_token(frame)
        try:
            api_key, api_version, correlation_id, id_bytes = _HEADER.unpack_from(frame)
            at = _HEADER.size
            if id_bytes == -1:  # a null client id
                client_id = None
            else:  # as kio's nullable string reader: no other negative size, UTF-8, in frame
                if id_bytes < 0 or at + id_bytes > len(frame):
                    raise ValueError(f"client id of {id_bytes} bytes does not fit the frame")
                client_id = frame[at : at + id_bytes].decode()
                at += id_bytes
        except (struct.error, ValueError) as exc:  # UnicodeDecodeError is a ValueError
            return self._fail(f"unreadable request header: {exc!r}")
        unsupported_api_versions = api_key == apis.ApiKey.API_VERSIONS and not apis.is_supported(
            api_key, api_version
        )
        if not unsupported_api_versions and not apis.is_supported(api_key, api_version):
            return self._fail(f"api key {api_key} version {api_version} is not supported")
        body_version = 0 if unsupported_api_versions else api_version
        try:
            if apis.request_is_flexible(api_key, api_version):
                at = _skip_tagged_fields(frame, at)
            if unsupported_api_versions:
                # Kafka does not parse the body of an ApiVersions request it cannot read.
                body = apis.request_class(api_key, 0)()
            elif (decode := DECODERS.get(api_key)) is not None:
                body = decode(api_version, frame, at)  # the core's request, in one pass
            else:
                cls = apis.request_class(api_key, api_version)
                check_body(cls, frame, at)  # before kio's reader, which trusts lengths
                body, _ = apis.reader(cls)(frame, at)
        except Exception as exc:  # kio raises KeyError, ValueError, its own
            # DecodeError family...; bytes from a peer must never raise out of here.
            return self._fail(f"undecodable api key {api_key} v{api_version}: {exc!r}")
        request = WireRequest(
            api_key,
            api_version,
            correlation_id,
            client_id,
            body,
            body_version,
            len(frame),
            self._next_sequence,
        )
        self._next_sequence += 1
        return request

    def _raw_token(self, frame: bytes) -> WireRequest:
        cls = apis.request_class(apis.ApiKey.SASL_AUTHENTICATE, 0)
        request = WireRequest(
            int(apis.ApiKey.SASL_AUTHENTICATE),
            0,
            -1,
            None,
            cls(auth_bytes=frame),
            0,
            len(frame),
            self._next_sequence,
            raw_sasl_token=True,
        )
        self._next_sequence += 1
        return request


def _skip_tagged_fields(frame: bytes, at: int) -> int:
    """Skip a tagged-field section (the request header's: none are defined, all are ignored)."""
    count, n = read_unsigned_varint(frame, at)
    at += n
    for _ in range(count):
        _tag, n = read_unsigned_varint(frame, at)
        at += n
        size, n = read_unsigned_varint(frame, at)
        at += n + size
        if at > len(frame):
            raise ValueError("tagged field runs past the frame")
    return at


def encode_response(request: WireRequest, response: object) -> bytes:
    """The whole response frame: size, response header (v0, or v1 with an empty tagged-field
    section for flexible requests), body (kio's entity, written here, or already encoded); for a
    bare SASL token, its size and bytes only."""
    if request.raw_sasl_token:
        token = response.auth_bytes  # type: ignore[attr-defined]
        return _SIZE.pack(len(token)) + token
    body = response.body if type(response) is EncodedResponse else encode_body(response)
    if apis.response_header_version(request.api_key, request.body_version) == 1:
        return _SIZE_ID_TAGS.pack(len(body) + 5, request.correlation_id, 0) + body
    return _SIZE_ID.pack(len(body) + 4, request.correlation_id) + body


def encode_body(response: object) -> bytes:
    """A kio response entity written out: a response body, without size or header."""
    buffer = io.BytesIO()
    apis.writer(type(response))(buffer, response)
    return buffer.getvalue()
