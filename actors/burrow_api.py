"""Burrow's v3 HTTP API over groupcoord's live commit windows: paths and JSON shapes are
Burrow's (``core/internal/httpserver`` and ``core/protocol``), so tools written for Burrow
(burrow-exporter, dashboards) read groupcoord unchanged.

Pure: ``route(path, view, now_ms)`` answers one GET from a ``LiveView`` (what the HTTP service
last gathered from the partitions) with ``(HTTP status, JSON document)``. Paths:

  /burrow/admin                                    "GOOD" (Burrow's health check)
  /v3/kafka                                        cluster list
  /v3/kafka/{cluster}                              cluster module detail
  /v3/kafka/{cluster}/topic                        topics (those some group commits to)
  /v3/kafka/{cluster}/topic/{topic}                its end offsets by partition (null: unknown)
  /v3/kafka/{cluster}/topic/{topic}/consumers      the groups committing to it
  /v3/kafka/{cluster}/consumer                     consumer groups
  /v3/kafka/{cluster}/consumer/{group}             stored offsets per topic partition
  /v3/kafka/{cluster}/consumer/{group}/status      Burrow's verdict, non-OK partitions only
  /v3/kafka/{cluster}/consumer/{group}/lag         the same with every partition
  /groupcoord/v1/groups                            the web view's extra data (not Burrow's)

As in Burrow: an unknown cluster or group is a 404 with ``"error": true`` (a group whose
evaluation finds nothing is a 404 ``NOTFOUND`` status with ``"error": false``); any other
path is Burrow's catch-all 404 ``{"error":true,"message":"invalid request type","result":{}}``.
Topic partitions are listed by index up to the highest one the group committed, the gaps as
empty partitions (Burrow sizes them by the topic's partition count). A lag nobody knows (no
end offset sampled) is ``null``, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import unquote

import msgspec

from groupcoord.coordinator.burrow import (
    CommitPoint,
    GroupStatus,
    PartitionStatus,
    Status,
    group_status,
    partition_status,
)

from .live_lag import WindowSnapshot

MAX_PATH_SEGMENTS = 8


class MemberView(msgspec.Struct, frozen=True):
    member_id: str
    client_id: str
    client_host: str
    assignment: tuple[tuple[str, int], ...]


class GroupView(msgspec.Struct, frozen=True):
    group_id: str
    state: str
    protocol_type: str
    members: tuple[MemberView, ...]


class LiveView(msgspec.Struct, frozen=True):
    """One refresh of the HTTP service: groups the coordinator lists, commit windows by
    group, and each window's sampled current lag history ``(time_ms, lag)``."""

    cluster: str
    host: str
    servers: tuple[str, ...]
    window: int
    offset_refresh_s: float
    groups: Mapping[str, GroupView]
    windows: Mapping[str, tuple[WindowSnapshot, ...]]
    history: Mapping[tuple[str, str, int], tuple[tuple[int, int | None], ...]]


def _request(path: str, view: LiveView) -> dict:
    return {"url": path, "host": view.host}


def _error(code: int, message: str, path: str, view: LiveView) -> tuple[int, dict]:
    return code, {"error": True, "message": message, "request": _request(path, view)}


INVALID = {"error": True, "message": "invalid request type", "result": {}}


def _offset(point: CommitPoint | None) -> dict | None:
    if point is None:
        return None
    return {
        "offset": point.offset,
        "timestamp": point.timestamp_ms,
        "observedAt": point.observed_at_ms,
        "lag": point.lag,
    }


def _current_lag(w: WindowSnapshot) -> int | None:
    if w.end_offset is None or not w.points:
        return None
    return max(w.end_offset - w.points[-1].offset, 0)


def owners(group: GroupView | None) -> dict[tuple[str, int], MemberView]:
    if group is None:
        return {}
    return {tp: m for m in group.members for tp in m.assignment}


def _by_topic(windows: tuple[WindowSnapshot, ...]) -> dict[str, list[WindowSnapshot | None]]:
    """Windows per topic, indexed by partition; partitions never committed are None."""
    topics: dict[str, list[WindowSnapshot | None]] = {}
    for w in windows:
        slots = topics.setdefault(w.topic, [])
        slots.extend([None] * (w.partition + 1 - len(slots)))
        slots[w.partition] = w
    return topics


def topic_ends(view: LiveView) -> dict[str, list[int | None]]:
    """Per topic, the latest sampled end offset of each partition index (None: unknown)."""
    ends: dict[str, list[int | None]] = {}
    for windows in view.windows.values():
        for w in windows:
            slots = ends.setdefault(w.topic, [])
            slots.extend([None] * (w.partition + 1 - len(slots)))
            if w.end_offset is not None:
                slots[w.partition] = w.end_offset
    return ends


def consumer_topics(view: LiveView, group_id: str) -> dict[str, list[dict]]:
    """Burrow's ConsumerTopics: per topic, one ConsumerPartition per partition index."""
    owned = owners(view.groups.get(group_id))
    out = {}
    for topic, slots in sorted(_by_topic(view.windows.get(group_id, ())).items()):
        rows = []
        for partition, w in enumerate(slots):
            member = owned.get((topic, partition))
            offsets: list[dict | None] = []
            if w is not None:  # Burrow's ring: empty slots (null) first, then oldest first
                offsets = [None] * (view.window - len(w.points))
                offsets += [_offset(p) for p in w.points]
            rows.append(
                {
                    "offsets": offsets,
                    "owner": member.client_host if member else "",
                    "client_id": member.client_id if member else "",
                    "current-lag": None if w is None else _current_lag(w),
                }
            )
        out[topic] = rows
    return out


def evaluate(view: LiveView, group_id: str, now_ms: int) -> GroupStatus:
    """Burrow's verdict on one group as of ``now_ms``, over every partition index."""
    parts = []
    for topic, slots in _by_topic(view.windows.get(group_id, ())).items():
        for partition, w in enumerate(slots):
            if w is None:
                parts.append(partition_status(group_id, topic, partition, [], None, now_ms))
                continue
            parts.append(
                partition_status(
                    group_id,
                    topic,
                    partition,
                    w.points,
                    _current_lag(w),
                    now_ms,
                    view.window,
                    w.recent_ends,
                )
            )
    return group_status(group_id, parts)


def _partition_json(p: PartitionStatus, owned: dict) -> dict:
    member = owned.get((p.topic, p.partition))
    return {
        "topic": p.topic,
        "partition": p.partition,
        "owner": member.client_host if member else "",
        "client_id": member.client_id if member else "",
        "status": p.status,
        "start": _offset(p.start),
        "end": _offset(p.end),
        "current_lag": p.current_lag,
        "complete": p.complete,
    }


def status_json(view: LiveView, group_id: str, status: GroupStatus, show_all: bool) -> dict:
    """Burrow's ConsumerGroupStatus; without ``show_all`` only partitions worse than OK."""
    owned = owners(view.groups.get(group_id))
    shown = [p for p in status.partitions if show_all or Status[p.status] > Status.OK]
    return {
        "cluster": view.cluster,
        "group": group_id,
        "status": status.status,
        "complete": status.complete,
        "partitions": [_partition_json(p, owned) for p in shown],
        "partition_count": len(status.partitions),
        "maxlag": None if status.max_lag is None else _partition_json(status.max_lag, owned),
        "totallag": status.total_lag,
    }


def groups_json(view: LiveView, now_ms: int) -> list[dict]:
    """The web view's data: every group's state, members, assignments, Burrow status and
    per-partition lag with its recent history."""
    out = []
    for group_id in sorted(set(view.groups) | set(view.windows)):
        group = view.groups.get(group_id)
        status = evaluate(view, group_id, now_ms)
        partitions = [
            {
                "topic": p.topic,
                "partition": p.partition,
                "status": p.status,
                "offset": p.end.offset if p.end else None,
                "current_lag": p.current_lag,
                "history": [
                    lag for _, lag in view.history.get((group_id, p.topic, p.partition), ())
                ],
            }
            for p in status.partitions
        ]
        out.append(
            {
                "group": group_id,
                "state": group.state if group else "Unknown",
                "protocol_type": group.protocol_type if group else "",
                "members": [msgspec.to_builtins(m) for m in group.members] if group else [],
                "status": status.status,
                "totallag": status.total_lag,
                "partitions": partitions,
            }
        )
    return out


NOT_FOUND_STATUS = {  # Burrow's evaluator answer for a group it has no offsets for
    "status": "NOTFOUND",
    "complete": 1.0,
    "partitions": [],
    "partition_count": 0,
    "maxlag": None,
    "totallag": 0,
}


def route(path: str, view: LiveView, now_ms: int) -> tuple[int, dict | str]:
    """Answer ``GET path`` (no query string) from ``view``: (HTTP status, JSON document or
    the health check's text)."""
    if path == "/burrow/admin":
        return 200, "GOOD"
    raw = path.strip("/").split("/")
    if len(raw) > MAX_PATH_SEGMENTS:
        return 404, INVALID
    seg = [unquote(s) for s in raw]
    req = _request(path, view)

    def ok(message: str, **fields) -> tuple[int, dict]:
        return 200, {"error": False, "message": message, **fields, "request": req}

    if seg == ["groupcoord", "v1", "groups"]:
        return ok("groups returned", groups=groups_json(view, now_ms))
    if seg[:2] != ["v3", "kafka"] or "" in seg[2:] or len(seg) > 6:
        return 404, INVALID
    if len(seg) == 2:
        return ok("cluster list returned", clusters=[view.cluster])
    if len(seg) >= 4 and seg[3] == "topic":
        return _topic_route(seg, path, view, req)
    if len(seg) >= 4 and seg[3] != "consumer":
        return 404, INVALID
    known = seg[2] == view.cluster
    group_id = seg[4] if len(seg) >= 5 else ""
    if len(seg) == 6:
        if seg[5] not in ("status", "lag"):
            return 404, INVALID
        # Burrow's evaluator answers an unknown cluster or group with a NOTFOUND status.
        status = evaluate(view, group_id, now_ms) if known else None
        if status is None or status.status == "NOTFOUND":
            body = {"cluster": seg[2], "group": group_id, **NOT_FOUND_STATUS}
            return 404, {
                "error": False,
                "message": "consumer status returned",
                "status": body,
                "request": req,
            }
        return ok(
            "consumer status returned",
            status=status_json(view, group_id, status, show_all=seg[5] == "lag"),
        )
    if not known:  # Burrow's messages, by path
        message = {3: "cluster module not found", 4: "cluster not found"}
        return _error(404, message.get(len(seg), "cluster or consumer not found"), path, view)
    if len(seg) == 3:
        return ok(
            "cluster module detail returned",
            module={
                "class-name": "groupcoord",
                "servers": list(view.servers),
                "client-profile": {
                    "name": "",
                    "client-id": "",
                    "kafka-version": "",
                    "tls": None,
                    "sasl": None,
                },
                "topic-refresh": 0,
                "offset-refresh": view.offset_refresh_s,
            },
        )
    if len(seg) == 4:
        return ok("consumer list returned", consumers=sorted(set(view.groups) | set(view.windows)))
    if group_id not in view.groups and group_id not in view.windows:
        return _error(404, "cluster or consumer not found", path, view)
    return ok("consumer detail returned", topics=consumer_topics(view, group_id))


def _topic_route(seg: list[str], path: str, view: LiveView, req: dict) -> tuple[int, dict]:
    """Burrow's topic paths (burrow-exporter lists topics before it reads any group)."""
    if len(seg) > 6 or len(seg) == 6 and seg[5] != "consumers":
        return 404, INVALID
    if seg[2] != view.cluster:
        message = "cluster or topic not found" if len(seg) == 5 else "cluster not found"
        return _error(404, message, path, view)
    ends = topic_ends(view)

    def ok(message: str, **fields) -> tuple[int, dict]:
        return 200, {"error": False, "message": message, **fields, "request": req}

    if len(seg) == 4:
        return ok("topic list returned", topics=sorted(ends))
    if len(seg) == 6:  # Burrow: an unknown topic has no consumers (not an error)
        groups = [g for g, ws in sorted(view.windows.items()) if any(w.topic == seg[4] for w in ws)]
        return ok("consumers of topic returned", consumers=groups)
    if seg[4] not in ends:
        return _error(404, "cluster or topic not found", path, view)
    return ok("topic offsets returned", offsets=ends[seg[4]])
