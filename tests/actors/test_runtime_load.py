"""PartitionRuntime's loader without Ray (actors/runtime_load.py): a failed load retried on a
fresh log object, damage that stops loading and says so, a held lock waited out, and an I/O
failure that persists handed to a fresh process."""

from __future__ import annotations

import asyncio

from groupcoord.actors.runtime import PartitionRuntime
from groupcoord.actors.runtime_load import LOAD_ATTEMPTS_PER_PROCESS
from groupcoord.coordinator import Errors, OffsetFetchRequest
from groupcoord.storage import CorruptLogError, LogLockedError

from .fakes import MemoryLog
from .test_runtime import CONFIG, CountingMetrics, commit


def failing_loads(errors: list, *, fatal=None, metrics=None):
    """A runtime whose successive logs fail their load_into with ``errors`` (None: loads)."""
    logs: list[MemoryLog] = []

    def open_log():
        logs.append(MemoryLog([], epoch=len(logs) + 1))
        logs[-1].fail_load = errors.pop(0) if errors else None
        return logs[-1]

    runtime = PartitionRuntime(
        0,
        1,
        CONFIG,
        open_log,
        metrics=metrics,
        on_fatal=(fatal.append if fatal is not None else None),
    )
    return runtime, logs


async def settle(runtime: PartitionRuntime, until) -> None:
    runtime.start()
    for _ in range(2000):
        if until(runtime):
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"runtime never settled: {runtime.info()}")


def test_a_failed_load_is_retried_on_a_fresh_log_object():
    # Before: the loop kept the log whose load failed and retried load_into on it (never
    # closed, so its writer lock stayed held), so a log object left broken never recovered.
    async def scenario():
        runtime, logs = failing_loads([OSError("EIO reading a segment")])
        await settle(runtime, lambda r: r.state == "serving")
        assert len(logs) == 2 and logs[0].closed and not logs[1].closed
        assert runtime.info()["load_attempts"] == 2
        assert runtime.epoch == 2
        await runtime.close()

    asyncio.run(scenario())


def test_a_damaged_log_stops_loading_and_says_so():
    # Before: damage was retried forever, the partition stayed "loading" and every request got
    # COORDINATOR_LOAD_IN_PROGRESS, promising a load that could never finish.
    async def scenario():
        fatal, metrics = [], CountingMetrics()
        damage = CorruptLogError("/logs/partition-0/00000000000000000000.log", 96, 3, "bad crc")
        runtime, logs = failing_loads([damage, None], fatal=fatal, metrics=metrics)
        await settle(runtime, lambda r: r.state != "loading")
        await asyncio.sleep(0.3)  # room for a retry, which must not come
        info = runtime.info()
        assert info["state"] == "load_failed" and info["load_failure"] == "corrupt"
        assert "bad crc" in info["load_error"] and "\n" not in info["load_error"]
        assert len(logs) == 1 and logs[0].closed and info["load_attempts"] == 1
        assert metrics.load_failures == [(0, "corrupt")]
        assert fatal == []  # a new process would find the same damage
        answer = await runtime.handle(commit("g", 1))
        assert answer.partitions[0].error == Errors.COORDINATOR_NOT_AVAILABLE
        await runtime.close()

    asyncio.run(scenario())


def test_a_held_lock_is_waited_out_and_names_its_holder():
    async def scenario():
        fatal, metrics = [], CountingMetrics()
        locked = [
            LogLockedError(
                "/logs/partition-0 is being written by another live process "
                "(pid 4242 on host h1); only one writer may own a partition log"
            )
            for _ in range(LOAD_ATTEMPTS_PER_PROCESS + 1)
        ]
        opened = []

        def open_log():  # raises, like storage's open does
            opened.append(1)
            if locked:
                raise locked.pop(0)
            return MemoryLog([])

        runtime = PartitionRuntime(0, 1, CONFIG, open_log, metrics=metrics, on_fatal=fatal.append)
        await settle(runtime, lambda r: r.load_attempts >= 2)
        info = runtime.info()
        assert info["state"] == "loading" and info["load_failure"] == "locked"
        assert "pid 4242 on host h1" in info["load_error"]
        answer = await runtime.handle(commit("g", 1))
        assert answer.partitions[0].error == Errors.COORDINATOR_LOAD_IN_PROGRESS
        await settle(runtime, lambda r: r.state == "serving")
        assert fatal == [] and len(opened) == LOAD_ATTEMPTS_PER_PROCESS + 2
        assert set(metrics.load_failures) == {(0, "locked")}
        await runtime.close()

    asyncio.run(scenario())


def test_an_io_failure_that_persists_hands_over_to_a_fresh_process():
    # Before: an OSError on every attempt was retried forever in the same process, silently
    # "loading"; now, after LOAD_ATTEMPTS_PER_PROCESS attempts, on_fatal (Ray's restart).
    async def scenario():
        fatal, metrics = [], CountingMetrics()
        errors = [OSError(5, "Input/output error") for _ in range(LOAD_ATTEMPTS_PER_PROCESS)]
        runtime, logs = failing_loads(errors, fatal=fatal, metrics=metrics)
        await settle(runtime, lambda r: r.state != "loading")
        info = runtime.info()
        assert info["state"] == "load_failed" and info["load_failure"] == "io"
        assert info["load_attempts"] == LOAD_ATTEMPTS_PER_PROCESS
        assert len(fatal) == 1 and isinstance(fatal[0], OSError)
        assert all(log_.closed for log_ in logs)  # no lock left held by this process
        assert len(metrics.load_failures) == LOAD_ATTEMPTS_PER_PROCESS
        answer = await runtime.handle(OffsetFetchRequest("g", None))
        assert answer.error == Errors.COORDINATOR_NOT_AVAILABLE
        await runtime.close()

    asyncio.run(scenario())
