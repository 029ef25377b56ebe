"""``PartitionRuntime.submit``, the listeners' path: replies by callback, exactly once."""

from __future__ import annotations

import asyncio
import logging

import pytest

from groupcoord.actors.live_lag import LagWindowConfig
from groupcoord.coordinator import Errors, HeartbeatRequest

from .fakes import MemoryLog
from .test_runtime import commit, make, serving

ANSWER_TIMEOUT_S = 5.0


class Replies:
    """Reply callbacks that record what they were called with, and wake a waiting test."""

    def __init__(self) -> None:
        self.got: dict[str, list] = {}
        self.changed = asyncio.Event()

    def to(self, name: str, *, raises: bool = False):
        self.got[name] = []

        def reply(response):
            self.got[name].append(response)
            self.changed.set()
            if raises:
                raise RuntimeError(f"{name}'s callback broke")

        return reply

    async def until(self, *names: str) -> None:
        async with asyncio.timeout(ANSWER_TIMEOUT_S):
            while not all(self.got[n] for n in names):
                self.changed.clear()
                await self.changed.wait()


def test_a_reply_waits_for_the_append_and_comes_once():
    async def scenario():
        runtime, logs = make()
        await serving(runtime)
        logs[0].gate.clear()  # the fsync hangs until the test lets it go
        replies = Replies()
        runtime.submit(commit("g", 1), replies.to("commit"))
        await asyncio.sleep(0.05)
        assert replies.got["commit"] == []  # not durable yet
        logs[0].gate.set()
        await replies.until("commit")
        await asyncio.sleep(0.05)
        [response] = replies.got["commit"]
        assert response.partitions[0].error == Errors.NONE
        await runtime.close()

    asyncio.run(scenario())


def test_a_reply_that_depends_on_nothing_unwritten_comes_before_submit_returns():
    async def scenario():
        runtime, _ = make()
        await serving(runtime)
        replies = Replies()
        runtime.submit(HeartbeatRequest("nobody", 1, "m"), replies.to("heartbeat"))
        assert [r.error for r in replies.got["heartbeat"]] == [Errors.UNKNOWN_MEMBER_ID]
        await runtime.close()

    asyncio.run(scenario())


def test_turn_end_callbacks_run_with_the_append_that_released_the_replies(monkeypatch):
    # fsync "never": the turn's append runs in _end_turn, on the loop. A channel flushing the
    # replies it gathered must do it there, before anything the replies scheduled with
    # call_soon (a later turn of the loop).
    monkeypatch.setattr(MemoryLog, "append_may_block", False)

    async def scenario():
        runtime, _ = make()
        await serving(runtime)
        loop = asyncio.get_running_loop()
        order: list[str] = []

        def reply(name: str):
            def called(response) -> None:
                order.append(name)
                loop.call_soon(order.append, f"later after {name}")
                runtime.call_at_turn_end(lambda: order.append(f"flush after {name}"))

            return called

        runtime.submit(commit("a", 1), reply("a"))
        runtime.submit(commit("b", 1), reply("b"))
        await asyncio.sleep(0.05)
        assert order == [
            "a",
            "b",
            "flush after a",
            "flush after b",
            "later after a",
            "later after b",
        ]
        order.clear()
        runtime.call_at_turn_end(lambda: order.append("no turn due"))  # the next turn, then
        await asyncio.sleep(0)
        assert order == ["no turn due"]
        await runtime.close()

    asyncio.run(scenario())


def test_a_callback_that_raises_is_logged_and_the_others_still_get_theirs(caplog):
    async def scenario():
        runtime, _ = make(lag_windows=LagWindowConfig())  # live lag kept from the start
        await serving(runtime)
        replies = Replies()
        for name in ("first", "broken", "last"):
            runtime.submit(commit(name, 1), replies.to(name, raises=name == "broken"))
        await replies.until("first", "broken", "last")
        assert all(len(got) == 1 for got in replies.got.values())
        assert runtime.state == "serving"
        assert runtime.lag.snapshot()[-1].group_id == "last"  # its bookkeeping ran too
        await runtime.close()

    with caplog.at_level(logging.ERROR, logger="groupcoord.partition"):
        asyncio.run(scenario())
    assert ["a reply callback raised" in r.getMessage() for r in caplog.records] == [True]


def test_a_cancelled_caller_is_skipped():
    async def scenario():
        runtime, logs = make()
        await serving(runtime)
        logs[0].gate.clear()
        cancelled = asyncio.create_task(runtime.handle(commit("gone", 1)))
        kept = asyncio.create_task(runtime.handle(commit("kept", 1)))
        await asyncio.sleep(0.05)
        cancelled.cancel()
        logs[0].gate.set()
        assert (await asyncio.wait_for(kept, ANSWER_TIMEOUT_S)).partitions[0].error == Errors.NONE
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert runtime.state == "serving"
        await runtime.close()

    asyncio.run(scenario())


def test_an_ill_typed_request_raises_and_calls_nothing():
    async def scenario():
        runtime, _ = make()
        await serving(runtime)
        replies = Replies()
        with pytest.raises(ValueError):
            runtime.submit(HeartbeatRequest("g", "one", "m"), replies.to("bad"))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        assert replies.got["bad"] == []
        await runtime.close()

    asyncio.run(scenario())


def test_a_failed_partition_replies_not_coordinator_to_every_caller():
    async def scenario():
        runtime, logs = make()
        await serving(runtime)
        logs[0].gate.clear()
        replies = Replies()
        runtime.submit(commit("g", 1), replies.to("commit"))
        await asyncio.sleep(0.05)
        runtime._fail(RuntimeError("the log broke"))
        [response] = replies.got["commit"]
        assert response.partitions[0].error == Errors.NOT_COORDINATOR
        logs[0].gate.set()
        await asyncio.sleep(0.05)
        assert len(replies.got["commit"]) == 1  # the append's release finds it replied
        runtime.submit(commit("g", 2), replies.to("after"))
        assert replies.got["after"][0].partitions[0].error == Errors.NOT_COORDINATOR

    asyncio.run(scenario())
