"""``groupcoord groups``: kafka-consumer-groups for groupcoord, with Kafka's options.

    groupcoord groups --list [--state [S,...]] [--type [T,...]]
    groupcoord groups --describe (--group G ... | --all-groups) [--offsets | --members | --state]
                      [--verbose] [--end-offsets SOURCE]
    groupcoord groups --reset-offsets (--group G ... | --all-groups)
                      (--topic T[:P,...] ... | --all-topics) SCENARIO [--dry-run | --execute]
                      [--export] [--end-offsets SOURCE] [--start-offsets SOURCE]
    groupcoord groups --reset-offsets (--group G ... | --all-groups) --from-file PLAN.csv
                      [--dry-run | --execute] [--export]
    groupcoord groups --delete-offsets --group G --topic T[:P,...] ...
    groupcoord groups --delete (--group G ... | --all-groups)
    groupcoord groups --validate-regex REGEX

The older spellings ``groups list``, ``groups describe G...``, ``groups delete G...``,
``groups reset-offsets G ...`` and ``groups delete-offsets G ...`` still work (a reset without
``--topic`` covers every committed partition). As in Kafka, a reset is a dry run unless
``--execute`` is given, and is refused for a group with active members; ``--export`` prints
the plan as Kafka's CSV, which ``--from-file`` reads back (cli_groups_reset.py). An offsets SOURCE
is ``file:PATH`` (or a bare path), ``kafka:HOST:PORT[,...]`` or ``python:module:function``
(end_offsets.py). Output columns, messages and the JSON schema: groups_output.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence

from groupcoord.coordinator import Errors
from groupcoord.coordinator.routing import partition_for
from groupcoord.coordinator.topic_regex import regex_error

from . import bootstrap
from .admin import AdminClient, AdminError
from .bootstrap import DEFAULT_NAMESPACE, Deployment, ask_async
from .cli_common import (
    EXIT_FAILED,
    EXIT_OK,
    OneLineParser,
    UsageError,
    add_common,
    connect_and_say,
)
from .cli_groups_reset import prepare, reset
from .end_offsets import end_offsets_source
from .groups_output import (
    DELETE_OFFSETS_VIEW,
    OFFSETS_VERBOSE_VIEW,
    OFFSETS_VIEW,
    STATE_VERBOSE_VIEW,
    STATE_VIEW,
    GroupsOutput,
    assignment_text,
    described_rows,
    group_row,
    offset_row,
)
from .offset_reset import parse_topics, partitions_named

ACTIONS = (
    "--list",
    "--describe",
    "--reset-offsets",
    "--delete-offsets",
    "--delete",
    "--validate-regex",
)
ALIASES = {a[2:]: a for a in ACTIONS[:5]}  # the older spellings: `groups list`, ...
STATES = ("Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead")
TYPES = ("classic", "consumer")  # Kafka's group types (KIP-848), as --list --type spells them
# Why a group could not be deleted, in the words of Kafka's exceptions.
DELETE_REFUSALS = {
    Errors.NON_EMPTY_GROUP: "the group is not empty",
    Errors.GROUP_ID_NOT_FOUND: "the group id does not exist",
}
ADDRESS_HELP = (
    "Ray cluster (GCS host:port, as serve printed it); default RAY_ADDRESS, else the one "
    "cluster running on this machine"
)
SOURCE_HELP = "file:PATH (or a bare PATH), kafka:HOST:PORT[,HOST:PORT] or python:module:function"
EPILOG = (
    "exit status: 0 done, 1 the operation failed (unknown group, refused reset or delete, "
    "unreachable offsets source), 2 usage error or no deployment reached"
)
OVERVIEW = f"""usage: groupcoord groups ACTION [options]   (groupcoord groups ACTION --help)

Kafka's kafka-consumer-groups for groupcoord. One action:
  --list            list the groups (--state [S,...]: with their state, or only those;
                    --type [T,...] likewise their type)
  --describe        offsets and lag (default), --members or --state of groups
  --reset-offsets   plan (--dry-run, the default) or --execute an offset reset
  --delete-offsets  delete a group's offsets of some topics
  --delete          delete groups that have no members
  --validate-regex  whether a consumer's topic regex (KIP-848) is valid here

{EPILOG}"""


def _parser(action: str) -> argparse.ArgumentParser:
    """The options of one action (a flag another action takes is refused here)."""
    descriptions = {
        "--list": "List the consumer groups; --state shows their state or keeps only those "
        f"states ({', '.join(STATES)}; comma-separated), --type likewise their type "
        f"({', '.join(TYPES)}).",
        "--describe": "Describe groups: per partition CURRENT-OFFSET, LOG-END-OFFSET, LAG and "
        "owner (--offsets, the default; --verbose adds the commit's LEADER-EPOCH), the "
        "members (--members; --verbose adds their epochs and current and target "
        "assignments), or the group (--state; --verbose adds GROUP-EPOCH and "
        "TARGET-ASSIGNMENT-EPOCH), with Kafka 4's columns.",
        "--reset-offsets": "Reset the committed offsets of groups without active members. A "
        "dry run (prints the new offsets) unless --execute is given.",
        "--delete-offsets": "Delete a group's committed offsets of the partitions named by "
        "--topic (refused for topics the group still subscribes to).",
        "--delete": "Delete groups; a group with members is refused (NON_EMPTY_GROUP).",
        "--validate-regex": "Say whether REGEX is a topic regular expression the coordinator "
        "accepts from a consumer (RE2, KIP-848), and if not why, in Kafka's words; exit "
        "status 1 when it is not (Kafka's tool exits 0 either way). Asks no deployment.",
    }
    p = OneLineParser(
        prog=f"groupcoord groups {action}",
        description=descriptions[action],
        epilog=EPILOG,
        allow_abbrev=False,
    )
    if action == "--validate-regex":
        # Optional to argparse, so that "--validate-regex --help" is help; parse() requires it.
        p.add_argument(action, dest="regex", metavar="REGEX", nargs="?", help="the pattern")
        add_common(p, ADDRESS_HELP, DEFAULT_NAMESPACE)  # accepted like any action's; unused
        return p
    p.add_argument(action, action="store_true", dest="action_flag", help="the action")
    add_common(p, ADDRESS_HELP, DEFAULT_NAMESPACE)
    if action == "--list":
        p.add_argument(
            "--state",
            nargs="?",
            const="",
            default=None,
            metavar="S[,S...]",
            help="show each group's state; with states, only groups in them",
        )
        p.add_argument(
            "--type",
            nargs="?",
            const="",
            default=None,
            metavar="T[,T...]",
            help="show each group's type; with types (classic, consumer), only groups of them",
        )
        return p
    if action == "--delete-offsets":
        p.add_argument("--group", required=True, help="the group")
        p.add_argument(
            "--topic",
            action="append",
            required=True,
            help="a topic (all its partitions) or topic:0,1,... (repeatable)",
        )
        return p
    p.add_argument("--group", action="append", default=[], help="a group id (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every group")
    if action == "--describe":
        view = p.add_mutually_exclusive_group()
        view.add_argument("--offsets", action="store_true", help="offsets and lag (default)")
        view.add_argument("--members", action="store_true", help="the members")
        view.add_argument("--state", action="store_true", help="state, strategy, coordinator")
        p.add_argument(
            "--verbose",
            action="store_true",
            help="Kafka's verbose columns: epochs and assignments (--members, --state), "
            "LEADER-EPOCH (--offsets)",
        )
        p.add_argument("--end-offsets", metavar="SOURCE", help=f"log-end offsets: {SOURCE_HELP}")
    elif action == "--reset-offsets":
        scope = p.add_mutually_exclusive_group()
        scope.add_argument("--topic", action="append", help="topic or topic:0,1 (repeatable)")
        scope.add_argument("--all-topics", action="store_true", help="every committed partition")
        scenario = p.add_mutually_exclusive_group(required=True)
        scenario.add_argument("--to-earliest", action="store_true", help="log-start offsets")
        scenario.add_argument("--to-latest", action="store_true", help="log-end offsets")
        scenario.add_argument("--to-current", action="store_true", help="the committed offsets")
        scenario.add_argument("--to-offset", type=int, metavar="N", help="offset N")
        scenario.add_argument("--shift-by", type=int, metavar="N", help="committed + N (N < 0 ok)")
        scenario.add_argument(
            "--to-datetime", metavar="ISO", help="first offset at YYYY-MM-DDTHH:mm:SS[.sss][Z]"
        )
        scenario.add_argument(
            "--by-duration", metavar="PnDTnHnMnS", help="first offset that long ago"
        )
        scenario.add_argument(
            "--from-file",
            metavar="PATH",
            help="the offsets of a CSV plan (--export's): topic,partition,offset lines, or "
            "group,topic,partition,offset (no --topic: the file names the partitions)",
        )
        run = p.add_mutually_exclusive_group()
        run.add_argument("--dry-run", action="store_true", help="only print the plan (default)")
        run.add_argument("--execute", action="store_true", help="write the new offsets")
        p.add_argument(
            "--export",
            action="store_true",
            help="print the plan as CSV (Kafka's format: topic,partition,offset for one "
            "--group, else group,topic,partition,offset), not as a table",
        )
        p.add_argument("--end-offsets", metavar="SOURCE", help=f"log-end offsets: {SOURCE_HELP}")
        p.add_argument(
            "--start-offsets",
            metavar="SOURCE",
            help="log-start offsets (default: the --end-offsets Kafka cluster's earliest, else 0)",
        )
    return p


def _expand_alias(argv: list[str]) -> list[str]:
    """``describe g1 g2 --json`` -> ``--describe --group g1 --group g2 --json``."""
    if not argv or argv[0] not in ALIASES:
        return argv
    action, rest = ALIASES[argv[0]], argv[1:]
    groups = []
    while rest and not rest[0].startswith("-"):
        groups.append(rest.pop(0))
    expanded = [action, *(x for g in groups for x in ("--group", g)), *rest]
    if action == "--reset-offsets" and not {"--topic", "--all-topics"} & set(rest):
        expanded.append("--all-topics")
    return expanded


def parse(argv: Sequence[str]) -> argparse.Namespace | None:
    """The parsed options (``args.action`` is the action flag), or None once help is printed."""
    argv = _expand_alias(list(argv))
    actions = [a for a in ACTIONS if a in argv]
    if len(actions) != 1:
        if not actions and ("-h" in argv or "--help" in argv):
            print(OVERVIEW)
            return None
        raise UsageError(
            f"groupcoord groups: give exactly one action: {', '.join(ACTIONS)} "
            f"(see groupcoord groups --help; got: {' '.join(argv) or 'nothing'})"
        )
    parser = _parser(actions[0])
    args = parser.parse_args(argv)
    args.action = actions[0]
    if args.action in ("--describe", "--delete", "--reset-offsets"):
        if bool(args.group) == args.all_groups:
            parser.error("give --group G (repeatable) or --all-groups")
    if args.action == "--reset-offsets":
        if not (args.topic or args.all_topics or args.from_file is not None):
            parser.error("give the reset's scope: --topic T[:P,...] or --all-topics")
        if args.export and args.json:
            parser.error("--export and --json are two forms of the output: give one")
    if args.action == "--validate-regex" and args.regex is None:
        parser.error("--validate-regex needs the REGEX to check")
    if args.action == "--list" and args.state:
        args.state = _names(args.state, STATES, "state")
    if args.action == "--list" and args.type:
        args.type = _names(args.type, TYPES, "type")
    return args


def _names(text: str, valid: Sequence[str], what: str) -> list[str]:
    """Comma-separated names of ``valid`` (states, types), any case, as they are spelled
    there."""
    canonical = {name.lower(): name for name in valid}
    wanted = [name.strip().lower() for name in text.split(",")]
    if any(name not in canonical for name in wanted):
        raise UsageError(
            f"groupcoord groups --list: invalid {what} list {text!r}; valid {what}s are: "
            f"{', '.join(valid)}"
        )
    return [canonical[name] for name in wanted]


def main(argv: Sequence[str]) -> int:
    """Run ``groupcoord groups ARGV``; usage errors and connection failures propagate (the
    entry point prints them), an operation that fails is reported here and returns 1."""
    args = parse(argv)
    if args is None:
        return EXIT_OK
    if args.action == "--validate-regex":
        return _validate_regex(args.regex, args.json)
    end_fn = end_offsets_source(args.end_offsets) if getattr(args, "end_offsets", None) else None
    if args.action == "--reset-offsets":  # every usage error before reaching the cluster
        prepare(args)
    elif args.action == "--delete-offsets":
        try:
            parse_topics(args.topic)
        except ValueError as exc:
            raise UsageError(f"groupcoord groups --delete-offsets: {exc}") from None
    deployment = connect_and_say(args.namespace, args.address)
    out = GroupsOutput(args.json)
    run = {
        "--list": _list,
        "--describe": _describe,
        "--reset-offsets": lambda *run_args: reset(*run_args, _group_ids),
        "--delete-offsets": _delete_offsets,
        "--delete": _delete,
    }[args.action]
    try:
        status = asyncio.run(run(args, deployment, out, end_fn))
    # RuntimeError: AdminError, CoordinatorUnavailable, ResetError, a partition not serving.
    except (RuntimeError, ConnectionError, TimeoutError) as exc:
        out.error(f"groupcoord: {exc}")
        status = EXIT_FAILED
    out.finish()
    return status


def _validate_regex(regex: str, as_json: bool) -> int:
    """Kafka's ``--validate-regex``: its sentence, or with ``as_json`` one object."""
    why = regex_error(regex)
    if as_json:
        print(json.dumps({"regex": regex, "valid": why is None, "reason": why}))
    elif why is None:
        print(f"The regular expression `{regex}` is valid.")
    else:
        print(f"The regular expression `{regex}` is invalid: {why}.")
    return EXIT_OK if why is None else EXIT_FAILED


async def _group_ids(args, admin: AdminClient) -> list[str]:
    if args.all_groups:
        return sorted(g.group_id for g in await admin.list_groups())
    return list(dict.fromkeys(args.group))


async def _list(args, deployment: Deployment, out: GroupsOutput, _end) -> int:
    infos = deployment.infos()
    if any(i["state"] in bootstrap.BROKEN_STATES for i in infos):
        # ListGroups would wait for them until it times out.
        broken = bootstrap.not_serving(infos, bootstrap.BROKEN_STATES)
        raise RuntimeError(f"cannot list every group: {broken} (see groupcoord status)")
    listed = await AdminClient(deployment.router).list_groups(args.state or ())
    if args.type:
        listed = [g for g in listed if g.group_type in args.type]
    rows = [
        group_row(
            group=g.group_id,
            state=g.group_state,
            protocol_type=g.protocol_type or None,
            group_type=g.group_type,
        )
        for g in sorted(listed, key=lambda g: g.group_id)
    ]
    out.add("groups", rows)
    columns = [("group", "GROUP")]
    if args.type is not None:  # Kafka's --list --type: a TYPE column, spelled Classic
        columns.append(("type_text", "TYPE"))
        rows = [r | {"type_text": (r["group_type"] or "").capitalize() or None} for r in rows]
    if args.state is not None:
        columns.append(("state", "STATE"))
    if len(columns) == 1:
        for row in rows:
            out.text(row["group"])
    else:
        out.table(rows, columns)
    return EXIT_OK


async def _describe(args, deployment: Deployment, out: GroupsOutput, end_fn) -> int:
    admin = AdminClient(deployment.router)
    ids = await _group_ids(args, admin)
    described = await admin.describe_groups(ids, with_offsets=True, end_offsets=end_fn)
    kafka = {}
    if args.state:
        kafka = {i["partition"]: i.get("kafka") for i in deployment.infos()}
    status = EXIT_OK
    for d in described:
        coordinator = partition_for(d.group_id, deployment.num_partitions)
        group, members, offsets = described_rows(d, coordinator)
        out.add("groups", [group])
        if d.state == "Dead":
            out.error(f"Error: Consumer group '{d.group_id}' does not exist.")
            status = EXIT_FAILED
            continue
        out.add("members", members)
        out.add("offsets", offsets)
        if d.state == "Empty":
            out.note(f"Consumer group '{d.group_id}' has no active members.")
        elif d.state != "Stable":
            out.note(f"Warning: Consumer group '{d.group_id}' is rebalancing.")
        if args.state:
            where = kafka.get(coordinator)
            text = f"{where}  ({coordinator})" if where else f"partition-{coordinator}"
            epoch = group["generation"] if d.group_type == "consumer" else None
            row = group | {"coordinator_text": text, "group_epoch": epoch}
            out.table([row], STATE_VERBOSE_VIEW if args.verbose else STATE_VIEW)
        elif args.members:
            # The header even without members, as Kafka prints it.
            out.table(
                members_view(members, args.verbose, group["assignment_epoch"]),
                _members_columns(members, args.verbose),
            )
        elif offsets:
            out.table(offsets, OFFSETS_VERBOSE_VIEW if args.verbose else OFFSETS_VIEW)
    if end_fn is not None and any(o["log_end_offset"] is None for o in out.document["offsets"]):
        out.note(f"{args.end_offsets} has no end offset for some partitions: their LAG is -")
    return status


def members_view(members: list[dict], verbose: bool, target_epoch: int | None = None) -> list[dict]:
    """The rows of ``--members``: with ``verbose``, the assignments as text (a consumer group's
    target one too, and its target assignment epoch, as Kafka's TARGET-EPOCH)."""
    if not verbose:
        return members
    return [
        m
        | {
            "assignment_text": assignment_text(m["assignment"]),
            "target_text": None
            if m["target_assignment"] is None
            else assignment_text(m["target_assignment"]),
            "target_epoch": target_epoch,
        }
        for m in members
    ]


def _members_columns(members: list[dict], verbose: bool) -> list[tuple[str, str]]:
    columns = [("group", "GROUP"), ("consumer_id", "CONSUMER-ID")]
    if any(m["group_instance_id"] for m in members):  # Kafka shows it only when one has it
        columns.append(("group_instance_id", "GROUP-INSTANCE-ID"))
    columns += [("host", "HOST"), ("client_id", "CLIENT-ID"), ("partitions", "#PARTITIONS")]
    if verbose:  # Kafka 4's tool: for every group, "-" where a classic one has no such thing
        columns += [
            ("member_epoch", "CURRENT-EPOCH"),
            ("assignment_text", "CURRENT-ASSIGNMENT"),
            ("target_epoch", "TARGET-EPOCH"),
            ("target_text", "TARGET-ASSIGNMENT"),
        ]
    return columns


async def _delete_offsets(args, deployment: Deployment, out: GroupsOutput, _end) -> int:
    admin = AdminClient(deployment.router)
    catalog = await ask_async(deployment.router.topics.remote(), "the router")
    committed = await admin.fetch_offsets(args.group)
    targets = partitions_named(args.topic, committed, catalog)
    try:
        results = await admin.delete_offsets(args.group, targets)
    except AdminError as exc:
        out.add("groups", [group_row(group=args.group, error=exc.error.name)])
        out.error(f"Error: {args.group}: {exc}")
        return EXIT_FAILED
    rows = [
        offset_row(
            group=args.group,
            topic=t,
            partition=p,
            current_offset=committed.get((t, p)),
            error=None if e == Errors.NONE else e.name,
        )
        for (t, p), e in sorted(results.items())
    ]
    out.add("groups", [group_row(group=args.group)])
    out.add("offsets", rows)
    failed = any(r["error"] for r in rows)
    if failed:
        out.error("Error: some partitions' offsets were not deleted (see STATUS)")
    else:
        out.text(f"Request succeeded for deleting offsets from group {args.group}.")
    shown = [r | {"status": f"Error: {r['error']}" if r["error"] else "Successful"} for r in rows]
    out.table(shown, DELETE_OFFSETS_VIEW)
    return EXIT_FAILED if failed else EXIT_OK


async def _delete(args, deployment: Deployment, out: GroupsOutput, _end) -> int:
    admin = AdminClient(deployment.router)
    results = await admin.delete_groups(await _group_ids(args, admin))
    out.add(
        "groups",
        [
            group_row(group=g, error=None if e == Errors.NONE else e.name)
            for g, e in results.items()
        ],
    )
    deleted = [g for g, e in results.items() if e == Errors.NONE]
    failed = {g: e for g, e in results.items() if e != Errors.NONE}
    if not failed:
        names = ", ".join(f"'{g}'" for g in deleted)
        out.text(f"Deletion of requested consumer groups ({names}) was successful.")
        return EXIT_OK
    for g, e in failed.items():
        why = DELETE_REFUSALS.get(e, "")
        out.error(
            f"Error: Group '{g}' could not be deleted due to: {e.name}"
            + (f" ({why})" if why else "")
        )
    if deleted:
        out.note(
            "These consumer groups were deleted successfully: "
            + ", ".join(f"'{g}'" for g in deleted)
        )
    return EXIT_FAILED
