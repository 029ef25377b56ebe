"""Idle polling (``actors/idle_poll``): the loop turns on for a while after work, then sleeps."""

from __future__ import annotations

import asyncio

import pytest

from groupcoord.actors.idle_poll import MAX_IDLE_POLL_US, IdlePoll, check_idle_poll_us
from groupcoord.actors.wire_config import WireConfig
from groupcoord.coordinator import HeartbeatRequest

from .test_runtime import make, serving
from .test_runtime_submit import Replies


class FakeLoop:
    """A loop's call_soon and a clock the test moves by hand."""

    def __init__(self) -> None:
        self.ready: list = []
        self.now_s = 100.0

    def call_soon(self, callback) -> None:
        self.ready.append(callback)

    def turn(self) -> int:
        """Run what was ready at the start of the turn; how many callbacks ran."""
        ready, self.ready = self.ready, []
        for callback in ready:
            callback()
        return len(ready)


def test_work_keeps_the_loop_turning_until_the_budget_has_passed_since_the_last_work():
    loop = FakeLoop()
    idle = IdlePoll(loop.call_soon, 0.001, clock=lambda: loop.now_s)
    idle.worked()
    idle.worked()  # more work in the same turn: still one poll scheduled
    assert len(loop.ready) == 1 and idle.polling
    loop.now_s += 0.0006
    assert loop.turn() == 1 and len(loop.ready) == 1  # within the budget: polls on
    idle.worked()  # work 0.6 ms in moves the deadline to 1.6 ms
    loop.now_s += 0.0006
    assert loop.turn() == 1 and len(loop.ready) == 1  # 1.2 ms: past the first deadline only
    loop.now_s += 0.0005
    assert loop.turn() == 1 and loop.ready == []  # 1.7 ms: past both, the loop may sleep
    assert not idle.polling and idle.turns == 3
    idle.worked()  # the next work starts a new poll
    assert len(loop.ready) == 1 and idle.polling


def test_a_zero_budget_never_polls():
    loop = FakeLoop()
    idle = IdlePoll(loop.call_soon, 0.0, clock=lambda: loop.now_s)
    idle.worked()
    assert loop.ready == [] and not idle.polling


@pytest.mark.parametrize("value", [-1, MAX_IDLE_POLL_US + 1, True, 1.5, "200", None])
def test_settings_outside_the_bound_are_refused(value):
    with pytest.raises(ValueError, match=r"idle_poll_us must be an int in \[0, 10000\]"):
        check_idle_poll_us(value, "idle_poll_us")
    with pytest.raises(ValueError, match=r"WireConfig.idle_poll_us must be an int"):
        WireConfig(idle_poll_us=value)


def test_a_partition_polls_after_a_turn_with_work_and_then_sleeps():
    async def scenario():
        runtime, _ = make(idle_poll_us=2_000)
        await serving(runtime)
        idle = runtime.idle_poll
        assert idle is not None and runtime.info()["idle_poll_turns"] == idle.turns
        while idle.polling:  # after the load's own turns (a slow machine may still be there)
            await asyncio.sleep(0.01)
        before = idle.turns
        replies = Replies()
        runtime.submit(HeartbeatRequest("nobody", 1, "m"), replies.to("heartbeat"))
        await replies.until("heartbeat")  # answered within submit: the turn has not ended
        assert not idle.polling
        await asyncio.sleep(0)  # the turn's end (_end_turn) runs
        assert idle.polling  # the turn that answered it left the loop polling
        while idle.polling:  # ends on its own: 2 ms after the last turn with work
            await asyncio.sleep(0.01)
        polled = idle.turns - before
        assert polled > 1  # it turned again and again rather than sleeping
        await asyncio.sleep(0.05)
        assert idle.turns - before == polled  # and then slept: no work, no polling
        await runtime.close()

    asyncio.run(scenario())


def test_a_partition_without_idle_polling_has_no_poller():
    async def scenario():
        runtime, _ = make()
        await serving(runtime)
        assert runtime.idle_poll is None and runtime.info()["idle_poll_turns"] is None
        await runtime.close()

    asyncio.run(scenario())
