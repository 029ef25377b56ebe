"""Members committing through a multi-node deployment while nodes are lost: what every
multi-node test checks afterwards (acknowledged commits read back, no partition owned twice
in a generation, every member Stable again by itself)."""

from __future__ import annotations

import asyncio
import itertools
import time
import traceback
from collections.abc import Callable

from groupcoord.actors import AdminClient, Deployment, start, stop
from groupcoord.coordinator import partition_for
from tests.actors.helpers import committer, member, no_double_ownership, settled, wait_until

TOPIC_PARTITIONS = 4
PARTITIONS_DEFAULT = 3  # coordinator partitions of the multi-node tests
MEMBERS_PER_GROUP = 2


# A stopped committer ends after its commit in flight, which the channel bounds (60 s).
COMMITTERS_STOP_S = 90.0


def groups_covering(num_partitions: int, prefix: str) -> list[str]:
    """One group id per coordinator partition (group i lands on partition i)."""
    chosen: dict[int, str] = {}
    for i in itertools.count():
        group = f"{prefix}-{i}"
        chosen.setdefault(partition_for(group, num_partitions), group)
        if len(chosen) == num_partitions:
            return [chosen[p] for p in range(num_partitions)]
    raise AssertionError("unreachable")


def start_placed(log_dir: str, namespace: str, placed: Callable, **options):
    """Start a deployment whose placement ``placed(deployment, infos)`` accepts. Placement is a soft
    affinity (actors/placement.py) that Ray does not always honour on a loaded machine, and a
    test about losing nodes needs partitions on them: start again (same log root, same
    namespace) up to 5 times."""
    for attempt in range(5):
        deployment = start(PARTITIONS_DEFAULT, log_dir, namespace=namespace, **options)
        infos = deployment.wait_ready(60)
        if placed(deployment, infos) or attempt == 4:
            return deployment, infos
        stop(deployment)
    raise AssertionError("unreachable")


def wait_serving(deployment: Deployment, predicate: Callable[[list[dict]], bool], timeout_s=90):
    """Poll every partition's info() until ``predicate(infos)`` holds with all serving."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            infos = deployment.infos()
        except Exception:  # a partition between incarnations: ask again
            infos = None
        if infos and all(i["state"] == "serving" for i in infos) and predicate(infos):
            return infos
        if time.monotonic() > deadline:
            raise AssertionError(f"partitions not back in {timeout_s}s: {infos}")
        time.sleep(0.1)


async def commit_through(deployment: Deployment, groups: list[str], disrupt) -> dict:
    """Members of ``groups`` commit while ``disrupt()`` (blocking, run in a thread) breaks
    things and returns once the partitions serve again; then check what every test checks.
    Returns the acknowledged offsets per group."""
    topics = {"t": TOPIC_PARTITIONS}
    members = {
        g: [member(deployment.router, g, topics=topics) for _ in range(MEMBERS_PER_GROUP)]
        for g in groups
    }
    for g, ms in members.items():
        await wait_until(lambda ms=ms: settled(ms, TOPIC_PARTITIONS), 60, f"{g} settled")
    counter = itertools.count(1)
    attempted: dict = {g: {} for g in groups}
    acked: dict = {g: {} for g in groups}
    stop_event = asyncio.Event()
    tasks = [
        asyncio.create_task(committer(m, counter, attempted[g], acked[g], stop_event))
        for g, ms in members.items()
        for m in ms
    ]
    await asyncio.sleep(1.0)
    before = {g: dict(a) for g, a in acked.items()}
    await asyncio.to_thread(disrupt)
    await asyncio.sleep(1.0)  # commits reach the new incarnations
    stop_event.set()
    done, stuck = await asyncio.wait(tasks, timeout=COMMITTERS_STOP_S)
    for task in done:
        task.result()  # a committer's own failure fails the test
    if stuck:  # say where each hangs: a commit must be bounded by the channel's timeout
        stacks = ["".join(traceback.format_stack(t.get_stack()[-1])) for t in stuck]
        raise AssertionError(f"{len(stuck)} committers still busy: {stacks}")
    everyone = [m for ms in members.values() for m in ms]
    for g, ms in members.items():
        await wait_until(
            lambda ms=ms: settled(ms, TOPIC_PARTITIONS), 90, f"{g} back to Stable by itself"
        )
    no_double_ownership(everyone)
    admin = AdminClient(deployment.router)
    for g in groups:
        assert acked[g] != before[g], f"{g}: nothing acknowledged after the disruption"
        fetched = await admin.fetch_offsets(g)
        for tp, offset in acked[g].items():
            # Unacknowledged commits may have landed too, but never an offset nobody sent.
            assert fetched[tp] >= offset, (g, tp, fetched[tp], offset)
            assert fetched[tp] in attempted[g][tp]
    for m in everyone:
        await m.close()
    return acked
