"""The demo's script: start everything on an embedded Ray, consume, kill, recover, report.

Phases (each printed as it happens):
1. start 2 partitions on an embedded Ray and 5 consumer actors in two groups
   (cooperative-sticky and range) over a synthetic 8-partition topic; wait for Stable;
2. consume and commit for ``seconds``;
3. kill the partition actor that coordinates ``demo-orders`` (Ray restarts it, it reloads its
   log); measure until it serves again and until every member is Stable on its own, and check
   that no acknowledged commit went backwards;
4. consume again, print Burrow's verdict on each group from the live HTTP service (its web
   view and Burrow API are printed at the start and stay up while the demo runs), stop the
   consumers, print groups, members, assignments and offsets with lag.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request

import ray

from groupcoord.coordinator import CoordinatorConfig, partition_for

from .admin import AdminClient
from .bootstrap import ensure_ray, start, stop
from .demo import DemoConsumer, SyntheticTopic
from .http_service import HttpConfig
from .output import show_descriptions

DEMO_NAMESPACE = "groupcoord-demo"
DEMO_GROUPS = (("demo-orders", 3, "cooperative-sticky"), ("demo-audit", 2, "range"))
SESSION_MS = 3_000
COMMIT_INTERVAL_MS = 200
WAIT_LIMIT_S = 60.0


def _wait(predicate, what: str, limit_s: float = WAIT_LIMIT_S) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > limit_s:
            raise RuntimeError(f"demo: gave up waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - started


def _statuses(consumers) -> list[dict]:
    return ray.get([c.status.remote() for _, c in consumers])


def _all_stable(consumers, group: str | None = None) -> bool:
    picked = [(g, c) for g, c in consumers if group in (None, g)]
    statuses = _statuses(picked)
    by_group: dict[str, set] = {}
    for (g, _), s in zip(picked, statuses, strict=True):
        if not s["stable"]:
            return False
        by_group.setdefault(g, set()).add(s["generation"])
    return all(len(gens) == 1 for gens in by_group.values())


def run_demo(log_dir: str, seconds: float, out) -> SyntheticTopic:
    """Run the demo against logs in ``log_dir``; returns the synthetic topic it consumed."""
    started_ray = ensure_ray(None, DEMO_NAMESPACE)
    config = CoordinatorConfig(
        group_min_session_timeout_ms=100, group_initial_rebalance_delay_ms=500
    )
    topic = SyntheticTopic("events", 8, 50, time.time())
    http = HttpConfig(end_offsets=topic.end_offsets, end_offsets_interval_s=1.0)
    deployment = start(2, log_dir, namespace=DEMO_NAMESPACE, config=config, http=http)
    try:
        return _run(deployment, topic, seconds, out)
    finally:
        stop(deployment)
        if started_ray:
            ray.shutdown()


def _run(deployment, topic: SyntheticTopic, seconds: float, out) -> SyntheticTopic:
    out.note(f"[1/4] coordinator: 2 partition actors, logs in {deployment.log_dir}")
    out.note(
        f"      web view: http://{deployment.http}/ ; Burrow API: "
        f"http://{deployment.http}/v3/kafka/groupcoord/consumer/demo-orders/lag"
    )
    deployment.wait_ready(WAIT_LIMIT_S)
    consumers = [
        (
            group,
            DemoConsumer.remote(
                deployment.router, group, topic, assignor, SESSION_MS, COMMIT_INTERVAL_MS
            ),
        )
        for group, count, assignor in DEMO_GROUPS
        for _ in range(count)
    ]
    took = _wait(lambda: _all_stable(consumers), "the groups to become Stable")
    out.note(
        f"      {len(consumers)} consumer actors in {len(DEMO_GROUPS)} groups are Stable "
        f"after {took:.1f}s"
    )
    _show_members(out, consumers, "assignments", "assignments before the failure")

    out.note(f"[2/4] consuming and committing for {seconds:.0f}s")
    time.sleep(seconds)
    admin = AdminClient(deployment.router)
    before = asyncio.run(admin.fetch_offsets("demo-orders"))

    victim = partition_for("demo-orders", deployment.num_partitions)
    handle = deployment.partitions()[victim]
    old = ray.get(handle.info.remote())
    out.note(
        f"[3/4] killing partition actor {victim} (pid {old['pid']}, epoch {old['epoch']}) "
        f"that coordinates demo-orders"
    )
    killed_at = time.monotonic()
    ray.kill(handle, no_restart=False)

    def serving_again() -> bool:
        try:
            info = ray.get(handle.info.remote(), timeout=5)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return False
        return info["state"] == "serving" and info["epoch"] > old["epoch"]

    _wait(serving_again, "the partition to serve again")
    serving_s = time.monotonic() - killed_at
    _wait(lambda: _all_stable(consumers, "demo-orders"), "demo-orders to be Stable again")
    stable_s = time.monotonic() - killed_at
    new = ray.get(handle.info.remote())
    after = asyncio.run(admin.fetch_offsets("demo-orders"))
    regressions = [tp for tp, o in before.items() if after.get(tp, -1) < o]
    out.show(
        "recovery",
        "recovery after the kill",
        [
            {
                "partition": victim,
                "old_pid": old["pid"],
                "new_pid": new["pid"],
                "old_epoch": old["epoch"],
                "new_epoch": new["epoch"],
                "serving_after_s": round(serving_s, 2),
                "members_stable_after_s": round(stable_s, 2),
                "acknowledged_offsets_kept": not regressions,
            }
        ],
        (
            "partition",
            "old_pid",
            "new_pid",
            "old_epoch",
            "new_epoch",
            "serving_after_s",
            "members_stable_after_s",
            "acknowledged_offsets_kept",
        ),
    )
    if regressions:
        raise RuntimeError(f"demo: committed offsets went backwards for {regressions}")

    out.note(f"[4/4] consuming for {seconds:.0f}s more, then stopping the consumers")
    time.sleep(seconds)
    _show_members(out, consumers, "consumers", "consumers")
    _show_burrow(out, deployment.http)
    show_descriptions(
        out,
        asyncio.run(
            admin.describe_groups(
                [g for g, _, _ in DEMO_GROUPS],
                end_offsets=lambda tps: {tp: topic.end_offset(*tp) for tp in tps},
            )
        ),
    )
    ray.get([c.stop.remote() for _, c in consumers])
    groups = asyncio.run(admin.list_groups())
    out.show(
        "listed",
        "groups after the consumers left (ListGroups)",
        [{"group": g.group_id, "state": g.group_state, "type": g.protocol_type} for g in groups],
        ("group", "state", "type"),
    )
    return topic


def _show_members(out, consumers, key: str, title: str) -> None:
    rows = []
    for (group, _), s in zip(consumers, _statuses(consumers), strict=True):
        rows.append(
            {
                "group": group,
                "member": s["member_id"][-12:],
                "generation": s["generation"],
                "leader": "yes" if s["leader"] else "",
                "partitions": ",".join(f"{t}-{p}" for t, p in s["assignment"]),
                "commits": s["commits"],
                "failed": s["failed_commits"],
                "retries": s["retries"],
            }
        )
    out.show(
        key,
        title,
        rows,
        ("group", "member", "generation", "leader", "partitions", "commits", "failed", "retries"),
    )


def _show_burrow(out, http: str) -> None:
    """Burrow's verdict on each demo group, read from the live HTTP service's API."""
    rows = []
    for group, _, _ in DEMO_GROUPS:
        url = f"http://{http}/v3/kafka/groupcoord/consumer/{group}/lag"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                status = json.load(response)["status"]
        except urllib.error.HTTPError as error:  # 404: NOTFOUND, still Burrow's document
            status = json.load(error)["status"]
        rows.append(
            {
                "group": group,
                "status": status["status"],
                "total_lag": status["totallag"],
                "partitions": status["partition_count"],
                "complete": round(status["complete"], 2),
            }
        )
    out.show(
        "burrow",
        "Burrow's verdict (live, GET /v3/kafka/groupcoord/consumer/<group>/lag)",
        rows,
        ("group", "status", "total_lag", "partitions", "complete"),
    )
