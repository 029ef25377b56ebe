"""One bound on an await, for every call in this package that waits on another actor, a
socket or a thread.

``asyncio.wait_for`` is not used: on Python 3.11, when the task awaiting it is cancelled in the
same turn of the event loop as the awaited result arrives, it returns that result and the
cancellation is lost. A member's ``close()`` cancels its coordination task and waits for it;
with the cancellation lost, that task went on heartbeating and ``close()`` never returned (a
multi-node CI run hung so: tests/actors/test_channel_cancel.py). ``asyncio.timeout`` keeps the
cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


async def bounded(awaitable: Awaitable[T], timeout_s: float) -> T:
    """``await awaitable``; past ``timeout_s`` it is cancelled and ``TimeoutError`` raised.
    Also from a coroutine stepped outside any task, as the Kafka listener runs a request's
    first step (``kafka_listener``): ``asyncio.timeout`` needs a task, so the wait gets one."""
    if asyncio.current_task() is None:
        waiting = asyncio.ensure_future(bounded(awaitable, timeout_s))
        # Its outcome is retrieved even when this coroutine is closed first (the connection
        # went), so asyncio does not log it as never retrieved.
        waiting.add_done_callback(_retrieved)
        return await waiting
    async with asyncio.timeout(timeout_s):
        return await awaitable


def _retrieved(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()


async def gathered_within(awaitables: Iterable[Awaitable[Any]], timeout_s: float) -> list[Any]:
    """Each awaitable's result, or the exception it raised, in order, once all are done or
    ``timeout_s`` has passed; one still running then is cancelled and given as
    ``TimeoutError`` (so the answers that came are not lost with the one that did not)."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    if tasks:
        await asyncio.wait(tasks, timeout=timeout_s)
    results: list[Any] = []
    for task in tasks:
        if not task.done():
            task.cancel()
            results.append(TimeoutError(f"no answer within {timeout_s:g} s"))
        elif task.cancelled():
            results.append(asyncio.CancelledError())
        else:
            results.append(task.exception() or task.result())
    return results
