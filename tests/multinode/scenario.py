"""Members committing through a multi-node deployment while nodes are lost: what every
multi-node test checks afterwards (acknowledged commits read back, no partition owned twice
in a generation, every member Stable again by itself)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

from groupcoord.actors import AdminClient, Deployment, start, stop
from groupcoord.coordinator import partition_for
from tests.actors.helpers import committer, member, no_double_ownership, settled, wait_until

TOPIC_PARTITIONS = 4
PARTITIONS_DEFAULT = 3  # coordinator partitions of the multi-node tests
MEMBERS_PER_GROUP = 2


# Each phase after the disruption has its own bound, and all of them fit in the scenario's
# pytest timeout (300 s): a phase that overruns fails naming itself, each member's state and
# every task's stack. A stopped committer ends after its commit in flight, which the channel
# bounds (60 s).
COMMITTERS_STOP_S = 70.0
SETTLE_S = 90.0  # every group back to Stable by itself
READ_BACK_S = 45.0  # every group's offsets fetched and every member closed


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


def _state_of(members: dict[str, list]) -> str:
    lines = []
    for g, ms in members.items():
        for m in ms:
            lines.append(
                f"{g} {m.member_id or '-'}: stable={m.stable} "
                f"generation={getattr(m, 'generation_id', None)} owns={sorted(m.assignment)} "
                f"partition={m.channel.partition} discoveries={m.channel.discoveries} "
                f"retries={m.channel.retries}"
            )
    return "\n".join(lines)


def _task_stacks() -> str:
    """Every task's chain of awaits, innermost last, down to the future it waits on."""
    out = []
    for task in asyncio.all_tasks():
        lines, awaited = [task.get_name()], task.get_coro()
        for _ in range(50):  # a bound: chains are short
            frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
            if frame is None:
                lines.append(f"  waits on {awaited!r:.200}")
                break
            lines.append(f"  {frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")
            awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
        out.append("\n".join(lines))
    return "\n".join(out)


async def _within(what: str, members: dict[str, list], timeout_s: float, awaitable):
    task = asyncio.ensure_future(awaitable)
    await asyncio.wait({task}, timeout=timeout_s)
    if not task.done():  # the stacks first: cancelling unwinds them
        stacks = _task_stacks()
        task.cancel()
        raise AssertionError(
            f"{what}: not done in {timeout_s:.0f}s\nmembers:\n{_state_of(members)}\n"
            f"tasks:\n{stacks}"
        )
    return task.result()


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
    await _within("stopping the committers", members, COMMITTERS_STOP_S, asyncio.gather(*tasks))
    everyone = [m for ms in members.values() for m in ms]

    async def all_settled() -> None:
        await asyncio.gather(
            *(
                wait_until(lambda ms=ms: settled(ms, TOPIC_PARTITIONS), SETTLE_S + 1, g)
                for ms in members.values()
            )
        )

    await _within("every group back to Stable by itself", members, SETTLE_S, all_settled())
    no_double_ownership(everyone)

    async def read_back() -> None:
        admin = AdminClient(deployment.router)
        for g in groups:
            assert acked[g] != before[g], f"{g}: nothing acknowledged after the disruption"
            fetched = await admin.fetch_offsets(g)
            print(f"{time.monotonic():.1f} fetched {g}")  # where a slow read-back spends it
            for tp, offset in acked[g].items():
                # Unacknowledged commits may have landed too, but never an offset nobody sent.
                assert fetched[tp] >= offset, (g, tp, fetched[tp], offset)
                assert fetched[tp] in attempted[g][tp]
        for m in everyone:
            await m.close()
            print(f"{time.monotonic():.1f} closed {m.member_id}")

    await _within("reading the offsets back and closing", members, READ_BACK_S, read_back())
    return acked
