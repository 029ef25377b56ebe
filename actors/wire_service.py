"""Kafka listeners in the Ray actors: one per partition, one bootstrap listener in the router.

Theory of operation
-------------------
* **Partition listeners are coordinators.** Partition ``n``'s actor listens on
  ``WireConfig.partition_port(n)`` and is Kafka broker ``n`` to clients. Every group request it
  receives goes to its own ``PartitionRuntime``: groups of other partitions get NOT_COORDINATOR
  from the Shard, and the client asks FindCoordinator again, as it would with Kafka.
* **The router knows where everyone is.** Every ``metadata_refresh_ms`` each partition listener
  calls ``router.exchange(n, node, held_version)``: it registers its address and gets back the
  addresses of all partitions, and, when the catalog is newer than the one it holds, its
  changes over that version (``catalog_changes``; the whole catalog when the router no
  longer holds them). A change is pushed the same way (``wire_directory``).
  So a partition restarted on another port or node is found again within one refresh. A
  restarted router also asks every partition actor where it listens as it starts
  (``kafka_node``), rather than wait up to a refresh for each; until they have answered it
  knows fewer, so a listener keeps every address it was told and takes only newer ones. A
  listener that registers for the first time or at a new address is also pushed to the
  others at once (``wire_directory``): a client told fewer brokers than before drops the
  rest, failing what it has in flight to them, so no listener may name fewer than the
  bootstrap listener for a whole refresh. Until its partition has registered (or answered the
  router's asking), a group's FindCoordinator answers COORDINATOR_NOT_AVAILABLE, which
  clients retry.
* **The bootstrap listener** (``WireConfig.bootstrap_port``, in the router) is what users put in
  ``bootstrap.servers``. It answers Metadata with the partition listeners as the brokers (not
  itself: an admin client that lists groups on every broker would see groups twice),
  FindCoordinator, and any group request, which it forwards to the group's partition actor.
* **One security config for all.** ``WireConfig.security`` (``ListenerSecurity``: protocol,
  SASL users file, TLS files, ACLs) travels with the config to every partition actor, so the
  bootstrap listener and every partition listener authenticate and authorize alike; a request
  is authorized by the listener that received it (the partition a bootstrap listener forwards
  to trusts it). A listener bound to a wildcard address (``0.0.0.0``, ``::``) tells clients the
  address of the node it runs on.
* **A restarted listener keeps its address**, as a restarted Kafka broker does. A listener
  given port 0 records the port it took in Ray's KV store (keyed by its log directory) and
  asks for it again when it restarts; only if that port is taken meanwhile (or on another
  node where it is in use) does it take a new one. Why it matters: the router names a dead
  partition's last address until the restarted one registers, and librdkafka re-bootstraps
  once when all its brokers are down; had the port changed, a client re-bootstrapped in that
  window would try dead addresses until its rebootstrap timer (5 minutes) ran out.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import msgspec
from ray.exceptions import RayActorError, RayError

from groupcoord.coordinator import CoordinatorConfig, Errors, JoinGroupRequest, partition_for
from groupcoord.wire import Node
from groupcoord.wire.topics import TopicResult

from .bounded import bounded
from .catalog_changes import CatalogChanges, apply_changes
from .kafka_gateway import KafkaGateway
from .kafka_listener import KafkaListener, ListenerCounters
from .kv import listen_at_remembered_port
from .network_frames import NetworkView
from .network_pool import NetworkPool
from .responses import error_response
from .wire_config import WireConfig

# Each refresh's wait for the router: Ray fails a call to a dead router, but one that is alive
# and stalled would otherwise hold this listener's refreshes for good.
EXCHANGE_TIMEOUT_S = 30.0
# A topic change's wait for the router (which itself waits at most PUBLISH_TIMEOUT_S for the
# listeners): past it the client is told REQUEST_TIMED_OUT, as Kafka's controller says when it
# cannot answer in time; the change may or may not have been made.
CHANGE_TOPICS_TIMEOUT_S = 30.0
# The bootstrap listener's wait for a partition to answer a request it forwards, beyond the
# JoinGroup's own rebalance timeout (the one request a partition may rightly hold that long).
FORWARD_TIMEOUT_S = 30.0

log = logging.getLogger("groupcoord.listener")


async def listen(listener: KafkaListener, log_key: str) -> int:
    """Start ``listener`` (at the port the listener of ``log_key`` took last when its port is
    0: see the module docstring); returns the port."""

    async def bind(port: int) -> int:
        listener.port = port
        return await listener.start()

    return await listen_at_remembered_port(port_key(log_key), listener.port, bind)


def port_key(log_key: str) -> bytes:
    """Where the port a listener took is remembered: one log directory, one listener."""
    return f"listener-port:{log_key}".encode()


class WireDirectory(msgspec.Struct):
    """What the router tells listeners: every partition's listener and the topic catalog
    (partition counts, topic ids, and groups' own settings: ``coordinator.group_config``).
    Version -1: no catalog (the addresses only). ``changes``: the catalog as its changes over
    a version instead (``catalog_changes``); the whole catalog's fields are then empty and
    the version -1."""

    nodes: dict[int, Node]
    topics: dict[str, int]
    catalog_version: int
    topic_ids: dict[str, uuid.UUID] = msgspec.field(default_factory=dict)
    group_configs: dict[str, dict[str, int]] = msgspec.field(default_factory=dict)
    changes: CatalogChanges | None = None

    def __reduce__(self):
        # How Ray sends it: as msgpack, 20-odd times faster to write than pickle's object
        # graph (a catalog of 90,000 topics: 24 ms against 570, UUIDs above all).
        return (_directory_from_msgpack, (msgspec.msgpack.encode(self),))


def _directory_from_msgpack(data: bytes) -> WireDirectory:
    return msgspec.msgpack.decode(data, type=WireDirectory)


class PartitionListener:
    """The Kafka listener of one partition actor (see the module docstring)."""

    def __init__(
        self,
        partition: int,
        num_partitions: int,
        config: WireConfig,
        runtime: Any,
        router: Any,
        log_key: str,
    ) -> None:
        self.partition, self.num_partitions, self.config = partition, num_partitions, config
        self._log_key = log_key
        self._runtime = runtime
        self._router = router
        self.directory = WireDirectory({}, {}, -1)
        self.node: Node | None = None
        self._listener: KafkaListener | None = None
        self._pool: NetworkPool | None = None
        self._task: asyncio.Task | None = None

    async def start(self) -> Node:
        if self.config.network_processes:
            return await self._start_pool()
        gateway = KafkaGateway(
            node=Node(self.partition, self.config.host, 0),
            route=self._route,
            list_groups=self._list_groups,
            coordinator_for=self._coordinator_for,
            brokers=self._brokers,
            topics=lambda: self.directory.topics,
            change_topics=self._change_topics,
            cluster_id=f"groupcoord-{self.num_partitions}",
            topic_ids=lambda: self.directory.topic_ids,
            group_configs=lambda: self.directory.group_configs,
            catalog_version=lambda: self.directory.catalog_version,
            coordinator_config=self._runtime.config,
            authorizer=self.config.security.authorizer(),
            submit_route=self._submit_route,
        )
        self._listener = self.config.listener(
            gateway.respond,
            self.config.partition_port(self.partition),
            gateway.submit,
            self._runtime.call_at_turn_end,
        )
        port = await listen(self._listener, self._log_key)
        self.node = gateway.node = Node(self.partition, self.config.advertised_host(), port)
        self._task = asyncio.get_running_loop().create_task(self._refresh_forever())
        return self.node

    async def _start_pool(self) -> Node:
        """The listener's port, served by network processes (``network_pool``)."""
        pool = NetworkPool(
            self.config, self.partition, self.num_partitions, self._runtime, self._change_topics
        )
        port = await listen_at_remembered_port(
            port_key(self._log_key), self.config.partition_port(self.partition), pool.bind
        )
        self._pool = pool
        self.node = Node(self.partition, self.config.advertised_host(), port)
        pool.publish(self._view())
        pool.start()
        self._task = asyncio.get_running_loop().create_task(self._refresh_forever())
        return self.node

    def counters(self) -> ListenerCounters:
        """The partition's Kafka listener's counters: its own listener's, or its network
        processes' summed (``NetworkPool.counters``)."""
        if self._pool is not None:
            return self._pool.counters()
        return ListenerCounters() if self._listener is None else self._listener.counters()

    def network_info(self) -> dict | None:
        """The network processes' ids and how many times one was started again (None
        without network processes)."""
        if self._pool is None:
            return None
        return {"pids": self._pool.pids, "restarts": self._pool.restarts}

    def _view(self) -> NetworkView:
        assert self.node is not None  # set before the first view
        directory = self.directory
        return NetworkView(
            self.node,
            dict(directory.nodes),
            list(self._brokers()),
            dict(directory.topics),
            dict(directory.topic_ids),
            self._runtime.config,
            dict(directory.group_configs),
            directory.catalog_version,
        )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._listener is not None:
            await self._listener.close()
        if self._pool is not None:
            await self._pool.close()

    def _route(self, group_id: str, request: Any) -> Awaitable[Any]:
        # Not async itself: it hands back the runtime's coroutine, one coroutine less for every
        # group request to create and step through.
        return self._runtime.handle(request)

    def _submit_route(self, group_id: str, request: Any, reply: Callable[[Any], None]) -> None:
        # Single-group requests: the runtime calls reply itself, no future (KafkaGateway.submit).
        # The wire layer built the request from bytes it read as Kafka's types (fast_requests,
        # or kio and translate), so every field already has its declared type: not checked
        # again (a msgpack round trip, 11 µs for a commit of 64 partitions).
        self._runtime.submit(request, reply, typed=True)

    async def _list_groups(self, request: Any) -> Any:
        return await self._runtime.handle(request)

    async def _coordinator_for(self, group_id: str) -> Node | None:
        return self.directory.nodes.get(partition_for(group_id, self.num_partitions))

    async def _change_topics(self, changes: list) -> list:
        try:
            asked = self._router.change_topics.remote(changes)
            return await bounded(asked, CHANGE_TOPICS_TIMEOUT_S)
        except (TimeoutError, RayError) as exc:  # a stalled router, or one restarting
            log.warning("partition %d: topic change not answered (%r)", self.partition, exc)
            why = (
                f"the topic catalog did not answer within {CHANGE_TOPICS_TIMEOUT_S:g} s"
                if isinstance(exc, TimeoutError)
                else "the topic catalog is unavailable (its actor is restarting)"
            )
            return [TopicResult(Errors.REQUEST_TIMED_OUT, why)] * len(changes)

    def brokers_named(self) -> int:
        """How many brokers this partition's Metadata answers name (0 before it listens)."""
        return 0 if self.node is None else len(self._brokers())

    def _brokers(self) -> Sequence[Node]:
        nodes = dict(self.directory.nodes)
        nodes[self.partition] = self.node
        return [nodes[n] for n in sorted(nodes)]

    def adopt(self, directory: WireDirectory) -> int:
        """Take the router's directory, but never an older catalog than the one held: a refresh
        the router answered before publishing a change can arrive after the change did, and
        a client that just created a topic must not see it vanish. Addresses are always
        taken (the next refresh corrects any stale one), and none is dropped: a router that
        has just restarted may not know every partition's yet, and a client told fewer
        brokers drops the others (module docstring). Changes (``catalog_changes``) are
        applied in place when they apply to the version held; otherwise only the addresses
        are taken, and the next refresh asks for the changes over the version held. Returns
        the catalog version held after."""
        held = self.directory
        nodes = directory.nodes
        if held.nodes.keys() - nodes.keys():
            nodes = {**held.nodes, **nodes}
        changes = directory.changes
        if changes is not None:
            if changes.applies_to(held.catalog_version):
                self._apply(changes, nodes)
                return changes.catalog_version
            directory = WireDirectory(nodes, {}, -1)
        if directory.catalog_version <= held.catalog_version:
            # Most refreshes (each second): no newer catalog, and no listener moved. Nothing is
            # rebuilt or compared then: the network processes' view copies and compares the
            # whole catalog (8 ms at 90,000 topics, bench/catalog.py's "refresh" row).
            if nodes == held.nodes:
                return held.catalog_version
            directory = WireDirectory(
                nodes, held.topics, held.catalog_version, held.topic_ids, held.group_configs
            )
        else:  # copied: later changes are applied to it in place, and the sender may keep it
            directory = WireDirectory(
                nodes,
                dict(directory.topics),
                directory.catalog_version,
                dict(directory.topic_ids),
                dict(directory.group_configs),
            )
        self.directory = directory
        if self._pool is not None and self.node is not None:
            self._pool.publish(self._view())
        if directory.catalog_version > self._runtime.catalog_version:
            self._hand_runtime_catalog()
        return directory.catalog_version

    def _apply(self, changes: CatalogChanges, nodes: dict[int, Node]) -> None:
        """``changes`` to the held catalog, the network processes' and the shard's, each at
        the changes' size (unless a listener moved too, or the shard is at another version)."""
        held = self.directory
        apply_changes(changes, held.topics, held.topic_ids, held.group_configs)
        self.directory = WireDirectory(
            nodes, held.topics, changes.catalog_version, held.topic_ids, held.group_configs
        )
        pool = self._pool
        if pool is not None and self.node is not None:
            if nodes != held.nodes or not pool.publish_changes(changes):
                pool.publish(self._view())
        if self._runtime.catalog_version >= changes.catalog_version:
            return
        try:
            taken = self._runtime.apply_catalog_changes(changes)
        except ValueError as exc:  # the router validates topics: this is a bug, not input
            log.error("partition %d: topic catalog changes refused: %s", self.partition, exc)
            return
        if not taken:  # the shard is at a version the changes are not over
            self._hand_runtime_catalog()

    def _hand_runtime_catalog(self) -> None:
        directory = self.directory
        try:  # the shard's copy (consumer groups)
            self._runtime.update_topics(
                directory.catalog_version, dict(directory.topics), directory.group_configs
            )
        except ValueError as exc:  # the router validates topics: this is a bug, not input
            log.error("partition %d: topic catalog refused: %s", self.partition, exc)

    async def _refresh_forever(self) -> None:
        while True:
            try:
                held = self.directory.catalog_version
                exchanged = self._router.exchange.remote(self.partition, self.node, held)
                self.adopt(await bounded(exchanged, EXCHANGE_TIMEOUT_S))
            except Exception as exc:  # restarting or stalled: keep what we know, ask again
                log.info(
                    "partition %d: no listener directory from the router (%r)", self.partition, exc
                )
            await asyncio.sleep(self.config.metadata_refresh_ms / 1000)


def forward_timeout_s(request: Any) -> float:
    """How long the bootstrap listener waits for a partition's answer to ``request``."""
    if isinstance(request, JoinGroupRequest):  # held until the rebalance completes
        return request.rebalance_timeout_ms / 1000 + FORWARD_TIMEOUT_S
    return FORWARD_TIMEOUT_S


class BootstrapListener:
    """The router's listener: forwards each group to its partition actor."""

    def __init__(
        self,
        config: WireConfig,
        num_partitions: int,
        partition_handle: Any,
        list_groups: Any,
        nodes: Mapping[int, Node],
        topics: Callable[[], Mapping[str, int]],
        change_topics: Any,
        topic_ids: Callable[[], Mapping[str, uuid.UUID]],
        group_configs: Callable[[], Mapping[str, Mapping[str, int]]],
        log_key: str,
        coordinator_config: CoordinatorConfig,
        catalog_version: Callable[[], int] | None = None,
    ) -> None:
        self.config, self.num_partitions = config, num_partitions
        self._log_key = log_key
        self._partition_handle = partition_handle
        self._list_groups = list_groups
        self._nodes = nodes
        self._listener: KafkaListener | None = None
        self.gateway = KafkaGateway(
            node=Node(-1, config.host, 0),
            route=self._route,
            list_groups=self._list_all,
            coordinator_for=self._coordinator_for,
            brokers=lambda: [self._nodes[n] for n in sorted(self._nodes)],
            topics=topics,
            change_topics=change_topics,
            cluster_id=f"groupcoord-{num_partitions}",
            topic_ids=topic_ids,
            group_configs=group_configs,
            coordinator_config=coordinator_config,
            authorizer=config.security.authorizer(),
            catalog_version=catalog_version,
        )

    async def start(self) -> Node:
        self._listener = self.config.listener(self.gateway.respond, self.config.bootstrap_port)
        port = await listen(self._listener, self._log_key)
        self.gateway.node = Node(-1, self.config.advertised_host(), port)
        return self.gateway.node

    async def close(self) -> None:
        if self._listener is not None:
            await self._listener.close()

    def counters(self) -> ListenerCounters:
        """The bootstrap listener's counters (all zero until it listens)."""
        return ListenerCounters() if self._listener is None else self._listener.counters()

    async def _route(self, group_id: str, request: Any) -> Any:
        handle = self._partition_handle(partition_for(group_id, self.num_partitions))
        try:
            return await bounded(handle.handle.remote(request), forward_timeout_s(request))
        # Restarting or stalled: the client finds the coordinator again and retries.
        except (RayActorError, TimeoutError):
            return error_response(request, Errors.COORDINATOR_NOT_AVAILABLE)

    async def _list_all(self, request: Any) -> Any:
        # The router's list_groups asks every partition and merges (merge_list_groups).
        return await self._list_groups(list(request.states_filter))

    async def _coordinator_for(self, group_id: str) -> Node | None:
        return self._nodes.get(partition_for(group_id, self.num_partitions))
