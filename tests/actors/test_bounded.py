"""``bounded`` and ``gathered_within``: one bound on an await, in a task or outside one."""

from __future__ import annotations

import asyncio
import gc

import pytest

from groupcoord.actors.bounded import bounded, gathered_within


async def _answer_after(delay_s: float, value):
    await asyncio.sleep(delay_s)
    return value


def _step_outside_a_task(coroutine, done: asyncio.Future) -> None:
    """Run ``coroutine``'s first step in a plain callback, as the Kafka listener runs a
    request's, then drive it on from the futures it yields."""

    def step(value=None) -> None:
        try:
            waiting_on = coroutine.send(value)
        except StopIteration as finished:
            done.set_result(finished.value)
        except BaseException as exc:  # noqa: BLE001 — handed to the test
            done.set_exception(exc)
        else:
            waiting_on.add_done_callback(lambda _: step())

    step()


@pytest.mark.parametrize(("delay_s", "expected"), [(0.0, "answered"), (5.0, TimeoutError)])
def test_a_wait_stepped_outside_a_task_is_bounded(delay_s, expected):
    # Before: asyncio.timeout raised RuntimeError ("should be used inside a task"), and the
    # listener closed the connection of every CreateTopics sent to a partition's listener.
    async def scenario():
        done = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(
            _step_outside_a_task, bounded(_answer_after(delay_s, "answered"), 0.2), done
        )
        return await done

    if expected is TimeoutError:
        with pytest.raises(TimeoutError):
            asyncio.run(scenario())
    else:
        assert asyncio.run(scenario()) == expected


def test_gathered_within_keeps_what_came_and_marks_what_did_not():
    async def failing():
        raise KeyError("k")

    async def scenario():
        return await gathered_within(
            [_answer_after(0, 1), _answer_after(5, 2), failing()], timeout_s=0.2
        )

    first, late, failed = asyncio.run(scenario())
    assert first == 1
    assert isinstance(late, TimeoutError) and isinstance(failed, KeyError)


def test_a_wait_whose_caller_went_away_is_not_logged_as_never_retrieved(caplog):
    # The listener closes a request's coroutine when its connection goes; the wait's own task
    # then fails unwatched, which asyncio would log at ERROR when it is collected.
    async def failing_later():
        await asyncio.sleep(0.05)
        raise KeyError("the partition went away")

    async def scenario():
        loop = asyncio.get_running_loop()
        stepped = loop.create_future()

        def first_step_then_close() -> None:  # in a plain callback: outside any task
            coroutine = bounded(failing_later(), 5.0)
            waiting_on = coroutine.send(None)
            coroutine.close()  # the connection went
            stepped.set_result(waiting_on)

        loop.call_soon(first_step_then_close)
        await asyncio.wait([await stepped], timeout=5)

    asyncio.run(scenario())
    gc.collect()
    assert "never retrieved" not in caplog.text
