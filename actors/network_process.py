"""A network process: a partition's Kafka connections, served outside the partition's process.

Started by ``network_pool`` (``python -m groupcoord.actors.network_process``) with two
inherited file descriptors: a listening socket of the partition's port, and its end of a Unix
socket pair to the partition (``network_frames``). It runs the same ``KafkaListener`` and
``KafkaGateway`` as a partition's own listener; only the gateway's callables differ:

* group requests go to the partition as REQUEST frames, each answered by one REPLY, which the
  gateway turns into the Kafka answer here (``submit`` for the single-group requests, ``route``'s
  future for the rest);
* Metadata and FindCoordinator are answered from the partition's latest VIEW, which it sends
  first (the listener starts accepting only once it has arrived) and again when a listener
  moves, and its catalog brought up to date by the CHANGES frames of each catalog change;
* topic changes (CreateTopics and the like) go to the partition as TOPICS, which asks the
  router;
* the listener's counters go to the partition as COUNTERS when they changed, at most every
  ``COUNTERS_INTERVAL_S``.

The process lives as long as its channel: when the partition closes it, or dies and the kernel
closes it, the process stops accepting, closes its connections and exits. A frame it cannot
read ends it the same way (the partition starts another). Clients of a closed connection
reconnect, as they do to a restarted broker.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import logging
import socket
from collections.abc import Callable
from typing import Any

import msgspec
import uvloop

from groupcoord.coordinator import partition_for
from groupcoord.wire import Node

from .catalog_changes import apply_changes
from .idle_poll import IdlePoll
from .kafka_gateway import KafkaGateway
from .kafka_listener import DEFAULT_MAX_BUFFERED_BYTES, KafkaListener, ListenerCounters
from .network_frames import (
    CHANGES,
    COUNTERS,
    FAILED,
    MAX_REQUEST_ID,
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
from .wire_config import WireConfig

log = logging.getLogger("groupcoord.network")

COUNTERS_INTERVAL_S = 1.0


class PartitionChannel(asyncio.Protocol):
    """This process's end of the channel: sends requests, settles their replies."""

    def __init__(
        self, max_frame_bytes: int, at_turn_end: Callable[[Callable[[], None]], Any]
    ) -> None:
        self._reader = FrameReader(max_channel_frame_bytes(max_frame_bytes))
        self._at_turn_end = at_turn_end
        self._pending: dict[int, Callable[[Any], None]] = {}
        self._next_id = 0
        self.view: NetworkView | None = None
        self.on_view: Callable[[NetworkView], None] = lambda view: None
        self.viewed: asyncio.Future = asyncio.get_running_loop().create_future()
        self.closed: asyncio.Future = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self._writer = FrameWriter(self.transport.write, self._at_turn_end)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._reader.feed(data)
        except ChannelError as exc:
            log.error("network process: closing the channel to the partition: %s", exc)
            self.transport.close()
            return
        for kind, request_id, body in frames:
            if kind == VIEW:
                self.view = body
                self.on_view(body)
                if not self.viewed.done():
                    self.viewed.set_result(None)
                continue
            if kind == CHANGES:
                view = self.view
                if view is None or not body.applies_to(view.catalog_version):
                    # The partition sends them over the view it sent last, in order: a bug.
                    log.error("network process: catalog changes over another view: closing")
                    self.transport.close()
                    return
                apply_changes(body, view.topics, view.topic_ids, view.group_configs)
                self.view = msgspec.structs.replace(view, catalog_version=body.catalog_version)
                continue
            settle = self._pending.pop(request_id, None)
            if settle is None or kind not in (REPLY, TOPIC_RESULTS, FAILED):
                log.error("network process: frame kind %d for no request (%d)", kind, request_id)
                self.transport.close()
                return
            settle(RuntimeError(body) if kind == FAILED else body)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        if not self.viewed.done():
            self.viewed.set_exception(ConnectionError("the partition closed the channel"))

    def _send(self, kind: int, body: Any, settle: Callable[[Any], None]) -> None:
        request_id = self._next_id = (self._next_id + 1) & MAX_REQUEST_ID
        self._pending[request_id] = settle
        self._writer.send(kind, request_id, body)

    def submit(self, group_id: str, request: Any, reply: Callable[[Any], None]) -> None:
        """``KafkaGateway``'s ``submit_route``: ``reply`` is called with the partition's
        answer (never, if the channel closes first: the process is ending)."""
        self._send(REQUEST, request, reply)

    def route(self, group_id: str, request: Any) -> asyncio.Future:
        """``KafkaGateway``'s ``route``: a future of the partition's answer."""
        future = asyncio.get_running_loop().create_future()
        self._send(REQUEST, request, lambda answer: _settle(future, answer))
        return future

    def send_counters(self, counters: ListenerCounters) -> None:
        self._writer.send(COUNTERS, 0, counters)

    def change_topics(self, changes: list) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self._send(TOPICS, changes, lambda answer: _settle(future, answer))
        return future


def _settle(future: asyncio.Future, answer: Any) -> None:
    if future.done():  # its connection closed meanwhile
        return
    if isinstance(answer, Exception):
        future.set_exception(answer)
    else:
        future.set_result(answer)


async def serve(
    channel: socket.socket,
    listening: socket.socket,
    partition: int,
    num_partitions: int,
    config: WireConfig,
) -> None:
    """Serve ``listening``'s clients until the channel to the partition closes."""
    loop = asyncio.get_running_loop()
    idle = IdlePoll(loop.call_soon, config.idle_poll_us / 1e6)

    def polling_at_turn_end(callback: Callable[[], Any]) -> None:
        # A turn that sent requests to the partition, or answers to clients, expects their
        # answers or the clients' next requests soon: the loop polls for them (idle_poll).
        loop.call_soon(callback)
        idle.worked()

    at_turn_end = polling_at_turn_end if config.idle_poll_us else loop.call_soon

    _, partition_channel = await loop.connect_accepted_socket(
        lambda: PartitionChannel(config.max_frame_bytes, at_turn_end), channel
    )
    await partition_channel.viewed
    view = partition_channel.view
    assert view is not None  # set with viewed

    async def coordinator_for(group_id: str) -> Node | None:
        return partition_channel.view.nodes.get(partition_for(group_id, num_partitions))  # type: ignore[union-attr]

    def current() -> NetworkView:
        return partition_channel.view  # type: ignore[return-value]

    gateway = KafkaGateway(
        node=view.node,
        route=partition_channel.route,
        list_groups=lambda request: partition_channel.route("", request),
        coordinator_for=coordinator_for,
        brokers=lambda: current().brokers,
        topics=lambda: current().topics,
        change_topics=partition_channel.change_topics,
        cluster_id=f"groupcoord-{num_partitions}",
        topic_ids=lambda: current().topic_ids,
        group_configs=lambda: current().group_configs,
        catalog_version=lambda: current().catalog_version,
        coordinator_config=view.coordinator_config,
        authorizer=config.security.authorizer(),
        submit_route=partition_channel.submit,
    )

    def on_view(new: NetworkView) -> None:
        gateway.node = new.node

    partition_channel.on_view = on_view
    shares = max(config.network_processes, 1)
    listener = KafkaListener(
        gateway.respond,
        submit=gateway.submit,
        host=config.host,
        port=listening.getsockname()[1],
        max_connections=max(config.max_connections // shares, 1),
        max_frame_bytes=config.max_frame_bytes,
        max_buffered_bytes=DEFAULT_MAX_BUFFERED_BYTES // shares,
        security=config.security,
        # A turn's answers (the replies one read of the channel settles, mostly) go out in
        # one batched send, as a partition's listener sends its own (``batch_send``).
        at_turn_end=at_turn_end,
    )
    await listener.start(sock=listening)
    reporting = asyncio.get_running_loop().create_task(
        _report_counters(listener, partition_channel, idle)
    )
    await partition_channel.closed
    reporting.cancel()
    await listener.close()


async def _report_counters(
    listener: KafkaListener, channel: PartitionChannel, idle: IdlePoll
) -> None:
    sent = ListenerCounters()
    while True:
        await asyncio.sleep(COUNTERS_INTERVAL_S)
        counters = msgspec.structs.replace(listener.counters(), idle_poll_turns=idle.turns)
        if counters != sent:
            channel.send_counters(counters)
            sent = counters


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--channel-fd", type=int, required=True)
    parser.add_argument("--listen-fd", type=int, required=True)
    parser.add_argument("--partition", type=int, required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--config", required=True, help="the WireConfig, msgpack in base64")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    config = msgspec.msgpack.decode(base64.b64decode(args.config), type=WireConfig)
    channel = socket.socket(fileno=args.channel_fd)
    listening = socket.socket(fileno=args.listen_fd)
    coroutine = serve(channel, listening, args.partition, args.partitions, config)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:  # as Ray's actors
        runner.run(coroutine)


if __name__ == "__main__":
    main()
