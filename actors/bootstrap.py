"""Start or find a groupcoord deployment on Ray.

``start()`` uses the Ray this process is connected to, or the cluster at ``address``, or else
starts an embedded local Ray. It creates the router (which creates and starts loading every
partition actor) unless the namespace already has one, so calling it twice is harmless; a second
call with a different partition count is refused, because it would move every group.
``connect()`` finds a running deployment by namespace, from the same or another driver.
``stop()`` closes the partitions cleanly and kills the actors (the logs stay).
"""

from __future__ import annotations

import os
import time
from typing import Any

import msgspec
import ray

from groupcoord.coordinator import CoordinatorConfig
from groupcoord.coordinator.record_size import largest_record_bytes

from .router import MAX_PARTITIONS, ROUTER_NAME, RouterActor
from .wire_service import WireConfig

DEFAULT_NAMESPACE = "groupcoord"
DEFAULT_LOG_DIR = os.path.join(os.path.expanduser("~"), ".groupcoord", "logs")
READY_POLL_S = 0.05


class Deployment(msgspec.Struct, frozen=True):
    namespace: str
    router: Any            # RouterActor handle
    num_partitions: int
    log_dir: str
    kafka: str | None = None      # the Kafka bootstrap listener's host:port, when it has one

    def partitions(self) -> list:
        return ray.get(self.router.partitions.remote())

    def infos(self) -> list[dict]:
        return ray.get([h.info.remote() for h in self.partitions()])

    def wait_ready(self, timeout_s: float = 60.0) -> list[dict]:
        """Wait until every partition has loaded its log; returns their ``info()``."""
        deadline = time.monotonic() + timeout_s
        while True:
            infos = self.infos()
            if all(i["state"] == "serving" for i in infos):
                return infos
            if time.monotonic() > deadline:
                raise TimeoutError(f"partitions not serving after {timeout_s}s: {infos}")
            time.sleep(READY_POLL_S)


def ensure_ray(address: str | None, namespace: str, num_cpus: int | None = None) -> bool:
    """Connect to Ray unless connected already; returns True when this call started it."""
    if ray.is_initialized():
        return False
    if address is None:
        ray.init(namespace=namespace, include_dashboard=False, num_cpus=num_cpus,
                 log_to_driver=False, configure_logging=False)
    else:
        ray.init(address=address, namespace=namespace, log_to_driver=False)
    return True


def log_config_for(config: CoordinatorConfig, log_config: Any = None) -> Any:
    """The log configuration to run with: storage's defaults raised to hold the largest record
    the coordinator accepts (``record_size.largest_record_bytes``, measured as the log measures
    records); an explicit one is checked instead.

    A record the coordinator accepts but the log refuses would fail the partition on every
    retry of the same request, so such a configuration is refused up front (ValueError)."""
    biggest = largest_record_bytes(config)
    if log_config is None:
        from groupcoord.storage import LogConfig  # noqa: PLC0415 (actors import storage late)
        default = LogConfig()
        return msgspec.structs.replace(
            default, max_record_bytes=max(default.max_record_bytes, biggest),
            # A batch holds at least one whole record plus its framing.
            max_batch_bytes=max(default.max_batch_bytes, 2 * biggest))
    max_record = getattr(log_config, "max_record_bytes", None)
    if max_record is not None and max_record < biggest:
        raise ValueError(f"LogConfig.max_record_bytes ({max_record}) is below the largest "
                         f"record the coordinator accepts ({biggest} bytes); raise it or "
                         f"lower CoordinatorConfig.group_metadata_max_bytes")
    return log_config


def start(num_partitions: int = 4, log_dir: str = DEFAULT_LOG_DIR, *,
          namespace: str = DEFAULT_NAMESPACE, config: CoordinatorConfig | None = None,
          log_config: Any = None, address: str | None = None,
          num_cpus: int | None = None, wire: WireConfig | None = None) -> Deployment:
    """Start (or find) the coordinator in ``namespace``; returns its ``Deployment``.

    ``log_dir`` must be reachable from every node Ray may restart a partition on: a local
    directory for the embedded single-node default, a shared filesystem on a cluster.
    """
    if type(num_partitions) is not int or not 1 <= num_partitions <= MAX_PARTITIONS:
        raise ValueError(f"num_partitions must be an int in [1, {MAX_PARTITIONS}], "
                         f"got {num_partitions!r}")
    if not isinstance(namespace, str) or not namespace:
        raise ValueError("namespace must be a non-empty str")
    config = config or CoordinatorConfig()
    if not isinstance(config, CoordinatorConfig):
        raise ValueError("config must be a CoordinatorConfig")
    log_config = log_config_for(config, log_config)
    ensure_ray(address, namespace, num_cpus)
    log_dir = os.path.abspath(log_dir)
    os.makedirs(log_dir, exist_ok=True)
    router = RouterActor.options(
        name=ROUTER_NAME, namespace=namespace, lifetime="detached", max_restarts=-1,
        max_task_retries=0, get_if_exists=True, num_cpus=0,
    ).remote(num_partitions, log_dir, namespace, config, log_config, wire)
    described = ray.get(router.describe.remote())
    if described["init_error"]:
        raise RuntimeError(f"router failed to start: {described['init_error']}")
    if described["num_partitions"] != num_partitions:
        raise ValueError(f"namespace {namespace!r} already runs {described['num_partitions']} "
                         f"partitions, not {num_partitions}")
    kafka = ray.get(router.kafka_address.remote())
    return Deployment(namespace, router, num_partitions, described["log_dir"], kafka)


def connect(namespace: str = DEFAULT_NAMESPACE, address: str | None = "auto") -> Deployment:
    """Find the deployment running in ``namespace``. ``address`` is used only when this process
    is not connected to Ray yet ("auto": the cluster this machine belongs to)."""
    ensure_ray(address, namespace)
    try:
        router = ray.get_actor(ROUTER_NAME, namespace=namespace)
    except ValueError:
        raise LookupError(f"no groupcoord deployment in namespace {namespace!r}") from None
    described = ray.get(router.describe.remote())
    return Deployment(namespace, router, described["num_partitions"], described["log_dir"],
                      ray.get(router.kafka_address.remote()))


def stop(deployment: Deployment) -> None:
    """Close every partition (parked requests get NOT_COORDINATOR) and kill the actors."""
    handles = deployment.partitions()
    ray.get([h.close.remote() for h in handles])
    for handle in handles:
        ray.kill(handle, no_restart=True)
    ray.kill(deployment.router, no_restart=True)
