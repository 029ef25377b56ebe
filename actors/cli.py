"""``groupcoord``: run the coordinator, watch it survive a failure, administer groups.

    groupcoord serve  [--partitions N] [--log-dir DIR] [--namespace NS] [--address A] [--detach]
                      [--router-node head|any|NODE_ID]
                      [--kafka-port P [--kafka-host H] [--kafka-partition-ports BASE]
                       [--kafka-network-processes N] [--kafka-idle-poll-us US]
                       [--kafka-security-protocol P] [--sasl-mechanisms M,...] [--users-file F]
                       [--ssl-certfile F [--ssl-keyfile F] [--ssl-cafile F]] [--acl-file F]]
                      [--http-port P [--http-host H]] [--end-offsets SOURCE]
                      [--mirror-from kafka:HOST:PORT [--mirror-every-s S]
                       [--mirror-topic-pattern RE]]
                      [--config FILE.toml] [--log-level LEVEL] [one flag per setting: --help]
    groupcoord users  add NAME [--mechanism M]... [--password P] | list | delete NAME
                      [--users-file F | --log-dir DIR]
    groupcoord topics list | create TOPIC --partitions N | alter TOPIC --partitions N
                      | delete TOPIC | mirror --from kafka:HOST:PORT [--topic-pattern RE]
                      [--dry-run] [--every-s S]
    groupcoord configs GROUP [--set NAME=VALUE]... [--delete NAME]...
    groupcoord demo   [--seconds S] [--log-dir DIR]
    groupcoord status
    groupcoord groups --list | --describe | --reset-offsets | --delete-offsets | --delete ...
    groupcoord --version

Every command prints readable tables, or one JSON document with ``--json``; ``groups`` is
Kafka's kafka-consumer-groups (cli_groups.py). Exit status: 0 done; 2 a usage error (one line
on stderr naming what is wrong) or no deployment reached; ``groups`` and ``status`` exit 1 when
the operation itself failed (an unknown group, a refused reset, a partition not serving), while
``serve``, ``topics`` and ``configs`` report their other errors with 2 too.

Which Ray cluster: ``--address``, else ``RAY_ADDRESS``, else ``serve`` starts an embedded one and
the other commands use the one cluster running on this machine (refusing to guess between
several). ``serve`` prints the address clients should use; the other commands say on stderr
which cluster and namespace they reached, so ``--json`` output stays one clean document.
``serve`` in the foreground stops on SIGINT or SIGTERM: it closes every partition (parked
requests answered, logs flushed, writer locks released), stops its embedded Ray and exits 0.
"""

from __future__ import annotations

import getpass
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib.metadata import version

from ray.exceptions import RayError, RayTaskError

from groupcoord.coordinator.group_config import (
    DELETE,
    SET,
    SETTINGS,
    GroupConfigOp,
    group_setting,
)

from . import cli_groups
from .bootstrap import DEFAULT_LOG_DIR, DEFAULT_NAMESPACE, ask
from .cli_common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    OneLineParser,
    UsageError,
    connect_and_say,
)
from .cli_serve import PARTITION_COLUMNS, cmd_serve, iso_utc, partitions_rows, users_file
from .cli_topics import cmd_topics
from .demo_run import run_demo
from .output import Output, first_line
from .security import (
    DEFAULT_SASL_MECHANISMS,
    PROTOCOLS,
    USERS_FILE_NAME,
    UsersFile,
)
from .serve_config import add_serve_options, parse_with_config, usable_log_dir

# -- status and topics -------------------------------------------------------------------------


def _connect(args):
    return connect_and_say(args.namespace, args.address)


def cmd_status(args, out: Output) -> int:
    deployment = _connect(args)
    infos = deployment.infos()
    router = ask(deployment.router.describe.remote(), "the router")
    out.document["router_node"] = router["node"]
    counters = router.get("kafka_listener")
    bootstrap = None if counters is None else {"address": router.get("kafka"), **counters}
    out.document["bootstrap_listener"] = bootstrap
    out.document["mirror"] = mirror = router.get("mirror")
    if not out.as_json:
        print(f"router on node {router['node']}", flush=True)
        if bootstrap is not None:
            print(_bootstrap_line(bootstrap), flush=True)
        if mirror is not None:
            print(_mirror_line(mirror), flush=True)
    out.show("partitions", "partitions", partitions_rows(infos), PARTITION_COLUMNS)
    out.finish()
    return 0 if all(i["state"] == "serving" for i in infos) else 1


def _mirror_line(mirror: dict) -> str:
    """The router's catalog mirror (``catalog_mirror``): where from, and its last round."""
    head = f"topic catalog mirrored from {mirror['from']} every {mirror['every_s']:g} s"
    last = mirror["last"]
    if last is None:
        return f"{head}: no round yet"
    outcome = (
        f"failed: {last['error']}"
        if last["error"]
        else f"{last['created']} created, {last['grown']} grown, {last['refused']} refused"
    )
    return f"{head}: {mirror['rounds']} rounds, the last at {iso_utc(last['ended_ms'])}: {outcome}"


def _bootstrap_line(listener: dict) -> str:
    """The router's Kafka bootstrap listener: where it listens and what it counted."""
    where = listener["address"] or "(not listening)"
    return (
        f"Kafka bootstrap listener at {where}: {listener['connections']} connections, "
        f"{listener['refused_connections']} refused, {listener['protocol_errors']} protocol "
        f"errors, {listener['authentication_failures']} failed authentications"
    )


def cmd_configs(args, out: Output) -> int:
    router = _connect(args).router
    ops = [GroupConfigOp(name, SET, value) for name, value in map(_setting, args.set or ())]
    ops += [GroupConfigOp(name, DELETE, None) for name in args.delete or ()]
    if ops:
        try:
            ask(router.configure_group.remote(args.group, ops), "the router")
        except RayTaskError as exc:  # the router refused it: say why in one line
            raise ValueError(f"configs {args.group}: {exc.cause}") from None
    own = ask(router.group_configs.remote(), "the router").get(args.group, {})
    config = ask(router.describe.remote(), "the router")["config"]
    rows = [
        {
            "setting": name,
            "value": group_setting(own, name, config),
            "source": "group" if name in own else "deployment",
        }
        for name in SETTINGS
    ]
    out.show("settings", f"settings of group {args.group}", rows, ("setting", "value", "source"))
    out.finish()
    return 0


def _setting(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise UsageError(f"groupcoord configs: --set takes NAME=VALUE, got {text!r}")
    return name, value


# -- users -------------------------------------------------------------------------------------


def _password(args) -> str:
    if args.password is not None:
        return args.password
    if sys.stdin.isatty():
        return getpass.getpass(f"password for {args.name}: ")
    return sys.stdin.readline().rstrip("\r\n")


def cmd_users(args, out: Output) -> int:
    users = UsersFile(users_file(args))
    if args.action in ("add", "delete") and not args.name:
        raise ValueError(f"users {args.action} needs a user name")
    if args.action == "add":
        mechanisms = args.mechanism or DEFAULT_SASL_MECHANISMS
        users.add(args.name, _password(args), mechanisms, args.iterations)
        out.note(f"user {args.name!r}: {', '.join(mechanisms)} credentials in {users.path}")
    elif args.action == "delete":
        users.delete(args.name)
        out.note(f"user {args.name!r} deleted from {users.path}")
    rows = [
        {"user": name, "mechanism": mechanism, "iterations": credential.iterations}
        for name, credentials in sorted(users.list().items())
        for mechanism, credential in sorted(credentials.items())
    ]
    out.show("users", f"users in {users.path}", rows, ("user", "mechanism", "iterations"))
    out.finish()
    return 0


# -- demo --------------------------------------------------------------------------------------


def demo_lake_report(work_dir: str, log_dir: str, topic, out: Output) -> None:
    """The demo's last act: export the partition logs into a Delta lake with Spark and print a
    short analytics report, judging the consumers against the synthetic topic's end offsets."""
    try:
        # Lazy: the [spark] extra is optional, and PySpark takes seconds to import.
        from groupcoord.spark_export.report import export_and_report  # noqa: PLC0415
    except ImportError as exc:  # installed without the [spark] extra
        out.note(f"lake export skipped: {exc} (pip install 'groupcoord[spark]')")
        return
    log_end_path = os.path.join(work_dir, "log-end.csv")
    topic.write_log_end_history(log_end_path, until_s=time.time())
    lake_dir = os.path.join(work_dir, "lake")
    out.note(f"[lake] exporting {log_dir} into {lake_dir} with Spark (start-up takes a while)")
    text = export_and_report(
        log_dir,
        lake_dir,
        log_end_path=log_end_path,
        plot_dir=os.path.join(work_dir, "plots"),
        progress=out.note,
    )
    out.show_text("lake_report", text)


def cmd_demo(args, out: Output) -> int:
    log_dir = usable_log_dir(args.log_dir) if args.log_dir else None  # checked before Ray
    work_dir = tempfile.mkdtemp(prefix="groupcoord-demo-")
    log_dir = log_dir or os.path.join(work_dir, "logs")
    topic = run_demo(log_dir, args.seconds, out)
    if not args.no_lake:
        demo_lake_report(work_dir, log_dir, topic, out)
    out.finish()
    return 0


# -- entry point -------------------------------------------------------------------------------


def parser() -> OneLineParser:
    p = OneLineParser(prog="groupcoord", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"groupcoord {version('groupcoord')}")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp, address_help):
        sp.add_argument(
            "--namespace",
            default=DEFAULT_NAMESPACE,
            help="the deployment's Ray namespace (default: %(default)s)",
        )
        sp.add_argument("--address", default=None, help=address_help)
        sp.add_argument("--json", action="store_true", help="one JSON document, no tables")

    serve = sub.add_parser(
        "serve",
        help="start the coordinator and stay up",
        description="Start the coordinator: one Ray actor per offsets partition, a router, "
        "optional Kafka listeners and HTTP service. Every setting is a flag or a key of "
        "--config FILE.toml; a flag overrides the file. Stops on Ctrl-C or SIGTERM.",
    )
    common(serve, "Ray cluster (GCS host:port); default RAY_ADDRESS, else an embedded Ray")
    serve.add_argument(
        "--partitions", type=int, default=4, help="offsets partitions (default: %(default)s)"
    )
    serve.add_argument(
        "--log-dir",
        default=DEFAULT_LOG_DIR,
        help="partition logs, deployment.json and server-logs/ (default: %(default)s)",
    )
    serve.add_argument(
        "--detach",
        action="store_true",
        help="return once serving (the actors are detached and stay)",
    )
    serve.add_argument(
        "--ready-timeout",
        type=float,
        default=120.0,
        help="how long to wait for every partition to load (default: %(default)s s)",
    )
    serve.add_argument(
        "--router-node",
        default="head",
        help="where the router runs: head (default), any, or a Ray node id; partitions "
        "are spread over the nodes",
    )
    serve.add_argument(
        "--kafka-port",
        type=int,
        default=None,
        help="serve Kafka clients: the bootstrap listener's port (0: any free port; "
        "default: no Kafka listeners)",
    )
    serve.add_argument(
        "--kafka-host",
        default="127.0.0.1",
        help="the listeners' bind address (default 127.0.0.1). Anything but loopback needs "
        "--kafka-security-protocol SASL_SSL or SASL_PLAINTEXT (or SSL with --ssl-cafile); "
        "0.0.0.0 listens everywhere and "
        "tells clients each node's address",
    )
    serve.add_argument(
        "--kafka-partition-ports",
        type=int,
        default=0,
        help="partition n listens on BASE + n (default 0: any free port)",
    )
    serve.add_argument(
        "--kafka-network-processes",
        type=int,
        default=None,
        help="serve each partition's Kafka connections from N processes of its own, as "
        "Kafka's num.network.threads (default 0: on the partition's own thread)",
    )
    serve.add_argument(
        "--kafka-idle-poll-us",
        type=int,
        default=None,
        help="after each turn with work, a partition's loop (and its network processes') "
        "polls this long rather than sleeping: quicker answers for up to that much of a "
        "core, as Seastar's --idle-poll-time-us (default 0: off; at most 10000)",
    )
    serve.add_argument(
        "--http-port",
        type=int,
        default=None,
        help="serve live lag over HTTP: Burrow's v3 API (/v3/kafka/...) and a web view (/) "
        "on this port (0: any free port; default: no HTTP service)",
    )
    serve.add_argument(
        "--http-host",
        default="127.0.0.1",
        help="the HTTP service's address (default loopback; the API is read-only and "
        "unauthenticated, like Burrow's)",
    )
    serve.add_argument(
        "--end-offsets",
        metavar="SOURCE",
        default=None,
        help="where live lag's log-end offsets come from: file:PATH (JSON, read once), "
        "kafka:HOST:PORT[,...] (ListOffsets on an upstream cluster) or python:module:function "
        "(README: Administering groups); needs --http-port. Default: none, lag is null",
    )
    serve.add_argument(
        "--mirror-from",
        metavar="kafka:HOST:PORT",
        default=None,
        help="keep the topic catalog mirrored from this Kafka cluster (kafka:HOST:PORT[,...]): "
        "the router creates and grows topics as `topics mirror` does, every --mirror-every-s. "
        "Default: no mirror",
    )
    serve.add_argument(
        "--mirror-every-s",
        type=float,
        default=None,
        help="seconds between the mirror's rounds, in [1, 86400] (default 60)",
    )
    serve.add_argument(
        "--mirror-topic-pattern",
        metavar="RE",
        default=None,
        help="mirror only the topics whose whole name this regular expression matches",
    )
    serve.add_argument(
        "--kafka-security-protocol",
        choices=PROTOCOLS,
        default=None,
        help="Kafka's security.protocol for every listener (default PLAINTEXT): SSL is TLS "
        "without client identity, SASL_PLAINTEXT and SASL_SSL authenticate users from "
        "--users-file (SASL_SSL over TLS)",
    )
    serve.add_argument(
        "--sasl-mechanisms",
        default=None,
        help="comma-separated SASL mechanisms to enable, from PLAIN, SCRAM-SHA-256, "
        f"SCRAM-SHA-512 (default {','.join(DEFAULT_SASL_MECHANISMS)})",
    )
    serve.add_argument(
        "--users-file",
        default=None,
        help="SASL users and their SCRAM credentials, as `groupcoord users` writes them "
        f"(default LOG_DIR/{USERS_FILE_NAME}); must be readable on every node",
    )
    serve.add_argument(
        "--ssl-certfile",
        default=None,
        help="PEM certificate chain the listeners present (SSL, SASL_SSL); may hold the key",
    )
    serve.add_argument(
        "--ssl-keyfile", default=None, help="PEM private key, if not in --ssl-certfile"
    )
    serve.add_argument(
        "--ssl-cafile",
        default=None,
        help="SSL only: require client certificates signed by these PEM CAs; the principal is "
        "User:<certificate subject>, e.g. User:CN=alice,O=acme",
    )
    serve.add_argument(
        "--acl-file",
        default=None,
        help="group ACLs (.json or .toml; README: Security). With it, anything not allowed "
        "is denied; without it every client may do everything",
    )
    add_serve_options(serve)

    users = sub.add_parser(
        "users",
        help="SASL users of the Kafka listeners (SCRAM credentials)",
        description="Add, list or delete the SASL users of the Kafka listeners in the users "
        "file (SCRAM credentials, never the password). Needs no running deployment.",
    )
    users.add_argument("action", choices=("add", "list", "delete"), help="what to do")
    users.add_argument("name", nargs="?", help="add/delete: the user name")
    users.add_argument("--users-file", default=None, help=f"default LOG_DIR/{USERS_FILE_NAME}")
    users.add_argument(
        "--log-dir",
        default=DEFAULT_LOG_DIR,
        help="the deployment's log directory, where the users file is by default "
        "(default: %(default)s)",
    )
    users.add_argument(
        "--mechanism",
        action="append",
        choices=("SCRAM-SHA-256", "SCRAM-SHA-512"),
        help="add: store a credential for this mechanism (repeatable; default both). PLAIN "
        "passwords are checked against the SCRAM credentials",
    )
    users.add_argument(
        "--iterations", type=int, default=4096, help="add: PBKDF2 iterations (4096-16384)"
    )
    users.add_argument(
        "--password",
        default=None,
        help="add: the password (default: read from the terminal, or one line of stdin)",
    )
    users.add_argument("--json", action="store_true", help="one JSON document, no tables")

    demo = sub.add_parser(
        "demo",
        help="run consumers, kill a partition, show the recovery",
        description="On an embedded Ray: start a two-partition coordinator with its web view "
        "and Burrow API (their URLs are printed), run consumers over a synthetic topic, kill a "
        "partition actor and show that no acknowledged commit was lost, then export the logs "
        "with Spark and print the lake report.",
    )
    demo.add_argument("--seconds", type=float, default=6.0, help="consuming time per phase")
    demo.add_argument(
        "--log-dir", default=None, help="the partition logs (default: a new temporary directory)"
    )
    demo.add_argument("--json", action="store_true", help="one JSON document, no tables")
    demo.add_argument("--no-lake", action="store_true", help="skip the Spark export and report")

    # Dispatched before parsing (see main); listed here so that --help shows them.
    sub.add_parser(
        "export",
        add_help=False,
        help="export partition logs into the Delta lake (groupcoord export --help)",
    )
    sub.add_parser(
        "report", add_help=False, help="analytics report from the lake (groupcoord report --help)"
    )

    client_address = (
        "Ray cluster (GCS host:port, as serve printed it); default RAY_ADDRESS, "
        "else the one cluster running on this machine"
    )
    status = sub.add_parser(
        "status",
        help="the partitions: node, state, epoch, load time, groups, errors",
        description="Each offsets partition: state, epoch, groups, process, node, load time, "
        "niceness, Kafka listener and load errors. Exit 1 when a partition is not serving.",
    )
    common(status, client_address)

    topics = sub.add_parser(
        "topics",
        help="the topic catalog Kafka clients see",
        description="The topic catalog (LOG_DIR/topics.json) that Kafka clients' Metadata "
        "requests see: list it, create a topic, grow one (alter), delete one, or mirror an "
        "upstream Kafka cluster's topics into it.",
    )
    common(topics, client_address)
    topics.add_argument(
        "action", choices=("list", "create", "alter", "delete", "mirror"), help="what to do"
    )
    topics.add_argument("topic", nargs="?", help="create/alter/delete: the topic name")
    topics.add_argument("--partitions", type=int, help="create/alter: the partition count")
    topics.add_argument(
        "--from",
        dest="source",
        metavar="kafka:HOST:PORT[,...]",
        help="mirror: the upstream Kafka cluster whose topics and partition counts the "
        "catalog takes (creating and growing topics, never shrinking or deleting one)",
    )
    topics.add_argument(
        "--topic-pattern", metavar="REGEX", help="mirror: only upstream topics matching it whole"
    )
    topics.add_argument(
        "--dry-run", action="store_true", help="mirror: show and validate, change nothing"
    )
    topics.add_argument(
        "--every-s",
        type=float,
        metavar="S",
        help="mirror: again every S seconds until interrupted, showing each round's changes",
    )

    configs = sub.add_parser(
        "configs",
        help="a group's own settings (kafka-configs --entity-type groups)",
        description="A consumer group's own settings, which override the deployment's for that "
        "group (Kafka's group configs: " + ", ".join(SETTINGS) + "): show them, set some "
        "(--set NAME=VALUE) or go back to the deployment's (--delete NAME).",
    )
    common(configs, client_address)
    configs.add_argument("group", help="the group id")
    configs.add_argument("--set", action="append", metavar="NAME=VALUE", help="set a setting")
    configs.add_argument("--delete", action="append", metavar="NAME", help="drop a setting")

    # Dispatched before parsing (see main), like export and report.
    sub.add_parser(
        "groups",
        add_help=False,
        help="Kafka's kafka-consumer-groups: --list, --describe, --reset-offsets, "
        "--delete-offsets, --delete (groupcoord groups --help)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("export", "report"):
        # The lake commands belong to spark_export, which has its own options and parser.
        # Lazy: it loads PySpark, which the other commands do not need.
        from groupcoord.spark_export import cli as lake_cli  # noqa: PLC0415

        return (lake_cli.export_main if argv[0] == "export" else lake_cli.report_main)(argv[1:])
    commands = {
        "serve": cmd_serve,
        "demo": cmd_demo,
        "status": cmd_status,
        "topics": cmd_topics,
        "configs": cmd_configs,
        "users": cmd_users,
    }
    try:
        if argv and argv[0] == "groups":
            return cli_groups.main(argv[1:])
        args, extra = parser().parse_known_args(argv)
        if extra:  # name the command whose options were wrong, not just "groupcoord"
            raise UsageError(
                f"groupcoord {args.command}: unrecognized arguments: {' '.join(extra)} "
                f"(see groupcoord {args.command} --help)"
            )
        if args.command == "serve":  # its --config FILE supplies defaults for its flags
            args = parse_with_config(parser(), "serve", argv)
        return commands[args.command](args, Output(getattr(args, "json", False)))
    except SystemExit as done:  # --help and --version print, then exit through argparse
        return done.code if isinstance(done.code, int) else EXIT_OK
    # Before ValueError: a failed actor task is also an instance of its cause's type, and its
    # message carries the remote traceback.
    except RayError as exc:
        print(f"groupcoord: the deployment failed: {first_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
    # OSError: no Ray cluster to connect to (ConnectionError), partitions not serving in time
    # (TimeoutError); ValueError includes UsageError.
    except (ValueError, LookupError, RuntimeError, OSError) as exc:
        print(f"groupcoord: {exc}" if not isinstance(exc, UsageError) else exc, file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
