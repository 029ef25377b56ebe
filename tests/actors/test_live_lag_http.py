"""Live lag over HTTP on a real Ray deployment: members commit through the partition actors,
end offsets come from a plain function (a file the test writes), and Burrow's v3 API, the
Prometheus gauges and the web view (in a real headless Chromium) say what Burrow would."""

from __future__ import annotations

import asyncio
import functools
import json
import socket
import urllib.error
import urllib.request

import pytest
import ray
from playwright.async_api import async_playwright

from groupcoord.actors import start, stop
from groupcoord.actors.http_actor import HTTP_ACTOR_NAME
from groupcoord.actors.http_service import HttpConfig
from groupcoord.actors.live_lag import LagWindowConfig

from .helpers import TEST_CONFIG, member, metric_value, scrape_metrics, wait_restarted
from .lag_sources import file_end_offsets, write_end_offsets

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
pytestmark = pytest.mark.timeout(300)
TOPIC = {"t": 2}
TPS = [("t", 0), ("t", 1)]


@pytest.fixture(scope="module")
def live(ray_session, tmp_path_factory):
    work = tmp_path_factory.mktemp("live-lag")
    ends_path = str(work / "ends.json")
    write_end_offsets(ends_path, {})
    http = HttpConfig(
        cluster="local",
        end_offsets=functools.partial(file_end_offsets, ends_path),
        refresh_interval_s=0.2,
        end_offsets_interval_s=0.2,
        # 10 slots at one commit per 150 ms: a consumer is STOP after ~1.4 s of silence, and a
        # busy machine delaying a live consumer's commits by less than that changes nothing.
        lag_windows=LagWindowConfig(window=10, min_distance_ms=100),
    )
    d = start(1, str(work / "logs"), namespace="gc-live", config=TEST_CONFIG, http=http)
    d.wait_ready(60)
    yield d, ends_path
    stop(d, timeout_s=60)


def get(base: str, path: str) -> tuple[int, dict | str]:
    try:
        with urllib.request.urlopen(base + path, timeout=10) as r:
            body, code, kind = r.read(), r.status, r.headers["Content-Type"]
    except urllib.error.HTTPError as e:
        body, code, kind = e.read(), e.code, e.headers["Content-Type"]
    return code, json.loads(body) if kind == "application/json" else body.decode()


def raw(address: str, data: bytes) -> bytes:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


PARTITION_KEYS = {
    "topic",
    "partition",
    "owner",
    "client_id",
    "status",
    "start",
    "end",
    "current_lag",
    "complete",
}


async def _page_rows(page) -> dict:
    return await page.evaluate(
        """() => {
        const text = (row, cls) => row.querySelector('.' + cls).textContent;
        const groups = {};
        for (const r of document.querySelectorAll('tr.group-row')) {
          groups[r.dataset.group] = {state: text(r, 'state'), status: text(r, 'status'),
                                     totallag: text(r, 'totallag')};
        }
        const parts = {};
        for (const r of document.querySelectorAll('tr.partition-row')) {
          const points = r.querySelector('svg.sparkline polyline').getAttribute('points');
          parts[`${r.dataset.group}/${r.dataset.partition}`] = {
            lag: text(r, 'lag'), status: text(r, 'pstatus'), offset: text(r, 'offset'),
            sparkline_points: points.trim() ? points.trim().split(' ').length : 0};
        }
        return {groups, parts, renders: Number(document.body.dataset.renders || 0)};
    }"""
    )


def test_burrow_api_web_view_and_metrics_follow_the_commits(live, ray_session):
    deployment, ends_path = live
    base = f"http://{deployment.http}"
    cluster_path = "/v3/kafka/local"

    async def scenario():
        router = deployment.router
        members = {g: member(router, g, topics=TOPIC) for g in ("keeps-up", "stops", "stalls")}
        committer = None
        try:
            for m in members.values():
                assert len(await m.wait_assigned(30)) == 2
            end = {("t", 0): 100, ("t", 1): 200}
            for _ in range(12):  # everyone commits while the topic grows
                end = {tp: o + 10 for tp, o in end.items()}
                write_end_offsets(ends_path, end)
                await members["keeps-up"].commit(end)
                await members["stops"].commit({tp: o - 5 for tp, o in end.items()})
                await members["stalls"].commit({tp: 50 for tp in TPS})
                await asyncio.sleep(0.15)

            async def keep_committing():  # "stops" has stopped; the others go on
                while True:
                    await members["keeps-up"].commit(end)
                    await members["stalls"].commit({tp: 50 for tp in TPS})
                    await asyncio.sleep(0.15)

            committer = asyncio.get_running_loop().create_task(keep_committing())
            await check(members, end)
        finally:
            if committer is not None:
                committer.cancel()
            for m in members.values():
                await m.close(timeout_ms=5_000)

    async def fetch(path: str):  # off the event loop: the members keep committing meanwhile
        return await asyncio.to_thread(get, base, path)

    async def verdicts(groups) -> dict:
        out = {}
        for g in groups:
            code, doc = await fetch(f"{cluster_path}/consumer/{g}/lag")
            out[g] = doc["status"] if code == 200 else None
        return out

    async def check(members, end):
        expected = {"keeps-up": "OK", "stops": "STOP", "stalls": "STALL"}
        latest = {}
        for _ in range(150):
            latest = await verdicts(members)
            if all(
                s is not None and {p["status"] for p in s["partitions"]} == {expected[g]}
                for g, s in latest.items()
            ):
                break
            await asyncio.sleep(0.2)
        else:
            raise AssertionError(f"Burrow verdicts are not {expected}: {latest}")
        keeps, stops, stalls = latest["keeps-up"], latest["stops"], latest["stalls"]
        assert (keeps["status"], keeps["totallag"], keeps["complete"]) == ("OK", 0, 1.0)
        assert [p["current_lag"] for p in stops["partitions"]] == [5, 5]
        assert (stops["status"], stops["totallag"]) == ("ERR", 10)
        assert (stalls["status"], stalls["totallag"]) == (
            "ERR",
            end[("t", 0)] + end[("t", 1)] - 100,
        )
        assert stalls["partition_count"] == 2 and stalls["maxlag"]["partition"] == 1
        for p in keeps["partitions"] + stops["partitions"]:
            assert set(p) == PARTITION_KEYS
            assert set(p["end"]) == {"offset", "timestamp", "observedAt", "lag"}
            assert p["client_id"] == "groupcoord-consumer"  # the owner, from DescribeGroups
        assert stops["partitions"][0]["end"]["offset"] == end[("t", 0)] - 5

        # /status lists only the partitions that are not OK; /lag lists them all.
        code, status = await fetch(f"{cluster_path}/consumer/keeps-up/status")
        assert code == 200 and status["status"]["partitions"] == []
        assert status["status"]["partition_count"] == 2
        code, detail = await fetch(f"{cluster_path}/consumer/stops")
        assert code == 200 and detail["message"] == "consumer detail returned"
        ring = detail["topics"]["t"][0]
        assert len(ring["offsets"]) == 10 and ring["current-lag"] == 5
        assert ring["offsets"][-1]["offset"] == end[("t", 0)] - 5
        code, listed = await fetch(f"{cluster_path}/consumer")
        assert code == 200 and set(members) <= set(listed["consumers"])
        assert (await fetch("/v3/kafka"))[1]["clusters"] == ["local"]
        # burrow-exporter lists topics first, then reads their end offsets.
        assert (await fetch(f"{cluster_path}/topic"))[1]["topics"] == ["t"]
        assert (await fetch(f"{cluster_path}/topic/t"))[1]["offsets"] == [end[tp] for tp in TPS]

        # Prometheus, through Ray's metrics agent: ERR is Burrow's 3, STOP 4.
        for _ in range(60):
            text = await asyncio.to_thread(scrape_metrics, ray_session)
            if (
                metric_value(text, "groupcoord_group_status", group="stops") == 3
                and metric_value(text, "groupcoord_partition_status", group="stops", partition="0")
                == 4
                and metric_value(text, "groupcoord_consumer_lag", group="stops", partition="1") == 5
                and metric_value(text, "groupcoord_group_status", group="keeps-up") == 1
            ):
                break
            await asyncio.sleep(0.5)
        else:
            raise AssertionError("lag gauges not in Prometheus")

        # The web view in a real browser, while two members keep committing.
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(
                executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
            )
            try:
                page = await browser.new_page()
                await page.goto(f"{base}/?refresh=0.5")
                await page.wait_for_function("Number(document.body.dataset.renders || 0) >= 3")
                shown = await _page_rows(page)
            finally:
                await browser.close()
        api = await verdicts(members)
        code, view = await fetch("/groupcoord/v1/groups")
        for g in members:
            state = next(x["state"] for x in view["groups"] if x["group"] == g)
            assert shown["groups"][g] == {
                "state": state,
                "status": api[g]["status"],
                "totallag": str(api[g]["totallag"]),
            }
            for p in api[g]["partitions"]:
                row = shown["parts"][f"{g}/{p['partition']}"]
                assert row["lag"] == str(p["current_lag"])
                assert row["status"] == p["status"]
                assert row["offset"] == str(p["end"]["offset"])
                assert row["sparkline_points"] >= 2
        assert shown["groups"]["keeps-up"]["state"] == "Stable"

    asyncio.run(scenario())


def test_bad_requests_get_burrow_style_errors(live):
    deployment, _ = live
    base = f"http://{deployment.http}"
    assert get(base, "/burrow/admin") == (200, "GOOD")
    code, doc = get(base, "/v3/kafka/nope")
    assert code == 404 and doc["error"] is True and doc["message"] == "cluster module not found"
    assert doc["request"]["url"] == "/v3/kafka/nope"
    code, doc = get(base, "/v3/kafka/local/consumer/no-such-group")
    assert (code, doc["error"], doc["message"]) == (404, True, "cluster or consumer not found")
    code, doc = get(base, "/v3/kafka/local/consumer/no-such-group/status")
    assert (code, doc["error"], doc["status"]["status"]) == (404, False, "NOTFOUND")
    for path in ("/nope", "/v3/kafka/local/broker", "/v3/kafka/local/consumer/g/other", "/v3//x"):
        code, doc = get(base, path)
        assert (code, doc["error"], doc["message"]) == (404, True, "invalid request type"), path
    assert raw(deployment.http, b"POST /v3/kafka HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405")
    assert raw(deployment.http, b"nonsense\r\n\r\n").startswith(b"HTTP/1.1 400")
    huge = b"GET /v3/kafka HTTP/1.1\r\nX: " + b"a" * 20_000 + b"\r\n\r\n"
    assert raw(deployment.http, huge).startswith(b"HTTP/1.1 431")
    # The service is unaffected.
    assert get(base, "/v3/kafka")[0] == 200


def test_a_restarted_service_keeps_its_address(live):
    """Given port 0 it took a free port; restarted by Ray, it asks for that port again, so
    dashboards, scrapers and ``Deployment.http`` keep working."""
    deployment, _ = live
    actor = ray.get_actor(HTTP_ACTOR_NAME, namespace=deployment.namespace)
    pid = ray.get(actor.info.remote())["pid"]
    ray.kill(actor, no_restart=False)
    wait_restarted(lambda: ray.get(actor.info.remote(), timeout=10), pid)
    assert ray.get(actor.address.remote(), timeout=30) == deployment.http
    assert get(f"http://{deployment.http}", "/burrow/admin") == (200, "GOOD")
