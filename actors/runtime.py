"""PartitionRuntime: drives one Shard on an asyncio loop — load, group commit, timers.

Theory of operation
-------------------
The Shard decides; this class does the I/O around it, on one event loop:

* **Load in the background.** ``start()`` opens the partition's log and replays it into a fresh
  Shard in the I/O thread. Until that finishes, requests go to an empty Shard that is still
  loading, so they get Kafka's load-time answers (spec §2.2): COORDINATOR_LOAD_IN_PROGRESS, NONE
  for a heartbeat, REBALANCE_IN_PROGRESS for a sync. The runtime never raises out of ``start()``
  (a Ray actor whose ``__init__`` raises is dead for good).
* **A failed load says so.** The log object of a failed attempt is closed (its lock released)
  and the next attempt opens a fresh one (``runtime_load``). What happens next depends on why
  it failed (``load_failure_kind``): a writer lock held by another live process is waited out
  (retried with backoff, still answering COORDINATOR_LOAD_IN_PROGRESS: there is hope); damage
  (``CorruptLogError``) cannot be fixed by retrying, so the partition stops in state
  ``load_failed``; anything else (an OSError, a failed log) is retried
  ``LOAD_ATTEMPTS_PER_PROCESS`` times, then the partition stops in ``load_failed`` and calls
  ``on_fatal``, because a fresh process (Ray's restart, maybe on another node) may succeed. In
  ``load_failed`` every request gets COORDINATOR_NOT_AVAILABLE (no load is in progress, so
  LOAD_IN_PROGRESS would promise one); ``info()`` carries the error, its kind and the attempts,
  the log says it at CRITICAL and the metrics count it.
* **Group commit.** ``handle`` runs the Shard synchronously (it is fast and does no I/O) and
  queues the Step's records. One flusher task hands everything queued since its last append to
  the log in one ``append`` call (one fsync), in the single I/O thread, so concurrent requests
  share a sync. While one append is in flight the next batch accumulates. An append that cannot
  block (fsync policy ``never``) runs instead at the end of the loop turn (``_end_turn``, one
  callback scheduled by the turn's first Step): every request read in that turn shares it.
* **Replies wait for durability.** Each reply carries a barrier: the number of records queued
  when its Step was made. It is released when that many records are durable. A reply whose Step
  wrote nothing still waits for earlier writes, because it may have read them (DESIGN.md
  principle 3: a read that follows unacknowledged writes waits for them).
* **A failure fails the partition.** If an append fails, or the Shard raises (a bug), memory can
  no longer be trusted: nothing is rolled back. Every caller still waiting gets NOT_COORDINATOR
  (its change was never acknowledged, so the client retries it elsewhere), new requests get
  NOT_COORDINATOR, and ``on_fatal`` is called: the Ray actor exits and Ray's restart reloads
  the partition from its log.
* **Replies are callbacks.** ``submit(request, reply)`` calls ``reply(response)`` when the
  response is released: a listener writes its answer from inside that call, with no future,
  coroutine or loop callback per request. ``handle`` wraps it in a future for callers that
  await (the actor's Ray methods). A caller that gathers a turn's replies into one write (a
  network process's channel) flushes them with ``call_at_turn_end``: in the same callback as
  the append that released them, where a ``call_soon`` would wait one more turn of the loop,
  with its poll (16-in-flight commits over 4 channels, ``bench/wire_split.py``: 17 against 20
  µs of the partition's thread a commit).
* **Answer first, account after.** A commit's live lag and metrics (and a delete's) are
  recorded after the replies released with it have been called, in answer order
  (``_account``).
* **Timers.** At the end of every turn with a Step, one ``loop.call_at`` is aimed at
  ``next_wake_ms()``, never after the earliest deadline (moved only when that time moved; a
  wake before any deadline fires nothing and aims again). Not ``next_deadline_ms()``: its exact
  answer cascades the timing wheel whenever a commit or heartbeat re-arms the member whose
  session ends first, which under load was most turns. The Shard runs with
  ``immediate_timers=False``: a timer armed with no delay (a zero initial rebalance delay)
  fires at that ``call_at``, after the requests read in the same loop turn, as Kafka's
  coordinator runs it after the requests already in its queue.
* **Idle polling** (``idle_poll_us`` > 0; ``idle_poll``). After each turn with a Step the loop
  keeps turning without sleeping for that long, so a request that comes meanwhile is read
  without waking a sleeping thread.
* **Epochs.** Each incarnation reports the epoch its log handed out under the writer lock, so
  answers from two incarnations can never be confused.

The log is injected (``open_log()`` returns an object with ``epoch``, ``append_may_block``,
``load_into(shard, progress)``, ``append(records) -> end_offset``, ``maybe_snapshot(shard)`` and
``close()``), as are the clock and the member-id source, so the runtime is testable without Ray
or a disk. An append that may block (it waits for an fsync) runs on the log's thread; one that
may not (fsync policy ``never``: a write into the page cache) runs on the event loop, which is
cheaper than the hop to that thread and back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from groupcoord.coordinator import CoordinatorConfig, Errors, Shard
from groupcoord.coordinator.messages import DeleteGroupsRequest, OffsetCommitRequest, validate

from .idle_poll import IdlePoll, check_idle_poll_us
from .live_lag import LagTracker, LagWindowConfig
from .responses import error_response
from .runtime_catalog import CatalogMixin
from .runtime_load import LoadMixin

log = logging.getLogger("groupcoord.partition")

# Called with a request's response (``PartitionRuntime.submit``).
Reply = Callable[[Any], None]

SNAPSHOT_CHECK_INTERVAL_S = 0.05  # the least time between two snapshot policy checks


def _settle(future: asyncio.Future, response: Any) -> None:
    if not future.done():  # a caller cancelled meanwhile
        future.set_result(response)


def wall_clock_ms() -> int:
    # Wall time, not monotonic: commit timestamps and retention must survive restarts.
    return time.time_ns() // 1_000_000


class PartitionRuntime(CatalogMixin, LoadMixin):
    """One offsets partition on an asyncio loop. Construct, ``start()``, then ``handle()``.

    Contract: ``handle(request)`` returns the request's response once every record it depends
    on is durable, and ``submit(request, reply)`` calls ``reply`` with it then; both raise
    ``ValueError`` for a request that is not a well-typed groupcoord request (the partition is
    unaffected). ``info()`` describes the partition.
    """

    def __init__(
        self,
        partition: int,
        num_partitions: int,
        config: CoordinatorConfig,
        open_log: Callable[[], Any],
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        ids: Callable[[], str] | None = None,
        metrics: Any = None,
        on_fatal: Callable[[BaseException], None] | None = None,
        on_loaded: Callable[[], None] | None = None,
        lag_windows: LagWindowConfig | None = None,
        idle_poll_us: int = 0,
    ) -> None:
        self.partition = partition
        self.num_partitions = num_partitions
        self.config = config
        self._open_log = open_log
        self._clock_ms = clock_ms
        self._ids = ids
        self._metrics = metrics
        self._on_fatal = on_fatal or (lambda exc: None)
        self._on_loaded = on_loaded or (lambda: None)
        self.epoch = -1
        # loading | serving | load_failed | failed | closed
        self.state = "loading"
        self.load_summary: Any = None
        self.load_seconds: float | None = None
        self.loaded_at_ms: int | None = None  # the clock's time when it started serving
        self.load_error: str | None = None  # the last failed attempt's, one line
        self.load_failure: str | None = None  # its load_failure_kind
        self.load_attempts = 0
        self.fatal_error: str | None = None
        self._shard = self._new_shard()  # answers while loading
        self._log: Any = None
        self._io = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"p{partition}-io")
        # Snapshots get their own thread: building one for a million offsets takes ~0.3 s, and
        # appends (and so every reply) must not queue behind it. The log makes the two safe.
        self._snapshots = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix=f"p{partition}-snapshot"
        )
        self._request_ids = itertools.count(1)
        # request id -> (reply, request, now_ms, perf_counter at submit), until replied
        self._waiting: dict[int, tuple[Reply, Any, int, float]] = {}
        self._queued: list = []  # records not yet handed to the log
        self._queued_total = 0  # records ever queued (the barrier clock)
        self._durable_total = 0  # records ever made durable
        self._held: deque = deque()  # (barrier, request id, response), barrier order
        self._flush_wanted = asyncio.Event()
        self._durable_changed = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_wake_ms = 0  # the Shard's next_wake_ms() _timer was aimed at, while set
        self._turn_end_queued = False  # an _end_turn call is scheduled on the loop
        self._ending_turn = False  # _end_turn is running
        self._turn_end_calls: list[Callable[[], Any]] = []  # call_at_turn_end's, for _end_turn
        self._flush_queued = False  # records wait for _end_turn's append
        # (request, response, now_ms, seconds) answered, for _account to record
        self._answered: list[tuple[Any, Any, int, float]] = []
        self._tasks: list[asyncio.Task] = []
        # The loop ``start()`` ran on. Kept because asyncio.get_running_loop() costs a getpid()
        # system call, and the hot path asked for the loop about four times per commit.
        self._loop: asyncio.AbstractEventLoop | None = None
        # Keeps the loop turning for a while after each turn with work (``idle_poll``); set
        # by start(), which knows the loop.
        self._idle_poll_s = check_idle_poll_us(idle_poll_us, "idle_poll_us") / 1e6
        self.idle_poll: IdlePoll | None = None
        self.appends = 0
        self.snapshots_checked = 0  # maybe_snapshot calls completed (thread-safe +=)
        self._snapshot_queued = False  # a maybe_snapshot call is queued or running
        self._snapshot_check_at = 0.0  # loop time before which no new check starts
        self._snapshot_timer: asyncio.TimerHandle | None = None  # a deferred check
        # Recent commits for live lag (live_lag.py): kept from the start when the deployment has
        # an HTTP service (``lag_windows``), else from its first read.
        self.lag = LagTracker(lag_windows, keeping=lag_windows is not None)
        # The newest topic catalog handed in (version, {topic: partitions}, groups' own
        # settings); replayed into the shard once it is loaded (``update_topics``).
        self.catalog_version = -1
        self._catalog: dict[str, int] | None = None
        self._group_configs: dict[str, dict[str, int]] = {}
        self.catalogs_taken = self.catalog_changes_taken = 0  # whole, and as changes

    # -- lifecycle -------------------------------------------------------------------------------

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        # The loop start() ran on; before start() (a catalog handed in early), the running one.
        return self._loop or asyncio.get_running_loop()

    def _new_shard(self) -> Shard:
        # A timer due now waits for the loop's next timer turn, behind the requests read in
        # this one (see the Shard's docstring).
        return Shard(
            self.partition, self.num_partitions, self.config, ids=self._ids, immediate_timers=False
        )

    def start(self) -> None:
        """Begin loading in the background; never raises for a bad log (it retries)."""
        if self._tasks:
            return
        loop = self._loop = asyncio.get_running_loop()
        if self._idle_poll_s:
            self.idle_poll = IdlePoll(loop.call_soon, self._idle_poll_s)
        self._tasks = [
            loop.create_task(self._load_forever()),
            loop.create_task(self._flush_forever()),
        ]

    async def close(self) -> None:
        """Give the partition up: parked requests get NOT_COORDINATOR, the log is closed."""
        if self.state == "closed":
            return
        if self.state == "serving":
            self._run_step(self._shard.on_unloaded, self._clock_ms())
            await self._wait_durable(self._queued_total)
        self.state = "closed"
        self._cancel_timer()
        if self._snapshot_timer is not None:
            self._snapshot_timer.cancel()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._reply_all(Errors.NOT_COORDINATOR)
        # On the I/O thread, behind a load that may still be opening the log: a log opened
        # after this point would otherwise stay open, its writer lock held for good.
        await asyncio.get_running_loop().run_in_executor(self._io, self._close_log)
        self._io.shutdown(wait=False)
        self._snapshots.shutdown(wait=False)  # a queued check finds the log closed: a no-op

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()

    # -- the topic catalog -------------------------------------------------------------------------

    # -- requests ----------------------------------------------------------------------------------

    def submit(self, request: Any, reply: Reply, *, typed: bool = False) -> None:
        """Take ``request``; ``reply(response)`` is called exactly once, when every record the
        response depends on is durable, maybe before ``submit`` returns (a heartbeat that
        follows no unwritten record). If the partition fails or closes first it is called with
        NOT_COORDINATOR. ``ValueError`` (nothing called, nothing changed) for a request that is
        not a well-typed groupcoord request. ``reply`` is called from the loop's callbacks, so
        it must not block; an exception it raises is logged and the other replies still go.
        The listeners' path: no future and no coroutine per request. ``typed``: the caller
        built ``request`` with a decoder that yields only the declared types (msgspec, for a
        network process's frame; the wire layer, for a listener's request), which is what
        ``validate`` checks, so it is not checked twice."""
        if not typed:
            request = validate(request)  # ValueError for anything ill-typed
        if self.state in ("closed", "failed"):
            reply(error_response(request, Errors.NOT_COORDINATOR))
            return
        if self.state == "load_failed":  # no load in progress: nothing to wait for
            reply(error_response(request, Errors.COORDINATOR_NOT_AVAILABLE))
            return
        request_id = next(self._request_ids)
        now_ms = self._clock_ms()
        self._waiting[request_id] = (reply, request, now_ms, time.perf_counter())
        self._run_step(self._shard.handle, now_ms, request_id, request)

    async def handle(self, request: Any) -> Any:
        """``submit`` for a caller that awaits the response (the actor's Ray methods)."""
        future = self._event_loop().create_future()
        self.submit(request, functools.partial(_settle, future))
        return await future

    def _account(self) -> None:
        """Live lag and metrics of the commits and deletes answered since the last call, in
        answer order. They run after the replies that released them have been called (a
        listener's reply writes its answer): a commit's latency to its client does not
        include its bookkeeping (Kafka, too, answers first and records request metrics after).
        A caller's next request sees them done."""
        answered, self._answered = self._answered, []
        for request, response, now_ms, seconds in answered:
            if type(request) is OffsetCommitRequest:
                self.lag.committed(request, response, now_ms)  # the Shard's commit timestamp
                if self._metrics is not None:
                    self._metrics.committed(self.partition, len(request.offsets), seconds)
            else:
                self.lag.deleted(request, response)

    def _run_step(self, method, *args) -> None:
        """Run one Shard call and route its Step; a Shard exception fails the partition."""
        try:
            step = method(*args)
        except Exception as exc:  # a core bug: memory may be half-changed
            self._fail(exc)
            return
        self._process(step)

    def _process(self, step) -> None:
        if step.records:
            self._queued.extend(step.records)
            self._queued_total += len(step.records)
            if self.state != "serving" or self._log.append_may_block:
                self._flush_wanted.set()
            else:
                # An append that cannot block runs on the loop: once per turn, after every
                # request that turn handled, with no task to wake (see _end_turn).
                self._flush_queued = True
        barrier = self._queued_total
        for request_id, response in step.replies:
            if barrier <= self._durable_total:
                self._release(request_id, response)
            else:
                self._held.append((barrier, request_id, response))
        for request_id in step.dropped:  # Kafka forgets these; release the caller
            entry = self._waiting.pop(request_id, None)
            if entry is not None:
                self._reply(entry[0], error_response(entry[1], Errors.REBALANCE_IN_PROGRESS))
        if self._answered:
            self._account()
        for event in step.events:
            # Structured: one line per event, saying which group and why.
            log.info(
                "partition=%d group=%s event=%s detail=%s",
                self.partition,
                event.group_id,
                event.kind,
                event.detail,
            )
            if self._metrics is not None:
                self._metrics.event(self.partition, event)
        # Once per turn of the loop, after every request that turn handled (a listener handles
        # every connection's reads in one turn): one callback does the turn's append and aims
        # the loop's timer (one callback, not two: with about one commit per turn under load,
        # each loop callback is a few per cent of a commit's CPU).
        if not self._turn_end_queued:
            self._turn_end_queued = True
            self._event_loop().call_soon(self._end_turn)

    def _release(self, request_id: int, response: Any) -> None:
        entry = self._waiting.pop(request_id, None)
        if entry is None:  # replied already (the partition failed)
            return
        reply, request, now_ms, started = entry
        self._reply(reply, response)
        if type(request) in (OffsetCommitRequest, DeleteGroupsRequest):
            self._answered.append((request, response, now_ms, time.perf_counter() - started))

    def _reply(self, reply: Reply, response: Any) -> None:
        try:
            reply(response)
        except Exception:  # the caller's bug: the other callers still get their replies
            log.exception("partition %d: a reply callback raised", self.partition)

    def _reply_all(self, error: Errors) -> None:
        """Every caller still waiting gets ``error`` (the partition failed or closed)."""
        waiting, self._waiting = self._waiting, {}
        for reply, request, _, _ in waiting.values():
            self._reply(reply, error_response(request, error))

    # -- group commit ------------------------------------------------------------------------------

    async def _flush_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._flush_wanted.wait()
            self._flush_wanted.clear()
            if not self._queued or self.state != "serving":
                continue
            batch, self._queued = self._queued, []
            started = time.perf_counter()
            try:
                if not self._log.append_may_block:  # see the module docstring
                    self._log.append(batch)
                else:
                    await loop.run_in_executor(self._io, self._log.append, batch)
            except Exception as exc:
                self._fail(exc)
                return
            if self.state != "serving":  # failed by the Shard meanwhile
                return
            self._appended(batch, started)

    def _end_turn(self) -> None:
        """The end of a loop turn in which Steps were processed (scheduled by ``_process``):
        the turn's append, when the log's appends cannot block, then the timer's aim, then
        ``call_at_turn_end``'s callbacks; then the loop polls for ``idle_poll_us``."""
        self._turn_end_queued = False
        self._ending_turn = True
        try:
            if self._flush_queued:
                self._flush_now()
            self._aim_timer()
        finally:
            self._ending_turn = False
        calls, self._turn_end_calls = self._turn_end_calls, []
        for call in calls:
            try:
                call()
            except Exception:  # the caller's bug: the other callbacks still run
                log.exception("partition %d: a turn-end callback raised", self.partition)
        if self.idle_poll is not None:
            self.idle_poll.worked()

    def call_at_turn_end(self, callback: Callable[[], Any]) -> None:
        """Call ``callback`` once, at the end of this loop turn's ``_end_turn`` (after its
        append released the replies it held), or in the loop's next turn when no
        ``_end_turn`` is due. A network channel flushes its reply frames so: in the turn that
        released them, not one turn later (module docstring, "Replies are callbacks")."""
        if self._turn_end_queued or self._ending_turn:
            self._turn_end_calls.append(callback)
        else:
            self._event_loop().call_soon(callback)

    def _flush_now(self) -> None:
        """The flusher's work for a log whose appends cannot block: everything queued this
        turn in one append."""
        self._flush_queued = False
        if not self._queued or self.state != "serving":
            return
        batch, self._queued = self._queued, []
        started = time.perf_counter()
        try:
            self._log.append(batch)
        except Exception as exc:
            self._fail(exc)
            return
        self._appended(batch, started)

    def _appended(self, batch: list, started: float) -> None:
        """``batch`` is durable: release the replies it held, wake ``_wait_durable``, and
        check for a snapshot."""
        self.appends += 1
        self._durable_total += len(batch)
        if self._metrics is not None:
            self._metrics.appended(self.partition, len(batch), time.perf_counter() - started)
        held = self._held
        while held and held[0][0] <= self._durable_total:
            _, request_id, response = held.popleft()
            self._release(request_id, response)
        if self._answered:
            self._account()
        self._durable_changed.set()
        self._durable_changed = asyncio.Event()
        if self._snapshot_timer is None:
            # After every flush, even under sustained load (waiting for an idle moment
            # would let the tail, and so the load time, grow without bound), but at most
            # every SNAPSHOT_CHECK_INTERVAL_S: a check wakes the snapshot thread, which
            # folds the new records holding the GIL, ~10 % of a commit's CPU when it ran
            # after every flush. A check not yet due is deferred, not dropped.
            loop = self._event_loop()
            wait_s = self._snapshot_check_at - loop.time()
            if wait_s <= 0:
                self._check_snapshot()
            else:
                self._snapshot_timer = loop.call_later(wait_s, self._check_snapshot)

    def _check_snapshot(self) -> None:
        """Consult the log's snapshot policy on the snapshot thread, not awaited; at most one
        at a time (while one runs this is a no-op: the next flush asks again). The log builds
        snapshots from its own data, never from the live shard."""
        self._snapshot_timer = None
        if self._snapshot_queued or self.state != "serving":
            return
        self._snapshot_queued = True
        loop = self._event_loop()
        self._snapshot_check_at = loop.time() + SNAPSHOT_CHECK_INTERVAL_S
        self._snapshots.submit(self._log.maybe_snapshot, self._shard).add_done_callback(
            self._snapshot_done
        )

    def _snapshot_done(self, future: concurrent.futures.Future) -> None:
        self._snapshot_queued = False  # a plain store: safe from the snapshot thread
        exc = future.exception()
        if exc is not None:  # an optimisation: log it and go on
            log.error("partition %d: snapshot failed: %r", self.partition, exc)
        else:
            self.snapshots_checked += 1

    async def _wait_durable(self, total: int) -> None:
        while self._durable_total < total and self.state == "serving":
            self._flush_wanted.set()
            await self._durable_changed.wait()

    # -- timers ------------------------------------------------------------------------------------

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _aim_timer(self) -> None:
        wake_ms = self._shard.next_wake_ms() if self.state == "serving" else None
        # Already aimed there: most turns (commits, heartbeats) leave the front of the timing
        # wheel where it was.
        if self._timer is not None and wake_ms == self._timer_wake_ms:
            return
        self._cancel_timer()
        if wake_ms is not None:
            loop = self._event_loop()
            delay_s = max(wake_ms - self._clock_ms(), 0) / 1000
            self._timer = loop.call_at(loop.time() + delay_s, self._fire_timers)
            self._timer_wake_ms = wake_ms

    def _fire_timers(self) -> None:
        self._timer = None
        if self.state == "serving":
            self._run_step(self._shard.on_timer, self._clock_ms())

    # -- introspection -----------------------------------------------------------------------------

    def group_states(self) -> dict[str, int]:
        """Groups per state; the Shard keeps the counts, so this costs no scan (the gauge
        reads it every few seconds on the event loop)."""
        return self._shard.group_state_counts() if self.state == "serving" else {}

    def info(self) -> dict:
        return {
            "partition": self.partition,
            "epoch": self.epoch,
            "state": self.state,
            "groups": len(self._shard.groups()) if self.state == "serving" else 0,
            "group_states": self.group_states(),
            "parked_requests": self._shard.parked_requests,
            "durable_records": self._durable_total,
            "queued_records": len(self._queued),
            "appends": self.appends,
            "catalog_version": self.catalog_version,
            "catalogs_taken": self.catalogs_taken,  # whole (update_topics)
            "catalog_changes_taken": self.catalog_changes_taken,  # as changes alone
            # turns the loop polled rather than slept (idle_poll); None when it does not poll
            "idle_poll_turns": None if self.idle_poll is None else self.idle_poll.turns,
            "load_seconds": self.load_seconds,
            "loaded_at_ms": self.loaded_at_ms,
            "load_error": self.load_error,
            "load_failure": self.load_failure,
            "load_attempts": self.load_attempts,
            "fatal_error": self.fatal_error,
            "load_summary": repr(self.load_summary) if self.load_summary is not None else None,
        }

    def _fail(self, exc: BaseException) -> None:
        """Memory is ahead of the log or broken: answer nothing that was not durable (callers
        get NOT_COORDINATOR and retry elsewhere), then hand over to ``on_fatal``."""
        if self.state == "failed":
            return
        log.critical("partition %d: failing the partition: %r", self.partition, exc)
        self.state = "failed"
        self.fatal_error = repr(exc)
        self._cancel_timer()
        self._held.clear()
        self._queued = []
        self._reply_all(Errors.NOT_COORDINATOR)
        self._durable_changed.set()
        self._on_fatal(exc)
