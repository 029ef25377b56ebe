"""Live lag without Ray: Burrow's window filling and rules online, the partition's bounded
tracker, Burrow's JSON answers for a hand-built view, and the service's end-offset sampling
against sources that fail, hang or answer nonsense."""

from __future__ import annotations

import asyncio

import pytest

from groupcoord.actors.burrow_api import GroupView, LiveView, MemberView, route
from groupcoord.actors.http_service import HttpConfig, LagService, valid_end_offsets
from groupcoord.actors.live_lag import LagTracker, LagWindowConfig, WindowSnapshot
from groupcoord.coordinator import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    Errors,
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
)
from groupcoord.coordinator.burrow import CommitPoint, CommitWindow, Status, evaluate_window
from groupcoord.coordinator.messages import DeletableGroupResult

from .lag_sources import failing_end_offsets, hanging_end_offsets


def commit(group: str, offsets: dict, errors: dict | None = None):
    request = OffsetCommitRequest(
        group,
        1,
        "m",
        [OffsetCommitRequestPartition(t, p, o) for (t, p), o in offsets.items()],
    )
    errors = errors or {}
    response = OffsetCommitResponse(
        [OffsetCommitResponsePartition(t, p, errors.get((t, p), Errors.NONE)) for t, p in offsets]
    )
    return request, response


def test_commit_window_fills_slots_as_burrows_storage_does():
    w = CommitWindow(window=3, min_distance_ms=1_000)
    w.add(10, 0, None)
    w.add(12, 400, 3)  # within min-distance: takes the slot's offset and lag, keeps its time
    assert w.points() == [CommitPoint(12, 0, 3, 400)]
    for i, t in enumerate((1_000, 2_000, 3_000)):
        w.add(20 + i, t, 1)
    assert [p.offset for p in w.points()] == [20, 21, 22]  # the oldest slot went
    with pytest.raises(ValueError, match="window"):
        CommitWindow(window=0)
    with pytest.raises(ValueError, match="min_distance"):
        CommitWindow(min_distance_ms=-1)


def test_unknown_lags_are_skipped_as_burrow_skips_null_lags():
    def window(lags):
        return [CommitPoint(10 * i, 1_000 * i, lag) for i, lag in enumerate(lags)]

    assert evaluate_window(window([None, 5, None, 6]), 6, 4_000) == Status.WARN
    assert evaluate_window(window([None, 6, None, 5]), 5, 4_000) == Status.OK
    assert evaluate_window(window([5, 6]), None, 99_000) == Status.OK  # unknown now: not judged


def test_tracker_keeps_committed_partitions_with_lag_at_commit_time_and_stays_bounded():
    tracker = LagTracker(LagWindowConfig(window=2, min_distance_ms=0, max_windows=2))
    tracker.committed(*commit("g", {("t", 0): 5}), 1_000)
    assert tracker.topic_partitions() == [("t", 0)]
    assert tracker.observe_end_offsets({("t", 0): 9, ("t", 1): 4, ("x", 0): "bad"}) == 1
    request, response = commit(
        "g", {("t", 0): 7, ("t", 1): 3}, {("t", 1): Errors.REBALANCE_IN_PROGRESS}
    )
    tracker.committed(request, response, 2_000)
    [snap] = tracker.snapshot()
    assert snap.points == [CommitPoint(5, 1_000, None, 1_000), CommitPoint(7, 2_000, 2, 2_000)]
    assert (snap.end_offset, snap.recent_ends) == (9, [9])
    tracker.committed(*commit("h", {("u", 0): 1}), 3_000)
    tracker.committed(*commit("i", {("u", 0): 1}), 4_000)  # a third window: g's goes
    assert [(s.group_id, s.topic) for s in tracker.snapshot()] == [("h", "u"), ("i", "u")]
    assert tracker.evicted == 1 and tracker.observe_end_offsets({("t", 0): 10}) == 0
    deleted = DeleteGroupsResponse([DeletableGroupResult("h", Errors.NONE)])
    tracker.deleted(DeleteGroupsRequest(["h"]), deleted)
    assert [s.group_id for s in tracker.snapshot()] == ["i"]
    with pytest.raises(ValueError, match="max_windows"):
        LagWindowConfig(max_windows=0)


def test_tracker_pairs_answers_with_requests_by_partition_whatever_their_order():
    # The core answers in the request's order, which the tracker relies on first; an answer in
    # another order, or naming a partition the request did not, still pairs by partition.
    tracker = LagTracker(LagWindowConfig(window=2, min_distance_ms=0))
    request, _ = commit("g", {("t", 0): 5, ("t", 1): 6})
    answer = OffsetCommitResponse(
        [
            OffsetCommitResponsePartition("t", 1, Errors.NONE),
            OffsetCommitResponsePartition("t", 9, Errors.NONE),
            OffsetCommitResponsePartition("t", 0, Errors.NONE),
        ]
    )
    tracker.committed(request, answer, 1_000)
    assert {(s.partition, s.points[-1].offset) for s in tracker.snapshot()} == {(0, 5), (1, 6)}


@pytest.mark.parametrize("first_read", ["snapshot", "topic_partitions", "observe_end_offsets"])
def test_a_tracker_not_keeping_keeps_nothing_until_first_read_then_fills(first_read):
    # A partition deployed without the HTTP service: nothing reads live lag, so nothing is kept;
    # an HTTP service attached later gets the windows fill from its first read on.
    tracker = LagTracker(LagWindowConfig(min_distance_ms=0), keeping=False)
    tracker.committed(*commit("g", {("t", 0): 5}), 1_000)
    reads = {
        "snapshot": tracker.snapshot,
        "topic_partitions": tracker.topic_partitions,
        "observe_end_offsets": lambda: tracker.observe_end_offsets({("t", 0): 9}),
    }
    assert reads[first_read]() in ([], 0)
    assert tracker.keeping
    tracker.committed(*commit("g", {("t", 0): 7}), 2_000)
    [snap] = tracker.snapshot()
    assert [p.offset for p in snap.points] == [7]


def _view() -> LiveView:
    points = [CommitPoint(10 + i, 1_000 * i, 7 - i, 1_000 * i) for i in range(3)]
    stalled = [CommitPoint(10, 1_000 * i, 5 + i, 1_000 * i) for i in range(3)]
    windows = (
        WindowSnapshot("g", "t", 1, points, 20, [18, 20]),
        WindowSnapshot("g", "u", 0, stalled, None, []),
        WindowSnapshot("g", "v", 0, stalled, 30, [30]),
    )
    member = MemberView("m-1", "client-1", "/10.0.0.1", (("t", 1),))
    return LiveView(
        "local",
        "host",
        (),
        4,
        5.0,
        {"g": GroupView("g", "Stable", "consumer", (member,))},
        {"g": windows},
        {("g", "t", 1): ((0, 8), (1, None))},
    )


def test_burrow_json_for_a_hand_built_view():
    view = _view()
    code, doc = route("/v3/kafka/local/consumer/g", view, 3_000)
    assert code == 200
    t = doc["topics"]["t"]
    assert t[0] == {"offsets": [], "owner": "", "client_id": "", "current-lag": None}  # a gap
    assert t[1]["offsets"][0] is None and t[1]["offsets"][1]["lag"] == 7  # empty slot first
    assert (t[1]["owner"], t[1]["client_id"], t[1]["current-lag"]) == ("/10.0.0.1", "client-1", 8)
    assert doc["topics"]["u"][0]["current-lag"] is None  # no end offset known: null, not 0
    code, doc = route("/v3/kafka/local/consumer/g/lag", view, 3_000)
    status = doc["status"]
    assert (code, status["status"], status["partition_count"], status["totallag"]) == (
        200,
        "ERR",
        4,
        8 + 20,
    )
    by_tp = {(p["topic"], p["partition"]): p for p in status["partitions"]}
    assert by_tp[("u", 0)]["status"] == "OK" and by_tp[("u", 0)]["current_lag"] is None
    assert by_tp[("v", 0)]["status"] == "STALL"
    assert by_tp[("t", 1)]["complete"] == 0.75 and status["maxlag"]["topic"] == "v"
    code, doc = route("/v3/kafka/local/consumer/g/status", view, 3_000)
    assert [p["topic"] for p in doc["status"]["partitions"]] == ["v"]
    code, doc = route("/groupcoord/v1/groups", view, 3_000)
    [g] = doc["groups"]
    assert (g["state"], g["status"], g["members"][0]["client_id"]) == ("Stable", "ERR", "client-1")
    history = {(p["topic"], p["partition"]): p["history"] for p in g["partitions"]}
    assert history[("t", 1)] == [8, None] and history[("t", 0)] == []
    assert route("/v3/kafka/local/topic", view, 0)[1]["topics"] == ["t", "u", "v"]
    assert route("/v3/kafka/local/topic/t", view, 0)[1]["offsets"] == [None, 20]
    assert route("/v3/kafka/local/topic/t/consumers", view, 0)[1]["consumers"] == ["g"]
    assert route("/v3/kafka/local/topic/nope", view, 0)[0] == 404
    assert route("/v3/kafka/local/consumer/g%2Fx", view, 0)[0] == 404
    assert route("/" + "a/" * 20, view, 0) == (404, route("/x", view, 0)[1])


class Sources:
    def __init__(self) -> None:
        self.pushed: list[dict] = []

    async def topic_partitions(self):
        return [("t", 0), ("t", 1)]

    async def push_end_offsets(self, mapping):
        self.pushed.append(dict(mapping))

    async def windows(self):
        return []

    async def groups(self, max_groups):
        return {}


def test_sampling_survives_sources_that_fail_hang_or_answer_nonsense():
    async def scenario(fn, timeout_s=5.0):
        sources = Sources()
        config = HttpConfig(
            end_offsets=fn, end_offsets_interval_s=0.01, end_offsets_timeout_s=timeout_s
        )
        service = LagService(config, sources)
        await service.refresh()
        error = service.end_offsets_error
        await asyncio.sleep(0.02)
        await service.refresh()  # still refreshing: the loop goes on
        await service.close()
        return sources.pushed, error, service.end_offsets_error

    pushed, first, _ = asyncio.run(scenario(lambda asked: {("t", 0): 7, ("t", 9): 1, ("t", 1): -1}))
    assert pushed == [{("t", 0): 7}, {("t", 0): 7}] and first is None
    pushed, first, _ = asyncio.run(scenario(failing_end_offsets))
    assert pushed == [] and first == "ConnectionError: broker unreachable"
    pushed, first, second = asyncio.run(scenario(hanging_end_offsets, timeout_s=0.2))
    assert pushed == [] and first == "no answer within 0.2 s"
    assert second == "the previous call has not returned yet"  # one call at a time
    pushed, first, _ = asyncio.run(scenario(lambda asked: [1, 2]))
    assert pushed == [] and "not a mapping" in first
    with pytest.raises(ValueError, match="not a mapping"):
        valid_end_offsets(None, [])
    with pytest.raises(ValueError, match="end_offsets"):
        HttpConfig(end_offsets=42)
    with pytest.raises(ValueError, match="port"):
        HttpConfig(port=70_000)
