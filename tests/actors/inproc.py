"""An in-process stand-in for the router and one partition actor, for client tests without Ray.

``InProcRouter(runtime)`` answers ``find_coordinator.remote(group)`` with a handle whose
``handle.remote(request)`` runs ``runtime.handle(request)`` (a real ``PartitionRuntime`` over
``fakes.MemoryLog``). ``.remote(...)`` returns a coroutine, awaited exactly like an ObjectRef.
With ``reorder_seed`` each call to the partition first waits a random few milliseconds, so
calls may run in another order than they were made: what Ray's async actors do (DESIGN.md).
With ``tamper(request, response) -> response`` each answer can be rewritten on its way back, to
show the client a coordinator misbehaving.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from groupcoord.actors.runtime import PartitionRuntime
from groupcoord.coordinator import CoordinatorConfig

from .fakes import MemoryLog

# The in-process client tests' coordinator settings and members: short timers, no join delay.
CONFIG = CoordinatorConfig(group_min_session_timeout_ms=10, group_initial_rebalance_delay_ms=0)
MEMBER = dict(
    topic_partitions={"t": 2},
    session_timeout_ms=2_000,
    heartbeat_interval_ms=100,
    rebalance_timeout_ms=2_000,
)


class RemoteMethod:
    """A Ray actor method's ``.remote`` over a plain function (its result, not an ObjectRef)."""

    def __init__(self, function) -> None:
        self._function = function

    def remote(self, *args):
        return self._function(*args)


class InProcPartition:
    def __init__(
        self,
        runtime: PartitionRuntime,
        reorder_seed: int | None = None,
        tamper: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        rng = random.Random(reorder_seed) if reorder_seed is not None else None

        async def handle(request):
            if rng is not None:
                await asyncio.sleep(rng.uniform(0, 0.01))
            response = await runtime.handle(request)
            return response if tamper is None else tamper(request, response)

        self.handle = RemoteMethod(handle)


class InProcRouter:
    def __init__(
        self,
        runtime: PartitionRuntime,
        reorder_seed: int | None = None,
        tamper: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        partition = InProcPartition(runtime, reorder_seed, tamper)

        async def find_coordinator(group_id: str):
            return 0, partition

        self.find_coordinator = RemoteMethod(find_coordinator)


async def serving_runtime(config: CoordinatorConfig) -> PartitionRuntime:
    runtime = PartitionRuntime(0, 1, config, lambda: MemoryLog([]))
    runtime.start()
    for _ in range(2000):
        if runtime.state == "serving":
            return runtime
        await asyncio.sleep(0.005)
    raise AssertionError(f"runtime never served: {runtime.info()}")
