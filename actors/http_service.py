"""The live lag service: samples end offsets, gathers the partitions' commit windows, and
answers HTTP (Burrow's v3 API, ``burrow_api``, and the web view, ``webview``).

``LagService`` is plain asyncio over an injected ``sources`` object (the partitions, reached
through Ray by ``http_actor.RaySources``), so it runs without Ray too. Every
``refresh_interval_s`` it

1. every ``end_offsets_interval_s``, asks ``config.end_offsets`` (any ``EndOffsetsFn``) for the
   log-end offsets of the topic partitions the partitions have commit windows for, in a
   worker thread and within ``end_offsets_timeout_s``; a source that raises, hangs or answers
   nonsense is logged and skipped (the previous answer stands; one call at a time), and the
   answer is pushed to the partitions, which take later commits' lag against it;
2. gathers the windows and the groups (state, members, assignments) into a ``LiveView``, and
   appends each partition's current lag to a bounded history (the web view's sparklines);
3. sets the Prometheus gauges: lag per group/topic/partition, Burrow's status per group.

HTTP requests are answered from the last ``LiveView`` (evaluated at request time, as Burrow's
evaluator is), so a request never waits on a partition. Each connection carries one request
(``Connection: close``): the head is at most ``MAX_HEAD_BYTES`` and must arrive within
``request_timeout_s``; GET and HEAD only; at most ``max_connections`` at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import socket
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from . import burrow_api, webview
from .bounded import bounded
from .burrow_api import LiveView
from .end_offsets import EndOffsetsFn
from .live_lag import LagWindowConfig
from .offsets import MAX_PORT

log = logging.getLogger("groupcoord.http")

MAX_HEAD_BYTES = 8 * 1024
STATUS_TEXT = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


class HttpConfig(msgspec.Struct, frozen=True):
    """The HTTP service. ``host`` is loopback unless told otherwise (the API is read-only and
    unauthenticated, like Burrow's); port 0 takes any free port. ``cluster`` is the name
    Burrow's paths use. ``lag_windows`` is how partitions keep commit windows."""

    host: str = "127.0.0.1"
    port: int = 0
    cluster: str = "groupcoord"
    end_offsets: EndOffsetsFn | None = None
    refresh_interval_s: float = 1.0
    end_offsets_interval_s: float = 5.0
    end_offsets_timeout_s: float = 5.0
    lag_windows: LagWindowConfig = LagWindowConfig()
    history: int = 60  # current-lag samples kept per partition (the sparkline)
    max_groups: int = 10_000
    request_timeout_s: float = 10.0
    max_connections: int = 64

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host:
            raise ValueError("host must be a non-empty str")
        if type(self.port) is not int or not 0 <= self.port <= MAX_PORT:
            raise ValueError(f"port must be an int in [0, {MAX_PORT}], got {self.port!r}")
        if not isinstance(self.cluster, str) or not self.cluster or "/" in self.cluster:
            raise ValueError(f"cluster must be a non-empty name without '/', got {self.cluster!r}")
        if self.end_offsets is not None and not callable(self.end_offsets):
            raise ValueError("end_offsets must be a callable (an EndOffsetsFn) or None")
        for name in (
            "refresh_interval_s",
            "end_offsets_interval_s",
            "end_offsets_timeout_s",
            "request_timeout_s",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 < value <= 3600:
                raise ValueError(f"{name} must be in (0, 3600], got {value!r}")
        for name, top in (
            ("history", 10_000),
            ("max_groups", 1_000_000),
            ("max_connections", 10_000),
        ):
            value = getattr(self, name)
            if type(value) is not int or not 1 <= value <= top:
                raise ValueError(f"{name} must be an int in [1, {top}], got {value!r}")
        if not isinstance(self.lag_windows, LagWindowConfig):
            raise ValueError("lag_windows must be a LagWindowConfig")


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def valid_end_offsets(answer: Any, asked: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The usable part of an end-offsets answer: asked-for keys with non-negative int values.
    ValueError when the answer is not a mapping at all."""
    if not isinstance(answer, Mapping):
        raise ValueError(f"end offsets source answered a {type(answer).__name__}, not a mapping")
    wanted = set(asked)
    return {tp: end for tp, end in answer.items() if tp in wanted and type(end) is int and end >= 0}


class LagService:
    """``sources`` has async ``topic_partitions()``, ``push_end_offsets(mapping)``,
    ``windows()`` and ``groups(max_groups)`` (see ``http_actor.RaySources``)."""

    def __init__(
        self,
        config: HttpConfig,
        sources: Any,
        *,
        servers: Sequence[str] = (),
        metrics: Any = None,
        clock_ms: Callable[[], int] = wall_ms,
    ) -> None:
        self.config = config
        self._sources = sources
        self._metrics = metrics
        self._clock_ms = clock_ms
        self._servers = tuple(servers)
        self._history: dict[tuple[str, str, int], deque] = {}
        self._sampler = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="end-offsets")
        self._sampling: asyncio.Future | None = None
        self._sampled_at = float("-inf")
        self.end_offsets: dict[tuple[str, int], int] = {}
        self.end_offsets_error: str | None = None
        self.refreshes = 0
        self.refresh_error: str | None = None
        self.view = self._make_view({}, {})
        self._server: asyncio.Server | None = None
        self._connections = 0
        self._task: asyncio.Task | None = None

    def _make_view(self, groups: Mapping, windows: Mapping) -> LiveView:
        return LiveView(
            self.config.cluster,
            socket.gethostname(),
            self._servers,
            self.config.lag_windows.window,
            self.config.end_offsets_interval_s,
            groups,
            windows,
            {k: tuple(v) for k, v in self._history.items()},
        )

    # -- the refresh loop ---------------------------------------------------------------------

    async def start(self, port: int | None = None) -> tuple[str, int]:
        """Listen (on ``port``, default the config's) and start refreshing; returns the
        (host, port) listened on. OSError when it cannot listen (nothing started then)."""
        self._server = await asyncio.start_server(
            self._client,
            self.config.host,
            self.config.port if port is None else port,
            limit=MAX_HEAD_BYTES,
        )
        self._task = asyncio.get_running_loop().create_task(self._refresh_forever())
        host, port = self._server.sockets[0].getsockname()[:2]
        return host, port

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._server is not None:
            self._server.close()
        self._sampler.shutdown(wait=False)

    async def _refresh_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self.refresh()
                self.refresh_error = None
            except Exception as exc:  # a partition restarting: the old view stands
                self.refresh_error = repr(exc)[:300]
                log.warning("live lag refresh failed: %r", exc)
            self.refreshes += 1
            await asyncio.sleep(max(self.config.refresh_interval_s - (loop.time() - started), 0))

    async def refresh(self) -> None:
        loop = asyncio.get_running_loop()
        if (
            self.config.end_offsets is not None
            and loop.time() - self._sampled_at >= self.config.end_offsets_interval_s
        ):
            self._sampled_at = loop.time()
            sampled = await self._sample(await self._sources.topic_partitions())
            if sampled:
                self.end_offsets = sampled
                await self._sources.push_end_offsets(sampled)
        windows = await self._sources.windows()
        groups = await self._sources.groups(self.config.max_groups)
        by_group: dict[str, list] = {}
        for w in windows:
            by_group.setdefault(w.group_id, []).append(w)
        now_ms = self._clock_ms()
        seen = set()
        for w in windows:
            key = (w.group_id, w.topic, w.partition)
            seen.add(key)
            ring = self._history.get(key)
            if ring is None:
                ring = self._history[key] = deque(maxlen=self.config.history)
            lag = (
                None
                if w.end_offset is None or not w.points
                else max(w.end_offset - w.points[-1].offset, 0)
            )
            ring.append((now_ms, lag))
        for key in [k for k in self._history if k not in seen]:
            del self._history[key]
        self.view = self._make_view(groups, {g: tuple(ws) for g, ws in by_group.items()})
        if self._metrics is not None:
            self._report(now_ms)

    async def _sample(self, asked: Sequence[tuple[str, int]]) -> dict | None:
        """One call of the end-offsets source, bounded; None when it gave nothing usable."""
        if not asked:
            return None
        if self._sampling is not None and not self._sampling.done():
            self.end_offsets_error = "the previous call has not returned yet"
            log.warning("end offsets source: %s; skipping this sample", self.end_offsets_error)
            return None
        fn = self.config.end_offsets
        self._sampling = asyncio.get_running_loop().run_in_executor(self._sampler, fn, list(asked))
        try:
            answer = await bounded(
                asyncio.shield(self._sampling), self.config.end_offsets_timeout_s
            )
            sampled = valid_end_offsets(answer, asked)
        except TimeoutError:
            self.end_offsets_error = f"no answer within {self.config.end_offsets_timeout_s} s"
        except Exception as exc:  # a broken source must not stop the service
            self.end_offsets_error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        else:
            self.end_offsets_error = None
            return sampled
        log.warning("end offsets source: %s", self.end_offsets_error)
        return None

    def _report(self, now_ms: int) -> None:
        view = self.view
        for group_id in view.windows:
            status = burrow_api.evaluate(view, group_id, now_ms)
            self._metrics.group_status(group_id, status)

    def info(self) -> dict:
        return {
            "refreshes": self.refreshes,
            "refresh_error": self.refresh_error,
            "end_offsets_known": len(self.end_offsets),
            "end_offsets_error": self.end_offsets_error,
            "groups": len(self.view.groups),
            "windows": sum(len(ws) for ws in self.view.windows.values()),
        }

    # -- HTTP ---------------------------------------------------------------------------------

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections += 1
        try:
            if self._connections > self.config.max_connections:
                await self._reply(writer, 503, {"error": True, "message": "too many connections"})
                return
            try:
                head = await bounded(reader.readuntil(b"\r\n\r\n"), self.config.request_timeout_s)
            except asyncio.LimitOverrunError:
                await self._reply(writer, 431, {"error": True, "message": "request head too large"})
                return
            except TimeoutError:
                await self._reply(writer, 408, {"error": True, "message": "request timed out"})
                return
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            await self._answer(writer, head)
        except (ConnectionError, TimeoutError):
            pass  # the client went away
        finally:
            self._connections -= 1
            writer.close()

    async def _answer(self, writer: asyncio.StreamWriter, head: bytes) -> None:
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[1].startswith("/"):
            await self._reply(writer, 400, {"error": True, "message": "malformed request line"})
            return
        method, target = parts[0], parts[1]
        if method not in ("GET", "HEAD"):
            await self._reply(
                writer, 405, {"error": True, "message": f"method {method} not allowed"}
            )
            return
        path = target.split("?", 1)[0]
        if path in ("/", "/index.html"):
            code, body, kind = 200, webview.PAGE, "text/html; charset=utf-8"
        else:
            code, doc = burrow_api.route(path, self.view, self._clock_ms())
            if isinstance(doc, str):
                body, kind = doc, "text/plain; charset=utf-8"
            else:
                body, kind = json.dumps(doc, separators=(",", ":")), "application/json"
        await self._reply(writer, code, body, kind, head_only=method == "HEAD")

    async def _reply(
        self,
        writer: asyncio.StreamWriter,
        code: int,
        body: dict | str,
        kind: str = "application/json",
        head_only: bool = False,
    ) -> None:
        data = (json.dumps(body) if isinstance(body, dict) else body).encode()
        headers = (
            f"HTTP/1.1 {code} {STATUS_TEXT.get(code, '')}\r\n"
            f"Content-Type: {kind}\r\nContent-Length: {len(data)}\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n"
            + ("Allow: GET, HEAD\r\n" if code == 405 else "")
            + "\r\n"
        )
        writer.write(headers.encode() + (b"" if head_only else data))
        await bounded(writer.drain(), self.config.request_timeout_s)
