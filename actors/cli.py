"""``groupcoord``: run the coordinator, watch it survive a failure, administer groups.

    groupcoord serve  [--partitions N] [--log-dir DIR] [--namespace NS] [--address A] [--detach]
                      [--router-node head|any|NODE_ID]
                      [--kafka-port P [--kafka-host H] [--kafka-partition-ports BASE]
                       [--kafka-security-protocol P] [--sasl-mechanisms M,...] [--users-file F]
                       [--ssl-certfile F [--ssl-keyfile F] [--ssl-cafile F]] [--acl-file F]]
                      [--http-port P [--http-host H]] [--end-offsets SOURCE]
                      [--config FILE.toml] [--log-level LEVEL] [one flag per setting: --help]
    groupcoord users  add NAME [--mechanism M]... [--password P] | list | delete NAME
                      [--users-file F | --log-dir DIR]
    groupcoord topics list | create TOPIC --partitions N | alter TOPIC --partitions N
                      | delete TOPIC
    groupcoord demo   [--seconds S] [--log-dir DIR]
    groupcoord status
    groupcoord groups --list | --describe | --reset-offsets | --delete-offsets | --delete ...
    groupcoord --version

Every command prints readable tables, or one JSON document with ``--json``; ``groups`` is
Kafka's kafka-consumer-groups (cli_groups.py). Exit status: 0 done; 2 a usage error (one line
on stderr naming what is wrong) or no deployment reached; ``groups`` and ``status`` exit 1 when
the operation itself failed (an unknown group, a refused reset, a partition not serving), while
``serve`` and ``topics`` report their other errors with 2 too.

Which Ray cluster: ``--address``, else ``RAY_ADDRESS``, else ``serve`` starts an embedded one and
the other commands use the one cluster running on this machine (refusing to guess between
several). ``serve`` prints the address clients should use; the other commands say on stderr
which cluster and namespace they reached, so ``--json`` output stays one clean document.
``serve`` in the foreground stops on SIGINT or SIGTERM: it closes every partition (parked
requests answered, logs flushed, writer locks released), stops its embedded Ray and exits 0.
"""

from __future__ import annotations

import datetime
import getpass
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib.metadata import version

import ray
from ray.exceptions import RayTaskError

from . import bootstrap, cli_groups
from .bootstrap import DEFAULT_LOG_DIR, DEFAULT_NAMESPACE, ensure_ray, start, stop
from .cli_common import EXIT_OK, EXIT_USAGE, OneLineParser, UsageError, connect_and_say
from .demo_run import run_demo
from .end_offsets import end_offsets_source
from .http_service import HttpConfig
from .output import Output
from .security import (
    DEFAULT_SASL_MECHANISMS,
    PROTOCOLS,
    USERS_FILE_NAME,
    ListenerSecurity,
    UsersFile,
    read_acl_file,
)
from .serve_config import add_serve_options, parse_with_config, serve_settings, usable_log_dir
from .server_log import SERVER_LOGS
from .wire_service import WireConfig

# How long a stopping serve waits for the partitions to close before giving up on them.
STOP_TIMEOUT_S = 30.0

# -- serve -------------------------------------------------------------------------------------

PARTITION_COLUMNS = (
    "partition",
    "state",
    "epoch",
    "groups",
    "pid",
    "node",
    "load_s",
    "loaded_at",
    "nice",
    "kafka",
    "attempts",
    "error",
)


def _iso_utc(ms: int | None) -> str:
    if ms is None:
        return ""
    return (
        datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def partitions_rows(infos: list[dict]) -> list[dict]:
    return [
        {k: info.get(k) for k in ("partition", "state", "epoch", "groups", "pid")}
        | {
            "node": str(info.get("node", ""))[:12],
            "load_s": "" if info.get("load_seconds") is None else f"{info['load_seconds']:.2f}",
            "loaded_at": _iso_utc(info.get("loaded_at_ms")),
            "nice": info.get("niceness"),
            "kafka": info.get("kafka") or "",
            "attempts": info.get("load_attempts"),
            "error": (
                info.get("load_error") or info.get("init_error") or info.get("fatal_error") or ""
            )[:100],
        }
        for info in infos
    ]


class Stopped(BaseException):
    """SIGINT or SIGTERM reached ``serve`` (a BaseException, like KeyboardInterrupt, so that no
    ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum, frame) -> None:
    raise Stopped(signum)


_SECURITY_FLAGS = (
    "kafka_security_protocol",
    "sasl_mechanisms",
    "users_file",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_cafile",
    "acl_file",
)


def _users_file(args) -> str:
    return args.users_file or os.path.join(args.log_dir, USERS_FILE_NAME)


def _wire_config(args) -> WireConfig | None:
    """The Kafka listeners serve asked for; ValueError (before Ray starts) for a bad one,
    including security files that cannot be read (users, TLS, ACLs)."""
    if args.kafka_port is None:
        given = [f for f in _SECURITY_FLAGS if getattr(args, f) is not None]
        if given:
            raise ValueError(f"--{given[0].replace('_', '-')} needs --kafka-port")
        return None
    protocol = args.kafka_security_protocol or "PLAINTEXT"
    sasl = protocol.startswith("SASL_")
    mechanisms = DEFAULT_SASL_MECHANISMS
    if args.sasl_mechanisms is not None:
        if not sasl:
            raise ValueError(f"--sasl-mechanisms needs a SASL security protocol, not {protocol}")
        mechanisms = tuple(m.strip() for m in args.sasl_mechanisms.split(",") if m.strip())
    security = ListenerSecurity(
        protocol=protocol,
        sasl_mechanisms=mechanisms,
        users_file=os.path.abspath(_users_file(args)) if sasl else args.users_file,
        ssl_certfile=args.ssl_certfile and os.path.abspath(args.ssl_certfile),
        ssl_keyfile=args.ssl_keyfile and os.path.abspath(args.ssl_keyfile),
        ssl_cafile=args.ssl_cafile and os.path.abspath(args.ssl_cafile),
        acls=read_acl_file(args.acl_file) if args.acl_file else None,
    )
    wire = WireConfig(
        host=args.kafka_host,
        bootstrap_port=args.kafka_port,
        partition_ports=args.kafka_partition_ports,
        security=security,
    )
    security.check()
    return wire


def _progress(text: str) -> None:
    """A progress line on stderr (stdout stays the tables, or one JSON document)."""
    print(f"groupcoord: {text}", file=sys.stderr, flush=True)


def _loaded(info: dict, loaded: int, total: int) -> None:
    seconds = info.get("load_seconds")
    took = f" in {seconds:.3f}s" if seconds is not None else ""
    kafka = f", Kafka listener {info['kafka']}" if info.get("kafka") else ""
    _progress(
        f"partition {info['partition']} loaded {info.get('groups', 0)} groups{took} "
        f"({loaded}/{total} serving){kafka}"
    )


def _http_config(args) -> HttpConfig | None:
    """The live lag HTTP service serve asked for; ValueError (before Ray starts) for a bad
    one. Without an end-offsets source lags are unknown (null); statuses need them."""
    if args.http_port is None:
        if args.end_offsets is not None:
            raise UsageError(
                "groupcoord serve: --end-offsets needs --http-port (it feeds live lag)"
            )
        return None
    end_offsets = end_offsets_source(args.end_offsets) if args.end_offsets else None
    return HttpConfig(host=args.http_host, port=args.http_port, end_offsets=end_offsets)


def cmd_serve(args, out: Output) -> int:
    wire = _wire_config(args)
    http = _http_config(args)
    if (
        args.detach
        and not ray.is_initialized()
        and bootstrap.resolve_address(args.address, embedded=True)[0] == "local"
    ):
        # An embedded Ray belongs to this process: detached actors would die with it at exit.
        raise ValueError(
            "--detach needs a Ray cluster that outlives this command: start one "
            "with `ray start --head` and pass --address (or run serve without "
            "--detach, which stays in the foreground)"
        )
    settings = serve_settings(args)  # every check that needs no Ray, before Ray starts
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    deployment = None
    try:
        if not ray.is_initialized():
            target, source = bootstrap.resolve_address(args.address, embedded=True)
            _progress(
                "starting an embedded Ray"
                if target == "local"
                else f"connecting to the Ray cluster at {target} ({source})"
            )
        started = time.monotonic()
        # Ray installs its own SIGTERM handler (it prints a C++ stack and dies) when it
        # connects: connect first, then put ours in its place.
        ensure_ray(args.address, args.namespace)
        for s in previous:
            signal.signal(s, _raise_stopped)
        _progress(f"Ray at {bootstrap.ray_address()} ({time.monotonic() - started:.1f}s)")
        _progress(
            f"starting {args.partitions} partitions; coordinator logs in "
            f"{os.path.join(settings.log_dir, SERVER_LOGS)}/ (partition-<n>.log, router.log)"
        )
        deployment = start(
            args.partitions,
            settings.log_dir,
            namespace=args.namespace,
            address=args.address,
            wire=wire,
            config=settings.config,
            log_config=settings.log_config,
            log_level=settings.log_level,
            http=http,
            router_node=args.router_node,
        )
        infos = deployment.wait_ready(args.ready_timeout, progress=_loaded)
        if deployment.kafka is not None:
            _progress(f"Kafka bootstrap listener up at {deployment.kafka}")
        out.note(
            f"groupcoord serving {deployment.num_partitions} partitions in namespace "
            f"{deployment.namespace!r}, logs in {deployment.log_dir} "
            f"(deployment {deployment.cluster_id})"
        )
        out.note(
            f"Ray cluster at {deployment.ray_address} ({deployment.ray_source}); clients "
            f"use --address {deployment.ray_address} --namespace {deployment.namespace} "
            f"(or RAY_ADDRESS={deployment.ray_address})"
            + (
                "; token authentication is on: clients need RAY_AUTH_MODE=token and the "
                "token (~/.ray/auth_token or RAY_AUTH_TOKEN)"
                if os.environ.get("RAY_AUTH_MODE") == "token"
                else ""
            )
        )
        if deployment.kafka is not None and wire is not None:
            security = wire.security
            out.note(
                f"Kafka clients: bootstrap.servers={deployment.kafka} "
                f"security.protocol={security.protocol}"
                + (f" sasl.mechanism={'|'.join(security.sasl_mechanisms)}" if security.sasl else "")
                + (" (group ACLs on)" if security.acls is not None else "")
            )
        if deployment.http is not None:
            out.note(
                f"web view: http://{deployment.http}/ ; Burrow API: "
                f"http://{deployment.http}/v3/kafka"
            )
        out.document.update(
            kafka=deployment.kafka,
            http=deployment.http,
            ray_address=deployment.ray_address,
            namespace=deployment.namespace,
            cluster_id=deployment.cluster_id,
            log_dir=deployment.log_dir,
        )
        out.show("partitions", "partitions", partitions_rows(infos), PARTITION_COLUMNS)
        out.finish()
        if args.detach:
            return 0
        while True:  # stay up: an embedded Ray lives as long as we do
            signal.pause()
    except Stopped as stopped:
        for s in previous:  # a second signal must not interrupt the close
            signal.signal(s, signal.SIG_IGN)
        print(f"groupcoord: {stopped}: closing the partitions", file=sys.stderr, flush=True)
        status = 0
        if deployment is not None:
            try:
                stop(deployment, timeout_s=STOP_TIMEOUT_S)
            except Exception as exc:  # Ray went first (a Ctrl-C reaches its processes too)
                print(
                    f"groupcoord: could not close every partition: {exc!r}".splitlines()[0],
                    file=sys.stderr,
                    flush=True,
                )
                status = 1
        if ray.is_initialized():
            ray.shutdown()
        print("groupcoord: stopped", file=sys.stderr, flush=True)
        return status
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


# -- status and topics -------------------------------------------------------------------------


def _connect(args):
    return connect_and_say(args.namespace, args.address)


def cmd_status(args, out: Output) -> int:
    deployment = _connect(args)
    infos = deployment.infos()
    router_node = ray.get(deployment.router.describe.remote())["node"]
    out.document["router_node"] = router_node
    if not out.as_json:
        print(f"router on node {router_node}", flush=True)
    out.show("partitions", "partitions", partitions_rows(infos), PARTITION_COLUMNS)
    out.finish()
    return 0 if all(i["state"] == "serving" for i in infos) else 1


def cmd_topics(args, out: Output) -> int:
    router = _connect(args).router
    if args.action != "list":
        if args.topic is None:
            raise ValueError(f"topics {args.action} needs a topic name")
        if args.action in ("create", "alter") and args.partitions is None:
            raise ValueError(f"topics {args.action} needs --partitions N")
        change = {
            "create": lambda: router.create_topic.remote(args.topic, args.partitions),
            "alter": lambda: router.alter_topic.remote(args.topic, args.partitions),
            "delete": lambda: router.delete_topic.remote(args.topic),
        }[args.action]
        try:
            ray.get(change())
        except RayTaskError as exc:  # the router refused it: say why in one line
            raise ValueError(f"topics {args.action} {args.topic}: {exc.cause}") from None
    topics = ray.get(router.topics.remote())
    rows = [{"topic": t, "partitions": n} for t, n in sorted(topics.items())]
    out.show("topics", "topics", rows, ("topic", "partitions"))
    out.finish()
    return 0


# -- users -------------------------------------------------------------------------------------


def _password(args) -> str:
    if args.password is not None:
        return args.password
    if sys.stdin.isatty():
        return getpass.getpass(f"password for {args.name}: ")
    return sys.stdin.readline().rstrip("\r\n")


def cmd_users(args, out: Output) -> int:
    users = UsersFile(_users_file(args))
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
        "requests see: list it, create a topic, grow one (alter) or delete one.",
    )
    common(topics, client_address)
    topics.add_argument("action", choices=("list", "create", "alter", "delete"), help="what to do")
    topics.add_argument("topic", nargs="?", help="create/alter/delete: the topic name")
    topics.add_argument("--partitions", type=int, help="create/alter: the partition count")

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
    # OSError: no Ray cluster to connect to (ConnectionError), partitions not serving in time
    # (TimeoutError); ValueError includes UsageError.
    except (ValueError, LookupError, RuntimeError, OSError) as exc:
        print(f"groupcoord: {exc}" if not isinstance(exc, UsageError) else exc, file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
