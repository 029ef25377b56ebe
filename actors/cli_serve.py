"""``groupcoord serve``: start (or reach) Ray, start the deployment with its listeners, print
where clients connect and each partition's state, and in the foreground stay up until SIGINT
or SIGTERM, then close every partition (cli.py's docstring has the command line)."""

from __future__ import annotations

import datetime
import os
import signal
import sys
import time

import ray

from . import bootstrap
from .bootstrap import ensure_ray, start, stop
from .catalog_mirror import MirrorConfig, check_every_s
from .cli_common import UsageError
from .end_offsets import check_servers, end_offsets_source
from .http_service import HttpConfig
from .output import Output
from .security import (
    DEFAULT_SASL_MECHANISMS,
    USERS_FILE_NAME,
    ListenerSecurity,
    read_acl_file,
)
from .serve_config import serve_settings
from .server_log import SERVER_LOGS
from .topic_mirror import topic_matcher
from .wire_config import WireConfig

# How long a stopping serve waits for the partitions to close before giving up on them.
STOP_TIMEOUT_S = 30.0

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
    "net",
    "conns",
    "attempts",
    "error",
)


def iso_utc(ms: int | None) -> str:
    if ms is None:
        return ""
    return (
        datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def _network(network: dict | None) -> str:
    """The partition's network processes running, and how many times one was started again
    ("" without network processes)."""
    if not network:
        return ""
    running, restarts = len(network["pids"]), network["restarts"]
    return f"{running} ({restarts} restarts)" if restarts else str(running)


def partitions_rows(infos: list[dict]) -> list[dict]:
    return [
        {k: info.get(k) for k in ("partition", "state", "epoch", "groups", "pid")}
        | {
            "node": str(info.get("node", ""))[:12],
            "load_s": "" if info.get("load_seconds") is None else f"{info['load_seconds']:.2f}",
            "loaded_at": iso_utc(info.get("loaded_at_ms")),
            "nice": info.get("niceness"),
            "kafka": info.get("kafka") or "",
            "net": _network(info.get("network_processes")),
            "conns": (info.get("kafka_listener") or {}).get("connections", ""),
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


def users_file(args) -> str:
    return args.users_file or os.path.join(args.log_dir, USERS_FILE_NAME)


def _wire_config(args) -> WireConfig | None:
    """The Kafka listeners serve asked for; ValueError (before Ray starts) for a bad one,
    including security files that cannot be read (users, TLS, ACLs)."""
    if args.kafka_port is None:
        flags = (*_SECURITY_FLAGS, "kafka_network_processes", "kafka_idle_poll_us")
        given = [f for f in flags if getattr(args, f) is not None]
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
        users_file=os.path.abspath(users_file(args)) if sasl else args.users_file,
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
        network_processes=args.kafka_network_processes or 0,
        idle_poll_us=args.kafka_idle_poll_us or 0,
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


def _mirror_config(args) -> MirrorConfig | None:
    """The catalog mirror serve asked for; UsageError (before Ray starts) for a bad one."""
    if args.mirror_from is None:
        given = [
            f for f in ("mirror_every_s", "mirror_topic_pattern") if getattr(args, f) is not None
        ]
        if given:
            flag = given[0].replace("_", "-")
            raise UsageError(f"groupcoord serve: --{flag} needs --mirror-from")
        return None
    kind, _, servers = args.mirror_from.partition(":")
    every_s = 60.0 if args.mirror_every_s is None else args.mirror_every_s
    try:
        if kind != "kafka":
            raise ValueError("--mirror-from takes kafka:HOST:PORT[,HOST:PORT...]")
        check_every_s(every_s, "--mirror-every-s")
        topic_matcher(args.mirror_topic_pattern)
        return MirrorConfig(check_servers(servers), every_s, args.mirror_topic_pattern)
    except ValueError as exc:
        raise UsageError(f"groupcoord serve: {exc}") from None


def mirror_line(mirror: MirrorConfig) -> str:
    pattern = f" (topics matching {mirror.topic_pattern})" if mirror.topic_pattern else ""
    return f"topic catalog mirrored from kafka:{mirror.servers}{pattern} every {mirror.every_s:g} s"


def cmd_serve(args, out: Output) -> int:
    wire = _wire_config(args)
    http = _http_config(args)
    mirror = _mirror_config(args)
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
            mirror=mirror,
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
        if mirror is not None:
            out.note(mirror_line(mirror))
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
