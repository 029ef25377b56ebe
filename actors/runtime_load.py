"""Loading a partition's log into a fresh Shard, with retries: ``PartitionRuntime``'s loader.

The runtime's module docstring says when a failed load is waited out, retried or final
(``load_failure_kind``); ``LoadMixin._load_forever`` is that loop, the task ``start()`` runs
first. A mixin of ``PartitionRuntime`` only: it works on the runtime's fields (``state``,
``_log``, ``_io``, the load fields ``info()`` reports) and leaves ``state`` at ``serving``,
``load_failed`` or ``closed``.
"""

from __future__ import annotations

import asyncio
import logging
import time

from groupcoord.storage import CorruptLogError, LogLockedError

log = logging.getLogger("groupcoord.partition")

LOAD_RETRY_MAX_S = 5.0
# Load attempts that failed for a reason other than a held lock or damage, before this process
# gives up and hands over to ``on_fatal`` (a fresh process may succeed where this one cannot).
LOAD_ATTEMPTS_PER_PROCESS = 3


def load_failure_kind(exc: BaseException) -> str:
    """Why a load failed: ``locked`` (another live process writes the log: wait for it),
    ``corrupt`` (acknowledged data cannot be read: retrying cannot help) or ``io`` (anything
    else: an OSError, a failed log; a fresh process may succeed)."""
    if isinstance(exc, LogLockedError):
        return "locked"
    if isinstance(exc, CorruptLogError):
        return "corrupt"
    return "io"


class LoadMixin:
    """``PartitionRuntime``'s loader (see the module docstring)."""

    async def _load_forever(self) -> None:
        loop = asyncio.get_running_loop()
        backoff_s = 0.1
        io_failures = 0
        while self.state == "loading":
            started = time.perf_counter()
            self.load_attempts += 1
            try:
                shard, summary = await loop.run_in_executor(self._io, self._load_blocking)
            except Exception as exc:
                # Never retry on the same object: a failed open or load can leave it half-made.
                await loop.run_in_executor(self._io, self._discard_log)
                if self.state != "loading":  # closed meanwhile
                    return
                kind = self._load_failed(exc)
                io_failures += kind == "io"
                if kind == "corrupt" or io_failures >= LOAD_ATTEMPTS_PER_PROCESS:
                    self.state = "load_failed"
                    log.critical(
                        "partition %d: cannot load (%s, %d attempts): %s",
                        self.partition,
                        kind,
                        self.load_attempts,
                        self.load_error,
                    )
                    if kind != "corrupt":  # a fresh process may succeed
                        self._on_fatal(exc)
                    return
                log.error(
                    "partition %d: load attempt %d failed (%s): %s; retrying in %.1fs",
                    self.partition,
                    self.load_attempts,
                    kind,
                    self.load_error,
                    backoff_s,
                )
                await asyncio.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, LOAD_RETRY_MAX_S)
                continue
            if self.state != "loading":  # closed while loading
                return
            self.load_summary = summary
            self._shard = shard
            self.state = "serving"
            # Before on_loaded, which re-arms sessions at each group's own timeout.
            shard.update_group_configs(self._group_configs)
            self._run_step(shard.on_loaded, self._clock_ms())
            if self._catalog is not None:  # a catalog that arrived while loading
                self._update_shard_topics(self._catalog)
            self.load_seconds = time.perf_counter() - started
            self.loaded_at_ms = self._clock_ms()
            log.info(
                "partition %d (epoch %d) loaded %d groups in %.3fs",
                self.partition,
                self.epoch,
                len(shard.groups()),
                self.load_seconds,
            )
            if self._metrics is not None:
                self._metrics.loaded(self.partition, self.load_seconds)
            self._on_loaded()

    def _load_failed(self, exc: BaseException) -> str:
        """Record a failed load attempt (info, metrics); returns its kind."""
        kind = load_failure_kind(exc)
        self.load_failure = kind
        self.load_error = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        if self._metrics is not None:
            self._metrics.load_failed(self.partition, kind)
        return kind

    def _discard_log(self) -> None:
        log_, self._log = self._log, None
        if log_ is not None:
            try:
                log_.close()
            except Exception as exc:  # already failed: the next open starts clean
                log.warning("partition %d: closing the failed log: %r", self.partition, exc)

    def _load_blocking(self):
        if self._log is None:
            self._log = self._open_log()
            self.epoch = int(getattr(self._log, "epoch", 0))
        shard = self._new_shard()
        summary = self._log.load_into(shard)
        return shard, summary
