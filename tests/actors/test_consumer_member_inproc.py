"""The consumer-protocol member against a real PartitionRuntime in this process (no Ray), where
an answer can be lost after the coordinator applied the request: the member asks again for its
whole assignment and revokes in time, instead of being fenced by its rebalance timeout."""

from __future__ import annotations

import asyncio

from groupcoord.actors import GroupMember
from groupcoord.coordinator import ConsumerGroupHeartbeatResponse, CoordinatorConfig

from .helpers import Tracker, wait_until
from .inproc import InProcRouter, serving_runtime

CONFIG = CoordinatorConfig(
    group_min_session_timeout_ms=10,
    group_initial_rebalance_delay_ms=0,
    consumer_group_heartbeat_interval_ms=50,
)
REBALANCE_MS = 60_000  # far longer than the test: a member that never revokes would stall it


def test_a_lost_answer_is_asked_for_again():
    async def scenario():
        runtime = await serving_runtime(CONFIG)
        assert runtime.update_topics(1, {"t": 4})
        dropped: list = []
        victim: list[str] = []  # the member whose next new assignment is lost on its way

        def lose_once(request, response):
            if (
                isinstance(response, ConsumerGroupHeartbeatResponse)
                and response.assignment is not None
                and victim == [request.member_id]
                and not dropped
            ):
                dropped.append(response)
                raise TimeoutError("the answer was lost")  # applied, never delivered
            return response

        router = InProcRouter(runtime, tamper=lose_once)
        a_calls, b_calls = Tracker(), Tracker()
        options = dict(group_protocol="consumer", rebalance_timeout_ms=REBALANCE_MS)
        a = GroupMember(router, "g", ["t"], listener=a_calls, **options)
        a.start()
        assert len(await a.wait_assigned(10)) == 4
        victim.append(a.member_id)
        b = GroupMember(router, "g", ["t"], listener=b_calls, **options)
        b.start()
        owned = await b.wait_assigned(10)  # a revoked in time, though its answer was lost
        assert len(dropped) == 1 and len(dropped[0].assignment.topic_partitions[0].partitions) == 2
        await wait_until(lambda: a.stable and len(a.assignment) == 2, 10, "a settled")
        assert owned.isdisjoint(a.assignment)
        assert [kind for kind, _ in a_calls.calls] == ["assigned", "revoked", "assigned"]
        assert a_calls.calls[1][1] == owned
        await asyncio.gather(a.close(), b.close())
        await runtime.close()

    asyncio.run(scenario())
