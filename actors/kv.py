"""Ray's internal KV store (in the GCS), in groupcoord's namespace: the small facts that must
outlive an actor process — who owns a partition, how many loads in a row failed, which port a
listener took. ``kv_get`` and ``kv_put`` block: from a coroutine, run them in a thread."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ray.experimental import internal_kv

log = logging.getLogger("groupcoord.kv")

NAMESPACE = "groupcoord"


def kv_get(key: bytes) -> bytes | None:
    return internal_kv._internal_kv_get(key, namespace=NAMESPACE)


def kv_put(key: bytes, value: bytes) -> None:
    internal_kv._internal_kv_put(key, value, overwrite=True, namespace=NAMESPACE)


async def listen_at_remembered_port(
    key: bytes, port: int, bind: Callable[[int], Awaitable[int]]
) -> int:
    """Listen by ``bind(port)``, which returns the port taken. A ``port`` of 0 means any free
    port, and then the port last taken under ``key`` is asked for first, so that an actor
    restarted by Ray comes back at the address its clients know (a Kafka broker keeps its
    address across restarts; clients' knowledge of a moved one can be minutes stale). Only
    when that port is taken meanwhile is another one taken. Returns the port listened on."""
    if port != 0:
        return await bind(port)
    remembered = int(await asyncio.to_thread(kv_get, key) or 0)
    try:
        taken = await bind(remembered)
    except OSError as exc:
        if remembered == 0:
            raise
        log.info("port %d is taken (%r): listening on another", remembered, exc)
        taken = await bind(0)
    await asyncio.to_thread(kv_put, key, str(taken).encode())
    return taken
