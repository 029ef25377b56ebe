"""The rows ``groupcoord groups`` prints: one JSON schema for every action, Kafka's columns.

Every ``--json`` document of ``groups`` has the same four keys, whatever the action:

- ``groups``: ``{group, state, protocol_type, assignment_strategy, generation, leader, members,
  coordinator, error, group_type, assignment_epoch}`` (``members`` is the member count,
  ``coordinator`` the offsets partition that owns the group, ``error`` Kafka's error name,
  OFFSETS_UNKNOWN when a reset needs an offset no source knows, or null; ``group_type``
  "classic" or "consumer" (KIP-848), whose ``generation`` is the group epoch and
  ``assignment_strategy`` the server-side assignor);
- ``members``: ``{group, consumer_id, group_instance_id, host, client_id, partitions,
  assignment, member_epoch, target_assignment}`` (``partitions`` the count, ``assignment`` a
  list of ``{topic, partition}``; a consumer group's members also have an epoch and the
  assignment they are moving to, null in a classic group);
- ``offsets``: ``{group, topic, partition, current_offset, log_end_offset, lag, consumer_id,
  host, client_id, new_offset, error, leader_epoch}`` (``leader_epoch``: the committed
  offset's, Kafka's ``--offsets --verbose`` LEADER-EPOCH);
- ``notes``: the messages the text form prints on stderr (errors go to stderr in both forms).

A value that is not known or does not apply is null, never "" or a guess; ids are never cut.
The text form prints Kafka's column names with ``-`` for null, as kafka-consumer-groups does;
as Kafka 4's tool, ``--verbose`` adds GROUP-EPOCH and TARGET-ASSIGNMENT-EPOCH to ``--state``,
CURRENT-EPOCH, CURRENT-ASSIGNMENT, TARGET-EPOCH and TARGET-ASSIGNMENT to ``--members`` and
LEADER-EPOCH to ``--offsets``, for every group (``-`` where a classic group has no such
thing).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import msgspec

from .admin import GroupDescription

GROUP_KEYS = (
    "group",
    "state",
    "protocol_type",
    "assignment_strategy",
    "generation",
    "leader",
    "members",
    "coordinator",
    "error",
    "group_type",
    "assignment_epoch",
)
MEMBER_KEYS = (
    "group",
    "consumer_id",
    "group_instance_id",
    "host",
    "client_id",
    "partitions",
    "assignment",
    "member_epoch",
    "target_assignment",
)
OFFSET_KEYS = (
    "group",
    "topic",
    "partition",
    "current_offset",
    "log_end_offset",
    "lag",
    "consumer_id",
    "host",
    "client_id",
    "new_offset",
    "error",
    "leader_epoch",
)

# (key, Kafka's column name) of each text view.
OFFSETS_VIEW = (
    ("group", "GROUP"),
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("current_offset", "CURRENT-OFFSET"),
    ("log_end_offset", "LOG-END-OFFSET"),
    ("lag", "LAG"),
    ("consumer_id", "CONSUMER-ID"),
    ("host", "HOST"),
    ("client_id", "CLIENT-ID"),
)
# --offsets --verbose: Kafka's LEADER-EPOCH after PARTITION.
OFFSETS_VERBOSE_VIEW = (*OFFSETS_VIEW[:3], ("leader_epoch", "LEADER-EPOCH"), *OFFSETS_VIEW[3:])
RESET_VIEW = (
    ("group", "GROUP"),
    ("topic", "TOPIC"),
    ("partition", "PARTITION"),
    ("new_offset", "NEW-OFFSET"),
)
DELETE_OFFSETS_VIEW = (("topic", "TOPIC"), ("partition", "PARTITION"), ("status", "STATUS"))
STATE_VIEW = (
    ("group", "GROUP"),
    ("coordinator_text", "COORDINATOR (ID)"),
    ("assignment_strategy", "ASSIGNMENT-STRATEGY"),
    ("state", "STATE"),
    ("members", "#MEMBERS"),
)
# --state --verbose (Kafka 4's tool): the group epoch and the target assignment's epoch before
# #MEMBERS, for every group ("-" for a classic one, which has neither).
STATE_VERBOSE_VIEW = (
    *STATE_VIEW[:-1],
    ("group_epoch", "GROUP-EPOCH"),
    ("assignment_epoch", "TARGET-ASSIGNMENT-EPOCH"),
    ("members", "#MEMBERS"),
)


def group_row(**values: object) -> dict:
    unknown = set(values) - set(GROUP_KEYS)
    if unknown:
        raise ValueError(f"not group row keys: {sorted(unknown)}")
    return {k: values.get(k) for k in GROUP_KEYS}


def offset_row(**values: object) -> dict:
    unknown = set(values) - set(OFFSET_KEYS)
    if unknown:
        raise ValueError(f"not offset row keys: {sorted(unknown)}")
    return {k: values.get(k) for k in OFFSET_KEYS}


def _or_none(text: str | None) -> str | None:
    return text if text else None


def described_rows(d: GroupDescription, coordinator: int) -> tuple[dict, list[dict], list[dict]]:
    """The group, members and offsets rows of one described group."""
    group = group_row(
        group=d.group_id,
        state=d.state,
        protocol_type=_or_none(d.protocol_type),
        assignment_strategy=_or_none(d.protocol),
        generation=d.generation_id if d.generation_id >= 0 else None,
        leader=_or_none(d.leader),
        members=len(d.members),
        coordinator=coordinator,
        error=None if d.state != "Dead" else "GROUP_ID_NOT_FOUND",
        group_type=d.group_type,
        assignment_epoch=d.assignment_epoch,
    )
    members = [
        {
            "group": d.group_id,
            "consumer_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "host": _or_none(m.client_host),
            "client_id": _or_none(m.client_id),
            "partitions": len(m.assignment),
            "assignment": [{"topic": t, "partition": p} for t, p in m.assignment],
            "member_epoch": m.member_epoch,
            "target_assignment": None
            if m.target_assignment is None
            else [{"topic": t, "partition": p} for t, p in m.target_assignment],
        }
        for m in d.members
    ]
    by_id = {m.member_id: m for m in d.members}
    offsets = []
    for o in d.offsets:
        owner = by_id.get(o.owner) if o.owner else None
        offsets.append(
            offset_row(
                group=d.group_id,
                topic=o.topic,
                partition=o.partition,
                current_offset=o.committed_offset,
                log_end_offset=o.end_offset,
                lag=o.lag,
                consumer_id=owner.member_id if owner else None,
                host=_or_none(owner.client_host) if owner else None,
                client_id=_or_none(owner.client_id) if owner else None,
                leader_epoch=o.leader_epoch,
            )
        )
    return group, members, offsets


def assignment_text(assignment: Sequence[dict]) -> str | None:
    """Kafka's ASSIGNMENT cell: ``topic:0,1;other:2`` (topics sorted), None when empty."""
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp["topic"], []).append(tp["partition"])
    text = ";".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items()))
    return text or None


def kafka_table(rows: Sequence[dict], columns: Sequence[tuple[str, str]]) -> str:
    """Columns padded to their widest cell, ``-`` for null, like kafka-consumer-groups."""
    cells = [["-" if r.get(k) is None else str(r[k]) for k, _ in columns] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, (_, h) in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        return " ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    return "\n".join([line([h for _, h in columns])] + [line(c) for c in cells])


class GroupsOutput:
    """The document of one ``groups`` command: tables on stdout and notes on stderr as they
    come, or the whole document as JSON at the end."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.document: dict[str, list] = {"groups": [], "members": [], "offsets": [], "notes": []}

    def add(self, key: str, rows: list[dict]) -> None:
        self.document[key].extend(rows)

    def table(self, rows: Sequence[dict], columns: Sequence[tuple[str, str]]) -> None:
        if not self.as_json:
            print(kafka_table(rows, columns), end="\n\n", flush=True)

    def text(self, line: str) -> None:
        """A line of the text form only (the JSON form carries the same facts as rows)."""
        if not self.as_json:
            print(line, flush=True)

    def note(self, text: str) -> None:
        self.document["notes"].append(text)
        if not self.as_json:
            print(text, file=sys.stderr, flush=True)

    def error(self, text: str) -> None:
        """A failure: on stderr in both forms (and in the JSON document's notes)."""
        self.document["notes"].append(text)
        print(text, file=sys.stderr, flush=True)

    def finish(self) -> None:
        if self.as_json:
            print(json.dumps(msgspec.to_builtins(self.document), indent=2))
