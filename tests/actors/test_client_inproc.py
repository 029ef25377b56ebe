"""The client and admin client against a real PartitionRuntime in this process (no Ray):
failures surface instead of vanishing, and a bare string is never taken for a list of names."""

from __future__ import annotations

import asyncio

import pytest
from msgspec.structs import replace

from groupcoord.actors import (
    AdminClient,
    CommitFailedError,
    GroupMember,
    GroupMemberError,
    RebalanceListener,
)
from groupcoord.coordinator import (
    Errors,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    SyncGroupRequest,
)

from .inproc import CONFIG, MEMBER, InProcRouter, serving_runtime


class BrokenListener(RebalanceListener):
    def on_partitions_assigned(self, partitions):
        raise RuntimeError("the application's listener failed")


def test_listener_failure_stops_the_member_visibly():
    # Before: the exception killed the background task silently; wait_assigned hung, `stable`
    # stayed True and the member stopped heartbeating while claiming its partitions.
    async def scenario():
        runtime = await serving_runtime(CONFIG)
        m = GroupMember(InProcRouter(runtime), "g", ["t"], listener=BrokenListener(), **MEMBER)
        m.start()
        with pytest.raises(GroupMemberError) as stopped:
            await m.wait_assigned(10)
        assert "listener failed" in str(stopped.value)
        assert not m.stable
        await m.close()
        await runtime.close()

    asyncio.run(scenario())


def test_async_commit_callback_gets_every_failure():
    # Before: only GroupMemberError/CoordinatorUnavailable reached the callback; a request the
    # coordinator refused as ill-typed (ValueError) left the callback uncalled. (An offset the
    # client itself can tell is bad never gets that far: commit_async raises ValueError.)
    def tamper(request, response):
        if isinstance(request, OffsetCommitRequest):
            raise ValueError("invalid OffsetCommitRequest")  # as the actor's validate()
        return response

    async def scenario():
        runtime = await serving_runtime(CONFIG)
        m = GroupMember(InProcRouter(runtime, tamper=tamper), "g", ["t"], **MEMBER)
        m.start()
        await m.wait_assigned(10)
        with pytest.raises(ValueError):
            m.commit_async({("t", 0): "not-an-offset"})
        results: list = []
        task = m.commit_async({("t", 0): 5}, callback=results.append)
        await asyncio.gather(task, return_exceptions=True)
        assert len(results) == 1 and isinstance(results[0], ValueError), results
        await m.close()
        await runtime.close()

    asyncio.run(scenario())


def test_a_bare_string_is_not_a_list_of_names():
    # Before: delete_groups("ab") deleted the groups "a" and "b"; GroupMember(..., "orders")
    # subscribed to the topics "o", "r", "d", "e", "s".
    async def scenario():
        runtime = await serving_runtime(CONFIG)
        router = InProcRouter(runtime)
        for group in ("a", "b"):
            response = await runtime.handle(
                OffsetCommitRequest(group, -1, "", [OffsetCommitRequestPartition("t", 0, 1)])
            )
            assert response.partitions[0].error == Errors.NONE
        admin = AdminClient(router)
        for call in (
            lambda: admin.delete_groups("ab"),
            lambda: admin.describe_groups("ab"),
            lambda: admin.list_groups("Empty"),
        ):
            with pytest.raises(ValueError):
                await call()
        assert await admin.fetch_offsets("a") == {("t", 0): 1}
        assert await admin.fetch_offsets("b") == {("t", 0): 1}
        with pytest.raises(ValueError):
            GroupMember(router, "g", "orders", **{**MEMBER, "topic_partitions": {"orders": 2}})
        await runtime.close()

    asyncio.run(scenario())


class CommitOnRevoke(RebalanceListener):
    """Kafka's usual pattern: commit what was processed before giving partitions up."""

    def __init__(self) -> None:
        self.member: GroupMember | None = None
        self.outcomes: list = []

    async def on_partitions_revoked(self, partitions):
        try:
            await self.member.commit({tp: 100 + tp[1] for tp in partitions})
        except GroupMemberError as exc:
            self.outcomes.append(exc)
        else:
            self.outcomes.append(sorted(partitions))


def test_eager_member_can_commit_in_on_partitions_revoked():
    # Before: the member marked itself as rejoining before running onJoinPrepare, so a commit
    # from on_partitions_revoked always failed (CommitFailedError). Kafka's consumer is still
    # Stable there (it becomes PreparingRebalance only when it sends the JoinGroup), and the
    # coordinator accepts the current generation's commit while it prepares the rebalance.
    async def scenario():
        runtime = await serving_runtime(CONFIG)
        router = InProcRouter(runtime)
        listener = CommitOnRevoke()
        a = GroupMember(router, "g", ["t"], listener=listener, **MEMBER)
        listener.member = a
        a.start()
        assert await a.wait_assigned(10) == {("t", 0), ("t", 1)}
        b = GroupMember(router, "g", ["t"], **MEMBER)
        b.start()
        await b.wait_assigned(10)
        assert listener.outcomes == [[("t", 0), ("t", 1)]], listener.outcomes
        assert await a.committed() == {("t", 0): 100, ("t", 1): 101}
        await a.close(leave=False)
        await b.close(leave=False)
        await runtime.close()

    asyncio.run(scenario())


def test_async_commits_land_in_the_order_they_were_made():
    # Before: each commit_async was an independent call; Ray's async actors (and failover
    # retries) do not keep one caller's order, so an older offset could land last and undo
    # a newer commit that had already been acknowledged. Kafka keeps a member's commits in
    # order; so must the member here.
    async def scenario():
        runtime = await serving_runtime(CONFIG)
        m = GroupMember(InProcRouter(runtime, reorder_seed=3), "g", ["t"], **MEMBER)
        m.start()
        await m.wait_assigned(10)
        results: list = []
        tasks = [
            m.commit_async({("t", 0): offset}, callback=results.append) for offset in range(1, 41)
        ]
        await asyncio.gather(*tasks)
        assert results == [None] * 40
        assert await m.committed([("t", 0)]) == {("t", 0): 40}
        await m.close()
        await runtime.close()

    asyncio.run(scenario())


def test_commit_that_finds_the_member_gone_calls_listener_without_deadlock():
    # A commit answered UNKNOWN_MEMBER_ID loses the partitions, which calls the listener
    # (on_partitions_lost defaults to on_partitions_revoked, which commits here): that inner
    # commit must fail fast, not wait behind the outer one.
    async def scenario():
        runtime = await serving_runtime(CONFIG)
        listener = CommitOnRevoke()
        slow_heartbeats = {**MEMBER, "session_timeout_ms": 10_000, "heartbeat_interval_ms": 5_000}
        a = GroupMember(InProcRouter(runtime), "g", ["t"], listener=listener, **slow_heartbeats)
        listener.member = a
        a.start()
        await a.wait_assigned(10)
        left = await runtime.handle(LeaveGroupRequest("g", [MemberIdentity(a.member_id)]))
        assert left.error == Errors.NONE
        with pytest.raises(CommitFailedError) as failed:
            await asyncio.wait_for(a.commit({("t", 0): 5}), 5)
        assert failed.value.error == Errors.UNKNOWN_MEMBER_ID
        assert len(listener.outcomes) == 1 and isinstance(listener.outcomes[0], CommitFailedError)
        await a.close(leave=False)
        await runtime.close()

    asyncio.run(scenario())


class Calls(RebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset]] = []

    def on_partitions_revoked(self, partitions):
        self.calls.append(("revoked", frozenset(partitions)))

    def on_partitions_assigned(self, partitions):
        self.calls.append(("assigned", frozenset(partitions)))


def test_cooperative_member_hears_of_every_rebalance_even_when_nothing_is_added():
    # Kafka's consumer calls onPartitionsAssigned after every rebalance, with the partitions
    # added (possibly none): a member that only gave partitions up still learns it is done.
    async def scenario():
        runtime = await serving_runtime(CONFIG)
        router = InProcRouter(runtime)
        options = {**MEMBER, "assignors": ("cooperative-sticky",)}
        first_calls = Calls()
        first = GroupMember(router, "g", ["t"], listener=first_calls, **options)
        first.start()
        assert await first.wait_assigned(10) == {("t", 0), ("t", 1)}
        second = GroupMember(router, "g", ["t"], **options)
        second.start()
        for _ in range(500):  # both settled on one partition each
            if (
                len(first.assignment) == 1
                and len(second.assignment) == 1
                and first.stable
                and second.stable
            ):
                break
            await asyncio.sleep(0.01)
        assert len(first.assignment) == 1
        revoked = [c for c in first_calls.calls if c[0] == "revoked"]
        assert len(revoked) == 1 and len(revoked[0][1]) == 1
        # after the revoking rebalance and after the follow-up one: nothing added either time
        assert first_calls.calls.count(("assigned", frozenset())) >= 2
        await second.close()
        await first.close()
        await runtime.close()

    asyncio.run(scenario())


def test_sync_answer_naming_another_protocol_is_fatal():
    # KIP-559: the member checks the protocol a SyncGroup answer names against the one its
    # join chose; a mismatch means the answer is not about its generation.
    def tamper(request, response):
        if isinstance(request, SyncGroupRequest):
            return replace(response, protocol_name="roundrobin")
        return response

    async def scenario():
        runtime = await serving_runtime(CONFIG)
        m = GroupMember(InProcRouter(runtime, tamper=tamper), "g", ["t"], **MEMBER)
        m.start()
        with pytest.raises(GroupMemberError) as stopped:
            await m.wait_assigned(10)
        assert stopped.value.error == Errors.INCONSISTENT_GROUP_PROTOCOL
        await m.close(leave=False)
        await runtime.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("kind", ["JoinGroupRequest", "SyncGroupRequest", "HeartbeatRequest"])
def test_an_unexpected_error_stops_the_member(kind):
    # Kafka's consumer raises on an error its handler does not name, rather than retrying it
    # forever; UNSUPPORTED_FOR_MESSAGE_FORMAT is one no group call of ours can be answered with.
    def tamper(request, response):
        if type(request).__name__ == kind:
            return replace(response, error=Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT)
        return response

    async def scenario():
        runtime = await serving_runtime(CONFIG)
        m = GroupMember(InProcRouter(runtime, tamper=tamper), "g", ["t"], **MEMBER)
        m.start()
        try:
            await m.wait_assigned(10)  # a heartbeat only fails once assigned
            for _ in range(300):
                if not m.stable:
                    break
                await asyncio.sleep(0.01)
            await m.wait_assigned(0.01)
        except GroupMemberError as stopped:
            assert stopped.error == Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT
        else:
            raise AssertionError("the member kept going")
        assert not m.stable
        await m.close(leave=False)
        await runtime.close()

    asyncio.run(scenario())
