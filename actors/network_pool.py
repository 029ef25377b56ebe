"""A partition's network processes: its Kafka connections served by other processes.

Why: a partition's own listener does every connection's work (socket reads and writes, framing,
kio's decoding and encoding, TLS, SASL) on the thread that also holds the group state and
writes the log, so one busy group can use one core at most. Kafka spreads that work over its
network threads (``num.network.threads``). With ``WireConfig.network_processes`` = N, the
partition does the same with N processes (``network_process``), and its thread keeps only the
core's work: decoding core requests from a channel, the Shard, the log, encoding the replies.

Theory of operation
-------------------
* **One listening socket, shared.** The partition binds its port once and every network
  process accepts on that socket: a new connection goes to whichever process takes it first,
  which is one with time to spare. (Not ``SO_REUSEPORT``'s socket per process: any process of
  the same user could then join the port and take a share of its clients.) The partition
  keeps its copy open: connections that arrive while a process is being replaced wait in the
  backlog, and the port stays the partition's (a restarted partition asks for its remembered
  port, as without network processes).
* **One channel each** (a Unix socket pair; frames in ``network_frames``). A REQUEST goes to
  ``PartitionRuntime.submit`` unchecked a second time (``typed``: the frame decoded it as its
  own type) and its REPLY is sent when the runtime calls back: when its records are in the
  log, as for a partition's own listener. Replies of a loop turn go out in one write, in the
  callback that released them (``PartitionRuntime.call_at_turn_end``).
* **Views.** ``publish`` sends every process what Metadata and FindCoordinator need (a
  ``NetworkView``) whenever the partition's listener adopts a new directory; a new process gets
  the latest first.
* **Counters.** Each process reports its listener's counters (``ListenerCounters``) when they
  change; ``counters()`` sums them, with what processes that ended had counted (their
  connections closed with them), so the totals never go back.
* **Lifetimes.** A process whose channel closes (it died, or sent a frame the partition cannot
  read, which the partition answers by closing the channel) is started again, after a delay
  that doubles from ``RESTART_DELAY_S`` up to ``RESTART_DELAY_MAX_S`` while processes keep
  dying within ``STABLE_S`` of their start. ``close`` closes the channels; each process then
  exits (it exits, too, when the partition's process dies and the kernel closes its end), and
  one still running after ``EXIT_WAIT_S`` is killed.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from groupcoord.coordinator.messages import REQUEST_TYPES

from .catalog_changes import CatalogChanges, apply_changes
from .kafka_listener import ListenerCounters
from .network_frames import (
    CHANGES,
    COUNTERS,
    FAILED,
    REPLY,
    REQUEST,
    TOPIC_RESULTS,
    TOPICS,
    VIEW,
    ChannelError,
    FrameReader,
    FrameWriter,
    NetworkView,
    max_channel_frame_bytes,
)

log = logging.getLogger("groupcoord.network")

MAX_NETWORK_PROCESSES = 64
RESTART_DELAY_S = 0.1
RESTART_DELAY_MAX_S = 30.0
STABLE_S = 10.0
EXIT_WAIT_S = 2.0
LISTEN_BACKLOG = 1024
_REQUESTS = frozenset(REQUEST_TYPES)

ChangeTopics = Callable[[list], Awaitable[list]]


class NetworkPool:
    """N network processes for one partition (module docstring). ``bind(port)`` takes the
    port (0: any free one) and returns it; ``publish(view)`` sends every process the view (and
    keeps it for those started later); ``start()`` starts the processes (after the first
    ``publish``); ``close()`` ends them. ``runtime`` is the partition's ``PartitionRuntime``;
    ``change_topics(changes)`` asks the router to change the topic catalog."""

    def __init__(
        self,
        config: Any,
        partition: int,
        num_partitions: int,
        runtime: Any,
        change_topics: ChangeTopics,
    ) -> None:
        count = config.network_processes
        if not 1 <= count <= MAX_NETWORK_PROCESSES:
            raise ValueError(f"network processes must be in [1, {MAX_NETWORK_PROCESSES}]")
        self.config, self.partition, self.num_partitions = config, partition, num_partitions
        self._runtime = runtime
        self._change_topics = change_topics
        self._socket: socket.socket | None = None
        self._slots: list[_Slot] = []
        self._view: NetworkView | None = None
        self._closing = False
        self._tasks: set[asyncio.Task] = set()  # held: the loop keeps only weak references
        self.restarts = 0
        self._ended_counters = ListenerCounters()  # what processes that ended had counted

    def background(self, coroutine: Any) -> None:
        """Run ``coroutine`` in a task of its own, held until it is done."""
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def bind(self, port: int) -> int:
        """The listening socket, on ``port`` (0: any free port); returns the port. OSError
        when it is taken (nothing stays bound)."""
        sock = socket.socket(_family(self.config.host), socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's servers
            sock.bind((self.config.host, port))
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._socket = sock
        return sock.getsockname()[1]

    def publish(self, view: NetworkView) -> None:
        if view == self._view:  # the listener's refresh adopts an unchanged directory each second
            return
        self._view = view
        for slot in self._slots:
            slot.send_view(view)

    def publish_changes(self, changes: CatalogChanges) -> bool:
        """Bring the view's catalog to ``changes.catalog_version`` and send every process
        just the changes (a catalog of 90,000 topics is megabytes a process to send). False,
        and nothing sent, when they do not apply to the view published last: ``publish`` the
        whole view then."""
        view = self._view
        if view is None or not changes.applies_to(view.catalog_version):
            return False
        apply_changes(changes, view.topics, view.topic_ids, view.group_configs)
        self._view = msgspec.structs.replace(view, catalog_version=changes.catalog_version)
        for slot in self._slots:
            slot.send_changes(changes)
        return True

    def start(self) -> None:
        if self._view is None or self._socket is None:
            raise RuntimeError("bind and publish before starting network processes")
        count = self.config.network_processes
        self._slots = [_Slot(self, index, self._socket) for index in range(count)]
        for slot in self._slots:
            slot.spawn()

    def attach(self, sock: socket.socket) -> None:
        """Serve a channel whose other end is not a network process this pool started (a
        bench's: bench/wire_split.py); ``close`` closes it."""
        slot = _Slot(self, len(self._slots), None)
        self._slots.append(slot)
        slot.attach(sock)

    def counters(self) -> ListenerCounters:
        """Every process's listener counters summed, as last reported (within
        ``network_process.COUNTERS_INTERVAL_S``)."""
        return sum((slot.counters for slot in self._slots), self._ended_counters)

    @property
    def pids(self) -> list[int]:
        """The running processes' ids (for tests and operators)."""
        return [s.process.pid for s in self._slots if s.process and s.process.poll() is None]

    async def close(self) -> None:
        self._closing = True
        await asyncio.gather(*(slot.close() for slot in self._slots))
        if self._socket is not None:
            self._socket.close()

    def _command(self, channel_fd: int, listen_fd: int) -> list[str]:
        config = base64.b64encode(msgspec.msgpack.encode(self.config)).decode()
        return [
            sys.executable,
            "-m",
            "groupcoord.actors.network_process",
            f"--channel-fd={channel_fd}",
            f"--listen-fd={listen_fd}",
            f"--partition={self.partition}",
            f"--partitions={self.num_partitions}",
            f"--config={config}",
        ]


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


class _Slot:
    """One network process and its channel; replaced when it ends (module docstring)."""

    def __init__(self, pool: NetworkPool, index: int, sock: socket.socket | None) -> None:
        # sock: the listening socket its processes accept on (None: an attached channel,
        # which has no process to start again)
        self.pool, self.index, self.sock = pool, index, sock
        self.process: subprocess.Popen | None = None
        self.channel: _Channel | None = None
        self.started_at = 0.0
        self.delay_s = RESTART_DELAY_S
        self.restart: asyncio.TimerHandle | None = None
        self.counters = ListenerCounters()  # its process's, as last reported

    def spawn(self) -> None:
        pool = self.pool
        assert self.sock is not None  # a slot with a process of its own
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(
                pool._command(theirs.fileno(), self.sock.fileno()),
                pass_fds=(theirs.fileno(), self.sock.fileno()),
            )
        except OSError as exc:
            mine.close()
            log.error("partition %d: network process cannot start: %r", pool.partition, exc)
            self._schedule_restart()
            return
        finally:
            theirs.close()
        self.started_at = time.monotonic()
        self.attach(mine)

    def attach(self, sock: socket.socket) -> None:
        """Serve the channel at ``sock``: requests read from it go to the runtime."""
        loop = asyncio.get_running_loop()
        self.channel = channel = _Channel(self, self.pool.config.max_frame_bytes)
        self.pool.background(loop.connect_accepted_socket(lambda: channel, sock))
        if self.pool._view is not None:
            channel.send(VIEW, 0, self.pool._view)

    def send_view(self, view: NetworkView) -> None:
        if self.channel is not None:
            self.channel.send(VIEW, 0, view)

    def send_changes(self, changes: CatalogChanges) -> None:
        # A channel attached later starts from the whole view, which has them already.
        if self.channel is not None:
            self.channel.send(CHANGES, 0, changes)

    def ended(self) -> None:
        """The channel closed: reap the process, and start another unless closing."""
        self.channel = None
        ended = msgspec.structs.replace(self.counters, connections=0)  # closed with it
        self.pool._ended_counters += ended
        self.counters = ListenerCounters()
        process = self.process
        if process is not None and process.poll() is None:
            self.pool.background(_reap(process))
        if self.pool._closing or self.sock is None:
            return
        if time.monotonic() - self.started_at >= STABLE_S:
            self.delay_s = RESTART_DELAY_S
        log.warning(
            "partition %d: network process %d ended (exit %s): starting another in %.1f s",
            self.pool.partition,
            self.index,
            None if process is None else process.poll(),
            self.delay_s,
        )
        self._schedule_restart()

    def _schedule_restart(self) -> None:
        self.pool.restarts += 1
        self.restart = asyncio.get_running_loop().call_later(self.delay_s, self._restart)
        self.delay_s = min(self.delay_s * 2, RESTART_DELAY_MAX_S)

    def _restart(self) -> None:
        self.restart = None
        if not self.pool._closing:
            self.spawn()

    async def close(self) -> None:
        if self.restart is not None:
            self.restart.cancel()
        if self.channel is not None:
            self.channel.close()
        if self.process is not None:
            await _reap(self.process)


async def _reap(process: subprocess.Popen) -> None:
    """Wait for ``process`` to exit (its channel is closed), killing it after EXIT_WAIT_S."""
    try:
        await asyncio.to_thread(process.wait, EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        await asyncio.to_thread(process.wait)


class _Channel(asyncio.Protocol):
    """The partition's end of one network process's channel."""

    def __init__(self, slot: _Slot, max_frame_bytes: int) -> None:
        self.slot = slot
        self.runtime = slot.pool._runtime
        self.reader = FrameReader(max_channel_frame_bytes(max_frame_bytes))
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._early: list[bytes] = []  # frames sent before the transport was made
        self.writer = FrameWriter(self._write, self.runtime.call_at_turn_end)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self._early:
            self.transport.write(b"".join(self._early))  # type: ignore[union-attr]
            self._early = []

    def _write(self, data: bytes) -> None:
        if self.closed:
            return
        if self.transport is None:
            self._early.append(data)
        else:
            self.transport.write(data)

    def send(self, kind: int, request_id: int, body: Any) -> None:
        if not self.closed:
            self.writer.send(kind, request_id, body)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.reader.feed(data)
            for kind, request_id, body in frames:
                if kind == REQUEST and type(body) in _REQUESTS:
                    self.runtime.submit(body, self._replier(request_id), typed=True)
                elif kind == TOPICS:
                    self.slot.pool.background(self._topics(request_id, body))
                elif kind == COUNTERS:
                    self.slot.counters = body
                else:
                    raise ChannelError(f"a frame of kind {kind} from a network process")
        except (ChannelError, ValueError) as exc:
            log.error(
                "partition %d: closing network process %d's channel: %s",
                self.slot.pool.partition,
                self.slot.index,
                exc,
            )
            self.close()

    def _replier(self, request_id: int) -> Callable[[Any], None]:
        def reply(response: Any) -> None:
            self.send(REPLY, request_id, response)

        return reply

    async def _topics(self, request_id: int, changes: list) -> None:
        try:
            results = await self.slot.pool._change_topics(changes)
        except Exception as exc:  # the router is restarting: the client is told and retries
            self.send(FAILED, request_id, f"topic catalog unavailable: {exc!r}")
            return
        self.send(TOPIC_RESULTS, request_id, results)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.slot.ended()
