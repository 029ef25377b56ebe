"""Start or find a groupcoord deployment on Ray.

Which Ray (``resolve_address``): the one this process is connected to (an ``address`` naming
another is an error); else ``address``; else
``RAY_ADDRESS`` (Ray's own variable, so ``ray status`` and ``ray job submit`` agree with us);
else ``start()`` runs an embedded local Ray and ``connect()`` auto-detects the cluster on this
machine — refusing to guess when several run here. ``Deployment.ray_address`` is the GCS
address that was reached (what other drivers pass as ``--address``), ``ray_source`` how.

``start()`` creates the router (which creates and starts loading every partition actor) unless
the namespace already has one with the same log root, so calling it twice is harmless. It is
refused, with one line and before anything is created, when the namespace already runs a
deployment on another log root, when the log root's ``deployment.json`` (``identity``) records
another partition count or namespace, or when another live process writes the root's
partitions. ``connect()`` finds a running deployment by namespace, from the same or another
driver. ``stop()`` closes the partitions cleanly (flush, locks released) and kills the actors
(the logs stay). ``start(http=HttpConfig(...))`` also starts the live lag HTTP service
(``http_actor``: Burrow's API and the web view); ``Deployment.http`` is its host:port.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import msgspec
import ray
from ray._private.services import find_gcs_addresses
from ray.exceptions import GetTimeoutError, RayError

from groupcoord.coordinator import CoordinatorConfig
from groupcoord.coordinator.record_size import largest_record_bytes
from groupcoord.storage import LogConfig

from . import identity
from .bounded import bounded
from .catalog_mirror import MirrorConfig
from .channel import RouterHandle
from .http_actor import HTTP_ACTOR_NAME, HttpActor
from .http_service import HttpConfig
from .offsets import MAX_PORT, decimal
from .partition_actor import partition_actor_name
from .placement import router_strategy
from .router import MAX_PARTITIONS, ROUTER_NAME, RouterActor, detached_options
from .wire_config import WireConfig

DEFAULT_NAMESPACE = "groupcoord"
DEFAULT_LOG_DIR = os.path.join(os.path.expanduser("~"), ".groupcoord", "logs")
READY_POLL_S = 0.05
# Partition states no wait can end: load_failed (PartitionRuntime), broken (its actor's init).
BROKEN_STATES = ("load_failed", "broken")
# How long a driver waits for one answer from a deployment's actor: the router bounds its own
# work (publishing a catalog change, asking every partition), so only an actor that is alive
# but stuck takes this long, and without a bound it would hold a command forever.
ANSWER_TIMEOUT_S = 60.0


def ask(refs: Any, what: str) -> Any:
    """``ray.get(refs)`` within ``ANSWER_TIMEOUT_S``; past it, TimeoutError naming ``what``
    (e.g. "the router"). A dead actor's RayActorError propagates."""
    timeout_s = ANSWER_TIMEOUT_S
    try:
        return ray.get(refs, timeout=timeout_s)
    except GetTimeoutError:
        raise TimeoutError(f"{what} did not answer within {timeout_s:.0f} s") from None


async def ask_async(ref: Any, what: str) -> Any:
    """``ask`` for a caller on an event loop: ``await ref`` within ``ANSWER_TIMEOUT_S``."""
    timeout_s = ANSWER_TIMEOUT_S
    try:
        return await bounded(ref, timeout_s)
    except TimeoutError:
        raise TimeoutError(f"{what} did not answer within {timeout_s:.0f} s") from None


class Deployment(msgspec.Struct, frozen=True):
    namespace: str
    router: RouterHandle
    num_partitions: int
    log_dir: str
    cluster_id: str = ""  # deployment.json's: the same for every start on this log root
    ray_address: str = ""  # the GCS address of the Ray cluster it runs in
    ray_source: str = ""  # how that cluster was chosen (see resolve_address)
    kafka: str | None = None  # the Kafka bootstrap listener's host:port, when it has one
    http: str | None = None  # the live lag HTTP service's host:port, when it runs

    def partitions(self) -> list:
        return ask(self.router.partitions.remote(), "the router")

    def infos(self) -> list[dict]:
        return ask([h.info.remote() for h in self.partitions()], "a partition actor")

    def wait_ready(
        self, timeout_s: float = 60.0, progress: Callable[[dict, int, int], None] | None = None
    ) -> list[dict]:
        """Wait until every partition has loaded its log and, with Kafka listeners, until every
        partition's listener has registered with the router and every listener's Metadata
        names them all (asked before, one names fewer brokers, and a client may wait for one
        far longer than this, or fail what it sent to one it drops) and the topic catalog;
        returns their ``info()``.
        Raises RuntimeError at once for a partition that cannot load or whose Kafka listener
        cannot start, TimeoutError (one line naming the partitions and why) when they are not
        serving in time. ``progress(info, loaded, total)`` is called once per partition as it
        is seen serving."""
        deadline = time.monotonic() + timeout_s
        seen: set[int] = set()
        while True:
            infos = self.infos()
            for n, info in enumerate(infos):
                if info["state"] == "serving" and n not in seen:
                    seen.add(n)
                    if progress is not None:
                        progress(info, len(seen), len(infos))
            if all(i["state"] == "serving" for i in infos) and self._listeners_ready(infos):
                return infos
            if any(i["state"] in BROKEN_STATES for i in infos):
                raise RuntimeError(f"cannot serve: {not_serving(infos, BROKEN_STATES)}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"partitions not serving after {timeout_s}s: {not_serving(infos)}"
                )
            time.sleep(READY_POLL_S)

    def _listeners_ready(self, infos: list[dict]) -> bool:
        """Whether every partition's Kafka listener is registered and holds the topic catalog
        (True without listeners).
        RuntimeError for a serving partition whose listener could not start (its actor's only
        ``init_error`` while it serves)."""
        if self.kafka is None:
            return True
        failed = [
            f"partition {n} ({info['init_error'][:160]})"
            for n, info in enumerate(infos)
            if info["state"] == "serving" and info.get("init_error")
        ]
        if failed:
            raise RuntimeError(f"cannot serve Kafka clients: {'; '.join(failed)}")
        if len(ask(self.router.kafka_listeners.remote(), "the router")) != self.num_partitions:
            return False
        # And every partition's Metadata names them all (the router tells the others when one
        # registers): a client that asks one naming fewer drops the rest. And it names the
        # topics: a listener the others were told about may still await its own first answer
        # from the router, and until then its Metadata lists none.
        return all(
            info.get("kafka_brokers") == self.num_partitions
            and info.get("listener_catalog_version", 0) >= 0
            for info in infos
        )


def not_serving(infos: list[dict], states: tuple[str, ...] | None = None) -> str:
    """One short line: each partition not serving (or in one of ``states``), its state and its
    last error. ``infos`` are every partition's, in partition order."""
    parts = []
    for n, info in enumerate(infos):
        if info["state"] != "serving" and (states is None or info["state"] in states):
            why = info.get("load_error") or info.get("init_error") or info.get("fatal_error")
            parts.append(f"partition {n} {info['state']}" + (f" ({why[:160]})" if why else ""))
    return "; ".join(parts)


def local_ray_clusters() -> set[str]:
    """GCS addresses of the Ray clusters with a node on this machine (Ray's own process scan,
    the one its ``auto`` lookup uses)."""
    find_gcs_addresses.cache_clear()
    return set(find_gcs_addresses())


def resolve_address(address: str | None, *, embedded: bool) -> tuple[str, str]:
    """``(address for ray.init, how it was chosen)`` for a process not yet connected to Ray.

    An explicit address wins; then ``RAY_ADDRESS``; then, with ``embedded``, a new local Ray
    (never whichever cluster happens to run here); else the one cluster running on this
    machine (LookupError, naming them, when there are several: the answer would depend on
    which one Ray picks)."""
    if address not in (None, "auto"):
        return address, "--address"
    from_env = os.environ.get("RAY_ADDRESS")
    if from_env and from_env != "auto":
        return from_env, "RAY_ADDRESS"
    if address is None and embedded:
        return "local", "embedded"
    clusters = local_ray_clusters()
    if len(clusters) > 1:
        raise LookupError(
            f"{len(clusters)} Ray clusters run on this machine "
            f"({', '.join(sorted(clusters))}): pass --address (groupcoord serve "
            f"printed the one to use) or set RAY_ADDRESS"
        )
    return "auto", "auto-detected"


_connected_via = "this process's Ray"  # how ensure_ray chose the cluster, when it did


def ensure_ray(
    address: str | None, namespace: str, num_cpus: int | None = None, *, embedded: bool = True
) -> str:
    """Connect to Ray unless connected already (see ``resolve_address``). Returns how the
    cluster was chosen when this call connected, ``""`` when the process was connected
    already (so a true value means this call connected and should disconnect)."""
    global _connected_via
    if ray.is_initialized():
        _check_same_cluster(address)
        return ""
    target, source = resolve_address(address, embedded=embedded)
    _connected_via = source
    if target == "local":
        ray.init(
            address="local",
            namespace=namespace,
            include_dashboard=False,
            num_cpus=num_cpus,
            log_to_driver=False,
            configure_logging=False,
        )
    else:
        _check_reachable(target)
        try:
            # WARNING: Ray's INFO lines ("Connecting to existing Ray cluster") would mix with
            # the CLI's own one-line reports on stderr; its warnings and errors still show.
            ray.init(
                address=target,
                namespace=namespace,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        except ConnectionError as exc:
            if os.environ.get("RAY_AUTH_MODE"):
                raise
            # Ray turns token authentication on by default, but a driver given an address
            # (not auto-detected) only uses the token when told to.
            raise ConnectionError(
                f"{exc} (if the cluster uses token authentication, Ray's "
                f"default, set RAY_AUTH_MODE=token)"
            ) from None
    return source


# How long a GCS address may take to accept a TCP connection before it counts as unreachable.
GCS_CONNECT_TIMEOUT_S = 5.0


def _check_reachable(target: str) -> None:
    """ConnectionError, in one line, when nothing accepts connections at a ``host:port`` GCS
    address: ``ray.init`` would retry for about a minute, printing its own warnings."""
    host, _, port_text = target.rpartition(":")
    if target in ("auto", "local") or "://" in target or not host:
        return  # Ray's own lookup or a client address: ray.init says what is wrong with it
    port = decimal(port_text, MAX_PORT)
    if port is None:
        raise ValueError(f"{target}: expected HOST:PORT, the port a number in 0..{MAX_PORT}")
    try:
        socket.create_connection((host, port), timeout=GCS_CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ConnectionError(
            f"no Ray cluster at {target}: {exc.strerror or exc} (pass the address "
            f"`groupcoord serve` printed, or start one with `ray start --head`)"
        ) from None


def _check_same_cluster(address: str | None) -> None:
    """An explicit address naming another cluster than the one this process is connected to
    is an error, not silently ignored. Clusters on one machine differ by GCS port; a Ray
    Client address (``ray://``) names a proxy's port, so it is not compared."""
    if address in (None, "auto", "local") or address.startswith("ray://"):
        return
    current = ray_address()
    if address.rpartition(":")[2] != current.rpartition(":")[2]:
        raise ValueError(
            f"this process is connected to the Ray cluster at {current}, not {address}"
        )


def ray_address() -> str:
    """The GCS address of the cluster this process is connected to."""
    return ray.get_runtime_context().gcs_address


def log_config_for(config: CoordinatorConfig, log_config: LogConfig | None = None) -> LogConfig:
    """The log configuration to run with: storage's defaults raised to hold the largest record
    the coordinator accepts (``record_size.largest_record_bytes``, measured as the log measures
    records); an explicit one is checked instead.

    A record the coordinator accepts but the log refuses would fail the partition on every
    retry of the same request, so such a configuration is refused up front (ValueError)."""
    biggest = largest_record_bytes(config)
    if log_config is None:
        default = LogConfig()
        return msgspec.structs.replace(
            default,
            max_record_bytes=max(default.max_record_bytes, biggest),
            # A batch holds at least one whole record plus its framing.
            max_batch_bytes=max(default.max_batch_bytes, 2 * biggest),
        )
    max_record = getattr(log_config, "max_record_bytes", None)
    if max_record is not None and max_record < biggest:
        raise ValueError(
            f"LogConfig.max_record_bytes ({max_record}) is below the largest "
            f"record the coordinator accepts ({biggest} bytes); raise it or "
            f"lower CoordinatorConfig.group_metadata_max_bytes"
        )
    return log_config


def start(
    num_partitions: int = 4,
    log_dir: str = DEFAULT_LOG_DIR,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    config: CoordinatorConfig | None = None,
    log_config: LogConfig | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    wire: WireConfig | None = None,
    log_level: int = logging.INFO,
    http: HttpConfig | None = None,
    router_node: str = "head",
    mirror: MirrorConfig | None = None,
) -> Deployment:
    """Start (or find) the coordinator in ``namespace``; returns its ``Deployment``.

    ``log_dir`` must be reachable from every node Ray may restart a partition on: a local
    directory for the embedded single-node default, a shared filesystem on a cluster. The
    actors log at ``log_level`` to ``<log_dir>/server-logs/`` (``server_log``).
    ``router_node`` places the router when this call creates it (placement.py): ``"head"``,
    ``"any"`` or a node id; partitions are spread over the nodes. It returns once the router
    (and its bootstrap listener) is up; ``Deployment.wait_ready`` waits for the partitions,
    as ``groupcoord serve`` does before it says it is serving. ``mirror`` has the router keep
    the topic catalog mirrored from an upstream Kafka cluster (``catalog_mirror``); like the
    other settings, it is the router's from the start that created it.
    """
    if type(num_partitions) is not int or not 1 <= num_partitions <= MAX_PARTITIONS:
        raise ValueError(
            f"num_partitions must be an int in [1, {MAX_PARTITIONS}], got {num_partitions!r}"
        )
    if not isinstance(namespace, str) or not namespace:
        raise ValueError("namespace must be a non-empty str")
    config = config or CoordinatorConfig()
    if not isinstance(config, CoordinatorConfig):
        raise ValueError("config must be a CoordinatorConfig")
    log_config = log_config_for(config, log_config)
    source = ensure_ray(address, namespace, num_cpus) or _connected_via
    strategy = router_strategy(router_node)  # ValueError before anything is created
    log_dir = os.path.abspath(log_dir)
    running = _running(namespace)
    if running is None:
        # Nothing runs in the namespace: this start decides, so check the root before any
        # actor exists (a disagreeing start must change nothing).
        claimed = identity.claim(log_dir, num_partitions, namespace)
        writer = identity.writer_of(log_dir, num_partitions)
        if writer is not None:
            raise RuntimeError(
                f"{writer}: another groupcoord serves {log_dir}; stop it, "
                f"connect to its Ray cluster, or use another --log-dir"
            )
        cluster_id = claimed.cluster_id
    else:
        _check_same_deployment(running[1], namespace, num_partitions, log_dir)
        cluster_id = running[1].get("cluster_id", "")
    router = RouterActor.options(
        name=ROUTER_NAME, scheduling_strategy=strategy, **detached_options(namespace)
    ).remote(
        num_partitions,
        log_dir,
        namespace,
        config,
        log_config,
        cluster_id,
        wire,
        log_level,
        http.lag_windows if http is not None else None,
        mirror,
    )
    described = ask(router.describe.remote(), "the router")
    if described["init_error"]:
        raise RuntimeError(f"router failed to start: {described['init_error']}")
    _check_same_deployment(described, namespace, num_partitions, log_dir)  # a start raced us
    kafka = ask(router.kafka_address.remote(), "the router")
    return Deployment(
        namespace,
        router,
        num_partitions,
        described["log_dir"],
        described.get("cluster_id", ""),
        ray_address(),
        source,
        kafka,
        None if http is None else _start_http(router, namespace, num_partitions, http, kafka),
    )


HTTP_START_TIMEOUT_S = 30.0


def _start_http(
    router: RouterHandle, namespace: str, num_partitions: int, http: HttpConfig, kafka: str | None
) -> str:
    """Start (or find) the HTTP service; its host:port. A service that cannot listen (a taken
    port) is removed again and reported in one line."""
    actor = HttpActor.options(name=HTTP_ACTOR_NAME, **detached_options(namespace)).remote(
        router, num_partitions, http, (kafka,) if kafka else ()
    )
    try:
        return ray.get(actor.address.remote(), timeout=HTTP_START_TIMEOUT_S)
    except Exception as exc:
        ray.kill(actor, no_restart=True)
        cause = getattr(exc, "cause", None) or exc
        raise RuntimeError(
            f"the HTTP service cannot listen on {http.host}:{http.port}: {cause}".splitlines()[0]
        ) from None


def _http_address(namespace: str) -> str | None:
    actor = _named(HTTP_ACTOR_NAME, namespace)
    if actor is None:
        return None
    return ray.get(actor.address.remote(), timeout=HTTP_START_TIMEOUT_S)


def _running(namespace: str) -> tuple[Any, dict] | None:
    """The router running in ``namespace`` and its ``describe()``, or None."""
    router = _named(ROUTER_NAME, namespace)
    if router is None:
        return None
    return router, ask(router.describe.remote(), "the router")


def _check_same_deployment(
    described: dict, namespace: str, num_partitions: int, log_dir: str
) -> None:
    if os.path.realpath(described["log_dir"]) != os.path.realpath(log_dir):
        raise ValueError(
            f"namespace {namespace!r} on this Ray cluster already runs a groupcoord "
            f"deployment with logs in {described['log_dir']}: two coordinators "
            f"would split its clients; use that --log-dir, another --namespace, "
            f"or stop it first"
        )
    if described["num_partitions"] != num_partitions:
        raise ValueError(
            f"namespace {namespace!r} already runs {described['num_partitions']} "
            f"partitions, not {num_partitions}: start with --partitions "
            f"{described['num_partitions']} (another count would move every group)"
        )


def connect(namespace: str = DEFAULT_NAMESPACE, address: str | None = None) -> Deployment:
    """Find the deployment running in ``namespace``. Unless this process is connected to Ray
    already, ``address``, else ``RAY_ADDRESS``, else the one Ray cluster running on this
    machine (see ``resolve_address``)."""
    source = ensure_ray(address, namespace, embedded=False) or _connected_via
    running = _running(namespace)
    if running is None:
        raise LookupError(
            f"no groupcoord deployment in namespace {namespace!r} on the Ray "
            f"cluster at {ray_address()} ({source})"
        )
    router, described = running
    return Deployment(
        namespace,
        router,
        described["num_partitions"],
        described["log_dir"],
        described.get("cluster_id", ""),
        ray_address(),
        source,
        ask(router.kafka_address.remote(), "the router"),
        _http_address(namespace),
    )


def stop(deployment: Deployment, timeout_s: float | None = None) -> None:
    """Close every partition (parked requests get NOT_COORDINATOR, the log is flushed and its
    writer lock released) and kill the actors; ``timeout_s`` bounds each closing. Every actor
    is killed even when closing one fails (it timed out, or Ray is restarting it); the first
    such failure is raised afterwards."""
    failures: list[Exception] = []
    http = _named(HTTP_ACTOR_NAME, deployment.namespace)
    _close([http], timeout_s, failures)  # first: it calls the partitions
    partitions = [
        _named(partition_actor_name(n), deployment.namespace)
        for n in range(deployment.num_partitions)
    ]
    _close(partitions, timeout_s, failures)
    for handle in [http, *partitions, deployment.router]:
        if handle is not None:
            ray.kill(handle, no_restart=True)
    if failures:
        raise failures[0]


def _named(name: str, namespace: str) -> Any:
    try:
        return ray.get_actor(name, namespace=namespace)
    except ValueError:  # not there (never started, or killed)
        return None


def _close(handles: list, timeout_s: float | None, failures: list[Exception]) -> None:
    """Call ``close`` on each handle there is (None: no such actor); a failure (a timeout, a
    restarting actor) is appended to ``failures`` rather than raised."""
    try:
        ray.get([h.close.remote() for h in handles if h is not None], timeout=timeout_s)
    except RayError as exc:  # GetTimeoutError is one
        failures.append(exc)
