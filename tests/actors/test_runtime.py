"""PartitionRuntime without Ray: loading, group commit, durability barriers, timers, failures."""

from __future__ import annotations

import asyncio
import threading

import pytest

from groupcoord.actors import runtime as runtime_module
from groupcoord.actors.live_lag import LagWindowConfig
from groupcoord.actors.runtime import PartitionRuntime
from groupcoord.coordinator import (
    CoordinatorConfig,
    DeleteGroupsRequest,
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetFetchRequest,
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)

from .fakes import MemoryLog

CONFIG = CoordinatorConfig(group_min_session_timeout_ms=10, group_initial_rebalance_delay_ms=0)


def commit(group: str, offset: int, partition: int = 0) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group, -1, "", [OffsetCommitRequestPartition("t", partition, offset)]
    )


def join(group: str, member_id: str = "", session_ms: int = 10_000) -> JoinGroupRequest:
    return JoinGroupRequest(
        group,
        member_id,
        "consumer",
        [JoinGroupRequestProtocol("range", b"")],
        session_ms,
        10_000,
        require_known_member_id=False,
    )


def make(
    store=None, *, config=CONFIG, opens=None, fatal=None, lag_windows=None, idle_poll_us=0
) -> tuple[PartitionRuntime, list]:
    store = [] if store is None else store
    logs: list[MemoryLog] = []

    def open_log():
        if opens:
            exc = opens.pop(0)
            if exc is not None:
                raise exc
        logs.append(MemoryLog(store, epoch=len(logs) + 1))
        return logs[-1]

    runtime = PartitionRuntime(
        0,
        1,
        config,
        open_log,
        on_fatal=(fatal.append if fatal is not None else None),
        lag_windows=lag_windows,
        idle_poll_us=idle_poll_us,
    )
    return runtime, logs


async def serving(runtime: PartitionRuntime) -> None:
    runtime.start()
    for _ in range(2000):
        if runtime.state == "serving":
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"runtime never served: {runtime.info()}")


def test_answers_load_in_progress_until_loaded_then_serves():
    async def scenario():
        runtime, logs = make()
        gate = threading.Event()
        original = MemoryLog.load_into

        def slow_load(self, shard, progress=None):
            gate.wait(10)
            return original(self, shard, progress)

        MemoryLog.load_into = slow_load
        try:
            runtime.start()
            response = await runtime.handle(commit("g", 5))
            assert response.partitions[0].error == Errors.COORDINATOR_LOAD_IN_PROGRESS
            fetched = await runtime.handle(OffsetFetchRequest("g", None))
            assert fetched.error == Errors.COORDINATOR_LOAD_IN_PROGRESS
            assert runtime.info()["state"] == "loading"
            gate.set()
            await serving(runtime)
        finally:
            MemoryLog.load_into = original
        response = await runtime.handle(commit("g", 5))
        assert response.partitions[0].error == Errors.NONE
        assert runtime.epoch == 1
        await runtime.close()

    asyncio.run(scenario())


def test_concurrent_commits_share_appends_and_wait_for_durability():
    async def scenario():
        runtime, logs = make()
        await serving(runtime)
        log = logs[0]
        log.gate.clear()  # hold the first append in the I/O thread
        tasks = [asyncio.create_task(runtime.handle(commit(f"g{i}", i))) for i in range(50)]
        await asyncio.sleep(0.05)
        assert not any(t.done() for t in tasks), "a reply left before its record was durable"
        log.gate.set()
        responses = await asyncio.gather(*tasks)
        assert all(r.partitions[0].error == Errors.NONE for r in responses)
        assert sum(log.appends) == 50
        # The first append took what was queued when it started; the rest share the next one(s).
        assert len(log.appends) <= 3, log.appends
        await runtime.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("may_block", [True, False])
def test_an_append_that_cannot_block_runs_on_the_event_loop(may_block, monkeypatch):
    # fsync "never" (PartitionLog.append_may_block False): the write runs on the loop, not the
    # log's thread; an append that may wait for an fsync never blocks the loop.
    monkeypatch.setattr(MemoryLog, "append_may_block", may_block)

    async def scenario():
        runtime, logs = make()
        await serving(runtime)
        response = await runtime.handle(commit("g", 1))
        assert response.partitions[0].error == Errors.NONE
        on_loop = [t is threading.current_thread() for t in logs[0].append_threads]
        assert on_loop == [not may_block]
        await runtime.close()

    asyncio.run(scenario())


def test_an_append_on_the_loop_is_shared_by_the_requests_of_one_turn(monkeypatch):
    # fsync "never": the requests handled in one loop turn share one append, run in a callback
    # after them; every reply leaves after its record is in the log.
    monkeypatch.setattr(MemoryLog, "append_may_block", False)

    async def scenario():
        runtime, logs = make()
        await serving(runtime)
        log = logs[0]
        appends_before = len(log.appends)
        store = log.store

        async def commit_and_look(i: int):
            response = await runtime.handle(commit(f"g{i}", i))
            mine = [r for r in store if getattr(r.key, "group", None) == f"g{i}"]
            return response, [r.value.offset for r in mine] == [i]

        answers = await asyncio.gather(*(commit_and_look(i) for i in range(20)))
        assert all(r.partitions[0].error == Errors.NONE and seen for r, seen in answers)
        assert log.appends[appends_before:] == [20]
        await runtime.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("with_http", [True, False], ids=["http service", "none"])
def test_live_lag_is_kept_from_the_start_only_for_a_deployment_with_an_http_service(with_http):
    # Without one (no lag_windows) nothing reads live lag until an HTTP service attached later
    # asks, so the partition keeps nothing until then.
    async def scenario():
        runtime, _ = make(lag_windows=LagWindowConfig() if with_http else None)
        await serving(runtime)
        assert (await runtime.handle(commit("early", 1))).partitions[0].error == Errors.NONE
        assert [w.group_id for w in runtime.lag.snapshot()] == (["early"] if with_http else [])
        assert (await runtime.handle(commit("later", 2))).partitions[0].error == Errors.NONE
        assert [w.group_id for w in runtime.lag.snapshot()][-1] == "later"
        await runtime.close()

    asyncio.run(scenario())


def test_live_lag_and_metrics_follow_the_answers_in_their_order():
    # A commit's bookkeeping runs after its reply is called (a listener's reply writes the
    # answer, so the answer goes first); a delete answered after a commit is applied after it,
    # so the commit does not resurrect the deleted group.
    async def scenario():
        runtime, _ = make()
        metrics = CountingMetrics()
        runtime._metrics = metrics
        await serving(runtime)
        seen_at_reply: list = []
        replied = asyncio.get_running_loop().create_future()

        def reply(response):
            seen_at_reply.append((runtime.lag.snapshot(), list(metrics.commits)))
            replied.set_result(response)

        runtime.submit(commit("kept", 5), reply)
        assert (await replied).partitions[0].error == Errors.NONE
        assert seen_at_reply == [([], [])]
        assert [(w.group_id, w.points[-1].offset) for w in runtime.lag.snapshot()] == [("kept", 5)]
        assert [offsets for _, offsets, _ in metrics.commits] == [1]
        gone = asyncio.create_task(runtime.handle(commit("gone", 7)))
        await asyncio.sleep(0)
        delete = asyncio.create_task(runtime.handle(DeleteGroupsRequest(["gone"])))
        assert (await delete).results[0].error == Errors.NONE
        assert (await gone).partitions[0].error == Errors.NONE
        assert [w.group_id for w in runtime.lag.snapshot()] == ["kept"]
        await runtime.close()

    asyncio.run(scenario())


def test_a_failed_append_on_the_loop_answers_nothing_as_committed(monkeypatch):
    monkeypatch.setattr(MemoryLog, "append_may_block", False)

    async def scenario():
        fatal: list[BaseException] = []
        runtime, logs = make(fatal=fatal)
        await serving(runtime)
        logs[0].fail_appends = OSError("disk gone")
        responses = await asyncio.gather(*(runtime.handle(commit("g", i)) for i in range(3)))
        assert all(r.partitions[0].error == Errors.NOT_COORDINATOR for r in responses)
        assert runtime.state == "failed" and isinstance(fatal[0], OSError)

    asyncio.run(scenario())


def test_snapshot_checks_are_spaced_but_none_is_dropped(monkeypatch):
    # One check right after the first flush; the flushes that follow within the interval get
    # one deferred check, not one each and not none.
    monkeypatch.setattr(MemoryLog, "append_may_block", False)
    monkeypatch.setattr(runtime_module, "SNAPSHOT_CHECK_INTERVAL_S", 1.0)

    async def scenario():
        runtime, logs = make()
        await serving(runtime)
        log = logs[0]

        async def checks(count: int) -> None:
            for _ in range(1000):
                if runtime.snapshots_checked >= count:
                    return
                await asyncio.sleep(0.005)
            raise AssertionError(f"{runtime.snapshots_checked} snapshot checks, not {count}")

        await runtime.handle(commit("g", 1))
        await checks(1)
        checked_after_first = log.snapshots
        for i in range(2, 6):
            await runtime.handle(commit("g", i))  # each its own flush
        assert log.snapshots == checked_after_first  # deferred, within the interval
        await checks(checked_after_first + 1)  # ...but it comes
        await asyncio.sleep(0.1)
        assert log.snapshots == checked_after_first + 1
        await runtime.close()

    asyncio.run(scenario())


def test_read_after_unacknowledged_write_waits_for_it():
    async def scenario():
        runtime, logs = make()
        await serving(runtime)
        logs[0].gate.clear()
        write = asyncio.create_task(runtime.handle(commit("g", 42)))
        await asyncio.sleep(0.01)
        read = asyncio.create_task(runtime.handle(OffsetFetchRequest("g", None)))
        await asyncio.sleep(0.05)
        assert not read.done(), "a read saw a commit that was not durable yet"
        logs[0].gate.set()
        await write
        fetched = await read
        assert [p.committed_offset for p in fetched.partitions] == [42]
        await runtime.close()

    asyncio.run(scenario())


def test_reload_restores_every_acknowledged_commit():
    async def scenario():
        store: list = []
        runtime, _ = make(store)
        await serving(runtime)
        for i in range(20):
            assert (await runtime.handle(commit("g", i, partition=i % 3))).partitions[0].error == 0
        await runtime.close()
        again, _ = make(store)
        await serving(again)
        fetched = await again.handle(OffsetFetchRequest("g", None))
        assert {p.partition: p.committed_offset for p in fetched.partitions} == {
            0: 18,
            1: 19,
            2: 17,
        }
        await again.close()

    asyncio.run(scenario())


def test_failed_append_fails_partition_and_loses_only_unacknowledged():
    async def scenario():
        store: list = []
        fatal: list = []
        runtime, logs = make(store, fatal=fatal)
        await serving(runtime)
        assert (await runtime.handle(commit("g", 1))).partitions[0].error == Errors.NONE
        logs[0].fail_appends = OSError("disk full")
        response = await runtime.handle(commit("g", 2))
        assert response.partitions[0].error == Errors.NOT_COORDINATOR
        assert len(fatal) == 1 and isinstance(fatal[0], OSError)
        assert runtime.state == "failed"
        later = await runtime.handle(OffsetFetchRequest("g", None))
        assert later.error == Errors.NOT_COORDINATOR
        again, _ = make(store)
        await serving(again)
        fetched = await again.handle(OffsetFetchRequest("g", None))
        assert [p.committed_offset for p in fetched.partitions] == [1]
        await again.close()

    asyncio.run(scenario())


def test_load_failures_are_retried_and_never_raise():
    async def scenario():
        runtime, logs = make(opens=[OSError("locked"), RuntimeError("torn"), None])
        await serving(runtime)
        assert len(logs) == 1
        assert "torn" in runtime.info()["load_error"]
        assert (await runtime.handle(commit("g", 3))).partitions[0].error == Errors.NONE
        await runtime.close()

    asyncio.run(scenario())


def test_bad_requests_raise_value_error_and_change_nothing():
    async def scenario():
        runtime, logs = make()
        await serving(runtime)
        for bad in (
            "junk",
            None,
            42,
            commit("g", "not-an-int"),
            OffsetCommitRequest("g", -1, "", [("t", 0, 1)]),
        ):
            with pytest.raises(ValueError):
                await runtime.handle(bad)
        assert logs[0].appends == [] and runtime.state == "serving"
        await runtime.close()

    asyncio.run(scenario())


def test_session_timer_fires_and_removes_member():
    async def scenario():
        runtime, logs = make()
        await serving(runtime)
        joined = await runtime.handle(join("g", session_ms=100))
        assert joined.error == Errors.NONE
        synced = await runtime.handle(
            SyncGroupRequest(
                "g",
                joined.generation_id,
                joined.member_id,
                [SyncGroupRequestAssignment(joined.member_id, b"")],
            )
        )
        assert synced.error == Errors.NONE
        # No heartbeats: the session timer (armed with loop.call_at) must expire the member.
        for _ in range(400):
            beat = await runtime.handle(
                HeartbeatRequest("g", joined.generation_id, joined.member_id)
            )
            if beat.error == Errors.UNKNOWN_MEMBER_ID:
                break
            await asyncio.sleep(0.2)  # 0.2 s > 100 ms: this heartbeat comes late
        assert beat.error == Errors.UNKNOWN_MEMBER_ID
        assert runtime.info()["group_states"] == {"Empty": 1}
        await runtime.close()

    asyncio.run(scenario())


def test_the_loop_timer_moves_only_when_the_earliest_deadline_does():
    # Every turn used to cancel the loop's timer and make a new one, commits included (3-5 %
    # of the loop thread per wire commit in profiles).
    async def scenario():
        runtime, _ = make()
        await serving(runtime)
        joined = await runtime.handle(join("g", session_ms=5_000))
        assignment = [SyncGroupRequestAssignment(joined.member_id, b"")]
        await runtime.handle(
            SyncGroupRequest("g", joined.generation_id, joined.member_id, assignment)
        )
        for _ in range(3):
            await asyncio.sleep(0)  # the aim runs on a later turn
        aimed = runtime._timer
        assert aimed is not None
        for offset in range(5):
            await runtime.handle(commit("other", offset))
            await asyncio.sleep(0)
        assert runtime._timer is aimed
        # A member with a shorter session brings the earliest deadline forward.
        await runtime.handle(join("h", session_ms=100))
        for _ in range(3):
            await asyncio.sleep(0)
        assert runtime._timer is not None and runtime._timer.when() < aimed.when()
        assert aimed.cancelled()
        await runtime.close()

    asyncio.run(scenario())


def test_close_answers_parked_join_not_coordinator():
    async def scenario():
        runtime, logs = make(
            config=CoordinatorConfig(
                group_min_session_timeout_ms=10, group_initial_rebalance_delay_ms=60_000
            )
        )
        await serving(runtime)
        parked = asyncio.create_task(runtime.handle(join("g")))
        await asyncio.sleep(0.05)
        assert not parked.done() and runtime.info()["parked_requests"] == 1
        await runtime.close()
        assert (await parked).error == Errors.NOT_COORDINATOR
        assert logs[0].closed

    asyncio.run(scenario())


def test_shard_exception_fails_partition():
    async def scenario():
        fatal: list = []
        runtime, logs = make(fatal=fatal)
        await serving(runtime)

        def broken(*args):
            raise KeyError("core bug")

        runtime._shard.handle = broken
        response = await runtime.handle(commit("g", 1))
        assert response.partitions[0].error == Errors.NOT_COORDINATOR
        assert runtime.state == "failed" and isinstance(fatal[0], KeyError)

    asyncio.run(scenario())


def test_snapshot_policy_is_consulted_after_flushes():
    async def scenario():
        runtime, logs = make()
        await serving(runtime)
        for i in range(3):
            await runtime.handle(commit("g", i))
        await runtime.close()  # waits for the I/O thread's queue
        assert logs[0].snapshots >= 1 and runtime.snapshots_checked == logs[0].snapshots

    asyncio.run(scenario())


def test_snapshot_policy_is_consulted_under_sustained_load():
    # A flush that ends with more records already queued must still consult the snapshot
    # policy: an "only when idle" policy never would under a steady stream, and the tail (so
    # the load time) would grow without bound. Appends here pass one at a time, by permit.
    async def scenario():
        runtime, logs = make()
        await serving(runtime)
        log = logs[0]
        permits, append = threading.Semaphore(0), log.append

        def stepped(records):
            assert permits.acquire(timeout=10)
            return append(records)

        log.append = stepped
        first = asyncio.ensure_future(runtime.handle(commit("g", 1)))
        await asyncio.sleep(0.01)  # handed to the append, which waits
        second = asyncio.ensure_future(runtime.handle(commit("h", 1)))
        await asyncio.sleep(0.01)  # queued behind it
        assert runtime.info()["queued_records"] == 1 and log.snapshots == 0
        permits.release()  # the first append completes...
        for _ in range(500):  # ...and the policy is consulted while the
            if log.snapshots:  # second one is still waiting
                break
            await asyncio.sleep(0.01)
        assert log.snapshots >= 1 and not second.done()
        permits.release()
        await asyncio.gather(first, second)
        await runtime.close()

    asyncio.run(scenario())


def test_close_while_the_log_is_opening_still_closes_it():
    # Before: close() saw no log yet and skipped closing it; the I/O thread then opened it and
    # kept it open (and its writer lock held) for good, so no later runtime could open it.
    async def scenario():
        gate = threading.Event()
        opened: list[MemoryLog] = []

        def open_log():
            gate.wait(10)
            opened.append(MemoryLog([]))
            return opened[-1]

        runtime = PartitionRuntime(0, 1, CONFIG, open_log)
        runtime.start()
        await asyncio.sleep(0.02)  # the I/O thread is inside open_log
        closing = asyncio.create_task(runtime.close())
        await asyncio.sleep(0.02)
        gate.set()
        await closing
        assert runtime.state == "closed"
        assert len(opened) == 1 and opened[0].closed

    asyncio.run(scenario())


class CountingMetrics:
    """The runtime's metrics interface, keeping load failures and commits."""

    def __init__(self) -> None:
        self.load_failures: list[tuple[int, str]] = []
        self.commits: list[tuple[int, int, float]] = []  # (partition, offsets, seconds)

    def load_failed(self, partition: int, kind: str) -> None:
        self.load_failures.append((partition, kind))

    def loaded(self, partition: int, seconds: float) -> None:
        pass

    def committed(self, partition: int, offsets: int, seconds: float) -> None:
        self.commits.append((partition, offsets, seconds))

    def appended(self, partition: int, records: int, seconds: float) -> None:
        pass

    def event(self, partition: int, event) -> None:
        pass
