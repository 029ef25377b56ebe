"""Output of the ``groupcoord`` commands (cli.py) and of the demo (demo_run.py): readable tables
as they come, or one JSON document at the end with ``--json``; an error in one line
(``first_line``, also for the router's mirror state)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import msgspec


def first_line(exc: BaseException) -> str:
    """``exc`` in one line: its type and the first line of its message (Ray's errors carry the
    remote traceback after it; a failed task's own exception is named, not Ray's wrapper)."""
    exc = getattr(exc, "cause", None) or exc
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else '(no message)'}"


def table(title: str, rows: Sequence[dict], columns: Sequence[str]) -> str:
    """A plain-text table; every value shown with ``str``, a missing one (None) as ``-``."""
    cells = [["-" if row.get(c) is None else str(row[c]) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = "  ".join("-" * w for w in widths)
    out = [title, "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)), line]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    if not rows:
        out.append("(none)")
    return "\n".join(out)


class Output:
    """Collects tables; prints them as text as they come, or as one JSON document at the end."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.document: dict = {}

    def show(self, key: str, title: str, rows: list[dict], columns: Sequence[str]) -> None:
        self.document[key] = rows
        if not self.as_json:
            print(table(title, rows, columns), end="\n\n", flush=True)

    def note(self, text: str) -> None:
        self.document.setdefault("notes", []).append(text)
        if not self.as_json:
            print(text, flush=True)

    def show_text(self, key: str, text: str) -> None:
        self.document[key] = text
        if not self.as_json:
            print(text, end="\n\n", flush=True)

    def finish(self) -> None:
        if self.as_json:
            print(json.dumps(msgspec.to_builtins(self.document), indent=2, default=str))


def describe_rows(descriptions) -> tuple[list[dict], list[dict], list[dict]]:
    groups, members, offsets = [], [], []
    for d in descriptions:
        groups.append(
            {
                "group": d.group_id,
                "state": d.state,
                "protocol": d.protocol,
                "generation": d.generation_id,
                "members": len(d.members),
                "leader": d.leader or None,
            }
        )
        for m in d.members:
            members.append(
                {
                    "group": d.group_id,
                    "member": m.member_id,
                    "instance": m.group_instance_id,
                    "client": m.client_id,
                    "partitions": ",".join(f"{t}-{p}" for t, p in m.assignment),
                }
            )
        for o in d.offsets:
            offsets.append(
                {
                    "group": d.group_id,
                    "topic": o.topic,
                    "partition": o.partition,
                    "committed": o.committed_offset,
                    "end": o.end_offset,
                    "lag": o.lag,
                    "owner": o.owner,
                }
            )
    return groups, members, offsets


def show_descriptions(out: Output, descriptions) -> None:
    groups, members, offsets = describe_rows(descriptions)
    out.show(
        "groups",
        "groups",
        groups,
        ("group", "state", "protocol", "generation", "members", "leader"),
    )
    out.show(
        "members",
        "members and assignments",
        members,
        ("group", "member", "instance", "client", "partitions"),
    )
    out.show(
        "offsets",
        "committed offsets",
        offsets,
        ("group", "topic", "partition", "committed", "end", "lag", "owner"),
    )
