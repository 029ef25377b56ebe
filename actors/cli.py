"""``groupcoord``: run the coordinator, watch it survive a failure, administer groups.

    groupcoord serve  [--partitions N] [--log-dir DIR] [--namespace NS] [--address A] [--detach]
                      [--router-node head|any|NODE_ID]
                      [--kafka-port P [--kafka-host H] [--kafka-partition-ports BASE]]
    groupcoord topics list | create TOPIC --partitions N | alter TOPIC --partitions N
                      | delete TOPIC
    groupcoord demo   [--seconds S] [--log-dir DIR]
    groupcoord status
    groupcoord groups list
    groupcoord groups describe GROUP... [--end-offsets FILE]
    groupcoord groups delete GROUP...
    groupcoord groups reset-offsets GROUP (--to-offset N | --to-earliest FILE | --to-latest FILE)

Every command prints readable tables, or one JSON document with ``--json``. Offset files are
JSON objects ``{"topic:partition": offset}``: there is no broker here to ask for log start and
end offsets, so the caller supplies them.

Which Ray cluster: ``--address``, else ``RAY_ADDRESS``, else ``serve`` starts an embedded one and
the other commands use the one cluster running on this machine (refusing to guess between
several). ``serve`` prints the address clients should use; the other commands say on stderr
which cluster and namespace they reached, so ``--json`` output stays one clean document.
``serve`` in the foreground stops on SIGINT or SIGTERM: it closes every partition (parked
requests answered, logs flushed, writer locks released), stops its embedded Ray and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence

import msgspec
import ray
from ray.exceptions import RayTaskError

from . import bootstrap
from .admin import AdminClient
from .bootstrap import DEFAULT_LOG_DIR, DEFAULT_NAMESPACE, connect, ensure_ray, start, stop
from .demo_run import run_demo
from .output import Output, show_descriptions
from .wire_service import WireConfig

# How long a stopping serve waits for the partitions to close before giving up on them.
STOP_TIMEOUT_S = 30.0

# -- output ------------------------------------------------------------------------------------


def _offsets_file(path: str) -> Callable[[str, int], int]:
    with open(path) as f:
        raw = json.load(f)
    if not isinstance(raw, dict):
        raise ValueError(f'{path}: expected a JSON object {{"topic:partition": offset}}')
    table_ = {}
    for key, value in raw.items():
        topic, _, partition = key.rpartition(":")
        if not topic or not partition.isdigit() or type(value) is not int:
            raise ValueError(f'{path}: entries must look like "topic:partition": offset')
        table_[(topic, int(partition))] = value

    def offset_of(topic: str, partition: int) -> int:
        if (topic, partition) not in table_:
            raise ValueError(f"{path} has no offset for {topic}:{partition}")
        return table_[(topic, partition)]

    return offset_of


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


def _wire_config(args) -> WireConfig | None:
    """The Kafka listeners serve asked for; ValueError (before Ray starts) for a bad one."""
    if args.kafka_port is None:
        return None
    return WireConfig(
        host=args.kafka_host,
        bootstrap_port=args.kafka_port,
        partition_ports=args.kafka_partition_ports,
    )


def cmd_serve(args, out: Output) -> int:
    wire = _wire_config(args)
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
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    deployment = None
    try:
        # Ray installs its own SIGTERM handler (it prints a C++ stack and dies) when it
        # connects: connect first, then put ours in its place.
        ensure_ray(args.address, args.namespace)
        for s in previous:
            signal.signal(s, _raise_stopped)
        deployment = start(
            args.partitions,
            args.log_dir,
            namespace=args.namespace,
            address=args.address,
            wire=wire,
            router_node=args.router_node,
        )
        infos = deployment.wait_ready(args.ready_timeout)
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
        if deployment.kafka is not None:
            out.note(f"Kafka clients: bootstrap.servers={deployment.kafka}")
        out.document.update(
            kafka=deployment.kafka,
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


# -- status and groups -------------------------------------------------------------------------


def _connect(args):
    """The deployment, saying on stderr which cluster and namespace were reached."""
    deployment = connect(args.namespace, args.address)
    print(
        f"groupcoord: Ray at {deployment.ray_address} ({deployment.ray_source}), namespace "
        f"{deployment.namespace!r}, deployment {deployment.cluster_id or '?'}",
        file=sys.stderr,
        flush=True,
    )
    return deployment


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


def cmd_groups(args, out: Output) -> int:
    deployment = _connect(args)
    admin = AdminClient(deployment.router)
    if args.action == "list":
        infos = deployment.infos()
        if any(i["state"] in bootstrap.BROKEN_STATES for i in infos):
            # ListGroups would wait for them until it times out.
            broken = bootstrap.not_serving(infos, bootstrap.BROKEN_STATES)
            raise RuntimeError(f"cannot list every group: {broken} (see groupcoord status)")
        groups = asyncio.run(admin.list_groups(args.state or ()))
        out.show(
            "groups",
            "groups",
            [msgspec.to_builtins(g) for g in groups],
            ("group_id", "group_state", "protocol_type"),
        )
    elif args.action == "describe":
        end_offsets = _offsets_file(args.end_offsets) if args.end_offsets else None
        show_descriptions(
            out,
            asyncio.run(
                admin.describe_groups(args.groups, with_offsets=True, end_offsets=end_offsets)
            ),
        )
    elif args.action == "delete":
        results = asyncio.run(admin.delete_groups(args.groups))
        out.show(
            "deleted",
            "delete groups",
            [{"group": g, "result": e.name} for g, e in results.items()],
            ("group", "result"),
        )
        out.finish()
        return 0 if all(e == 0 for e in results.values()) else 1
    else:
        (group,) = args.groups
        options = {"to_offset": args.to_offset}
        if args.to_earliest:
            options = {"to_earliest": _offsets_file(args.to_earliest)}
        elif args.to_latest:
            options = {"to_latest": _offsets_file(args.to_latest)}
        written = asyncio.run(admin.reset_offsets(group, **options))
        out.show(
            "reset",
            f"offsets of {group} reset",
            [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(written.items())],
            ("topic", "partition", "offset"),
        )
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
    work_dir = tempfile.mkdtemp(prefix="groupcoord-demo-")
    log_dir = args.log_dir or os.path.join(work_dir, "logs")
    topic = run_demo(log_dir, args.seconds, out)
    if not args.no_lake:
        demo_lake_report(work_dir, log_dir, topic, out)
    out.finish()
    return 0


# -- entry point -------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="groupcoord", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp, address_help):
        sp.add_argument("--namespace", default=DEFAULT_NAMESPACE)
        sp.add_argument("--address", default=None, help=address_help)
        sp.add_argument("--json", action="store_true", help="one JSON document, no tables")

    serve = sub.add_parser("serve", help="start the coordinator and stay up")
    common(serve, "Ray cluster (GCS host:port); default RAY_ADDRESS, else an embedded Ray")
    serve.add_argument("--partitions", type=int, default=4)
    serve.add_argument("--log-dir", default=DEFAULT_LOG_DIR)
    serve.add_argument(
        "--detach",
        action="store_true",
        help="return once serving (the actors are detached and stay)",
    )
    serve.add_argument("--ready-timeout", type=float, default=120.0)
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
        help="the listeners' address (loopback only: no SASL/TLS yet)",
    )
    serve.add_argument(
        "--kafka-partition-ports",
        type=int,
        default=0,
        help="partition n listens on BASE + n (default 0: any free port)",
    )

    demo = sub.add_parser("demo", help="run consumers, kill a partition, show the recovery")
    demo.add_argument("--seconds", type=float, default=6.0, help="consuming time per phase")
    demo.add_argument("--log-dir", default=None)
    demo.add_argument("--json", action="store_true")
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
        "status", help="the partitions: node, state, epoch, load time, groups, errors"
    )
    common(status, client_address)

    topics = sub.add_parser("topics", help="the topic catalog Kafka clients see")
    common(topics, client_address)
    topics.add_argument("action", choices=("list", "create", "alter", "delete"))
    topics.add_argument("topic", nargs="?")
    topics.add_argument("--partitions", type=int, help="create/alter: the partition count")

    groups = sub.add_parser("groups", help="list, describe, delete groups; reset offsets")
    common(groups, client_address)
    groups.add_argument("action", choices=("list", "describe", "delete", "reset-offsets"))
    groups.add_argument("groups", nargs="*")
    groups.add_argument("--state", action="append", help="list: only groups in this state")
    groups.add_argument("--end-offsets", help="describe: JSON file of end offsets (adds lag)")
    target = groups.add_mutually_exclusive_group()
    target.add_argument("--to-offset", type=int)
    target.add_argument("--to-earliest", help="JSON file of log start offsets")
    target.add_argument("--to-latest", help="JSON file of log end offsets")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("export", "report"):
        # The lake commands belong to spark_export, which has its own options and parser.
        # Lazy: it loads PySpark, which the other commands do not need.
        from groupcoord.spark_export import cli as lake_cli  # noqa: PLC0415

        return (lake_cli.export_main if argv[0] == "export" else lake_cli.report_main)(argv[1:])
    args = parser().parse_args(argv)
    out = Output(getattr(args, "json", False))
    if args.command == "groups":
        if args.action in ("describe", "delete") and not args.groups:
            parser().error(f"groups {args.action} needs at least one group id")
        if args.action == "reset-offsets" and (
            len(args.groups) != 1
            or (args.to_offset is None and not args.to_earliest and not args.to_latest)
        ):
            parser().error("groups reset-offsets needs one group and one --to-... option")
    commands = {
        "serve": cmd_serve,
        "demo": cmd_demo,
        "groups": cmd_groups,
        "status": cmd_status,
        "topics": cmd_topics,
    }
    try:
        return commands[args.command](args, out)
    # OSError: an unreadable offsets file, no Ray cluster to connect to (ConnectionError),
    # partitions not serving in time (TimeoutError).
    except (ValueError, LookupError, RuntimeError, OSError) as exc:
        print(f"groupcoord: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
