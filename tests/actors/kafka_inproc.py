"""One partition served to real Kafka clients, in this process and without Ray.

``WirePartition`` runs a real ``PartitionRuntime`` (over a real ``PartitionLog`` in a temporary
directory) and a ``KafkaListener`` on 127.0.0.1 in an event loop on its own thread, so blocking
Kafka clients (librdkafka, kafka-python) can run in the test's thread. With one partition, the
partition's listener is also the bootstrap listener. ``security`` configures the listener and
its gateway as ``WireConfig.security`` does in the actors. ``loop`` picks the event loop:
asyncio's own, or ``uvloop``, which Ray's async actors run on when it is installed (it is a
dependency). ``network_processes`` > 0 serves the port from that many network processes
(``network_pool``, as ``WireConfig.network_processes`` does in the actors) instead of the
listener on the partition's loop. ``idle_poll_us`` is ``WireConfig.idle_poll_us``: the
partition's loop (and its network processes') polls that long after each turn with work.
"""

from __future__ import annotations

import asyncio
import os
import threading

import uvloop

from groupcoord.actors.catalog import TopicCatalog
from groupcoord.actors.kafka_gateway import KafkaGateway
from groupcoord.actors.kafka_listener import KafkaListener, ListenerCounters
from groupcoord.actors.network_frames import NetworkView
from groupcoord.actors.network_pool import NetworkPool
from groupcoord.actors.runtime import PartitionRuntime
from groupcoord.actors.security import ListenerSecurity
from groupcoord.actors.wire_config import WireConfig
from groupcoord.coordinator import CoordinatorConfig
from groupcoord.storage import LogConfig, open_partition_log
from groupcoord.wire import Node

START_TIMEOUT_S = 30


class WirePartition:
    def __init__(
        self,
        log_dir: str,
        topics: dict[str, int],
        config: CoordinatorConfig | None = None,
        security: ListenerSecurity | None = None,
        loop: str = "asyncio",
        network_processes: int = 0,
        idle_poll_us: int = 0,
    ) -> None:
        self.topics = topics
        self.security = security or ListenerSecurity()
        self.config = config or CoordinatorConfig(group_initial_rebalance_delay_ms=0)
        self.loop = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}[loop]()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._log_dir = log_dir
        os.makedirs(log_dir + "-catalog", exist_ok=True)
        self.catalog = TopicCatalog(log_dir + "-catalog", self.config)
        for name, count in topics.items():
            if name not in self.catalog.topics():
                self.catalog.create(name, count)
        self.runtime: PartitionRuntime | None = None
        self.listener: KafkaListener | None = None
        self.network_processes = network_processes
        self.idle_poll_us = idle_poll_us
        self.pool: NetworkPool | None = None

    def start(self) -> str:
        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(START_TIMEOUT_S)
        return f"127.0.0.1:{port}"

    async def _start(self) -> int:
        self.runtime = PartitionRuntime(
            0,
            1,
            self.config,
            open_log=lambda: open_partition_log(self._log_dir, LogConfig(fsync_policy="never")),
            idle_poll_us=self.idle_poll_us,
        )
        self.runtime.start()
        while self.runtime.state != "serving":
            await asyncio.sleep(0.01)
        node = Node(0, "127.0.0.1", 0)
        runtime = self.runtime
        catalog = self.catalog  # the shard's copy of the catalog, as a partition actor fetches it
        runtime.update_topics(catalog.version, catalog.topics(), catalog.group_configs())

        # As the partition actors' listener routes (wire_service).
        def route(group_id, request):
            return runtime.handle(request)

        def submit_route(group_id, request, reply):
            runtime.submit(request, reply, typed=True)  # as the partition actor's listener

        async def list_groups(request):
            return await runtime.handle(request)

        async def coordinator_for(group_id):
            return gateway.node

        async def change_topics(changes):
            catalog = self.catalog
            before = catalog.version
            results = catalog.apply(changes)
            self.topics = catalog.topics()
            if catalog.version == before:
                return results
            # As a partition listener takes the router's publish: the changes alone, into
            # the shard's copy and the network processes' views (actors/catalog_changes.py).
            changed = catalog.changes_since(before)
            assert changed is not None and runtime.apply_catalog_changes(changed)
            if self.pool is not None:
                assert self.pool.publish_changes(changed)
            return results

        if self.network_processes:
            config = WireConfig(
                bootstrap_port=0,
                network_processes=self.network_processes,
                security=self.security,
                idle_poll_us=self.idle_poll_us,
            )
            self.pool = NetworkPool(config, 0, 1, runtime, change_topics)
            port = await self.pool.bind(0)
            self.pool_node = Node(0, "127.0.0.1", port)
            self.pool.publish(self._view(self.pool_node))
            self.pool.start()
            return port

        gateway = KafkaGateway(
            node=node,
            route=route,
            list_groups=list_groups,
            coordinator_for=coordinator_for,
            brokers=lambda: [gateway.node],
            topics=lambda: self.topics,
            change_topics=change_topics,
            cluster_id="groupcoord-test",
            topic_ids=self.catalog.topic_ids,
            group_configs=self.catalog.group_configs,
            coordinator_config=self.config,
            authorizer=self.security.authorizer(),
            submit_route=submit_route,
        )
        self.listener = KafkaListener(
            gateway.respond,
            security=self.security,
            submit=gateway.submit,
            at_turn_end=runtime.call_at_turn_end,  # as the partition actor's listener
        )
        port = await self.listener.start()
        gateway.node = Node(0, "127.0.0.1", port)
        return port

    def counters(self) -> ListenerCounters:
        """The listener's counters, or the network processes' summed (as PartitionListener's)."""

        async def read() -> ListenerCounters:
            if self.pool is not None:
                return self.pool.counters()
            return self.listener.counters()  # type: ignore[union-attr]

        return asyncio.run_coroutine_threadsafe(read(), self.loop).result(START_TIMEOUT_S)

    def _view(self, node: Node) -> NetworkView:
        catalog = self.catalog
        return NetworkView(
            node,
            {0: node},
            [node],
            dict(self.topics),
            catalog.topic_ids(),
            self.config,
            catalog.group_configs(),
            catalog.version,
        )

    def stop(self) -> None:
        async def _stop():
            if self.listener is not None:
                await self.listener.close()
            if self.pool is not None:
                await self.pool.close()
            await self.runtime.close()

        asyncio.run_coroutine_threadsafe(_stop(), self.loop).result(START_TIMEOUT_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(START_TIMEOUT_S)
