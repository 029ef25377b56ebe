"""A Kafka listener: TCP connections driven through ``groupcoord.wire.Connection``.

Theory of operation
-------------------
Each accepted socket gets a ``Connection`` (framing, headers, bounds; no I/O) inside an
``asyncio.Protocol`` (``_Client``), driven by the loop's callbacks rather than a task per
connection:

* every chunk the transport delivers is fed to the connection, and every request it releases is
  answered one at a time and in order: like a broker, which mutes a connection while one of its
  requests is being handled, so a client's requests on one connection are answered in the order
  sent (Kafka clients match answers by order). A single-group request on a partition's own
  listener (every member's steady traffic) is handed to ``submit`` with a reply callback
  (``_reply``), which the partition calls when the answer is ready: within the callback that
  read the request (a heartbeat), or from the partition's release (a commit, once it is in
  the log). Any other request is answered by ``respond``'s coroutine: within the callback that
  read it when it does not wait (a metadata request), with no task; from a future's done
  callback when it waits on a future of the loop (a Fetch's sleep, a call to another actor),
  again with no task (``_suspend``); in a task of its own when it waits on anything else;
* bytes that arrive while a request is being answered are buffered, up to ``READ_PAUSE_BYTES``:
  then the transport stops reading until the answer is written (TCP pushes back on the client),
  and it stops too while the client is not reading its answers (the transport's write buffer is
  over its high-water mark);
* a listener given ``at_turn_end`` (a partition's, a network process's) on a plaintext socket
  sends a turn's answers together, at the end of the loop turn, in one io_uring submission
  (``batch_send``): on loopback every send wakes its client's thread, which the kernel lets
  preempt the sender when the call returns, and one call is one preemption rather than one
  per answer (a turn that answered one connection writes through its transport: one send has
  no preemption to save). A connection's answers queue only while nothing of it is buffered
  in its transport (order holds); what a socket does not take goes to its transport; a
  connection that closes hands its queued answers to the transport first, which sends them
  before it closes. Without io_uring (a container's seccomp profile,
  ``kernel.io_uring_disabled``), over TLS, and on the bootstrap listener, each answer is
  written as it is made;
* a ``ProtocolError`` (garbage, an oversized or truncated frame, an unknown api or version) or
  a request the core refuses as ill-typed (``ValueError``) closes the connection, as Kafka does
  with a request it cannot parse; neither changes the partition's state; a bug raised while
  answering (any other exception, at any step) is logged with the client and closes it too;
* a connection with no request being answered and no bytes read or answer written for
  ``connection_max_idle_ms`` is closed (Kafka's connections.max.idle.ms), a client that stops
  reading its answers too (what is left unsent is dropped); beyond
  ``max_connections`` a new socket is closed at once. Memory per connection is bounded by the
  connection's buffer (one frame plus one read), and the bytes buffered by all connections
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
only one that authenticates may bind anything else (``security.check_host``): without
authentication anyone who can reach the port could reset a group's offsets.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
import types
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from typing import Any, cast

import msgspec

from groupcoord.wire import (
    DEFAULT_MAX_FRAME_BYTES,
    ApiKey,
    Connection,
    ProtocolError,
    WireRequest,
)
from groupcoord.wire.sasl import ANONYMOUS, MAX_RECEIVE_BYTES, SaslServer, SaslStep

from .batch_send import AtTurnEnd, TurnSends
from .offsets import MAX_PORT
from .security import ListenerSecurity, UserStore, certificate_principal, check_host

log = logging.getLogger("groupcoord.listener")

DEFAULT_MAX_CONNECTIONS = 1_000
DEFAULT_CONNECTION_MAX_IDLE_MS = 600_000  # Kafka's connections.max.idle.ms
DEFAULT_MAX_BUFFERED_BYTES = 256 * 1024 * 1024  # every connection's unparsed bytes together
# A connection answering a request stops reading once it holds this many unparsed bytes (what
# asyncio's streams buffer by default). Pausing at every request would cost two epoll_ctl calls
# per request; one more read (at most 256 KiB) stays well within Connection's own bound.
READ_PAUSE_BYTES = 64 * 1024

# (request, client host, principal) -> kio response
# An async function: the listener drives the coroutine itself (``_answer_released``).
Respond = Callable[[WireRequest, str, str], Coroutine[Any, Any, object]]
# (request, client host, principal, reply) -> whether it took the request; reply(kio response)
# is called once, maybe before it returns (``KafkaGateway.submit``).
Submit = Callable[[WireRequest, str, str, Callable[[object], None]], bool]
# Bytes of a SCRAM server nonce before base64 (RFC 5802 asks for an unpredictable one).
NONCE_BYTES = 24


class ListenerCounters(msgspec.Struct, frozen=True):
    """What a listener has seen: its open connections, and since it started the connections
    it refused (over ``max_connections``), the protocol errors that closed a connection, and
    the failed SASL authentications; a network process adds the turns its loop polled
    (``idle_poll_turns``, ``WireConfig.idle_poll_us``; a partition's own are in its info).
    ``+`` sums two listeners' (a partition's network processes)."""

    connections: int = 0
    refused_connections: int = 0
    protocol_errors: int = 0
    authentication_failures: int = 0
    idle_poll_turns: int = 0

    def __add__(self, other: ListenerCounters) -> ListenerCounters:
        mine, theirs = msgspec.structs.astuple(self), msgspec.structs.astuple(other)
        return ListenerCounters(*(a + b for a, b in zip(mine, theirs, strict=True)))


class KafkaListener:
    """One listening socket. ``await start()`` binds (port 0: any free port) and returns the
    port; ``await close()`` stops accepting and closes every connection. ``submit``, when
    given, takes the requests it can answer by callback (``KafkaGateway.submit``);
    ``respond`` answers the rest. ``at_turn_end``, when given (a partition's listener:
    ``PartitionRuntime.call_at_turn_end``; a network process's: its loop's ``call_soon``),
    sends a turn's answers together (module docstring)."""

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
        submit: Submit | None = None,
        at_turn_end: AtTurnEnd | None = None,
    ) -> None:
        security = security or ListenerSecurity()
        check_host(host, security)
        if not 0 <= port <= MAX_PORT:
            raise ValueError(f"port must be in [0, {MAX_PORT}], got {port}")
        if max_connections < 1 or connection_max_idle_ms < 1:
            raise ValueError("max_connections and connection_max_idle_ms must be >= 1")
        self._respond = respond
        self._submit = submit
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
        self._clients: set[_Client] = set()
        self.refused_connections = 0
        self.protocol_errors = 0
        self.authentication_failures = 0
        self._at_turn_end = at_turn_end
        self.sends: TurnSends | None = None  # a turn's answers, sent together (start)

    @property
    def connections(self) -> int:
        return len(self._clients)

    def counters(self) -> ListenerCounters:
        return ListenerCounters(
            self.connections,
            self.refused_connections,
            self.protocol_errors,
            self.authentication_failures,
        )

    async def start(self, sock: socket.socket | None = None) -> int:
        """Bind and listen, or accept on ``sock``, a socket already listening (a network
        process's: see ``network_pool``). The users file and TLS files are read here:
        ValueError, OSError or ssl.SSLError when they cannot be."""
        if self.security.sasl:
            self._users = UserStore(self.security.users_file)  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        ssl = self.security.ssl_context()
        if sock is not None:
            self._server = await loop.create_server(lambda: _Client(self), sock=sock, ssl=ssl)
        else:
            self._server = await loop.create_server(
                lambda: _Client(self), self.host, self.port, ssl=ssl
            )
        self.port = self._server.sockets[0].getsockname()[1]
        if self._at_turn_end is not None and ssl is None:
            self.sends = TurnSends.open(self._at_turn_end)
        return self.port

    async def close(self) -> None:
        if self.sends is not None:
            self.sends.close()
        if self._server is not None:
            self._server.close()
        answering = [c.task for c in self._clients if c.task is not None]
        for client in list(self._clients):
            client.close()
        await asyncio.gather(*answering, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()


class _Client(asyncio.Protocol):
    """One accepted connection of a ``KafkaListener`` (see the module docstring)."""

    sends: TurnSends | None = None  # the listener's, for a plaintext socket
    fd = -1  # its socket's number, when it has sends

    def __init__(self, listener: KafkaListener) -> None:
        self.listener = listener
        self.closed = False
        self.task: asyncio.Task | None = None  # answering the request in flight, if it waits
        # Or (coroutine, future, request): answering it, suspended on a future (_suspend).
        self.suspended: tuple[Coroutine[Any, Any, Any], asyncio.Future, WireRequest] | None = None
        self.submitted: WireRequest | None = None  # or answering it through submit (_reply)
        self.answering = False  # inside _answer_released

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not an isinstance check: uvloop's transports (Ray's loop when uvloop is installed)
        # implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)
        listener = self.listener
        if len(listener._clients) >= listener.max_connections:
            listener.refused_connections += 1
            self.closed = True
            transport.close()
            return
        listener._clients.add(self)
        self.loop = asyncio.get_running_loop()
        peer = transport.get_extra_info("peername")
        self.client_host = peer[0] if peer else ""
        self.connection = Connection(max_frame_bytes=listener.max_frame_bytes)
        self.released: deque[WireRequest | ProtocolError] = deque()
        self.reading_paused = False
        self.writing_paused = False
        self.end_of_input = False
        self.principal = ANONYMOUS
        if listener.security.client_certificates:  # verified by the TLS handshake
            self.principal = certificate_principal(transport.get_extra_info("peercert"))
        # The socket, for batched sends: plaintext only (a TLS transport writes records).
        sock = transport.get_extra_info("socket") if listener.sends is not None else None
        if sock is not None:
            self.fd, self.sends = sock.fileno(), listener.sends
        self.sasl: SaslServer | None = None
        if listener._users is not None:
            self.sasl = SaslServer(
                listener.security.sasl_mechanisms,
                listener._users.lookup,
                lambda: secrets.token_urlsafe(NONCE_BYTES),
            )
            self.connection.max_frame_bytes = min(listener.max_frame_bytes, MAX_RECEIVE_BYTES)
        # One timer per idle period, not one per read: it looks at last_active when it fires.
        self.idle_s = listener.connection_max_idle_ms / 1000
        self.last_active = self.loop.time()
        self.idle_timer: asyncio.TimerHandle | None = self.loop.call_later(
            self.idle_s, self._check_idle
        )

    # -- transport callbacks -----------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        listener = self.listener
        if listener.buffered_bytes + len(data) > listener.max_buffered_bytes:
            listener.protocol_errors += 1
            log.warning(
                "closing connection from %s: listeners hold %d unparsed bytes "
                "(max_buffered_bytes=%d)",
                self.client_host,
                listener.buffered_bytes,
                listener.max_buffered_bytes,
            )
            self.close()
            return
        self.last_active = self.loop.time()
        self._feed(data)
        self._answer_released()

    def eof_received(self) -> bool:
        # Requests already read are answered first, as a read loop would (not possible over
        # TLS, where asyncio closes the transport at once).
        self.end_of_input = True
        if self.closed or (not self.busy and not self.released):
            return False
        return self.transport.get_extra_info("sslcontext") is None

    def connection_lost(self, exc: Exception | None) -> None:
        self.close()

    def pause_writing(self) -> None:
        self.writing_paused = True
        self._flow()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self.last_active = self.loop.time()
        self._answer_released()

    # -- answering ---------------------------------------------------------------------------------

    def _answer_released(self) -> None:
        """Answer released requests until one must wait (``_suspend`` goes on with it), the
        client stops reading its answers, or none is left."""
        if self.released:  # usually empty after an answer: clients wait for it
            self.answering = True
            try:
                self._answer_each()
            finally:
                self.answering = False
        if self.end_of_input and not self.busy and not self.released:
            self.close()
            return
        self._flow()

    def _answer_each(self) -> None:
        submit = self.listener._submit
        while self.released and not self.busy and not self.writing_paused and not self.closed:
            item = self.released.popleft()
            if isinstance(item, ProtocolError):
                self.listener.protocol_errors += 1
                log.info("closing connection from %s: %s", self.client_host, item.reason)
                self.close()
                return
            if self.sasl is not None and not self.sasl.complete:
                if item.api_key == ApiKey.SASL_AUTHENTICATE:
                    # PLAIN derives a PBKDF2 key (~10 ms); hashlib releases the GIL, so a
                    # worker thread keeps it off the partition's event loop.
                    self._wait(asyncio.to_thread(self.sasl.receive, item), self._sasl_step, item)
                else:
                    self._sasl_step(item, self.sasl.receive(item))
                continue
            if submit is not None:
                self.submitted = item
                try:
                    taken = submit(item, self.client_host, self.principal, self._reply)
                except ValueError as exc:
                    self.submitted = None
                    self._refuse(item, exc)
                    return
                except Exception as exc:  # a bug: as below
                    self.submitted = None
                    self._failed(exc)
                    return
                if taken:  # answered already (_reply), or busy until it is
                    continue
                self.submitted = None
            coroutine = self.listener._respond(item, self.client_host, self.principal)
            # Run its first step here: most requests complete in it, and need no task.
            try:
                waiting_on = coroutine.send(None)
            except StopIteration as done:
                self._send(item, done.value)
            except ValueError as exc:
                self._refuse(item, exc)
            except Exception as exc:  # a bug: as a failed task (_finished) or a later step
                self._failed(exc)
                return
            else:
                self._suspend(coroutine, waiting_on, item)

    def _failed(self, exc: BaseException) -> None:
        """An answer failed with a bug (not a refusal): log it with the client, close."""
        log.error("closing connection from %s", self.client_host, exc_info=exc)
        self.close()

    @property
    def busy(self) -> bool:
        """A request is being answered: submitted, in a task, or suspended on a future."""
        return self.submitted is not None or self.task is not None or self.suspended is not None

    def _reply(self, response: object) -> None:
        """The answer to the submitted request: written, then the requests behind it go on
        (unless this is ``_answer_released``'s own call to submit, whose loop goes on)."""
        item = self.submitted
        if item is None:  # closed meanwhile
            return
        self.submitted = None
        self._send(item, response)
        if not self.answering:
            self._answer_released()

    def _suspend(
        self, coroutine: Coroutine[Any, Any, Any], waiting_on: Any, item: WireRequest
    ) -> None:
        """Go on with an answer that waits. On a future of this loop (a commit waiting for its
        append), the future's own callback drives the coroutine on: no task to create and
        wake, one loop turn less. On anything else, a task runs the rest."""
        if isinstance(waiting_on, asyncio.Future) and waiting_on.get_loop() is self.loop:
            self.suspended = (coroutine, waiting_on, item)
            waiting_on.add_done_callback(self._resume)
        else:
            self._wait(_go_on(coroutine, waiting_on), self._send, item)

    def _resume(self, future: asyncio.Future) -> None:
        if self.suspended is None or self.suspended[1] is not future:  # closed meanwhile
            return
        coroutine, _, item = self.suspended
        self.suspended = None
        try:
            waiting_on = coroutine.send(None)  # the await returns the future's result
        except StopIteration as done:
            self._send(item, done.value)
            self._answer_released()
        except ValueError as exc:
            self._refuse(item, exc)
        except (Exception, asyncio.CancelledError) as exc:  # as a failed task: log, close
            self._failed(exc)
        else:
            self._suspend(coroutine, waiting_on, item)

    def _wait(
        self,
        awaitable: Coroutine[Any, Any, Any],
        then: Callable[[WireRequest, Any], None],
        item: WireRequest,
    ) -> None:
        self.task = self.loop.create_task(awaitable)
        self.task.add_done_callback(lambda task: self._finished(task, then, item))

    def _finished(
        self, task: asyncio.Task, then: Callable[[WireRequest, Any], None], item: WireRequest
    ) -> None:
        self.task = None
        if self.closed or task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            then(item, task.result())
            self._answer_released()
        elif isinstance(exc, ValueError) and then == self._send:
            self._refuse(item, exc)
        else:
            self._failed(exc)

    def _send(self, item: WireRequest, response: object) -> None:
        self._write(self.connection.send_response(item, response))
        self.last_active = self.loop.time()
        if self.connection.buffered_bytes:  # release a request held back by the in-flight limit
            self._feed(b"")

    def _write(self, frame: bytes) -> None:
        """Write ``frame`` now, or queue it for the turn's batched sends: when the listener
        batches, the socket is plaintext, and nothing of this connection is buffered in its
        transport (its order must hold). A queued connection's transport holds nothing: all
        it writes comes through here, and queues behind what it queued."""
        if not frame:
            return
        sends = self.sends
        if sends is not None and not self.transport.get_write_buffer_size():
            sends.queue(self, frame)
        else:
            self.transport.write(frame)

    def sendable(self) -> bool:
        """``TurnSends.Writer``'s: its socket is still open, so ``fd`` is still its own."""
        return not self.closed and not self.transport.is_closing()

    def transport_write(self, data: bytes) -> None:
        """``TurnSends.Writer``'s: the transport sends, or buffers, ``data``."""
        self.transport.write(data)

    def _refuse(self, item: WireRequest, exc: ValueError) -> None:
        self.listener.protocol_errors += 1
        log.info(
            "closing connection from %s: refused api %d v%d: %s",
            self.client_host,
            item.api_key,
            item.api_version,
            exc,
        )
        self.close()

    def _sasl_step(self, item: WireRequest, step: SaslStep) -> None:
        assert self.sasl is not None
        if step.response is not None:
            self._write(self.connection.send_response(item, step.response))
        if step.close:
            self.listener.authentication_failures += 1
            log.info("closing connection from %s: %s", self.client_host, step.reason)
            self.close()
            return
        self.connection.raw_sasl_tokens = self.sasl.raw_tokens and not self.sasl.complete
        if self.sasl.principal is not None:
            self.principal = self.sasl.principal
            self.connection.max_frame_bytes = self.listener.max_frame_bytes
        self._feed(b"")

    # -- bounds ------------------------------------------------------------------------------------

    def _feed(self, data: bytes) -> None:
        connection = self.connection
        before = connection.buffered_bytes
        self.released.extend(connection.receive_data(data))
        self.listener.buffered_bytes += connection.buffered_bytes - before

    def _flow(self) -> None:
        pause = self.writing_paused or (
            self.connection.buffered_bytes >= READ_PAUSE_BYTES and not self.connection.wants_data
        )
        if pause != self.reading_paused and not self.closed:
            self.reading_paused = pause
            if pause:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()

    def _check_idle(self) -> None:
        self.idle_timer = None
        if self.closed:
            return
        left_s = self.idle_s
        if not self.busy:  # a request being answered is not idleness
            left_s -= self.loop.time() - self.last_active
            if left_s <= 0:
                self.close()  # idle: Kafka closes it too
                return
        self.idle_timer = self.loop.call_later(left_s, self._check_idle)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.listener._clients.discard(self)
        self.listener.buffered_bytes -= self.connection.buffered_bytes
        if self.idle_timer is not None:
            self.idle_timer.cancel()
        if self.task is not None:
            self.task.cancel()
        self.submitted = None  # its reply, when it comes, finds nothing to answer
        if self.suspended is not None:
            coroutine, future, _ = self.suspended
            self.suspended = None
            future.remove_done_callback(self._resume)
            coroutine.close()  # its finally clauses run (the runtime forgets the request)
        # Answers queued for the turn's batched sends go to the transport, which sends them
        # before it closes; the socket may be closed (and its number reused) before the batch.
        if self.sends is not None:
            self.sends.take_back(self)
        if self.writing_paused:
            self.transport.abort()  # close() would wait for a client that does not read
        else:
            self.transport.close()


async def _go_on(coroutine: Coroutine[Any, Any, Any], waiting_on: Any) -> Any:
    """The rest of a coroutine whose first step ran outside a task and yielded ``waiting_on``
    (what a task waits for: a future, or None to yield once), for a task to run."""
    return await _resume(coroutine, waiting_on)


@types.coroutine
def _resume(coroutine: Coroutine[Any, Any, Any], waiting_on: Any) -> Generator[Any, Any, Any]:
    """Hands ``waiting_on`` to the task (which waits as the coroutine asked), then drives the
    coroutine on with what the task sends, passing cancellation in."""
    while True:
        try:
            sent = yield waiting_on
        except GeneratorExit:
            coroutine.close()
            raise
        except BaseException as exc:  # the task's cancellation: the coroutine decides
            try:
                waiting_on = coroutine.throw(exc)
            except StopIteration as done:
                return done.value
            continue
        try:
            waiting_on = coroutine.send(sent)
        except StopIteration as done:
            return done.value
