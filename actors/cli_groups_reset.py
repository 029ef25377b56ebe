"""``groupcoord groups --reset-offsets``: Kafka's offset reset, planned by offset_reset.py and
written with the admin client.

``prepare`` finds everything the command line can get wrong before the cluster is asked: the
scenario and the offsets sources it needs, the ``--topic`` arguments, and a ``--from-file`` plan,
read (at most ``MAX_RESET_FILE_BYTES``) and checked whole. ``reset`` then plans each group in
turn, refuses a group with active members as Kafka does, writes the plan with ``--execute``, and
prints it as Kafka's table or, with ``--export``, as the CSV that ``--from-file`` reads back
(Kafka's format: ``topic,partition,offset`` for one ``--group``, with a leading group column
otherwise).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from .admin import RESETTABLE_STATES, AdminClient, AdminError
from .bootstrap import Deployment, ask_async
from .cli_common import EXIT_FAILED, EXIT_OK, UsageError
from .end_offsets import (
    EndOffsetsFn,
    kafka_offsets,
    kafka_offsets_for_times,
    start_offsets_source,
)
from .groups_output import RESET_VIEW, GroupsOutput, group_row, offset_row
from .offset_reset import (
    MAX_RESET_FILE_BYTES,
    ResetError,
    outside_catalog,
    parse_datetime_ms,
    parse_duration_ms,
    parse_reset_file,
    parse_topics,
    partitions_named,
    plan_reset,
    reset_file_text,
)

PROG = "groupcoord groups --reset-offsets"
GroupIds = Callable[[object, AdminClient], Awaitable[list[str]]]
Plans = dict[str | None, dict[tuple[str, int], int]]


def prepare(args) -> None:
    """Check the reset's command line and set what ``reset`` needs on ``args``: ``scenario``,
    ``value``, ``start_fn``, ``servers`` and ``plans`` (a ``--from-file`` plan, else None).
    ``UsageError`` (or ``ValueError`` from a malformed value) for anything wrong."""
    args.scenario, args.value = _scenario(args)
    args.start_fn, args.servers = _sources(args, args.scenario)
    if args.topic:
        try:
            parse_topics(args.topic)
        except ValueError as exc:
            raise UsageError(f"{PROG}: {exc}") from None
    args.plans = None
    if args.scenario == "from-file":
        args.plans = read_plans(args.from_file)
        if None in args.plans and not single_group(args):
            raise UsageError(
                f"{PROG}: --from-file {args.from_file} has no group column "
                "(topic,partition,offset), so it plans one group: give one --group, or "
                "write group,topic,partition,offset lines"
            )


def single_group(args) -> bool:
    """Whether the command names exactly one group (Kafka's export then has no group column)."""
    return not args.all_groups and len(set(args.group)) == 1


def read_plans(path: str) -> Plans:
    """The reset plan in the CSV file ``path`` (``offset_reset.parse_reset_file``), read now."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_RESET_FILE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{PROG}: --from-file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_RESET_FILE_BYTES:
        raise UsageError(f"{PROG}: --from-file {path}: larger than {MAX_RESET_FILE_BYTES} bytes")
    try:
        return parse_reset_file(data.decode("utf-8"), path)
    except UnicodeDecodeError:
        raise UsageError(f"{PROG}: --from-file {path}: not UTF-8 text") from None
    except ValueError as exc:
        raise UsageError(f"{PROG}: --from-file {exc}") from None


def _scenario(args) -> tuple[str, int | None]:
    for name in ("to_earliest", "to_latest", "to_current"):
        if getattr(args, name):
            return name.replace("_", "-"), None
    if args.to_offset is not None:
        if args.to_offset < 0:
            raise UsageError(f"{PROG}: --to-offset must be >= 0")
        return "to-offset", args.to_offset
    if args.shift_by is not None:
        return "shift-by", args.shift_by
    if args.from_file is not None:
        if args.topic:
            raise UsageError(
                f"{PROG}: --from-file names its partitions itself: drop --topic "
                "(--all-topics is accepted, as Kafka accepts it)"
            )
        return "from-file", None
    if args.to_datetime is not None:
        return "to-datetime", parse_datetime_ms(args.to_datetime)
    return "by-duration", parse_duration_ms(args.by_duration)


def _kafka_servers(spec: str | None) -> str | None:
    return spec[len("kafka:") :] if spec and spec.startswith("kafka:") else None


def _sources(args, scenario: str) -> tuple[EndOffsetsFn | None, str | None]:
    """The reset's log-start source and the Kafka cluster asked for offsets by time; usage
    errors for a scenario without the source it needs."""
    servers = _kafka_servers(args.end_offsets)
    if scenario == "to-latest" and not args.end_offsets:
        raise UsageError(
            f"{PROG}: --to-latest needs --end-offsets SOURCE (log-end offsets live outside "
            "groupcoord)"
        )
    if scenario in ("to-datetime", "by-duration") and servers is None:
        raise UsageError(
            f"{PROG}: --{scenario} needs --end-offsets kafka:HOST:PORT (offsets by time come "
            "from the Kafka cluster that holds the records)"
        )
    if args.start_offsets:
        return start_offsets_source(args.start_offsets), servers
    return (kafka_offsets(servers, earliest=True) if servers else None), servers


async def _lookup(fn: EndOffsetsFn | None, targets: Sequence[tuple[str, int]]):
    """What ``fn`` knows of ``targets`` (None without a source), off the event loop: a Kafka
    source blocks on its cluster."""
    return None if fn is None else dict(await asyncio.to_thread(fn, targets))


def _planned(args, group_id: str, catalog) -> dict[tuple[str, int], int]:
    """The ``--from-file`` plan of ``group_id``; ResetError when the file has none for it or
    names a partition its catalogued topic does not have."""
    plans = args.plans
    planned = plans.get(None) if None in plans else plans.get(group_id)
    if planned is None:  # Kafka: "No reset plan for group g found"
        raise ResetError(f"no reset plan for group '{group_id}' in {args.from_file}")
    unknown = outside_catalog(sorted(planned), catalog)
    if unknown:
        topic, partition = unknown[0]
        raise ResetError(
            f"{topic}-{partition} in {args.from_file} is not a partition of {topic} "
            f"({catalog[topic]} in the topic catalog)",
            "UNKNOWN_TOPIC_OR_PARTITION",
        )
    return planned


async def reset(args, deployment: Deployment, out: GroupsOutput, end_fn, group_ids: GroupIds):
    """Plan (and with ``--execute`` write) each group's reset; the command's exit status."""
    scenario, value, start_fn, servers = args.scenario, args.value, args.start_fn, args.servers
    if scenario == "by-duration":  # Kafka: now minus the duration
        value = round(time.time() * 1000) - (value or 0)
    time_fn = (
        kafka_offsets_for_times(servers, value or 0)
        if servers and scenario in ("to-datetime", "by-duration")
        else None
    )
    admin = AdminClient(deployment.router)
    catalog = {}
    if args.topic or args.plans is not None:
        catalog = await ask_async(deployment.router.topics.remote(), "the router")
    rows: list[dict] = []
    status = EXIT_OK
    for group_id in await group_ids(args, admin):
        (described,) = await admin.describe_groups([group_id])
        if described.state not in RESETTABLE_STATES:
            out.add(
                "groups",
                [group_row(group=group_id, state=described.state, error="NON_EMPTY_GROUP")],
            )
            out.error(
                f"Error: Assignments can only be reset if the group '{group_id}' is inactive, "
                f"but the current state is {described.state}."
            )
            status = EXIT_FAILED
            continue
        try:
            committed = await admin.fetch_offsets(group_id)
            planned = None if args.plans is None else _planned(args, group_id, catalog)
            if planned is not None:
                targets = sorted(planned)
            else:
                targets = partitions_named(args.topic, committed, catalog)
            if not targets:
                raise ResetError(
                    f"group '{group_id}' has no committed offsets to reset",
                    "GROUP_ID_NOT_FOUND" if described.state == "Dead" else "OFFSETS_UNKNOWN",
                )
            new, notes = plan_reset(
                scenario,
                targets,
                committed,
                value=value,
                start=await _lookup(start_fn, targets),
                end=await _lookup(end_fn, targets),
                at_time=await _lookup(time_fn, targets),
                planned=planned,
            )
            if args.execute:
                await admin.alter_offsets(group_id, new)
        except (ResetError, AdminError) as exc:
            out.add(
                "groups",
                [
                    group_row(
                        group=group_id,
                        state=described.state,
                        error=exc.error if isinstance(exc, ResetError) else exc.error.name,
                    )
                ],
            )
            out.error(f"Error: {group_id}: {exc}")
            status = EXIT_FAILED
            continue
        out.add("groups", [group_row(group=group_id, state=described.state)])
        for note in notes:
            out.note(f"{group_id}: {note}")
        if described.state == "Dead":
            out.note(
                f"consumer group '{group_id}' does not exist"
                + ("; it now has these offsets" if args.execute else "")
            )
        rows += [
            offset_row(
                group=group_id,
                topic=t,
                partition=p,
                current_offset=committed.get((t, p)),
                new_offset=offset,
            )
            for (t, p), offset in sorted(new.items())
        ]
    out.add("offsets", rows)
    if rows and args.export:
        out.text(reset_file_text(rows, with_group=not single_group(args)))
    elif rows:
        out.table(rows, RESET_VIEW)
    if rows and not args.execute:
        out.note("dry run: nothing was written (add --execute to write these offsets)")
    return status
