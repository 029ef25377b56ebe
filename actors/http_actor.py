"""The HTTP service's Ray actor, ``groupcoord-http``: a thin shell over ``LagService``.

Why its own actor rather than threads in the router or a partition: it calls the end-offsets
source (possibly slow, possibly a Kafka client) and serves browsers and scrapers, none of
which may delay a coordinator's replies; it gathers every partition, which no single partition
should do; and it can be restarted (or left out) without touching the coordinator. Like the
router it is named, detached and restarted forever by Ray, holds nothing a restart loses (its
windows live in the partitions), and its ``__init__`` never raises: ``address()`` says why it
cannot listen.

``RaySources`` reaches the partitions through the router: every call has a time bound
(``CALL_TIMEOUT_S``), and a partition that does not answer keeps its previous windows in the
view until it does.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import Any

import ray

from groupcoord.coordinator import DescribeGroupsRequest, Errors, partition_for
from groupcoord.coordinator.consumer_protocol import decode_assignment

from .bounded import bounded
from .burrow_api import GroupView, MemberView
from .http_service import HttpConfig, LagService
from .kv import listen_at_remembered_port
from .live_lag import WindowSnapshot
from .metrics import LagMetrics, created
from .partition_actor import normal_priority

log = logging.getLogger("groupcoord.http")

HTTP_ACTOR_NAME = "groupcoord-http"
CALL_TIMEOUT_S = 5.0


def _assignment(raw: bytes, protocol_type: str) -> tuple[tuple[str, int], ...]:
    if protocol_type != "consumer" or not raw:
        return ()
    try:
        return tuple(sorted(decode_assignment(raw).partitions))
    except ValueError:  # unparsable: shown as no assignment
        return ()


class RaySources:
    def __init__(self, router: Any, num_partitions: int) -> None:
        self._router = router
        self._num_partitions = num_partitions
        self._partitions: list | None = None
        self._windows: dict[int, list[WindowSnapshot]] = {}

    async def _handles(self) -> list:
        if self._partitions is None:
            self._partitions = await bounded(self._router.partitions.remote(), CALL_TIMEOUT_S)
        return self._partitions

    async def _each(self, call) -> list:
        handles = await self._handles()
        return await asyncio.gather(
            *(bounded(call(h), CALL_TIMEOUT_S) for h in handles),
            return_exceptions=True,
        )

    async def topic_partitions(self) -> list[tuple[str, int]]:
        answers = await self._each(lambda h: h.commit_topic_partitions.remote())
        return sorted({tp for a in answers if isinstance(a, list) for tp in a})

    async def push_end_offsets(self, end_offsets: Mapping[tuple[str, int], int]) -> None:
        await self._each(lambda h: h.observe_end_offsets.remote(dict(end_offsets)))

    async def windows(self) -> list[WindowSnapshot]:
        answers = await self._each(lambda h: h.live_lag.remote())
        for n, answer in enumerate(answers):
            if isinstance(answer, list):
                self._windows[n] = answer
            else:
                log.warning("partition %d: no commit windows this round: %r", n, answer)
        return [w for ws in self._windows.values() for w in ws]

    async def groups(self, max_groups: int) -> dict[str, GroupView]:
        listed = await bounded(self._router.list_groups.remote([]), CALL_TIMEOUT_S)
        ids = sorted(g.group_id for g in listed.groups)[:max_groups]
        handles = await self._handles()
        by_partition: dict[int, list[str]] = {}
        for g in ids:
            by_partition.setdefault(partition_for(g, self._num_partitions), []).append(g)
        answers = await asyncio.gather(
            *(
                bounded(handles[n].handle.remote(DescribeGroupsRequest(gs)), CALL_TIMEOUT_S)
                for n, gs in by_partition.items()
            ),
            return_exceptions=True,
        )
        out = {}
        for answer in answers:
            for d in getattr(answer, "groups", ()):
                if d.error != Errors.NONE:
                    continue
                members = tuple(
                    MemberView(
                        m.member_id,
                        m.client_id,
                        m.client_host,
                        _assignment(m.member_assignment, d.protocol_type),
                    )
                    for m in d.members
                )
                out[d.group_id] = GroupView(d.group_id, d.group_state, d.protocol_type, members)
        return out


@ray.remote
class HttpActor:
    """Methods: ``address() -> "host:port"``, ``info()``, ``close()``."""

    def __init__(
        self,
        router: Any,
        num_partitions: int,
        config: HttpConfig,
        servers: tuple[str, ...] = (),
    ) -> None:
        self.init_error: str | None = None
        normal_priority()
        try:
            self._service = LagService(
                config,
                RaySources(router, num_partitions),
                servers=servers,
                metrics=created(LagMetrics, "lag metrics"),
            )
            key = f"http-port:{ray.get_runtime_context().namespace}".encode()  # one per namespace
            self._started = asyncio.get_running_loop().create_task(self._listen(key, config))
        except Exception as exc:  # never raise from __init__: report instead
            log.critical("HTTP service cannot start: %r", exc)
            self.init_error = repr(exc)

    async def _listen(self, key: bytes, config: HttpConfig) -> tuple[str, int]:
        """Listen where this service listened before it restarted, when it was given port 0
        (kv.listen_at_remembered_port): dashboards and scrapers keep their address."""
        bound: list[tuple[str, int]] = []

        async def bind(port: int) -> int:
            bound.append(await self._service.start(port))
            return bound[-1][1]

        await listen_at_remembered_port(key, config.port, bind)
        return bound[-1]

    async def address(self) -> str:
        """``host:port`` once listening; raises what prevented listening."""
        if self.init_error is not None:
            raise RuntimeError(f"HTTP service failed to start: {self.init_error}")
        host, port = await self._started
        return f"{host}:{port}"

    async def info(self) -> dict:
        if self.init_error is not None:
            return {"init_error": self.init_error, "pid": os.getpid()}
        return {"init_error": None, "pid": os.getpid(), **self._service.info()}

    async def close(self) -> None:
        if self.init_error is None:
            await self._service.close()
