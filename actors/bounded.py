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
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def bounded(awaitable: Awaitable[T], timeout_s: float) -> T:
    """``await awaitable``; past ``timeout_s`` it is cancelled and ``TimeoutError`` raised."""
    async with asyncio.timeout(timeout_s):
        return await awaitable
