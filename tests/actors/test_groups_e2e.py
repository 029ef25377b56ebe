"""Group life cycles through real actor handles on a real local Ray."""

from __future__ import annotations

import asyncio

import pytest

from groupcoord.actors import AdminClient, AdminError, CommitFailedError, SyncGroupMember, stop
from groupcoord.coordinator import Errors

from .helpers import (
    HEARTBEAT_MS,
    REBALANCE_MS,
    SESSION_MS,
    member,
    no_double_ownership,
    settled,
    start_deployment,
    wait_until,
)


@pytest.fixture(scope="module")
def deployment(ray_session, tmp_path_factory):
    d = start_deployment(tmp_path_factory.mktemp("logs-e2e"), "gc-e2e")
    yield d
    stop(d)


def test_join_rebalance_on_join_leave_and_session_expiry(deployment):
    async def scenario():
        router = deployment.router
        a = member(router, "life")
        assert len(await a.wait_assigned(30)) == 6
        b, c = member(router, "life"), member(router, "life")
        await wait_until(lambda: settled([a, b, c], 6), what="three members settled")
        assert sorted(len(m.assignment) for m in (a, b, c)) == [2, 2, 2]
        assert sum(m.is_leader for m in (a, b, c)) == 1
        generation = a.generation_id
        await c.close()  # leaves at once
        await wait_until(
            lambda: settled([a, b], 6) and a.generation_id > generation,
            what="rebalance after leave",
        )
        # b stops heartbeating without leaving: its session expires and a takes everything.
        b._task.cancel()
        await wait_until(
            lambda: settled([a], 6),
            timeout_s=SESSION_MS / 1000 + 20,
            what="rebalance after session expiry",
        )
        assert len(a.assignment) == 6
        no_double_ownership([a, b, c])
        kinds = [kind for kind, _ in a.listener.calls]
        assert kinds[0] == "assigned" and "revoked" in kinds  # eager: revoke before rejoin
        await a.close()
        await b.close(leave=False)

    asyncio.run(scenario())


def test_static_member_restart_keeps_generation_and_assignment(deployment):
    async def scenario():
        router = deployment.router
        s = member(router, "static", group_instance_id="instance-1")
        d = member(router, "static")
        await wait_until(lambda: settled([s, d], 6), what="static group settled")
        generation, mine = s.generation_id, s.assignment
        await s.close()  # a static member sends no LeaveGroup
        again = member(router, "static", group_instance_id="instance-1")
        await wait_until(lambda: again.stable, what="static member back")
        assert again.assignment == mine
        assert again.generation_id == generation == d.generation_id
        assert d.rebalances == 1  # the dynamic member never rebalanced
        await again.close()
        await d.close()

    asyncio.run(scenario())


def test_cooperative_sticky_moves_partitions_without_double_ownership(deployment):
    async def scenario():
        router = deployment.router
        opts = dict(assignors=("cooperative-sticky",), topics={"t": 8})
        a = member(router, "coop", **opts)
        await a.wait_assigned(30)
        b = member(router, "coop", **opts)
        await wait_until(lambda: settled([a, b], 8), what="cooperative group settled")
        assert sorted(len(m.assignment) for m in (a, b)) == [4, 4]
        no_double_ownership([a, b])
        kinds = [kind for kind, _ in a.listener.calls]
        # a kept its partitions through the first rebalance, then gave up only four.
        revoked = [p for kind, p in a.listener.calls if kind == "revoked"]
        assert kinds[0] == "assigned" and [len(p) for p in revoked] == [4]
        await a.close()
        await b.close()

    asyncio.run(scenario())


def test_commits_fetches_and_admin_operations(deployment):
    async def scenario():
        router = deployment.router
        admin = AdminClient(router)
        m = member(router, "admin-g", topics={"t": 3})
        await m.wait_assigned(30)
        await m.commit({("t", 0): 10, ("t", 1): 20, ("t", 2): 30}, metadata="first")
        assert await m.committed() == {("t", 0): 10, ("t", 1): 20, ("t", 2): 30}
        done = asyncio.get_running_loop().create_future()
        m.commit_async({("t", 0): 11}, callback=done.set_result)
        assert await done is None
        assert (await m.committed([("t", 0)])) == {("t", 0): 11}
        listed = {g.group_id: g.group_state for g in await admin.list_groups()}
        assert listed["admin-g"] == "Stable"
        (desc,) = await admin.describe_groups(
            ["admin-g"], end_offsets=lambda tps: {tp: 100 for tp in tps}
        )
        assert desc.state == "Stable" and len(desc.members) == 1
        assert {(o.partition, o.lag) for o in desc.offsets} == {(0, 89), (1, 80), (2, 70)}
        assert all(o.owner == m.member_id for o in desc.offsets)
        with pytest.raises(AdminError) as refused:
            await admin.reset_offsets("admin-g", to_offset=0)
        assert refused.value.error == Errors.NON_EMPTY_GROUP
        assert (await admin.delete_offsets("admin-g", [("t", 0)])) == {
            ("t", 0): Errors.GROUP_SUBSCRIBED_TO_TOPIC
        }
        assert (await admin.delete_groups(["admin-g"]))["admin-g"] == Errors.NON_EMPTY_GROUP
        await m.close()
        with pytest.raises(CommitFailedError):
            await m.commit({("t", 0): 1})
        reset = await admin.reset_offsets(
            "admin-g", to_latest=lambda tps: {(t, p): 100 + p for t, p in tps}
        )
        assert reset == {("t", 0): 100, ("t", 1): 101, ("t", 2): 102}
        assert await admin.fetch_offsets("admin-g") == reset
        await admin.reset_offsets("admin-g", to_offset=5, partitions=[("t", 1)])
        assert (await admin.fetch_offsets("admin-g"))[("t", 1)] == 5
        assert (await admin.delete_offsets("admin-g", [("t", 2)])) == {("t", 2): Errors.NONE}
        assert ("t", 2) not in await admin.fetch_offsets("admin-g")
        assert (await admin.delete_groups(["admin-g", "never-was"])) == {
            "admin-g": Errors.NONE,
            "never-was": Errors.GROUP_ID_NOT_FOUND,
        }
        (gone,) = await admin.describe_groups(["admin-g"])
        assert gone.state == "Dead" and gone.members == ()

    asyncio.run(scenario())


def test_sync_facade(deployment):
    m = SyncGroupMember(
        deployment.router,
        "sync-g",
        ["t"],
        topic_partitions={"t": 2},
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        rebalance_timeout_ms=REBALANCE_MS,
    )
    try:
        assert m.wait_assigned(30) == frozenset({("t", 0), ("t", 1)})
        m.commit({("t", 0): 7})
        assert m.committed() == {("t", 0): 7}
    finally:
        m.close()
