"""A Kafka listener: TCP connections driven through ``groupcoord.wire.Connection``.

Theory of operation
-------------------
Each accepted socket gets a ``Connection`` (framing, headers, bounds; no I/O) and one task:

* read at most ``MAX_READ_BYTES`` while the connection wants data, feed it to the connection,
  and answer every request it releases, one at a time and in order: like a broker, which mutes
  a connection while one of its requests is being handled, so a client's requests on one
  connection are answered in the order sent (Kafka clients match answers by order);
* a ``ProtocolError`` (garbage, an oversized or truncated frame, an unknown api or version) or
  a request the core refuses as ill-typed (``ValueError``) closes the connection, as Kafka does
  with a request it cannot parse; neither changes the partition's state;
* a connection idle for ``connection_max_idle_ms`` is closed (Kafka's connections.max.idle.ms);
  beyond ``max_connections`` a new socket is closed at once. Memory per connection is bounded by
  the connection's buffer (one frame plus one read), and the bytes buffered by all connections
  together by ``max_buffered_bytes``: a read that would pass it closes its connection (else a
  thousand clients each holding a partial 10 MiB frame could hold 10 GiB).

Security (``ListenerSecurity``, Kafka's security protocols): with SSL or SASL_SSL the socket
speaks TLS; with SASL_PLAINTEXT or SASL_SSL each connection has a ``SaslServer`` that answers
ApiVersions, SaslHandshake and SaslAuthenticate until the client has authenticated (frames are
limited to Kafka's 512 KiB ``sasl.server.max.receive.size`` meanwhile) and closes the connection
on anything else or on a failed authentication, as Kafka does; no request reaches the gateway
before then. SaslAuthenticate is evaluated in a worker thread (PLAIN's key derivation costs
~10 ms of CPU, which must not stall the partition's timers and heartbeats). An SSL listener
with a CA file requires client certificates signed by it. The gateway is told the connection's
principal (``User:<name>`` from SASL, ``User:<subject>`` from a client certificate, else
``User:ANONYMOUS``) for its ACL checks. A listener binds loopback unless told otherwise, and
only one that authenticates may bind anything else (``check_host``): without authentication
anyone who can reach the port could reset a group's offsets.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import secrets
import ssl
from collections import deque
from collections.abc import Awaitable, Callable

from groupcoord.wire import (
    DEFAULT_MAX_FRAME_BYTES,
    ApiKey,
    Connection,
    ProtocolError,
    WireRequest,
)
from groupcoord.wire.connection import MAX_READ_BYTES
from groupcoord.wire.sasl import ANONYMOUS, MAX_RECEIVE_BYTES, SaslServer

from .security import ListenerSecurity, UserStore, certificate_principal

log = logging.getLogger("groupcoord.listener")

DEFAULT_MAX_CONNECTIONS = 1_000
DEFAULT_CONNECTION_MAX_IDLE_MS = 600_000  # Kafka's connections.max.idle.ms
DEFAULT_MAX_BUFFERED_BYTES = 256 * 1024 * 1024  # every connection's unparsed bytes together

# (request, client host, principal) -> kio response
Respond = Callable[[WireRequest, str, str], Awaitable[object]]
# Bytes of a SCRAM server nonce before base64 (RFC 5802 asks for an unpredictable one).
NONCE_BYTES = 24


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback IP address (a host name is not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_host(host: str, security: ListenerSecurity) -> None:
    """ValueError unless ``host`` is loopback or the listener authenticates its clients."""
    if not host:
        raise ValueError("listener host must not be empty")
    if not is_loopback(host) and not security.authenticates:
        raise ValueError(
            f"listener host {host} is not a loopback address: a non-loopback listener needs "
            f"authentication (security protocol SASL_SSL or SASL_PLAINTEXT, or SSL with client "
            f"certificates from --ssl-cafile; not {security.protocol} without)"
        )


class KafkaListener:
    """One listening socket. ``await start()`` binds (port 0: any free port) and returns the
    port; ``await close()`` stops accepting and closes every connection."""

    def __init__(
        self,
        respond: Respond,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        connection_max_idle_ms: int = DEFAULT_CONNECTION_MAX_IDLE_MS,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
        security: ListenerSecurity | None = None,
    ) -> None:
        security = security or ListenerSecurity()
        check_host(host, security)
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be in [0, 65535], got {port}")
        if max_connections < 1 or connection_max_idle_ms < 1:
            raise ValueError("max_connections and connection_max_idle_ms must be >= 1")
        self._respond = respond
        self.host = host
        self.port = port
        self.max_connections = max_connections
        self.connection_max_idle_ms = connection_max_idle_ms
        self.max_frame_bytes = max_frame_bytes
        self.max_buffered_bytes = max_buffered_bytes
        self.security = security
        self._users: UserStore | None = None
        self.buffered_bytes = 0  # unparsed bytes of every connection
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self.refused_connections = 0
        self.protocol_errors = 0
        self.authentication_failures = 0

    @property
    def connections(self) -> int:
        return len(self._tasks)

    async def start(self) -> int:
        """Bind and listen. The users file and TLS files are read here: ValueError, OSError or
        ssl.SSLError when they cannot be."""
        if self.security.sasl:
            self._users = UserStore(self.security.users_file)  # type: ignore[arg-type]
        self._server = await asyncio.start_server(
            self._accept, self.host, self.port, ssl=self.security.ssl_context()
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._tasks) >= self.max_connections:
            self.refused_connections += 1
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # the client went away, or its TLS was broken
        except asyncio.CancelledError:
            # close() ends every connection. Ending as cancelled would make asyncio's stream
            # callback ask a cancelled task for its exception and log a spurious traceback.
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        client_host = peer[0] if peer else ""
        connection = Connection(max_frame_bytes=self.max_frame_bytes)
        idle_s = self.connection_max_idle_ms / 1000
        released: deque[WireRequest | ProtocolError] = deque()
        sasl = None
        if self._users is not None:
            sasl = SaslServer(
                self.security.sasl_mechanisms,
                self._users.lookup,
                lambda: secrets.token_urlsafe(NONCE_BYTES),
            )
            connection.max_frame_bytes = min(self.max_frame_bytes, MAX_RECEIVE_BYTES)
        try:
            await self._answer(connection, reader, writer, client_host, idle_s, released, sasl)
        finally:
            self.buffered_bytes -= connection.buffered_bytes

    async def _answer(
        self,
        connection: Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_host: str,
        idle_s: float,
        released: deque[WireRequest | ProtocolError],
        sasl: SaslServer | None,
    ) -> None:
        principal = ANONYMOUS
        if self.security.client_certificates:  # verified by the TLS handshake
            principal = certificate_principal(writer.get_extra_info("peercert"))
        while True:
            while released:
                item = released.popleft()
                if isinstance(item, ProtocolError):
                    self.protocol_errors += 1
                    log.info("closing connection from %s: %s", client_host, item.reason)
                    return
                if sasl is not None and not sasl.complete:
                    if item.api_key == ApiKey.SASL_AUTHENTICATE:
                        # PLAIN derives a PBKDF2 key (~10 ms); hashlib releases the GIL, so a
                        # worker thread keeps it off the partition's event loop.
                        step = await asyncio.to_thread(sasl.receive, item)
                    else:
                        step = sasl.receive(item)
                    if step.response is not None:
                        writer.write(connection.send_response(item, step.response))
                        await writer.drain()
                    if step.close:
                        self.authentication_failures += 1
                        log.info("closing connection from %s: %s", client_host, step.reason)
                        return
                    connection.raw_sasl_tokens = sasl.raw_tokens and not sasl.complete
                    if sasl.principal is not None:
                        principal = sasl.principal
                        connection.max_frame_bytes = self.max_frame_bytes
                    released.extend(self._feed(connection, b""))
                    continue
                try:
                    response = await self._respond(item, client_host, principal)
                except ValueError as exc:
                    self.protocol_errors += 1
                    log.info(
                        "closing connection from %s: refused api %d v%d: %s",
                        client_host,
                        item.api_key,
                        item.api_version,
                        exc,
                    )
                    return
                writer.write(connection.send_response(item, response))
                await writer.drain()
                released.extend(self._feed(connection, b""))
            if connection.closed:
                return
            try:
                # asyncio.timeout, not wait_for: wait_for wraps every read in a task of its own.
                async with asyncio.timeout(idle_s):
                    data = await reader.read(MAX_READ_BYTES)
            except TimeoutError:
                return  # idle: Kafka closes it too
            if not data:
                return
            if self.buffered_bytes + len(data) > self.max_buffered_bytes:
                self.protocol_errors += 1
                log.warning(
                    "closing connection from %s: listeners hold %d unparsed bytes "
                    "(max_buffered_bytes=%d)",
                    client_host,
                    self.buffered_bytes,
                    self.max_buffered_bytes,
                )
                return
            released.extend(self._feed(connection, data))

    def _feed(self, connection: Connection, data: bytes) -> list[WireRequest | ProtocolError]:
        before = connection.buffered_bytes
        released = connection.receive_data(data)
        self.buffered_bytes += connection.buffered_bytes - before
        return released
