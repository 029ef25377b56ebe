"""Log offsets from where they live: a JSON file, an upstream Kafka cluster, or Python code.

groupcoord holds committed offsets, not records, so a partition's log-end (and log-start) offset
comes from elsewhere. Every source is an ``EndOffsetsFn``: given (topic, partition) pairs it
returns the offsets it knows; a pair it does not know is simply absent from the answer (lag is
then unknown for that partition, never an error for the whole describe). The same shape gives
log-start offsets (``start_offsets_source``) and, from Kafka, the first offset at a time
(``kafka_offsets_for_times``).

Sources are named by one spec string (``end_offsets_source``):

- ``file:PATH`` or a bare ``PATH``: a JSON object ``{"topic:partition": offset, ...}``, read once;
  every error names the file.
- ``kafka:HOST:PORT[,HOST:PORT...]``: ListOffsets against that cluster (confluent-kafka's admin
  client), each call bounded by ``KAFKA_TIMEOUT_S``; a partition the cluster does not know is
  absent, a cluster that cannot be reached is a ``ConnectionError``.
- ``python:module:function``: ``function`` is itself an ``EndOffsetsFn``; its answers are checked.
"""

from __future__ import annotations

import importlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from .offsets import MAX_OFFSET, MAX_PARTITION, MAX_PORT, checked_partitions, decimal

EndOffsetsFn = Callable[[Sequence[tuple[str, int]]], Mapping[tuple[str, int], int]]

# Bound on each round trip to an upstream Kafka cluster (its metadata, then ListOffsets).
KAFKA_TIMEOUT_S = 15.0

log = logging.getLogger("groupcoord.kafka")


def _checked_answer(
    where: str, answer: object, asked: Sequence[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """The pairs that were asked for, each with a non-negative int offset; ValueError naming the
    source for anything else."""
    if not isinstance(answer, Mapping):
        raise ValueError(f"{where} returned {type(answer).__name__}, not a mapping")
    wanted = set(asked)
    known: dict[tuple[str, int], int] = {}
    for key, offset in answer.items():
        if type(offset) is not int or offset < 0:
            raise ValueError(f"{where}: offset {offset!r} for {key!r} is not an int >= 0")
        if key in wanted:
            known[key] = offset
    return known


def offsets_file(path: str) -> EndOffsetsFn:
    """The offsets in the JSON file ``path`` (``{"topic:partition": offset}``), read now;
    ValueError naming the file when it is missing or malformed."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the offsets file: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:  # nested too deep
        raise ValueError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f'{path}: expected a JSON object {{"topic:partition": offset}}')
    table: dict[tuple[str, int], int] = {}
    for key, value in raw.items():
        topic, _, partition = key.rpartition(":")
        number = decimal(partition, MAX_PARTITION)
        if not topic or number is None or type(value) is not int or not 0 <= value <= MAX_OFFSET:
            raise ValueError(
                f'{path}: entries must look like "topic:partition": offset in 0..{MAX_OFFSET}, '
                f"not {key!r}: {value!r}"
            )
        table[(topic, number)] = value

    def known(pairs: Sequence[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
        return {tp: table[tp] for tp in pairs if tp in table}

    return known


def check_servers(servers: str) -> str:
    """``servers`` if it is "host:port[,host:port...]" (each port a number in 1..MAX_PORT),
    else ValueError saying so."""
    if not isinstance(servers, str) or not all(
        host and decimal(port, MAX_PORT) not in (None, 0)
        for host, _, port in (s.rpartition(":") for s in servers.split(","))
    ):
        raise ValueError(f"kafka:{servers}: expected kafka:HOST:PORT[,HOST:PORT...]")
    return servers


def kafka_admin(servers: str) -> Any:
    """A confluent-kafka admin client of the cluster at ``servers`` (``check_servers``);
    ValueError without confluent-kafka, which only the ``kafka:`` sources and ``topics
    mirror`` need (the [kafka] extra), so it is imported here, lazily."""
    check_servers(servers)
    try:
        from confluent_kafka.admin import AdminClient  # noqa: PLC0415
    except ImportError:
        raise ValueError(
            f"kafka:{servers} needs confluent-kafka (pip install 'groupcoord[kafka]')"
        ) from None
    return AdminClient({"bootstrap.servers": servers, "logger": _LibrdkafkaLog()})


class _LibrdkafkaLog:
    """librdkafka's own log lines, to ``groupcoord.kafka`` at DEBUG. Left to librdkafka, a
    client of an unreachable cluster writes a line to stderr for every connection attempt,
    around the one-line error the caller gives. They are handed over when the client is
    polled (``kafka_metadata`` polls it, so a long-lived client's lines do not pile up)."""

    def log(self, level: int, message: str, *args: Any) -> None:
        log.debug(message, *args)


def kafka_metadata(admin: Any, servers: str, timeout_s: float) -> Any:
    """The cluster's metadata (``admin.list_topics``) within ``timeout_s``; ConnectionError
    when no broker answers."""
    from confluent_kafka import KafkaException  # noqa: PLC0415 — kafka_admin imported it

    try:
        return admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise ConnectionError(f"kafka:{servers}: cluster unreachable ({exc})") from None
    finally:
        admin.poll(0)  # its log lines so far, to _LibrdkafkaLog


def _kafka_lookup(
    servers: str, spec_of: Callable[[Any], Any], what: str, timeout_s: float
) -> EndOffsetsFn:
    admin = kafka_admin(servers)
    from confluent_kafka import KafkaException, TopicPartition  # noqa: PLC0415 — as above
    from confluent_kafka.admin import OffsetSpec  # noqa: PLC0415

    def known(pairs: Sequence[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
        checked = checked_partitions(pairs) or []
        if not checked:
            return {}
        # Fails fast when no broker answers, instead of per partition.
        kafka_metadata(admin, servers, timeout_s)
        futures = admin.list_offsets(
            {TopicPartition(t, p): spec_of(OffsetSpec) for t, p in set(checked)},
            request_timeout=timeout_s,
        )
        found: dict[tuple[str, int], int] = {}
        deadline = time.monotonic() + timeout_s  # one bound for the whole request
        for tp, future in futures.items():
            try:
                offset = future.result(timeout=max(deadline - time.monotonic(), 0)).offset
            except (KafkaException, FutureTimeout):
                continue  # unknown topic or partition, no leader: not known here
            if offset >= 0:  # -1: no record at or after the timestamp asked for
                found[(tp.topic, tp.partition)] = offset
        return found

    known.__qualname__ = f"kafka {what} offsets of {servers}"
    return known


def kafka_offsets(
    servers: str, *, earliest: bool = False, timeout_s: float = KAFKA_TIMEOUT_S
) -> EndOffsetsFn:
    """Log-end (or, with ``earliest``, log-start) offsets from the Kafka cluster at
    ``servers`` ("host:port[,host:port]"), through ListOffsets; each call ends within about
    twice ``timeout_s`` (the metadata round trip, then ListOffsets)."""
    if earliest:
        return _kafka_lookup(servers, lambda spec: spec.earliest(), "start", timeout_s)
    return _kafka_lookup(servers, lambda spec: spec.latest(), "end", timeout_s)


def kafka_offsets_for_times(
    servers: str, timestamp_ms: int, *, timeout_s: float = KAFKA_TIMEOUT_S
) -> EndOffsetsFn:
    """For each partition, the offset of the first record at or after ``timestamp_ms`` in the
    Kafka cluster at ``servers``; a partition with no such record is absent."""
    return _kafka_lookup(servers, lambda spec: spec.for_timestamp(timestamp_ms), "time", timeout_s)


def python_offsets(target: str) -> EndOffsetsFn:
    """The ``EndOffsetsFn`` named ``module:function`` (imported now); its answers are checked."""
    module_name, _, name = target.partition(":")
    if not module_name or not name:
        raise ValueError(f"python:{target}: expected python:module:function")
    try:
        fn = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"python:{target}: {exc}") from None
    if not callable(fn):
        raise ValueError(f"python:{target} is not callable")

    def known(pairs: Sequence[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
        return _checked_answer(f"python:{target}", fn(list(pairs)), pairs)

    return known


def _source(spec: str, *, earliest: bool) -> EndOffsetsFn:
    if not isinstance(spec, str) or not spec:
        raise ValueError(
            "an offsets source is file:PATH, kafka:HOST:PORT or python:module:function"
        )
    kind, _, rest = spec.partition(":")
    if kind == "kafka":
        return kafka_offsets(rest, earliest=earliest)
    if kind == "python":
        return python_offsets(rest)
    return offsets_file(rest if kind == "file" else spec)


def end_offsets_source(spec: str) -> EndOffsetsFn:
    """The log-end offsets named by ``spec``: ``file:PATH`` (or a bare path),
    ``kafka:HOST:PORT[,HOST:PORT]`` or ``python:module:function``."""
    return _source(spec, earliest=False)


def start_offsets_source(spec: str) -> EndOffsetsFn:
    """The log-start offsets named by ``spec`` (the same kinds; from Kafka, the earliest
    offsets)."""
    return _source(spec, earliest=True)
