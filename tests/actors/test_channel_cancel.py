"""Cancelling a coordinator call ends it, even when its answer arrives in the same turn of the
event loop (no Ray: the coordinator's answer is a future this test completes).

Python 3.11's ``asyncio.wait_for`` returns the inner result when the outer task is cancelled in
the turn that result arrives, and the cancellation is lost: a member's ``close()`` then waited
forever on a coordination task that went on heartbeating (a multi-node CI run hung so)."""

from __future__ import annotations

import asyncio

import pytest

from groupcoord.actors import CoordinatorChannel
from groupcoord.coordinator import Errors, HeartbeatRequest, HeartbeatResponse

from .inproc import RemoteMethod

OUTER_S = 10


class AnsweringRouter:
    """One partition whose every call returns a future the test answers (``pending``)."""

    def __init__(self) -> None:
        self.pending: list[asyncio.Future] = []

        def handle(request):
            future = asyncio.get_running_loop().create_future()
            self.pending.append(future)
            return future

        partition = type("Partition", (), {"handle": RemoteMethod(handle)})()

        async def find_coordinator(group_id: str):
            return 0, partition

        self.find_coordinator = RemoteMethod(find_coordinator)


async def _until_pending(router: AnsweringRouter, count: int) -> None:
    for _ in range(1_000):
        if len(router.pending) >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"no call #{count} reached the partition")


def test_a_call_cancelled_as_its_answer_arrives_is_cancelled():
    async def scenario():
        router = AnsweringRouter()
        channel = CoordinatorChannel(router, "g")
        call = asyncio.create_task(channel.call(HeartbeatRequest("g", 1, "m")))
        await _until_pending(router, 1)
        router.pending[0].set_result(HeartbeatResponse(Errors.NONE))
        call.cancel()  # in the same turn as the answer
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(call, OUTER_S)
        assert call.cancelled()

    asyncio.run(scenario())


def test_cancelling_many_calls_as_their_answers_arrive_cancels_each():
    # The race both ways round: answer then cancel, cancel then answer.
    async def scenario():
        router = AnsweringRouter()
        channel = CoordinatorChannel(router, "g")
        for i in range(20):
            call = asyncio.create_task(channel.call(HeartbeatRequest("g", 1, "m")))
            await _until_pending(router, i + 1)
            if i % 2:
                call.cancel()
                if not router.pending[i].done():  # as Ray's callback: a cancelled one is left
                    router.pending[i].set_result(HeartbeatResponse(Errors.NONE))
            else:
                router.pending[i].set_result(HeartbeatResponse(Errors.NONE))
                call.cancel()
            done, _ = await asyncio.wait({call}, timeout=OUTER_S)
            assert call in done and call.cancelled(), i

    asyncio.run(scenario())


def test_a_task_stopped_while_its_call_is_answered_does_not_go_on():
    # What a member's close() relies on: cancelling its coordination task stops it.
    async def scenario():
        router = AnsweringRouter()
        channel = CoordinatorChannel(router, "g")
        loops = 0

        async def heartbeat_forever():
            nonlocal loops
            while True:
                await channel.call(HeartbeatRequest("g", 1, "m"))
                loops += 1

        task = asyncio.create_task(heartbeat_forever())
        await _until_pending(router, 1)
        router.pending[0].set_result(HeartbeatResponse(Errors.NONE))
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=OUTER_S)
        assert task in done and task.cancelled() and loops == 0

    asyncio.run(scenario())
