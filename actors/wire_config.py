"""``WireConfig``: where and how the Kafka listeners listen.

A module of its own, without Ray: a network process (``network_process``) reads its config
and imports nothing of Ray (about 0.4 s and 70 MB a process; see ``actors/__init__``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from groupcoord.wire import DEFAULT_MAX_FRAME_BYTES

from .idle_poll import check_idle_poll_us
from .kafka_listener import DEFAULT_MAX_CONNECTIONS, KafkaListener
from .network_pool import MAX_NETWORK_PROCESSES
from .offsets import MAX_PORT
from .security import ListenerSecurity, check_host

WILDCARD_HOSTS = ("0.0.0.0", "::")


class WireConfig(msgspec.Struct, frozen=True):
    """Where the Kafka listeners listen. ``bootstrap_port`` 0: any free port. ``partition_ports``
    0: each partition listener takes any free port; else partition n listens on
    ``partition_ports + n`` (stable addresses across restarts on the same node). ``host`` must be
    loopback unless ``security`` authenticates clients (SASL, or client certificates).
    ``network_processes``: 0, each partition serves its connections on its own thread; N, in
    N processes of its own (``network_pool``: Kafka's ``num.network.threads``), which share
    ``max_connections`` evenly. The bootstrap listener is always the router's own.
    ``idle_poll_us``: after each turn with work, each partition's event loop (and each of
    its network processes') keeps polling for this long instead of sleeping (``idle_poll``,
    Seastar's ``--idle-poll-time-us``): quicker answers for up to that much of a core after
    each burst; 0, off."""

    host: str = "127.0.0.1"
    bootstrap_port: int = 9092
    partition_ports: int = 0
    metadata_refresh_ms: int = 1_000
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    security: ListenerSecurity = ListenerSecurity()
    network_processes: int = 0
    idle_poll_us: int = 0

    def __post_init__(self) -> None:
        check_host(self.host, self.security)
        check_idle_poll_us(self.idle_poll_us, "WireConfig.idle_poll_us")
        count = self.network_processes
        if type(count) is not int or not 0 <= count <= MAX_NETWORK_PROCESSES:
            raise ValueError(
                f"WireConfig.network_processes must be an int in [0, {MAX_NETWORK_PROCESSES}]"
            )
        for name in ("bootstrap_port", "partition_ports"):
            value = getattr(self, name)
            if type(value) is not int or not 0 <= value <= MAX_PORT:
                raise ValueError(
                    f"WireConfig.{name} must be an int in [0, {MAX_PORT}], got {value!r}"
                )
        refresh_ms = self.metadata_refresh_ms
        if type(refresh_ms) is not int or not 10 <= refresh_ms <= 60_000:
            raise ValueError("WireConfig.metadata_refresh_ms must be an int in [10, 60000]")

    def partition_port(self, partition: int) -> int:
        return self.partition_ports + partition if self.partition_ports else 0

    def listener(
        self, respond: Any, port: int, submit: Any = None, at_turn_end: Any = None
    ) -> KafkaListener:
        return KafkaListener(
            respond,
            submit=submit,
            at_turn_end=at_turn_end,
            host=self.host,
            port=port,
            max_connections=self.max_connections,
            max_frame_bytes=self.max_frame_bytes,
            security=self.security,
        )

    def advertised_host(self) -> str:
        """The host clients are told to connect to: ``host``, or this node's address when
        ``host`` is a wildcard address."""
        if self.host in WILDCARD_HOSTS:
            import ray  # noqa: PLC0415 — not at import: network processes load this without Ray

            return ray.util.get_node_ip_address()
        return self.host
