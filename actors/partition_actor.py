"""The partition actor: a thin ``@ray.remote`` shell over ``PartitionRuntime``.

Named ``groupcoord-partition-<n>`` in the deployment's namespace, detached, restarted forever by
Ray (``max_restarts=-1``) and never retried by Ray (``max_task_retries=0``: a retried commit or
join would run twice; the client retries with Kafka's rules instead). A restart reruns
``__init__`` in a new process, which starts loading the log in the background and answers
COORDINATOR_LOAD_IN_PROGRESS until it is done. ``__init__`` itself never raises (an exception
there would kill the actor for good): whatever goes wrong is reported by ``info()`` and every
request is answered COORDINATOR_NOT_AVAILABLE.

A load that fails in a way a fresh process may fix (``PartitionRuntime``'s ``io`` kind) makes
the actor exit so that Ray restarts it, at most ``MAX_LOAD_RESTARTS`` times in a row: the count
lives in Ray's GCS key-value store (it must outlive the process) and is reset by a successful
load. Past it the actor stays up in state ``load_failed`` — a crash loop stops where ``info()``,
``groupcoord status`` and the logs show it, instead of spinning silently.

Each incarnation claims its partition in the GCS key-value store when it starts and checks the
claim every ``OWNER_CHECK_INTERVAL_S``: an incarnation that finds a newer one's claim exits at
once. That is how a process cut off from the cluster (a stalled or partitioned node that Ray
declared dead and whose actors it restarted elsewhere) gives up by itself when it runs again:
on a local file system it still holds the log's writer lock, which the new incarnation waits
for. The claim is not what keeps the log safe (a check is not atomic with a write); the log's
lock and epoch fencing are (storage/partition_log.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from typing import Any

import msgspec
import ray

from groupcoord.coordinator import CoordinatorConfig, Errors
from groupcoord.coordinator.messages import validate
from groupcoord.storage import open_partition_log

from .bounded import bounded
from .kv import kv_get, kv_put
from .live_lag import LagWindowConfig, WindowSnapshot
from .metrics import RayMetrics, created
from .responses import error_response
from .runtime import PartitionRuntime
from .server_log import log_to_file
from .wire_config import WireConfig
from .wire_service import EXCHANGE_TIMEOUT_S, PartitionListener

log = logging.getLogger("groupcoord.partition")

GAUGE_INTERVAL_S = 5.0
# Time for replies already resolved (NOT_COORDINATOR) to leave the process before it exits.
FATAL_EXIT_DELAY_S = 0.2
MAX_LOAD_RESTARTS = 3
OWNER_CHECK_INTERVAL_S = 1.0
CATALOG_FETCH_ATTEMPTS = 20


def partition_actor_name(partition: int) -> str:
    return f"groupcoord-partition-{partition}"


def partition_dir(log_dir: str, partition: int) -> str:
    return os.path.join(log_dir, f"partition-{partition}")


def open_log(directory: str, log_config: Any):
    return open_partition_log(directory, log_config)


def _load_restarts_key(directory: str) -> bytes:
    return f"load-restarts:{directory}".encode()  # one log directory, one partition


def load_restarts(directory: str) -> int:
    """Restarts in a row the partition of ``directory`` took because its load failed."""
    return int(kv_get(_load_restarts_key(directory)) or 0)


def set_load_restarts(directory: str, count: int) -> None:
    kv_put(_load_restarts_key(directory), str(count).encode())


def _owner_key(directory: str) -> bytes:
    return f"owner:{directory}".encode()


def claim_partition(directory: str, incarnation: str) -> None:
    """Record ``incarnation`` as the owner of the partition of ``directory``."""
    kv_put(_owner_key(directory), incarnation.encode())


def partition_owner(directory: str) -> str | None:
    """The incarnation that claimed the partition of ``directory`` last, if any."""
    value = kv_get(_owner_key(directory))
    return None if value is None else value.decode()


def normal_priority() -> int:
    """Run every thread of this process at niceness 0 if it can; returns the highest niceness
    left.

    Ray starts worker processes at niceness 15 (its ``worker_niceness``), which suits batch
    tasks but not a coordinator: any busy process at the normal priority on the same machine
    then delays its replies (measured: commits waiting 500 ms while the actor used 8% of a
    CPU). Linux keeps a niceness per thread (and a new thread inherits its creator's), so each
    thread is set, the main one included. Raising the priority needs CAP_SYS_NICE; without it,
    say how to start Ray instead.
    """
    try:
        threads = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:  # not Linux: the process as a whole
        threads = [0]
    left = 0
    for tid in threads:
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) > 0:
                os.setpriority(os.PRIO_PROCESS, tid, 0)
        except PermissionError:
            left = max(left, os.getpriority(os.PRIO_PROCESS, tid))
        except ProcessLookupError:  # a thread that ended meanwhile
            continue
    if left:
        log.warning(
            "running at niceness %d: busy processes on this machine will delay the "
            "coordinator's replies; start Ray with RAY_worker_niceness=0",
            left,
        )
    return left


def open_server_log(log_dir: str, name: str, level: int) -> str | None:
    """This actor's log file (``server_log``), or None when it cannot be opened: the actor
    serves anyway (``__init__`` must not raise) and says why on stderr, in Ray's logs."""
    try:
        return log_to_file(log_dir, name, level)
    except (OSError, ValueError, TypeError) as exc:
        log.error("%s: cannot open its log file in %s: %r", name, log_dir, exc)
        return None


def _exit_for_restart(exc: BaseException) -> None:
    # The only safe recovery from a failed append is a reload from the log: let Ray restart us.
    log.critical("exiting so that Ray restarts the partition: %r", exc)
    asyncio.get_running_loop().call_later(FATAL_EXIT_DELAY_S, os._exit, 1)


@ray.remote
class PartitionActor:
    """One offsets partition. Methods: ``handle(request)``, ``info()``, ``ping()``, ``close()``;
    for the router: ``wire_directory(directory)`` and ``kafka_node()``; for the HTTP service:
    ``live_lag()``, ``commit_topic_partitions()`` and ``observe_end_offsets(end_offsets)``
    (live_lag.py)."""

    def __init__(
        self,
        partition: int,
        num_partitions: int,
        log_dir: str,
        config: CoordinatorConfig,
        log_config: Any = None,
        wire: WireConfig | None = None,
        router: Any = None,
        log_level: int = logging.INFO,
        lag_windows: LagWindowConfig | None = None,
    ) -> None:
        self._runtime: PartitionRuntime | None = None
        self.server_log = open_server_log(log_dir, f"partition-{partition}", log_level)
        self.niceness = normal_priority()
        self._wire: PartitionListener | None = None
        self._init_error: str | None = None
        self._partition = partition
        self._router = router
        self.load_restarts: int | None = None  # read when a load fails
        try:
            directory = self._directory = partition_dir(log_dir, partition)
            self._incarnation = (
                f"{ray.get_runtime_context().get_node_id()} pid {os.getpid()} {uuid.uuid4().hex}"
            )
            claim_partition(directory, self._incarnation)  # before the log: see module doc
            self._owner_task = asyncio.get_running_loop().create_task(self._watch_owner())
            self._metrics = created(RayMetrics, "metrics")
            self._runtime = PartitionRuntime(
                partition,
                num_partitions,
                config,
                open_log=lambda: open_log(directory, log_config),
                metrics=self._metrics,
                on_fatal=self._on_fatal,
                on_loaded=self._on_loaded,
                lag_windows=lag_windows,
                idle_poll_us=0 if wire is None else wire.idle_poll_us,
            )
            self._runtime.start()
            if wire is not None:
                self._wire = PartitionListener(
                    partition, num_partitions, wire, self._runtime, router, directory
                )
                self._wire_task = asyncio.get_running_loop().create_task(self._start_wire())
            if self._metrics is not None:
                self._gauge_task = asyncio.get_running_loop().create_task(self._report_gauges())
        except Exception as exc:
            log.critical("partition %r cannot start: %r", partition, exc)
            self._init_error = repr(exc)

    async def _watch_owner(self) -> None:
        while True:
            await asyncio.sleep(OWNER_CHECK_INTERVAL_S)
            try:
                owner = await asyncio.to_thread(partition_owner, self._directory)
            except Exception as exc:  # the GCS unreachable: the log's fencing still holds
                log.warning("partition %d: cannot read its owner: %r", self._partition, exc)
                continue
            if owner is not None and owner != self._incarnation:
                # Acknowledge nothing more: whatever is in flight is left to the new owner.
                log.critical(
                    "partition %d: the incarnation %s owns it now; this one (%s) was cut off "
                    "and exits",
                    self._partition,
                    owner,
                    self._incarnation,
                )
                os._exit(1)

    async def _start_wire(self) -> None:
        try:
            await self._wire.start()
        except Exception as exc:  # a taken port: say so, keep serving Ray
            log.critical(
                "partition %d: Kafka listener cannot start: %r", self._runtime.partition, exc
            )
            self._init_error = f"Kafka listener: {exc!r}"

    def _on_fatal(self, exc: BaseException) -> None:
        if self._runtime.state == "load_failed":
            try:
                self.load_restarts = load_restarts(self._directory)
                if self.load_restarts >= MAX_LOAD_RESTARTS:
                    log.critical(
                        "partition %d: %d restarts in a row could not load it either; "
                        "staying up as load_failed: fix the cause, then restart the "
                        "deployment",
                        self._partition,
                        self.load_restarts,
                    )
                    return
                set_load_restarts(self._directory, self.load_restarts + 1)
            except Exception as kv_error:  # cannot count: do not risk a silent loop
                log.critical(
                    "partition %d: cannot count load restarts (%r); staying up as load_failed",
                    self._partition,
                    kv_error,
                )
                return
        _exit_for_restart(exc)

    def _on_loaded(self) -> None:
        try:
            set_load_restarts(self._directory, 0)
        except Exception as exc:  # only the crash-loop bound is affected
            log.warning("partition %d: cannot reset load restarts: %r", self._partition, exc)
        if self._router is not None:
            self._catalog_task = asyncio.get_running_loop().create_task(self._fetch_catalog())

    async def _fetch_catalog(self) -> None:
        """Ask the router for the topic catalog once loaded (consumer groups wait for it);
        later changes are pushed (``wire_directory``). Retried while the router restarts or
        stalls (each attempt bounded as a listener's refresh is), at most
        ``CATALOG_FETCH_ATTEMPTS`` times (the listener's refresh also carries it)."""
        delay_s = 0.1
        for _ in range(CATALOG_FETCH_ATTEMPTS):
            try:
                version, topics, group_configs = await bounded(
                    self._router.topic_catalog.remote(), EXCHANGE_TIMEOUT_S
                )
                self._runtime.update_topics(version, topics, group_configs)
                return
            except Exception as exc:
                log.warning("partition %d: no topic catalog yet (%r)", self._partition, exc)
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, 5.0)
        log.error("partition %d: gave up fetching the topic catalog", self._partition)

    async def _report_gauges(self) -> None:
        while True:
            await asyncio.sleep(GAUGE_INTERVAL_S)
            self._metrics.groups(self._runtime.partition, self._runtime.group_states())
            if self._wire is not None:
                self._metrics.listeners.report(self._runtime.partition, self._wire.counters())

    async def handle(self, request):
        if self._runtime is None:
            return error_response(validate(request), Errors.COORDINATOR_NOT_AVAILABLE)
        return await self._runtime.handle(request)

    async def wire_directory(self, directory: Any) -> int:
        """The router publishes a changed topic catalog (see wire_service), whole or as its
        changes (``catalog_changes``); the shard gets it too (consumer groups' partition
        counts). Returns the catalog version held after (-1: none), so that the router can
        send changes this partition could not take again, over the version it holds."""
        if self._wire is not None:
            return self._wire.adopt(directory)
        runtime = self._runtime
        if runtime is None:
            return -1
        if directory.changes is not None:
            runtime.apply_catalog_changes(directory.changes)
        else:
            runtime.update_topics(
                directory.catalog_version, dict(directory.topics), directory.group_configs
            )
        return runtime.catalog_version

    async def kafka_node(self) -> Any:
        """Where this partition's Kafka listener listens (a ``wire.Node``), or None before it
        listens or without one: a starting router asks (``RouterActor._ask_listeners``)."""
        return None if self._wire is None else self._wire.node

    async def live_lag(self) -> list[WindowSnapshot]:
        """The commit windows of this partition's groups (empty while broken)."""
        return [] if self._runtime is None else self._runtime.lag.snapshot()

    async def commit_topic_partitions(self) -> list[tuple[str, int]]:
        return [] if self._runtime is None else self._runtime.lag.topic_partitions()

    async def observe_end_offsets(self, end_offsets: dict) -> int:
        """Log-end offsets sampled by the HTTP service: later commits' lag is taken
        against them. Returns how many concern this partition's windows."""
        if self._runtime is None or not isinstance(end_offsets, dict):
            return 0
        return self._runtime.lag.observe_end_offsets(end_offsets)

    async def ping(self, payload: Any = None) -> Any:
        return payload

    async def info(self) -> dict:
        base = {
            "pid": os.getpid(),
            "node": ray.get_runtime_context().get_node_id(),
            "init_error": self._init_error,
            "load_restarts": self.load_restarts,
            "niceness": self.niceness,
            "server_log": self.server_log,
        }
        if self._runtime is None:
            return {**base, "state": "broken", "epoch": -1}
        node = self._wire.node if self._wire is not None else None
        kafka = None if node is None else f"{node.host}:{node.port}"
        wire = self._wire
        network = wire.network_info() if wire is not None else None
        counters = None if wire is None else msgspec.structs.asdict(wire.counters())
        return {
            **self._runtime.info(),
            **base,
            "kafka": kafka,
            "kafka_brokers": 0 if wire is None else wire.brokers_named(),
            # The catalog version its Kafka listener answers Metadata from (-1: none yet, until
            # its first exchange with the router is answered); None without one.
            "listener_catalog_version": None if wire is None else wire.directory.catalog_version,
            "network_processes": network,
            "kafka_listener": counters,
        }

    async def close(self) -> None:
        if self._wire is not None:
            await self._wire.close()
        if self._runtime is not None:
            await self._runtime.close()
