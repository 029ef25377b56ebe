"""The router: maps a group id to its partition actor (Kafka's hash, spec §7.1).

``RouterRuntime`` is plain Python over an injected partition factory; ``RouterActor`` is its
thin ``@ray.remote`` shell, named ``groupcoord-router``, detached and restarted forever. The
router holds no state a restart could lose: the partition count, the configuration and the log
root are its constructor arguments (Ray reruns ``__init__`` with the same ones), and the
partition actors are found again by name (``get_if_exists``), so a restarted router serves the
same partitions without restarting them. A router that finds its topic catalog claimed by a
newer one (``catalog``: Ray restarted it elsewhere while this one was cut off) exits within
``OWNER_CHECK_INTERVAL_S``; until then the catalog refuses its changes.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
import ray

from groupcoord.coordinator import CoordinatorConfig, Errors, partition_for
from groupcoord.coordinator.messages import ListGroupsRequest, ListGroupsResponse
from groupcoord.wire.topics import TopicChange

from .bounded import bounded, gathered_within
from .catalog import CatalogError, TopicCatalog
from .catalog_mirror import CatalogMirror, MirrorConfig
from .live_lag import LagWindowConfig
from .metrics import ListenerMetrics, created
from .partition_actor import (
    GAUGE_INTERVAL_S,
    OWNER_CHECK_INTERVAL_S,
    PartitionActor,
    normal_priority,
    open_server_log,
    partition_actor_name,
)
from .placement import alive_nodes, partition_strategy
from .wire_config import WireConfig
from .wire_service import BootstrapListener, WireDirectory

log = logging.getLogger("groupcoord.router")

ROUTER_NAME = "groupcoord-router"
MAX_PARTITIONS = 1_000  # each partition is a process; more is a configuration mistake
# Slots beyond the parked-request limit, for commits, heartbeats and admin calls in flight.
EXTRA_CONCURRENCY = 1_000
# How long a topic change waits for the partition listeners to confirm they know it.
PUBLISH_TIMEOUT_S = 5.0
# How long a starting router waits for a partition to say where it listens (``_ask_listeners``).
ASK_LISTENER_TIMEOUT_S = 30.0
# How long ListGroups waits for every partition: one that has not answered by then is left out
# and the answer says COORDINATOR_NOT_AVAILABLE, as for one that is down (merge_list_groups).
LIST_GROUPS_TIMEOUT_S = 30.0


class RouterRuntime:
    def __init__(self, num_partitions: int, partition_factory: Callable[[int], Any]) -> None:
        if type(num_partitions) is not int or not 1 <= num_partitions <= MAX_PARTITIONS:
            raise ValueError(
                f"num_partitions must be an int in [1, {MAX_PARTITIONS}], got {num_partitions!r}"
            )
        self.num_partitions = num_partitions
        self._factory = partition_factory
        self._handles: dict[int, Any] = {}

    def partition(self, n: int):
        if type(n) is not int or not 0 <= n < self.num_partitions:
            raise ValueError(f"partition must be an int in [0, {self.num_partitions}), got {n!r}")
        handle = self._handles.get(n)
        if handle is None:
            handle = self._handles[n] = self._factory(n)
        return handle

    def find_coordinator(self, group_id: str) -> tuple[int, Any]:
        if not isinstance(group_id, str):
            raise ValueError(f"group_id must be a str, got {type(group_id).__name__}")
        n = partition_for(group_id, self.num_partitions)
        return n, self.partition(n)


def detached_options(namespace: str) -> dict:
    """Every groupcoord actor's options: named in ``namespace``, detached, restarted by Ray
    forever, its calls never retried by Ray (a retried call would run twice; clients retry),
    found rather than started twice, and holding no CPU of its own."""
    return dict(
        namespace=namespace,
        lifetime="detached",
        max_restarts=-1,
        max_task_retries=0,
        get_if_exists=True,
        num_cpus=0,
    )


def partition_options(namespace: str, config: CoordinatorConfig) -> dict:
    # Parked joins and syncs each hold a concurrency slot while they wait.
    return detached_options(namespace) | dict(
        max_concurrency=config.max_parked_requests + EXTRA_CONCURRENCY
    )


def merge_list_groups(responses: list) -> ListGroupsResponse:
    """One ListGroups answer from every partition's (spec §2.10): an unreachable partition is
    COORDINATOR_NOT_AVAILABLE, otherwise the first partition error; groups sorted by id."""
    error, groups = Errors.NONE, []
    for response in responses:
        if isinstance(response, BaseException):
            error = error if error != Errors.NONE else Errors.COORDINATOR_NOT_AVAILABLE
            continue
        if response.error != Errors.NONE and error == Errors.NONE:
            error = response.error
        groups.extend(response.groups)
    return ListGroupsResponse(error, sorted(groups, key=lambda g: g.group_id))


@ray.remote
class RouterActor:
    """Methods: ``find_coordinator(group_id) -> (partition, handle)``, ``partitions()``,
    ``list_groups(states)``, ``describe()``, ``ping()``; the topic catalog: ``topics()``,
    ``topic_catalog()``, ``create_topic``, ``alter_topic``, ``delete_topic``,
    ``change_topics``, and groups' own settings: ``group_configs()``, ``configure_group``;
    for the Kafka listeners: ``exchange(partition, node)`` and
    ``kafka_address()``. Given a ``MirrorConfig``, it keeps the catalog mirrored from an
    upstream Kafka cluster (``catalog_mirror``; ``describe()["mirror"]``)."""

    def __init__(
        self,
        num_partitions: int,
        log_dir: str,
        namespace: str,
        config: CoordinatorConfig,
        log_config: Any = None,
        cluster_id: str = "",
        wire: WireConfig | None = None,
        log_level: int = logging.INFO,
        lag_windows: LagWindowConfig | None = None,
        mirror: MirrorConfig | None = None,
    ) -> None:
        self.config, self.log_dir, self.namespace = config, log_dir, namespace
        self.server_log = open_server_log(log_dir, "router", log_level)
        self.cluster_id = cluster_id
        self.init_error: str | None = None
        normal_priority()  # the bootstrap listener answers clients too
        self._nodes: dict = {}  # partition -> its listener's Node
        # partition -> the Node it registered itself (``exchange``); ``_nodes`` may know one
        # sooner, asked (``_ask_listeners``), but the others are told when it registers.
        self._registered: dict = {}
        self._pushes: set[asyncio.Task] = set()  # nodes told to the listeners (``exchange``)
        self.listener_pushes = 0  # registrations told to the other listeners (``describe``)
        self._bootstrap: BootstrapListener | None = None
        self._bootstrap_started: asyncio.Task | None = None  # its start(): its Node
        self._reporting: asyncio.Task | None = None  # its counters, to the metrics
        self._mirror: CatalogMirror | None = None  # serve --mirror-from
        try:
            myself = ray.get_runtime_context().current_actor  # partition listeners ask it
            # Spread over the nodes alive now (placement.py); an existing partition actor
            # (found by name after a router restart) stays where it is.
            node_ids = sorted(node["NodeID"] for node in alive_nodes())

            def factory(n: int):
                return PartitionActor.options(
                    name=partition_actor_name(n),
                    scheduling_strategy=partition_strategy(n, node_ids),
                    **partition_options(namespace, config),
                ).remote(
                    n,
                    num_partitions,
                    log_dir,
                    config,
                    log_config,
                    wire,
                    myself,
                    log_level,
                    lag_windows,
                )

            self.catalog = TopicCatalog(log_dir, config)
            self._owner_watch = asyncio.get_running_loop().create_task(self._watch_owner())
            self._runtime = RouterRuntime(num_partitions, factory)
            for n in range(num_partitions):  # start loading every partition now
                self._runtime.partition(n)
            if mirror is not None:
                self._mirror = CatalogMirror(mirror, self.catalog.topics, self.change_topics)
                self._mirroring = asyncio.get_running_loop().create_task(self._mirror.run_forever())
            if wire is not None:
                self._bootstrap = BootstrapListener(
                    wire,
                    num_partitions,
                    self._runtime.partition,
                    self.list_groups,
                    self._nodes,
                    lambda: self.catalog.snapshot().topics,
                    self.change_topics,
                    lambda: self.catalog.snapshot().topic_ids,
                    lambda: self.catalog.snapshot().group_configs,
                    os.path.join(log_dir, "bootstrap-listener"),
                    config,
                    lambda: self.catalog.version,
                )
                loop = asyncio.get_running_loop()
                self._bootstrap_started = loop.create_task(self._bootstrap.start())
                self._reporting = loop.create_task(self._report_listener())
                self._asking = loop.create_task(self._ask_listeners())
        except Exception as exc:  # never raise from __init__: report instead
            log.critical("router cannot start: %r", exc)
            self.init_error = repr(exc)
            self._runtime = None

    async def _watch_owner(self) -> None:
        """Exit once another router owns the catalog (module docstring)."""
        while True:
            await asyncio.sleep(OWNER_CHECK_INTERVAL_S)
            try:
                self.catalog.check_owner()
            except CatalogError as exc:
                log.critical("router: %s; this one was cut off and exits", exc)
                os._exit(1)

    def _live(self) -> RouterRuntime:
        if self._runtime is None:
            raise RuntimeError(f"router failed to start: {self.init_error}")
        return self._runtime

    async def find_coordinator(self, group_id: str):
        return self._live().find_coordinator(group_id)

    async def partitions(self) -> list:
        runtime = self._live()
        return [runtime.partition(n) for n in range(runtime.num_partitions)]

    async def _report_listener(self) -> None:
        """The bootstrap listener's counters, to Ray's metrics (label partition="bootstrap")."""
        metrics = created(ListenerMetrics, "listener metrics")
        while metrics is not None and self._bootstrap is not None:
            await asyncio.sleep(GAUGE_INTERVAL_S)
            metrics.report("bootstrap", self._bootstrap.counters())

    def _listening_at(self) -> str | None:
        """The bootstrap listener's host:port once it listens; None before, without one, or
        when it could not start (``kafka_address`` raises that)."""
        started = self._bootstrap_started
        if started is None or not started.done() or started.cancelled() or started.exception():
            return None
        node = started.result()
        return f"{node.host}:{node.port}"

    async def describe(self) -> dict:
        bootstrap = self._bootstrap
        return {
            "kafka": self._listening_at(),
            "kafka_listener": (
                None if bootstrap is None else msgspec.structs.asdict(bootstrap.counters())
            ),
            "num_partitions": self._runtime.num_partitions if self._runtime else 0,
            "log_dir": self.log_dir,
            "namespace": self.namespace,
            "config": self.config,
            "cluster_id": self.cluster_id,
            "init_error": self.init_error,
            "listener_pushes": self.listener_pushes,
            "mirror": None if self._mirror is None else self._mirror.state(),
            "server_log": self.server_log,
            "node": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
        }

    async def ping(self) -> None:
        return None

    async def _ask_listeners(self) -> None:
        """Ask every partition where its listener listens, once, at start. Otherwise a
        restarted router learns each address only from that partition's next ``exchange``,
        up to ``metadata_refresh_ms`` later, and meanwhile its bootstrap listener names fewer
        brokers and answers those partitions' FindCoordinator COORDINATOR_NOT_AVAILABLE. An
        ``exchange`` that comes first wins; a partition that does not answer within
        ``ASK_LISTENER_TIMEOUT_S`` (a first start: not listening yet) registers itself. An
        answer tells the other partitions nothing: each partition's registration does."""
        runtime = self._live()

        async def ask(partition: int) -> None:
            try:
                node = await bounded(
                    runtime.partition(partition).kafka_node.remote(), ASK_LISTENER_TIMEOUT_S
                )
            except Exception as exc:  # down, restarting or slow: its own exchange will do
                log.info("router: partition %d did not say where it listens (%r)", partition, exc)
                return
            if node is not None:
                self._nodes.setdefault(partition, node)

        await asyncio.gather(*(ask(n) for n in range(runtime.num_partitions)))

    async def exchange(self, partition: int, node: Any, held_version: int = -1) -> WireDirectory:
        """A partition listener registers its address; it learns everyone's, and the catalog
        unless it holds this version already (``held_version``): then the directory names
        version -1 and no catalog, which the listener keeps its own over (``adopt``). A
        listener polls every second, and the catalog can be megabytes."""
        self._live().partition(partition)  # ValueError for a partition out of range
        # A listener's first registration (it holds no directory yet: a new incarnation) or a
        # move. Not every first registration with a restarted router: its listeners know one
        # another already, and telling each of n about n - 1 others is n² calls.
        moved = held_version < 0 or self._registered.get(partition, node) != node
        self._nodes[partition] = self._registered[partition] = node
        nodes_only = WireDirectory(dict(self._nodes), {}, -1)
        if moved:
            # A new or moved listener: the others name it in their Metadata now, not at their
            # next poll. A client told fewer brokers than before drops the others, failing
            # what it has in flight to them (librdkafka: _DESTROY_BROKER). Not waited for.
            self.listener_pushes += 1
            push = asyncio.get_running_loop().create_task(
                self._tell(nodes_only, self._nodes.keys() - {partition}, PUBLISH_TIMEOUT_S)
            )
            self._pushes.add(push)
            push.add_done_callback(self._pushes.discard)
        if held_version == self.catalog.version:
            return nodes_only
        return self._directory_since(held_version)

    async def kafka_listeners(self) -> list[int]:
        """The partitions whose Kafka listener has registered: those Metadata names as brokers."""
        return sorted(self._nodes)

    async def kafka_address(self) -> str | None:
        """The bootstrap listener's host:port, once it listens (None without listeners)."""
        if self._bootstrap_started is None:
            return None
        await self._bootstrap_started  # raises what its start raised
        return self._listening_at()

    async def topics(self) -> dict[str, int]:
        return self.catalog.topics()

    async def topic_catalog(self) -> tuple[int, dict[str, int], dict[str, dict[str, int]]]:
        """The catalog's version, topics and groups' own settings, which a partition hands
        its shard once loaded."""
        return self.catalog.version, self.catalog.topics(), self.catalog.group_configs()

    async def create_topic(self, name: str, partitions: int) -> None:
        """CatalogError (a ValueError with Kafka's code) when refused; likewise below."""
        await self._change_one(TopicChange("create", name, partitions))

    async def alter_topic(self, name: str, partitions: int) -> None:
        await self._change_one(TopicChange("grow", name, partitions))

    async def delete_topic(self, name: str) -> None:
        await self._change_one(TopicChange("delete", name))

    async def group_configs(self) -> dict[str, dict[str, int]]:
        """Groups' own settings: {group id: {setting: value}} (``coordinator.group_config``)."""
        return self.catalog.group_configs()

    async def configure_group(self, group_id: str, ops: list) -> None:
        """Change a group's own settings by ``ops`` (``GroupConfigOp``: SET or DELETE), as
        IncrementalAlterConfigs does; CatalogError with Kafka's code when refused."""
        await self._change_one(TopicChange("alter_group_configs", group_id, configs=tuple(ops)))

    async def change_topics(self, changes: list) -> list:
        """Kafka's CreateTopics/DeleteTopics/CreatePartitions, and groups' settings changes
        (``wire.configs``). A change is answered once every
        partition listener that answers within ``PUBLISH_TIMEOUT_S`` knows it, so a client
        that created a topic finds it on whichever listener it asks next (a partition that is
        restarting learns it on its first refresh)."""
        before = self.catalog.version
        results = self.catalog.apply(changes)
        if self.catalog.version != before:
            await self._publish_directory(before)
        return results

    async def _change_one(self, change: TopicChange) -> None:
        (result,) = await self.change_topics([change])
        if result.error != Errors.NONE:
            raise CatalogError(result.error, result.message or "refused")

    def _directory(self) -> WireDirectory:
        catalog = self.catalog
        return WireDirectory(
            dict(self._nodes),
            catalog.topics(),
            catalog.version,
            catalog.topic_ids(),
            catalog.group_configs(),
        )

    def _directory_since(self, version: int) -> WireDirectory:
        """The directory for a holder of catalog ``version``: the catalog's changes over it
        when they are held (``catalog_changes``), else the whole catalog."""
        changes = self.catalog.changes_since(version)
        if changes is None:
            return self._directory()
        return WireDirectory(dict(self._nodes), {}, -1, changes=changes)

    async def _publish_directory(self, before: int) -> None:
        """Hand every partition the catalog changed from version ``before``: its changes,
        and to a partition that answers it holds an older version than they are over, the
        changes over that version (or the whole catalog)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PUBLISH_TIMEOUT_S
        version = self.catalog.version
        # Every partition, listener or not: each shard needs the catalog (consumer groups).
        answers = await self._tell(
            self._directory_since(before), range(self._live().num_partitions), PUBLISH_TIMEOUT_S
        )
        behind: dict[int, list[int]] = {}
        for partition, held in enumerate(answers or ()):
            if type(held) is int and held < version:
                behind.setdefault(held, []).append(partition)
        # Changes published at once cross: a few versions at most, one call for each.
        for held, partitions in behind.items():
            answers = await self._tell(
                self._directory_since(held), partitions, max(deadline - loop.time(), 0.0)
            )
            if answers is None:
                break
        if answers is None:
            log.warning(
                "topic catalog v%d: not every partition listener confirmed it within "
                "%.0f s; they learn it on their next refresh",
                version,
                PUBLISH_TIMEOUT_S,
            )

    async def _tell(
        self, directory: WireDirectory, partitions: Iterable[int], timeout_s: float
    ) -> list | None:
        """Hand ``directory`` to ``partitions``' actors: their answers (the catalog version
        each holds after, or the error it raised), or None when not all answered within
        ``timeout_s``. One that is down or restarting learns it at its next poll; its
        error is collected here, not left to Ray to print as unhandled."""
        runtime = self._live()
        shared = ray.put(directory)  # written once for all of them, not once a call
        calls = [runtime.partition(n).wire_directory.remote(shared) for n in partitions]
        try:
            return await bounded(asyncio.gather(*calls, return_exceptions=True), timeout_s)
        except TimeoutError:
            return None

    async def list_groups(self, states_filter=()) -> ListGroupsResponse:
        if not isinstance(states_filter, (list, tuple)) or not all(
            isinstance(s, str) for s in states_filter
        ):
            raise ValueError("states_filter must be a list of state names")
        request = ListGroupsRequest(list(states_filter))
        handles = await self.partitions()
        responses = await gathered_within(
            (h.handle.remote(request) for h in handles), LIST_GROUPS_TIMEOUT_S
        )
        return merge_list_groups(responses)


__all__ = ["ROUTER_NAME", "RouterActor", "RouterRuntime", "merge_list_groups", "partition_options"]
