"""The partition actor: a thin ``@ray.remote`` shell over ``PartitionRuntime``.

Named ``groupcoord-partition-<n>`` in the deployment's namespace, detached, restarted forever by
Ray (``max_restarts=-1``) and never retried by Ray (``max_task_retries=0``: a retried commit or
join would run twice; the client retries with Kafka's rules instead). A restart reruns
``__init__`` in a new process, which starts loading the log in the background and answers
COORDINATOR_LOAD_IN_PROGRESS until it is done. ``__init__`` itself never raises (an exception
there would kill the actor for good): whatever goes wrong is reported by ``info()`` and every
request is answered COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import ray

from groupcoord.coordinator import CoordinatorConfig, Errors
from groupcoord.coordinator.messages import validate

from .responses import error_response
from .runtime import PartitionRuntime
from .wire_service import PartitionListener, WireConfig

log = logging.getLogger("groupcoord.partition")

GROUP_GAUGE_INTERVAL_S = 5.0
# Time for replies already resolved (NOT_COORDINATOR) to leave the process before it exits.
FATAL_EXIT_DELAY_S = 0.2


def partition_actor_name(partition: int) -> str:
    return f"groupcoord-partition-{partition}"


def partition_dir(log_dir: str, partition: int) -> str:
    return os.path.join(log_dir, f"partition-{partition}")


def open_log(directory: str, log_config: Any):
    from groupcoord.storage import open_partition_log  # imported late: a missing storage
    return open_partition_log(directory, log_config)     # becomes a load error, not a dead actor


def _exit_for_restart(exc: BaseException) -> None:
    # The only safe recovery from a failed append is a reload from the log: let Ray restart us.
    log.critical("exiting so that Ray restarts the partition: %r", exc)
    asyncio.get_running_loop().call_later(FATAL_EXIT_DELAY_S, os._exit, 1)


@ray.remote
class PartitionActor:
    """One offsets partition. Methods: ``handle(request)``, ``info()``, ``ping()``, ``close()``."""

    def __init__(self, partition: int, num_partitions: int, log_dir: str,
                 config: CoordinatorConfig, log_config: Any = None,
                 wire: WireConfig | None = None, router: Any = None) -> None:
        self._runtime: PartitionRuntime | None = None
        self._wire: PartitionListener | None = None
        self._init_error: str | None = None
        try:
            from .metrics import RayMetrics
            directory = partition_dir(log_dir, partition)
            self._metrics = RayMetrics.create()
            self._runtime = PartitionRuntime(
                partition, num_partitions, config,
                open_log=lambda: open_log(directory, log_config),
                metrics=self._metrics, on_fatal=_exit_for_restart)
            self._runtime.start()
            if wire is not None:
                self._wire = PartitionListener(partition, num_partitions, wire, self._runtime,
                                               router)
                self._wire_task = asyncio.get_running_loop().create_task(self._start_wire())
            if self._metrics is not None:
                self._gauge_task = asyncio.get_running_loop().create_task(self._report_groups())
        except Exception as exc:
            log.critical("partition %r cannot start: %r", partition, exc)
            self._init_error = repr(exc)

    async def _start_wire(self) -> None:
        try:
            await self._wire.start()
        except Exception as exc:                  # a taken port: say so, keep serving Ray
            log.critical("partition %d: Kafka listener cannot start: %r",
                         self._runtime.partition, exc)
            self._init_error = f"Kafka listener: {exc!r}"

    async def _report_groups(self) -> None:
        while True:
            await asyncio.sleep(GROUP_GAUGE_INTERVAL_S)
            self._metrics.groups(self._runtime.partition, self._runtime.group_states())

    async def handle(self, request):
        if self._runtime is None:
            return error_response(validate(request), Errors.COORDINATOR_NOT_AVAILABLE)
        return await self._runtime.handle(request)

    async def wire_directory(self, directory: Any) -> None:
        """The router publishes a changed topic catalog (see wire_service)."""
        if self._wire is not None:
            self._wire.directory = directory

    async def ping(self, payload: Any = None) -> Any:
        return payload

    async def info(self) -> dict:
        base = {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(),
                "init_error": self._init_error}
        if self._runtime is None:
            return {**base, "state": "broken", "epoch": -1}
        node = self._wire.node if self._wire is not None else None
        kafka = None if node is None else f"{node.host}:{node.port}"
        return {**self._runtime.info(), **base, "kafka": kafka}

    async def close(self) -> None:
        if self._wire is not None:
            await self._wire.close()
        if self._runtime is not None:
            await self._runtime.close()
