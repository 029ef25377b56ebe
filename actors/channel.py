"""Calling a group's coordinator through Ray, with Kafka's client-side retry rules.

Ray never retries a partition call (``max_task_retries=0``); this does, the way Kafka's Java
client treats its coordinator:

* the actor is unreachable (dying, restarting, on a lost node), or answers NOT_COORDINATOR /
  COORDINATOR_NOT_AVAILABLE: back off, ask the router again (rediscover), retry;
* COORDINATOR_LOAD_IN_PROGRESS: back off, retry the same partition;
* anything else is the answer, handed to the caller.

Backoff doubles from ``retry_backoff_ms`` up to ``retry_backoff_max_ms``, and a call gives up
with ``CoordinatorUnavailable`` at its deadline (``timeout_ms`` after it started). Every attempt,
discovery included, is bounded by the time left (and by ``attempt_timeout_s`` where given): an
attempt still unanswered then is abandoned and the coordinator's handle forgotten, so a stuck
partition cannot hold a call past its deadline, and the next call asks the router afresh. A
``ValueError`` from an actor (a request it refused as ill-typed) is raised to the caller
unchanged and never retried.

Retrying a call whose first attempt died with its actor is safe for the group protocol: every
request is idempotent or guarded by a generation (a commit writes the same value twice at most).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from ray.exceptions import GetTimeoutError, RayActorError

from groupcoord.coordinator import Errors

from .bounded import bounded
from .responses import response_error

REDISCOVER = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE})
RETRY_SAME = frozenset({Errors.COORDINATOR_LOAD_IN_PROGRESS})

# The Ray actor handle of the router (router.py's RouterActor, ``Deployment.router``). Ray's
# handles are untyped (their ``.remote`` methods are made at run time), hence Any, named once.
RouterHandle = Any


class CoordinatorUnavailable(RuntimeError):
    """No coordinator answered within the call's timeout."""


class CoordinatorChannel:
    def __init__(
        self,
        router: RouterHandle,
        group_id: str,
        *,
        retry_backoff_ms: int = 50,
        retry_backoff_max_ms: int = 1_000,
        timeout_ms: int = 60_000,
    ) -> None:
        if retry_backoff_ms < 1 or retry_backoff_max_ms < retry_backoff_ms or timeout_ms < 1:
            raise ValueError("need 1 <= retry_backoff_ms <= retry_backoff_max_ms, timeout_ms >= 1")
        self.router = router
        self.group_id = group_id
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.timeout_ms = timeout_ms
        self.partition: int | None = None
        self._handle = None
        self.discoveries = 0  # how often the coordinator was (re)discovered
        self.retries = 0

    async def _coordinator(self):
        if self._handle is None:
            self.partition, self._handle = await self.router.find_coordinator.remote(self.group_id)
            self.discoveries += 1
        return self._handle

    def forget(self) -> None:
        self._handle = None

    async def call(
        self,
        request: msgspec.Struct,
        *,
        attempt_timeout_s: float | None = None,
        timeout_ms: int | None = None,
    ) -> Any:
        """Send ``request`` to the group's coordinator until it gives a final answer; raise
        ``CoordinatorUnavailable`` if none came by the deadline (``timeout_ms``, default the
        channel's)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout_ms or self.timeout_ms) / 1000
        backoff_s = self.retry_backoff_ms / 1000
        last: object = None
        while True:
            left_s = deadline - loop.time()
            if attempt_timeout_s is not None:
                left_s = min(left_s, attempt_timeout_s)
            try:
                # A hung attempt is cancelled here; what it sent may still run on the actor
                # (a commit is then unacknowledged, and retried or reported as unavailable).
                response = await bounded(self._attempt(request), max(left_s, 0))
            except (RayActorError, GetTimeoutError, TimeoutError) as exc:
                last = exc
                self.forget()
            else:
                error = response_error(response)
                if error not in REDISCOVER and error not in RETRY_SAME:
                    return response
                last = error
                if error in REDISCOVER:
                    self.forget()
            if loop.time() + backoff_s >= deadline:
                raise CoordinatorUnavailable(
                    f"group {self.group_id!r}: no coordinator answered in time (last: {last!r})"
                )
            self.retries += 1
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, self.retry_backoff_max_ms / 1000)

    async def _attempt(self, request) -> Any:
        handle = await self._coordinator()
        return await handle.handle.remote(request)
