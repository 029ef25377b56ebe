"""The router's own mirror of an upstream Kafka cluster's topics (``serve --mirror-from``).

``groupcoord topics mirror --every-s`` mirrors from a process of its own; a deployment served
with ``--detach`` should not need one beside it. With a ``MirrorConfig`` the router runs
``CatalogMirror.run_forever``: every ``every_s`` one round of ``topic_mirror.mirror_once``
(create what the catalog lacks, grow what has fewer partitions; never shrink or delete), in a
worker thread, since confluent-kafka's admin client blocks; the catalog is read and changed on
the router's event loop, through ``change_topics`` as a Kafka admin client's CreateTopics would.
Each round is bounded (``mirror_once``'s metadata round trip, each change's wait on the loop),
an unreachable cluster or a refused change is logged and kept in ``state()`` (the router's
``describe``, ``groupcoord status``), and the next round tries again. The router's restart
(Ray's) starts the mirror again with it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import msgspec

from .end_offsets import KAFKA_TIMEOUT_S
from .output import first_line
from .topic_mirror import mirror_once

log = logging.getLogger("groupcoord.mirror")

MIN_EVERY_S, MAX_EVERY_S = 1.0, 86_400.0
# A change's wait on the router's loop (which waits at most PUBLISH_TIMEOUT_S to publish it).
CHANGE_TIMEOUT_S = 60.0


def check_every_s(every_s: float, flag: str) -> float:
    """``every_s`` when it is an interval between rounds the mirror takes; ValueError naming
    ``flag`` (the option that gave it) otherwise."""
    if not MIN_EVERY_S <= every_s <= MAX_EVERY_S:
        raise ValueError(f"{flag} must be in [{MIN_EVERY_S:g}, {MAX_EVERY_S:g}]")
    return every_s


class MirrorConfig(msgspec.Struct, frozen=True):
    """``servers``: the upstream cluster ("host:port[,...]", ``end_offsets.check_servers``);
    ``every_s``: seconds between rounds; ``topic_pattern``: which upstream topics (a regular
    expression matched against the whole name; None: all)."""

    servers: str
    every_s: float = 60.0
    topic_pattern: str | None = None


class CatalogMirror:
    """Rounds of mirroring on the router's loop; ``state()`` is the last round's outcome:
    when it ended (ms since the epoch), how many topics it created and grew, how many changes
    were refused, and the error that ended it early (None when it completed)."""

    def __init__(
        self,
        config: MirrorConfig,
        topics: Callable[[], dict[str, int]],
        change_topics: Callable[[list], Awaitable[list]],
    ) -> None:
        self.config = config
        self._topics = topics
        self._change_topics = change_topics
        self.rounds = 0
        self._last: dict | None = None

    def state(self) -> dict:
        return {
            "from": f"kafka:{self.config.servers}",
            "every_s": self.config.every_s,
            "topic_pattern": self.config.topic_pattern,
            "rounds": self.rounds,
            "last": self._last,
        }

    async def run_forever(self) -> None:
        while True:
            await self.run_once()
            await asyncio.sleep(self.config.every_s)

    async def run_once(self) -> None:
        loop = asyncio.get_running_loop()

        def on_loop(make: Callable[[], Awaitable]):
            # From the worker thread: the catalog is the loop's to read and change.
            return asyncio.run_coroutine_threadsafe(make(), loop).result(CHANGE_TIMEOUT_S)

        async def topics() -> dict[str, int]:
            return self._topics()

        error = None
        rows: list = []
        try:
            rows = await asyncio.to_thread(
                mirror_once,
                self.config.servers,
                lambda: on_loop(topics),
                lambda changes: on_loop(lambda: self._change_topics(changes)),
                pattern=self.config.topic_pattern,
                timeout_s=KAFKA_TIMEOUT_S,
            )
        except Exception as exc:  # the cluster away, the router stalled: next round retries
            error = first_line(exc)
            log.warning("mirror from kafka:%s: %s", self.config.servers, error)
        self.rounds += 1
        refused = [r for r in rows if r.refused]
        for row in refused:
            log.warning("mirror: topic %s not changed: %s", row.topic, row.result)
        self._last = {
            "ended_ms": int(time.time() * 1000),
            "created": sum(r.action == "create" and not r.refused for r in rows),
            "grown": sum(r.action == "grow" and not r.refused for r in rows),
            "refused": len(refused),
            "error": error,
        }
