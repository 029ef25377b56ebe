"""The client at its edges, against a real PartitionRuntime in this process (no Ray): a call to
a stuck partition ends at its deadline, close() keeps what commit_async was asked to commit,
bad offsets are refused before anything is sent, close() during a cooperative rebalance loses
its partitions, and the leader rejoins when a topic grows."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from groupcoord.actors import (
    AdminClient,
    AdminError,
    CoordinatorChannel,
    CoordinatorUnavailable,
    GroupMember,
    RebalanceListener,
    SyncGroupMember,
)
from groupcoord.actors.runtime import PartitionRuntime
from groupcoord.coordinator import (
    Errors,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    TopicPartition,
)

from .fakes import MemoryLog
from .helpers import Tracker, wait_until
from .inproc import CONFIG, MEMBER, RemoteMethod

OUTER_S = 30  # a generous bound around calls that must end on their own


class StuckRouter:
    """The router and one partition in this process, where the partition can get stuck: while
    ``stuck(request)`` is true a call never answers, as on an actor whose event loop or disk
    hangs. ``requests`` are those that reached the partition, ``seen`` counts them by type."""

    def __init__(self, runtime: PartitionRuntime) -> None:
        self.stuck: Callable[[Any], bool] = lambda request: False
        self.seen: dict[str, int] = {}
        self.requests: list = []
        self.hung: list = []
        self.list_groups_hangs = False

        async def handle(request):
            kind = type(request).__name__
            self.seen[kind] = self.seen.get(kind, 0) + 1
            self.requests.append(request)
            if self.stuck(request):
                self.hung.append(request)
                await asyncio.Event().wait()  # never set: this call never answers
            return await runtime.handle(request)

        partition = type("Partition", (), {"handle": RemoteMethod(handle)})()

        async def find_coordinator(group_id: str):
            return 0, partition

        async def list_groups(states_filter=()):
            if self.list_groups_hangs:
                await asyncio.Event().wait()
            return await runtime.handle(ListGroupsRequest(list(states_filter)))

        self.find_coordinator = RemoteMethod(find_coordinator)
        self.list_groups = RemoteMethod(list_groups)

    def hang(self, *kinds: type) -> None:
        self.stuck = lambda request: isinstance(request, kinds)

    def unhang(self) -> None:
        self.stuck = lambda request: False


async def serving(log: MemoryLog | None = None) -> PartitionRuntime:
    store = log or MemoryLog([])
    runtime = PartitionRuntime(0, 1, CONFIG, lambda: store)
    runtime.start()
    await wait_until(lambda: runtime.state == "serving", OUTER_S, "the partition serving")
    return runtime


def on_stuck_router(
    scenario: Callable[[PartitionRuntime, StuckRouter], Awaitable[None]],
    log: MemoryLog | None = None,
) -> None:
    """Run ``scenario(runtime, router)`` on a serving partition (over ``log``) behind a
    ``StuckRouter``, then close the partition."""

    async def run() -> None:
        runtime = await serving(log)
        await scenario(runtime, StuckRouter(runtime))
        await runtime.close()

    asyncio.run(run())


async def committed_offset(runtime: PartitionRuntime, group: str, tp: tuple[str, int]) -> int:
    response = await runtime.handle(OffsetFetchRequest(group, [TopicPartition(*tp)]))
    return response.partitions[0].committed_offset


# -- item 10: every call is bounded by its deadline -----------------------------------------------


def test_a_call_to_a_stuck_partition_ends_at_its_deadline():
    # Before: the deadline was only checked between attempts, so an attempt that never
    # answered kept the call waiting forever (the outer bound fired instead).
    async def scenario(runtime, router):
        router.hang(HeartbeatRequest)
        channel = CoordinatorChannel(router, "g", timeout_ms=300)
        with pytest.raises(CoordinatorUnavailable):
            await asyncio.wait_for(channel.call(HeartbeatRequest("g", 1, "m")), OUTER_S)
        assert router.hung  # it really was stuck, not refused
        router.unhang()  # the handle was forgotten: rediscovered
        before = channel.discoveries
        response = await asyncio.wait_for(channel.call(HeartbeatRequest("g", 1, "m")), OUTER_S)
        assert response.error == Errors.UNKNOWN_MEMBER_ID
        assert channel.discoveries == before + 1

    on_stuck_router(scenario)


def test_commit_and_fetch_on_a_stuck_disk_end_at_the_request_timeout():
    # A real stuck partition: its log's append blocks (an fsync that does not return), so the
    # commit's reply, and the fetch that must wait for it, never come in time.
    log = MemoryLog([])

    async def scenario(runtime, router):
        m = GroupMember(router, "g", ["t"], request_timeout_ms=300, **MEMBER)
        m.start()
        await m.wait_assigned(OUTER_S)
        log.gate.clear()
        try:
            with pytest.raises(CoordinatorUnavailable):
                await asyncio.wait_for(m.commit({("t", 0): 5}), OUTER_S)
            with pytest.raises(CoordinatorUnavailable):
                await asyncio.wait_for(m.committed([("t", 0)]), OUTER_S)
        finally:
            log.gate.set()
        await asyncio.wait_for(m.commit({("t", 0): 6}), OUTER_S)
        assert await m.committed([("t", 0)]) == {("t", 0): 6}
        await m.close()

    on_stuck_router(scenario, log)


def test_heartbeats_go_on_past_a_stuck_heartbeat_and_the_member_recovers():
    # Before: the first heartbeat to a stuck partition never returned, so the member never
    # heartbeat again, not even once the partition answered again.
    async def scenario(runtime, router):
        m = GroupMember(router, "g", ["t"], listener=Tracker(), **MEMBER)
        m.start()
        await m.wait_assigned(OUTER_S)
        router.hang(HeartbeatRequest)
        await wait_until(lambda: len(router.hung) >= 2, OUTER_S, "a second heartbeat")
        router.unhang()
        # Its session expired meanwhile: the next heartbeat learns so, and the member rejoins.
        await wait_until(
            lambda: ("lost", frozenset({("t", 0), ("t", 1)})) in m.listener.calls,
            OUTER_S,
            "the partitions lost",
        )
        assert await m.wait_assigned(OUTER_S) == {("t", 0), ("t", 1)}
        await m.close()

    on_stuck_router(scenario)


def test_close_with_a_stuck_leave_group_returns():
    async def scenario(runtime, router):
        m = GroupMember(router, "g", ["t"], **MEMBER)
        m.start()
        await m.wait_assigned(OUTER_S)
        router.hang(LeaveGroupRequest)
        await asyncio.wait_for(m.close(), OUTER_S)
        assert len(router.hung) == 1 and m.generation_id == -1

    on_stuck_router(scenario)


def test_admin_calls_to_a_stuck_partition_or_router_end_at_their_deadline():
    async def scenario(runtime, router):
        admin = AdminClient(router, timeout_ms=300)
        router.hang(object)
        with pytest.raises(CoordinatorUnavailable):
            await asyncio.wait_for(admin.describe_groups(["g"]), OUTER_S)
        with pytest.raises(CoordinatorUnavailable):
            await asyncio.wait_for(admin.fetch_offsets("g"), OUTER_S)
        router.list_groups_hangs = True
        with pytest.raises(AdminError) as timed_out:
            await asyncio.wait_for(admin.list_groups(), OUTER_S)
        assert timed_out.value.error == Errors.REQUEST_TIMED_OUT
        router.list_groups_hangs = False
        router.unhang()
        assert await admin.list_groups() == []

    on_stuck_router(scenario)


# -- item 11: close() waits for pending commit_async ----------------------------------------------


def test_close_keeps_every_pending_async_commit():
    # Before: close() stopped the member first; the async commits still queued behind the
    # first one then failed (the member had left), and the committed offset stayed at 10.
    async def scenario(runtime, router):
        m = GroupMember(router, "g", ["t"], **MEMBER)
        m.start()
        await m.wait_assigned(OUTER_S)
        results: list = []
        for offset in (10, 20, 30):
            m.commit_async({("t", 0): offset}, callback=results.append)
        await asyncio.wait_for(m.close(), OUTER_S)
        assert results == [None, None, None]
        assert await committed_offset(runtime, "g", ("t", 0)) == 30

    on_stuck_router(scenario)


def test_sync_member_close_keeps_every_pending_async_commit():
    runtime_ready: dict = {}

    async def start_runtime():
        runtime_ready["runtime"] = await serving()

    loop = asyncio.new_event_loop()
    thread_loop = threading.Thread(target=loop.run_forever, daemon=True)
    thread_loop.start()
    try:
        asyncio.run_coroutine_threadsafe(start_runtime(), loop).result(OUTER_S)
        runtime = runtime_ready["runtime"]
        router = ThreadSafeRouter(StuckRouter(runtime), loop)
        m = SyncGroupMember(router, "g", ["t"], **MEMBER)
        m.wait_assigned(OUTER_S)
        results: list = []
        for offset in (10, 20, 30):
            m.commit_async({("t", 0): offset}, callback=results.append)
        m.close()
        assert results == [None, None, None]
        fetched = asyncio.run_coroutine_threadsafe(
            committed_offset(runtime, "g", ("t", 0)), loop
        ).result(OUTER_S)
        assert fetched == 30
        asyncio.run_coroutine_threadsafe(runtime.close(), loop).result(OUTER_S)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread_loop.join(OUTER_S)


class ThreadSafeRouter:
    """The in-process router, called from another event loop (as Ray handles may be): each
    call runs on the runtime's loop and is awaited from the caller's."""

    def __init__(self, router: StuckRouter, loop: asyncio.AbstractEventLoop) -> None:
        def across(function):
            def remote(*args):
                return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(function(*args), loop))

            return type("Method", (), {"remote": staticmethod(remote)})()

        async def find_coordinator(group_id):
            partition_number, partition = await router.find_coordinator.remote(group_id)
            return partition_number, type(
                "Partition", (), {"handle": across(partition.handle.remote)}
            )()

        self.find_coordinator = across(find_coordinator)


def test_close_gives_up_on_pending_async_commits_at_its_timeout():
    async def scenario(runtime, router):
        m = GroupMember(router, "g", ["t"], **MEMBER)
        m.start()
        await m.wait_assigned(OUTER_S)
        router.hang(OffsetCommitRequest)
        results: list = []
        m.commit_async({("t", 0): 10}, callback=results.append)
        for bad in (-1, 1.5, None):
            with pytest.raises(ValueError, match="timeout"):
                await m.close(timeout_ms=bad)
        assert m.stable and not results  # a refused close changed nothing
        await asyncio.wait_for(m.close(timeout_ms=300), OUTER_S)
        assert len(results) == 1 and isinstance(results[0], CoordinatorUnavailable), results
        router.unhang()
        assert await committed_offset(runtime, "g", ("t", 0)) == -1

    on_stuck_router(scenario)


# -- item 13: bad offsets are refused before anything is sent -------------------------------------

BAD_OFFSETS = [
    {("t", 0): -5},
    {("t", 0): -1},
    {("t", 0): True},
    {("t", 0): 1.5},
    {("t", 0): "3"},
    {("t", 0): None},
    {("t", 0): 2**63},
    {("t", -1): 1},
    {("t", 2**31): 1},
    {("t", True): 1},
    {("", 0): 1},
    {(1, 0): 1},
    {"t0": 1},
    {("t", 0, 1): 1},
    [(("t", 0), 1)],
]


@pytest.mark.parametrize("offsets", BAD_OFFSETS, ids=repr)
def test_bad_offsets_are_refused_by_commit_and_commit_async(offsets):
    # Before: {("t", 0): -5} was acknowledged and read back, and a committed -1 then read
    # as "no offset"; Kafka's consumer refuses a negative offset before sending anything.
    async def scenario(runtime, router):
        m = GroupMember(router, "g", ["t"], **MEMBER)
        m.start()
        await m.wait_assigned(OUTER_S)
        await m.commit({("t", 0): 7})
        results: list = []
        with pytest.raises(ValueError, match="offset|partition|topic|mapping"):
            await m.commit(offsets)
        with pytest.raises(ValueError, match="offset|partition|topic|mapping"):
            m.commit_async(offsets, callback=results.append)
        await asyncio.sleep(0)
        assert results == [] and router.seen["OffsetCommitRequest"] == 1
        assert await committed_offset(runtime, "g", ("t", 0)) == 7
        await m.close()

    on_stuck_router(scenario)


def test_bad_partitions_are_refused_by_committed_and_the_admin_client():
    async def scenario(runtime, router):
        m = GroupMember(router, "g", ["t"], **MEMBER)
        admin = AdminClient(router)
        for bad in ([("t", -1)], [("t", 2**31)], [("", 0)], [("t", True)], ["t0"], "t"):
            with pytest.raises(ValueError):
                await m.committed(bad)
            with pytest.raises(ValueError):
                await admin.fetch_offsets("g", bad)
            with pytest.raises(ValueError):
                await admin.delete_offsets("g", bad)
            with pytest.raises(ValueError):
                await admin.reset_offsets("g", to_offset=0, partitions=bad)
        for bad_offset in (-1, True, 1.5):
            with pytest.raises(ValueError):
                await admin.reset_offsets("g", to_offset=bad_offset)
        assert sum(router.seen.values()) == 0

    on_stuck_router(scenario)


def test_sync_member_refuses_bad_offsets_in_the_callers_thread():
    # Before: SyncGroupMember.commit_async handed the offsets to its loop unchecked, so a
    # refusal could not reach the caller at all.
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        runtime = asyncio.run_coroutine_threadsafe(serving(), loop).result(OUTER_S)
        stuck = StuckRouter(runtime)
        m = SyncGroupMember(ThreadSafeRouter(stuck, loop), "g", ["t"], **MEMBER)
        try:
            m.wait_assigned(OUTER_S)
            with pytest.raises(ValueError, match="offset"):
                m.commit({("t", 0): -5})
            with pytest.raises(ValueError, match="offset"):
                m.commit_async({("t", 0): -5})
            assert "OffsetCommitRequest" not in stuck.seen
        finally:
            m.close()
        asyncio.run_coroutine_threadsafe(runtime.close(), loop).result(OUTER_S)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(OUTER_S)


# -- item 14: close() during a cooperative rebalance; the leader follows partition counts ---------


def test_close_during_a_cooperative_rebalance_loses_the_partitions():
    # Kafka's onLeavePrepare: partitions still owned while a rebalance is in progress (or once
    # the generation is gone) are lost, not revoked: the group may already be handing them on.
    async def scenario(runtime, router):
        options = {**MEMBER, "assignors": ("cooperative-sticky",)}
        a = GroupMember(router, "g", ["t"], listener=Tracker(), **options)
        a.start()
        assert await a.wait_assigned(OUTER_S) == {("t", 0), ("t", 1)}
        # a's next SyncGroup gets stuck: a stays in the middle of the rebalance b starts.
        router.stuck = lambda r: isinstance(r, SyncGroupRequest) and r.member_id == a.member_id
        b = GroupMember(router, "g", ["t"], **options)
        b.start()
        await wait_until(lambda: router.hung, OUTER_S, "a in the middle of the rebalance")
        assert a.assignment == {("t", 0), ("t", 1)}  # cooperative: still owned
        await asyncio.wait_for(a.close(), OUTER_S)
        assert a.listener.calls[-1] == ("lost", frozenset({("t", 0), ("t", 1)}))
        assert ("revoked", frozenset({("t", 0), ("t", 1)})) not in a.listener.calls
        router.unhang()
        assert await b.wait_assigned(OUTER_S) == {("t", 0), ("t", 1)}
        await b.close()

    on_stuck_router(scenario)


def test_close_of_a_stable_member_revokes_the_partitions():
    async def scenario(runtime, router):
        a = GroupMember(
            router,
            "g",
            ["t"],
            listener=Tracker(),
            **{**MEMBER, "assignors": ("cooperative-sticky",)},
        )
        a.start()
        await a.wait_assigned(OUTER_S)
        await a.close()
        assert a.listener.calls[-1] == ("revoked", frozenset({("t", 0), ("t", 1)}))

    on_stuck_router(scenario)


def test_the_leader_rejoins_when_a_topic_grows():
    # Kafka's metadata-change rule: the leader remembers the partition counts it assigned,
    # re-reads them every metadata_max_age_ms and rejoins when one changed, so that the new
    # partitions get owners.
    async def scenario(runtime, router):
        counts = {"t": 2, "u": 1}
        options = {
            **MEMBER,
            "topic_partitions": lambda topic: counts[topic],
            "metadata_max_age_ms": 100,
        }
        a = GroupMember(router, "g", ["t"], **options)
        b = GroupMember(router, "g", ["u"], **options)  # the leader must watch u too
        a.start()
        await a.wait_assigned(OUTER_S)
        b.start()
        await wait_until(lambda: a.stable and b.stable and b.assignment, OUTER_S, "two members")
        generation = a.generation_id
        assert a.is_leader and a.assignment == {("t", 0), ("t", 1)}
        counts["u"] = 2
        await wait_until(
            lambda: b.assignment == {("u", 0), ("u", 1)} and b.stable,
            OUTER_S,
            "the new partition of u assigned",
        )
        assert b.generation_id > generation
        reasons = [
            r.reason
            for r in router.requests
            if isinstance(r, JoinGroupRequest) and r.member_id == a.member_id
        ]
        assert any("u: 1 -> 2" in (reason or "") for reason in reasons), reasons
        counts["t"] = 3
        await wait_until(
            lambda: a.assignment == {("t", 0), ("t", 1), ("t", 2)} and a.stable,
            OUTER_S,
            "the new partition of t assigned",
        )
        await a.close()
        await b.close()

    on_stuck_router(scenario)


@pytest.mark.parametrize("age", [-1, 1.5, None, True])
def test_a_bad_metadata_max_age_is_refused(age):
    with pytest.raises(ValueError, match="metadata_max_age_ms"):
        GroupMember(object(), "g", ["t"], **MEMBER, metadata_max_age_ms=age)


def test_sync_close_is_bounded_when_a_listener_never_returns():
    # Before: SyncGroupMember.close waited for GroupMember.close without any bound, so a
    # revocation callback that never returned hung the caller's thread for good.
    class Hangs(RebalanceListener):
        async def on_partitions_revoked(self, partitions):
            await asyncio.Event().wait()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        runtime = asyncio.run_coroutine_threadsafe(serving(), loop).result(OUTER_S)
        router = ThreadSafeRouter(StuckRouter(runtime), loop)
        m = SyncGroupMember(router, "g", ["t"], listener=Hangs(), **MEMBER)
        assert m.wait_assigned(OUTER_S)
        with pytest.raises(TimeoutError):
            m.close(timeout_ms=100)
        assert not m._thread.is_alive()
        asyncio.run_coroutine_threadsafe(runtime.close(), loop).result(OUTER_S)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(OUTER_S)
