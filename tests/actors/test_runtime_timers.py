"""The runtime's timers against the Shard's: a timer due now waits for the loop's next timer
turn, behind the requests read in this one (``Shard(immediate_timers=False)``)."""

from __future__ import annotations

import asyncio

from groupcoord.coordinator import Errors

from .test_runtime import join, make, serving

ANSWER_TIMEOUT_S = 5.0


def test_members_joining_in_one_loop_turn_form_one_generation():
    # The initial rebalance delay is 0 (CONFIG). Before, the first JoinGroup completed the
    # join phase within its own call: generation 1 held one member, and the second member's
    # join started a rebalance that waited for the first to rejoin (a heartbeat later for a
    # real client). Kafka's coordinator queues the due timer behind the requests it has.
    async def scenario():
        runtime, _ = make()
        await serving(runtime)
        first, second = await asyncio.wait_for(
            asyncio.gather(runtime.handle(join("g")), runtime.handle(join("g"))),
            ANSWER_TIMEOUT_S,
        )
        assert first.error == second.error == Errors.NONE
        assert first.generation_id == second.generation_id == 1
        leader = first if first.leader == first.member_id else second
        assert len(leader.members) == 2
        await runtime.close()

    asyncio.run(scenario())
