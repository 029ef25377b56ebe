"""``GroupMember(..., group_protocol="consumer")`` (KIP-848) over real actor handles on a real
local Ray: members join and leave and partitions move without ever having two owners (each
revocation is seen before another member is given the partition); commits carry the member
epoch; a member fenced by its session timeout loses its partitions and rejoins; a
consumer-protocol member and a classic one share a group (upgrade, then downgrade); a regex
subscription through ``SyncGroupMember``; bad arguments are refused before anything is sent."""

from __future__ import annotations

import asyncio

import pytest
import ray

from groupcoord.actors import (
    AdminClient,
    CommitFailedError,
    GroupMember,
    RebalanceListener,
    SyncGroupMember,
    start,
    stop,
)
from groupcoord.coordinator import CoordinatorConfig, Errors

from .helpers import wait_until

TOPIC, PARTITIONS = "kc", 6
EVERYTHING = frozenset((TOPIC, p) for p in range(PARTITIONS))
SESSION_MS = 3_000
# The consumer-group timers short (the member heartbeats at the coordinator's interval).
CONFIG = CoordinatorConfig(
    group_min_session_timeout_ms=100,
    group_initial_rebalance_delay_ms=0,
    consumer_group_session_timeout_ms=SESSION_MS,
    consumer_group_heartbeat_interval_ms=100,
)
WAIT_S = 30


@pytest.fixture(scope="module")
def deployment(ray_session, tmp_path_factory):
    d = start(
        2, str(tmp_path_factory.mktemp("logs-kipclient")), namespace="gc-kipclient", config=CONFIG
    )
    d.wait_ready(60)
    ray.get(d.router.create_topic.remote(TOPIC, PARTITIONS))
    yield d
    stop(d)


class Log(RebalanceListener):
    """Every listener call of every member, in the order they happened (one event loop)."""

    def __init__(self, events: list, name: str) -> None:
        self.events, self.name = events, name

    def on_partitions_revoked(self, partitions):
        self.events.append((self.name, "revoked", partitions))

    def on_partitions_assigned(self, partitions):
        self.events.append((self.name, "assigned", partitions))

    def on_partitions_lost(self, partitions):
        self.events.append((self.name, "lost", partitions))


def single_owner(events) -> dict:
    """Replay the listener calls: a partition is assigned only once its previous owner revoked
    or lost it. Returns the final owners."""
    owner: dict = {}
    for name, kind, partitions in events:
        for tp in partitions:
            if kind == "assigned":
                assert owner.get(tp) is None, f"{tp} assigned to {name} while {owner[tp]} owns it"
                owner[tp] = name
            else:
                assert owner.get(tp) == name, f"{name} gave up {tp}, owned by {owner.get(tp)}"
                owner[tp] = None
    return {tp: name for tp, name in owner.items() if name is not None}


def consumer(router, group: str, events: list, name: str, **kwargs) -> GroupMember:
    member = GroupMember(
        router, group, [TOPIC], group_protocol="consumer", listener=Log(events, name), **kwargs
    )
    member.start()
    return member


def covered(*members) -> bool:
    owned = [tp for m in members for tp in m.assignment]
    return all(m.stable for m in members) and len(owned) == len(set(owned)) == PARTITIONS


def test_members_join_and_leave_without_two_owners(deployment):
    async def scenario():
        events: list = []
        a = consumer(deployment.router, "kc-three", events, "a", server_assignor="range")
        assert await a.wait_assigned(WAIT_S) == EVERYTHING
        b = consumer(deployment.router, "kc-three", events, "b")
        c = consumer(deployment.router, "kc-three", events, "c")
        # wait_assigned returns once each holds its whole target: nothing is still coming.
        owned = [await m.wait_assigned(WAIT_S) for m in (b, c)]
        await wait_until(lambda: covered(a, b, c), WAIT_S, "three owners")
        assert all(len(m.assignment) == 2 for m in (a, b, c)), owned
        (described,) = await AdminClient(deployment.router).describe_groups(["kc-three"])
        assert (described.group_type, described.protocol) == ("consumer", "range")
        assert {m.member_id: m.member_epoch for m in described.members} == {
            m.member_id: m.member_epoch for m in (a, b, c)
        }
        await a.close()
        await wait_until(lambda: covered(b, c), WAIT_S, "two owners after a left")
        await b.close()
        await wait_until(lambda: c.assignment == EVERYTHING and c.stable, WAIT_S, "c alone")
        await c.close()
        assert single_owner(events) == {}
        assert ("a", "revoked", a.history[-1][1]) in events  # a gave its last ones back
        group = await AdminClient(deployment.router).describe_groups(["kc-three"])
        assert group[0].state == "Empty"

    asyncio.run(scenario())


def test_a_static_member_keeps_its_partitions_for_its_next_incarnation(deployment):
    async def scenario():
        events: list = []
        first = consumer(deployment.router, "kc-static", events, "s1", group_instance_id="i")
        await first.wait_assigned(WAIT_S)
        other = consumer(deployment.router, "kc-static", events, "d")
        await wait_until(lambda: covered(first, other), WAIT_S, "two owners")
        kept, seen = first.assignment, len(events)
        await first.close()  # epoch -2: its partitions wait for instance "i"
        (described,) = await AdminClient(deployment.router).describe_groups(["kc-static"])
        assert [
            (m.group_instance_id, m.member_epoch) for m in described.members if m.group_instance_id
        ] == [("i", -2)]
        second = consumer(deployment.router, "kc-static", events, "s2", group_instance_id="i")
        assert await second.wait_assigned(WAIT_S) == kept
        assert second.member_id != first.member_id
        # Nothing moved meanwhile: the other member was neither given nor asked for anything.
        assert [e for e in events[seen:] if e[0] == "d"] == []
        await asyncio.gather(second.close(), other.close())
        assert single_owner(events) == {}

    asyncio.run(scenario())


def test_commits_carry_the_member_epoch(deployment):
    async def scenario():
        events: list = []
        m = consumer(deployment.router, "kc-commit", events, "m")
        await m.wait_assigned(WAIT_S)
        n = consumer(deployment.router, "kc-commit", events, "n")  # m's epoch goes up
        await wait_until(lambda: covered(m, n), WAIT_S, "two owners")
        await n.close()
        await wait_until(lambda: m.stable and m.assignment == EVERYTHING, WAIT_S, "m alone")
        await m.commit({(TOPIC, 0): 10, (TOPIC, 1): 11})
        assert await m.committed([(TOPIC, 0), (TOPIC, 1), (TOPIC, 2)]) == {
            (TOPIC, 0): 10,
            (TOPIC, 1): 11,
            (TOPIC, 2): -1,
        }
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        m.commit_async({(TOPIC, 2): 12}, callback=done.set_result)
        assert await asyncio.wait_for(done, WAIT_S) is None
        # As if the answer that moved the epoch on had been lost: the commit is refused with
        # the coordinator's STALE_MEMBER_EPOCH, and nothing is stored.
        epoch = m.member_epoch
        m.member_epoch -= 1
        with pytest.raises(CommitFailedError, match="STALE_MEMBER_EPOCH") as refused:
            await m.commit({(TOPIC, 0): 99})
        assert refused.value.error == Errors.STALE_MEMBER_EPOCH
        # The next heartbeats set the member right (previous epoch accepted, or fenced and
        # rejoined); then it commits again.
        await wait_until(
            lambda: m.stable and m.member_epoch >= epoch, WAIT_S, "the member back in its epoch"
        )
        await m.commit({(TOPIC, 0): 13})
        assert (await m.committed([(TOPIC, 0)]))[(TOPIC, 0)] == 13
        await m.close()
        with pytest.raises(CommitFailedError):
            await m.commit({(TOPIC, 0): 14})
        assert (await m.committed([(TOPIC, 0)]))[(TOPIC, 0)] == 13

    asyncio.run(scenario())


class SlowFirstAssignment(Log):
    """Its first on_partitions_assigned outlasts the session (the member stops heartbeating,
    as a stuck consumer does) and then tries to commit."""

    def __init__(self, events, name, admin: AdminClient, group: str) -> None:
        super().__init__(events, name)
        self.admin, self.group, self.first = admin, group, True
        self.member: GroupMember | None = None
        self.commit_error: BaseException | None = None

    async def on_partitions_assigned(self, partitions):
        super().on_partitions_assigned(partitions)
        if not self.first:
            return
        self.first = False
        gone = False
        for _ in range(WAIT_S * 10):  # until the coordinator's session timer removed it
            (described,) = await self.admin.describe_groups([self.group])
            if gone := not described.members:
                break
            await asyncio.sleep(0.1)
        assert gone
        try:
            await self.member.commit({tp: 1 for tp in partitions})
        except CommitFailedError as exc:
            self.commit_error = exc


def test_a_fenced_member_loses_its_partitions_and_rejoins(deployment):
    async def scenario():
        events: list = []
        admin = AdminClient(deployment.router)
        listener = SlowFirstAssignment(events, "m", admin, "kc-fenced")
        m = GroupMember(
            deployment.router, "kc-fenced", [TOPIC], group_protocol="consumer", listener=listener
        )
        listener.member = m
        member_id = m.member_id
        m.start()
        assert await m.wait_assigned(WAIT_S) == EVERYTHING
        assert [kind for _, kind, _ in events] == ["assigned", "lost", "assigned"]
        assert events[1][2] == EVERYTHING
        assert listener.commit_error is not None
        assert listener.commit_error.error == Errors.UNKNOWN_MEMBER_ID
        assert m.member_id == member_id and m.member_epoch > 0
        (described,) = await admin.describe_groups(["kc-fenced"])
        assert [d.member_id for d in described.members] == [member_id]
        await m.close()

    asyncio.run(scenario())


def test_a_consumer_and_a_classic_member_share_a_group(deployment):
    async def scenario():
        events: list = []
        classic = GroupMember(
            deployment.router,
            "kc-mixed",
            [TOPIC],
            topic_partitions={TOPIC: PARTITIONS},
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=100,
            listener=Log(events, "classic"),
        )
        classic.start()
        assert await classic.wait_assigned(WAIT_S) == EVERYTHING
        # The consumer-protocol member upgrades the classic group; the coordinator assigns both.
        member = consumer(deployment.router, "kc-mixed", events, "consumer")
        await wait_until(lambda: covered(classic, member), WAIT_S, "both owning partitions")
        assert classic.assignment and member.assignment
        (described,) = await AdminClient(deployment.router).describe_groups(["kc-mixed"])
        assert described.group_type == "consumer" and len(described.members) == 2
        # When it leaves, the classic member is left alone and gets everything (downgrade).
        await member.close()
        await wait_until(
            lambda: classic.stable and classic.assignment == EVERYTHING, WAIT_S, "classic alone"
        )
        (described,) = await AdminClient(deployment.router).describe_groups(["kc-mixed"])
        assert described.group_type == "classic"
        await classic.close()
        assert single_owner(events) == {}

    asyncio.run(scenario())


def test_a_regex_subscription_through_the_blocking_member(deployment):
    for name, count in (("kcr-a", 2), ("kcr-b", 1), ("other-kcr", 1)):
        ray.get(deployment.router.create_topic.remote(name, count))
    member = SyncGroupMember(
        deployment.router, "kc-regex", group_protocol="consumer", topic_regex="kcr-.*"
    )
    try:
        assert member.wait_assigned(WAIT_S) == {("kcr-a", 0), ("kcr-a", 1), ("kcr-b", 0)}
        member.commit({("kcr-b", 0): 7})
        assert member.committed([("kcr-b", 0)]) == {("kcr-b", 0): 7}
    finally:
        member.close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(group_protocol="foo"), "group_protocol must be one of classic, consumer"),
        (dict(group_protocol=None), "group_protocol must be one of"),
        (dict(group_protocol="consumer", assignors=["range"]), "assignors: not an option"),
        (dict(group_protocol="consumer", session_timeout_ms=10_000), "session_timeout_ms"),
        (dict(group_protocol="consumer", heartbeat_interval_ms=100), "heartbeat_interval_ms"),
        (dict(group_protocol="consumer", topic_partitions={TOPIC: 6}), "topic_partitions"),
        (dict(topic_partitions={TOPIC: 6}, topic_regex="k.*"), "topic_regex: not an option"),
        (dict(topic_partitions={TOPIC: 6}, server_assignor="range"), "server_assignor"),
        (dict(), "needs topic_partitions"),
        (dict(group_protocol="consumer", server_assignor="sticky"), "server_assignor must be"),
        (dict(group_protocol="consumer", topic_regex="k("), "not valid RE2"),
        (dict(group_protocol="consumer", topic_regex="k.*"), "exactly one of them"),
        (dict(group_protocol="consumer", rebalance_timeout_ms=0), "rebalance_timeout_ms"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_sent(deployment, kwargs, message):
    with pytest.raises(ValueError, match=message):
        GroupMember(deployment.router, "kc-bad", [TOPIC], **kwargs)
    with pytest.raises(ValueError, match=message):
        SyncGroupMember(deployment.router, "kc-bad", [TOPIC], **kwargs)
    with pytest.raises(ValueError, match="a list of topics"):
        GroupMember(deployment.router, "kc-bad", TOPIC, group_protocol="consumer")
    listed = asyncio.run(AdminClient(deployment.router).list_groups())
    assert "kc-bad" not in {g.group_id for g in listed}
