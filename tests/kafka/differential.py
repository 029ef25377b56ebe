"""The driver of the differential tests (test_differential.py): plays one scenario, a list of
steps, against one server over raw wire connections (rawwire.py), and turns each answer into
plain values in which everything a server makes up is replaced by a stable alias, so the
answers of Kafka and groupcoord can be compared field by field.

A step is one request by one scenario member ("a", "b", "admin"...). Every member has its own
connection to the coordinator of the group it talks to, found with FindCoordinator at the
bootstrap address, as a real client does. Request fields may hold placeholders (``Ref``),
resolved when the step runs: the run's group and topic names, a member's current member id and
generation. A step marked ``background`` is sent from a thread and answered later (a JoinGroup
or SyncGroup that waits for the rest of the group); ``Await`` collects its answer. ``Pause``
waits, for a background request to arrive. A step answered with a retriable coordinator error
(loading, not available, not coordinator) is sent again, as a client would, for up to 10 s; a
closed connection is an answer too (``CLOSED``).

Normalisation (``normalise``): member ids become the name of the scenario member that was
given them ("a", "a#2" for its second id), topic ids the name of their topic, and throttle
times, node ids, hosts, ports and cluster ids are dropped; member lists whose order a server
does not define (JoinGroup's, DescribeGroups') are sorted, and ListGroups keeps only the run's
own groups (the servers are shared with other tests). OffsetFetch's topics and partitions are
sorted too (Kafka answers a fetch of all offsets in its hash maps' order), and so are the groups
of answers about several groups (Kafka answers them by offsets partition), and DescribeConfigs'
results and their entries (Kafka answers them in its own order; clients map them by name).
"""

from __future__ import annotations

import dataclasses
import struct
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from groupcoord.wire import ApiKey
from tests.kafka.rawwire import RawConnection, coordinator_address, plain

# The run's names, by placeholder: group ids ("G", "G2") and topics ("T", "T2").
GROUPS = ("G", "G2", "G3")
# A group no scenario names, for WaitForAssignable's probes (never compared nor listed).
PROBE_GROUP = "probe"
TOPICS = ("T", "T2")
DROPPED_FIELDS = frozenset(
    {
        "throttle_time",
        "node_id",
        "host",
        "port",
        "controller_id",
        "cluster_id",
        "leader_id",
        "replica_nodes",
        "isr_nodes",
        "brokers",
    }
)
METADATA_TIMEOUT_S = 20.0
GROUP_CONFIG_RESOURCE, GROUP_CONFIG_SOURCE = 32, 8  # Kafka's ConfigResource/ConfigSource codes
CLOSED = object()  # a step's answer when the server closed the connection
RETRY = {"coordinator_load_in_progress", "coordinator_not_available", "not_coordinator"}
RETRIES = 100
RETRY_PAUSE_S = 0.1
METADATA_FLAGS = dict(
    allow_auto_topic_creation=False,
    include_cluster_authorized_operations=False,
    include_topic_authorized_operations=False,
)


@dataclasses.dataclass(frozen=True)
class Ref:
    """A value known only when the step runs: ``resolve(run, member)``."""

    text: str
    resolve: Callable[[Run, str], Any]

    def __repr__(self) -> str:
        return self.text


def name(placeholder: str) -> Ref:
    """The run's group id or topic name for ``placeholder`` ("G", "T2", ...)."""
    return Ref(placeholder, lambda run, _member: run.names[placeholder])


def member_id(of: str | None = None) -> Ref:
    """The current member id of ``of`` (default: the step's member); "" before its first."""
    return Ref(f"id({of or ''})", lambda run, member: run.member_ids.get(of or member, ""))


def generation(of: str | None = None, plus: int = 0) -> Ref:
    """The generation ``of`` (default: the step's member) last joined, plus ``plus``."""
    return Ref(
        f"gen({of or ''}){plus:+d}" if plus else f"gen({of or ''})",
        lambda run, member: run.generations.get(of or member, -1) + plus,
    )


def epoch(of: str | None = None, plus: int = 0) -> Ref:
    """The member epoch ``of`` (default: the step's member) last heartbeated at, plus ``plus``;
    0 (joining) before its first."""
    return Ref(
        f"epoch({of or ''}){plus:+d}" if plus else f"epoch({of or ''})",
        lambda run, member: run.epochs.get(of or member, 0) + plus,
    )


def consumer_member_id(of: str | None = None) -> Ref:
    """The member id ``of`` (default: the step's member) heartbeats with: its current one, or,
    before its first, a new one made up by the client (ConsumerGroupHeartbeat v1)."""
    return Ref(
        f"cid({of or ''})",
        lambda run, member: (
            run.member_ids.get(of or member) or new_member_id().resolve(run, member)
        ),
    )


def new_member_id() -> Ref:
    """A new client-made member id, as a restarted KIP-848 client makes one."""
    return Ref("new-id", lambda _run, _member: str(uuid.uuid4()))


def owned(of: str | None = None) -> Ref:
    """The partitions ``of`` (default: the step's member) was last assigned, as a heartbeat's
    owned partitions ({topic_id, partitions}); none before its first assignment."""
    return Ref(f"owned({of or ''})", lambda run, member: run.assigned.get(of or member, []))


def subscription(*topics: Ref) -> Ref:
    """ConsumerProtocolSubscription v0 bytes for ``topics`` (Kafka parses these)."""

    def encode(run: Run, member: str) -> bytes:
        names = [t.resolve(run, member).encode() for t in topics]
        out = struct.pack(">hi", 0, len(names))
        for n in names:
            out += struct.pack(">h", len(n)) + n
        return out + struct.pack(">i", -1)

    return Ref(f"subscription{topics}", encode)


def assignment(partitions: dict[str, Sequence[int]]) -> Ref:
    """ConsumerProtocolAssignment v0 bytes: {topic placeholder: partitions}."""

    def encode(run: Run, _member: str) -> bytes:
        out = struct.pack(">hi", 0, len(partitions))
        for topic, parts in partitions.items():
            n = run.names[topic].encode()
            out += struct.pack(">h", len(n)) + n + struct.pack(">i", len(parts))
            out += b"".join(struct.pack(">i", p) for p in parts)
        return out + struct.pack(">i", -1)

    return Ref(f"assignment({partitions})", encode)


@dataclasses.dataclass(frozen=True)
class Step:
    """``member`` sends ``api`` with ``fields`` to the coordinator of ``group``."""

    label: str
    member: str
    api: ApiKey
    fields: dict
    group: str = "G"
    background: bool = False


@dataclasses.dataclass(frozen=True)
class Await:
    """The answer of the background step labelled ``label``."""

    label: str


@dataclasses.dataclass(frozen=True)
class Pause:
    """Wait ``ms``: long enough for a server's timer, or for a background request to arrive."""

    ms: int


@dataclasses.dataclass(frozen=True)
class WaitForTopics:
    """Poll Metadata on ``member``'s connection until every topic is known (not compared: a
    topic reaches a broker's metadata, or a listener's catalog, a moment after it is created)."""

    member: str
    topics: tuple[str, ...] = TOPICS


@dataclasses.dataclass(frozen=True)
class WaitForAssignable:
    """Join a probe group (``PROBE_GROUP``) with KIP-848 heartbeats until the coordinator
    assigns partitions of ``topic``, then leave it (not compared: a broker's group coordinator
    learns of a new topic from its metadata a moment after Metadata answers with it, and a
    member that joins before then is first given nothing)."""

    member: str
    topic: str = "T"


@dataclasses.dataclass(frozen=True)
class WaitForGroupConfig:
    """Poll DescribeConfigs until ``group``'s setting ``setting`` is its own ``value`` (None:
    until the group sets none); not compared: a broker's group coordinator learns of a changed
    group config from its metadata a moment after IncrementalAlterConfigs is answered."""

    member: str
    group: str
    setting: str
    value: str | None


@dataclasses.dataclass(frozen=True)
class Answer:
    """One compared answer: the step, the version it was sent at, the answer as plain values."""

    label: str
    api: ApiKey
    version: int
    body: dict


class Run:
    """One scenario against one server (see the module docstring)."""

    def __init__(self, bootstrap: str, versions: dict[ApiKey, int], names: dict[str, str]):
        self.bootstrap = bootstrap
        self.versions = versions
        self.names = names
        self.member_ids: dict[str, str] = {}
        self.generations: dict[str, int] = {}
        self.epochs: dict[str, int] = {}  # KIP-848 member epochs
        self.assigned: dict[str, list[dict]] = {}  # KIP-848 assignments, as owned partitions
        self.topic_ids: dict[str, str] = {}  # topic id -> its alias, from Metadata
        self.aliases: dict[str, str] = {}  # server-made id -> stable alias
        self._incarnations: dict[str, int] = {}
        self._connections: dict[tuple[str, str, bool], RawConnection] = {}
        self._coordinators: dict[str, str] = {}
        self._pending: dict[str, tuple[Step, Future]] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="diff-step")
        self.answers: list[Answer] = []

    def play(self, steps: Sequence) -> list[Answer]:
        try:
            for step in steps:
                match step:
                    case Step(background=True):
                        self._pending[step.label] = (step, self._pool.submit(self._send, step))
                    case Step():
                        self._record(step, self._send(step))
                    case Await():
                        sent, future = self._pending.pop(step.label)
                        self._record(sent, future.result(timeout=60))
                    case Pause():
                        time.sleep(step.ms / 1000)
                    case WaitForTopics():
                        self._wait_for_topics(step)
                    case WaitForAssignable():
                        self._wait_for_assignable(step)
                    case WaitForGroupConfig():
                        self._wait_for_group_config(step)
            if self._pending:
                raise AssertionError(f"background steps never awaited: {sorted(self._pending)}")
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)
            for connection in self._connections.values():
                connection.close()
        return self.answers

    def _connection(self, member: str, group: str, background: bool = False) -> RawConnection:
        """``member``'s connection to ``group``'s coordinator; background steps have their
        own, so the member can heartbeat while its JoinGroup or SyncGroup waits (a broker
        answers one request per connection at a time)."""
        group_id = self.names[group]
        with self._lock:
            if group_id not in self._coordinators:
                self._coordinators[group_id] = coordinator_address(
                    self.bootstrap, group_id, self.versions[ApiKey.FIND_COORDINATOR]
                )
            key = (member, self._coordinators[group_id], background)
            if key not in self._connections:
                self._connections[key] = RawConnection(key[1], client_id=f"diff-{member}")
            return self._connections[key]

    def _send(self, step: Step) -> object:
        """The step's answer, or ``CLOSED`` when the server closed the connection instead
        (what both do with a request they refuse to read); the next step reconnects."""
        fields = _resolve(step.fields, self, step.member)
        connection = self._connection(step.member, step.group, step.background)
        try:
            for _ in range(RETRIES):
                answer = connection.send(step.api, self.versions[step.api], **fields)
                # A client retries these; a new broker answers them while its offsets
                # partitions load, which is not what the step is about.
                if step.api == ApiKey.FIND_COORDINATOR or not error_codes(plain(answer)) & RETRY:
                    break
                time.sleep(RETRY_PAUSE_S)
        except ConnectionError:
            with self._lock:
                for key, held in list(self._connections.items()):
                    if held is connection:
                        del self._connections[key]
            connection.close()
            return CLOSED
        if step.api == ApiKey.JOIN_GROUP:
            self._joined(step.member, answer)
        if step.api == ApiKey.CONSUMER_GROUP_HEARTBEAT:
            self._heartbeated(step.member, answer)
        return answer

    def _joined(self, member: str, answer: Any) -> None:
        with self._lock:
            self._named(member, answer.member_id)
            if answer.error_code == 0:
                self.generations[member] = answer.generation_id

    def _heartbeated(self, member: str, answer: Any) -> None:
        """Keep a KIP-848 member's id, epoch and assignment, as its client does; a leave's
        answer (epoch -1 or -2) leaves them as they were, so that a scenario can show what a
        member that left is told when it heartbeats again."""
        with self._lock:
            if answer.error_code != 0:
                return
            self._named(member, answer.member_id)
            if answer.member_epoch < 0:
                return
            self.epochs[member] = answer.member_epoch
            if answer.assignment is not None:
                self.assigned[member] = [
                    {"topic_id": tp.topic_id, "partitions": list(tp.partitions)}
                    for tp in answer.assignment.topic_partitions
                ]

    def _named(self, member: str, given: str | None) -> None:
        """Alias a member id a server answered with: the member's name, "a#2" for its second."""
        if given and given not in self.aliases:
            count = self._incarnations.get(member, 0) + 1
            self._incarnations[member] = count
            self.aliases[given] = member if count == 1 else f"{member}#{count}"
        if given:
            self.member_ids[member] = given

    def _record(self, step: Step, answer: object) -> None:
        version = self.versions[step.api]
        body = plain(answer) if answer is not CLOSED else {"connection": "closed"}
        self.answers.append(Answer(step.label, step.api, version, body))

    def _wait_for_topics(self, step: WaitForTopics) -> None:
        wanted = [self.names[t] for t in step.topics]
        connection = self._connection(step.member, "G")
        deadline = time.monotonic() + METADATA_TIMEOUT_S
        while True:
            answer = connection.send(
                ApiKey.METADATA,
                self.versions[ApiKey.METADATA],
                topics=[{"name": t, "topic_id": None} for t in wanted],
                **METADATA_FLAGS,
            )
            if all(t.error_code == 0 for t in answer.topics):
                for t in answer.topics:
                    if getattr(t, "topic_id", None) is not None:
                        self.topic_ids[str(t.topic_id)] = f"id-of-{t.name}"
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"topics {wanted} unknown after {METADATA_TIMEOUT_S} s")
            time.sleep(0.1)

    def _wait_for_group_config(self, step: WaitForGroupConfig) -> None:
        connection = self._connection(step.member, step.group)
        resource = {
            "resource_type": GROUP_CONFIG_RESOURCE,
            "resource_name": self.names[step.group],
            "configuration_keys": [step.setting],
        }
        deadline = time.monotonic() + METADATA_TIMEOUT_S
        while True:
            answer = connection.send(
                ApiKey.DESCRIBE_CONFIGS,
                self.versions[ApiKey.DESCRIBE_CONFIGS],
                resources=[resource],
                include_synonyms=False,
                include_documentation=False,
            )
            own = [
                c.value for c in answer.results[0].configs if c.config_source == GROUP_CONFIG_SOURCE
            ]
            if own == ([] if step.value is None else [step.value]):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{step} not in force after {METADATA_TIMEOUT_S} s: {own}")
            time.sleep(0.1)

    def _wait_for_assignable(self, step: WaitForAssignable) -> None:
        connection = self._connection(step.member, PROBE_GROUP)
        version = self.versions[ApiKey.CONSUMER_GROUP_HEARTBEAT]
        probe = dict(
            group_id=self.names[PROBE_GROUP],
            member_id=str(uuid.uuid4()),
            instance_id=None,
            rack_id=None,
            rebalance_timeout=10_000,
            subscribed_topic_names=[self.names[step.topic]],
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=[],
        )
        deadline = time.monotonic() + METADATA_TIMEOUT_S
        member_epoch = 0
        while True:
            answer = connection.send(
                ApiKey.CONSUMER_GROUP_HEARTBEAT, version, member_epoch=member_epoch, **probe
            )
            if answer.error_code == 0:
                member_epoch = answer.member_epoch
                if answer.assignment is not None and answer.assignment.topic_partitions:
                    connection.send(
                        ApiKey.CONSUMER_GROUP_HEARTBEAT, version, **probe | {"member_epoch": -1}
                    )
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"{step.topic} not assignable after {METADATA_TIMEOUT_S} s")
            time.sleep(0.1)


def _resolve(value: Any, run: Run, member: str) -> Any:
    if isinstance(value, Ref):
        return value.resolve(run, member)
    if isinstance(value, dict):
        return {k: _resolve(v, run, member) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_resolve(v, run, member) for v in value]
    return value


# Answers about several groups: Kafka answers them grouped by offsets partition, not in the
# order asked (clients match them by group id).
_BY_GROUP = {
    (ApiKey.DESCRIBE_GROUPS, "groups"),
    (ApiKey.DELETE_GROUPS, "results"),
    (ApiKey.OFFSET_FETCH, "groups"),
    (ApiKey.CONSUMER_GROUP_DESCRIBE, "groups"),
}


_MEMBER_LISTS = (ApiKey.JOIN_GROUP, ApiKey.DESCRIBE_GROUPS, ApiKey.CONSUMER_GROUP_DESCRIBE)
_KIP848 = (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE)


def normalise(answer: Answer, run: Run, topic_ids: dict[str, str]) -> dict:
    """``answer``'s body with every server-made value replaced (see the module docstring);
    ``topic_ids`` ({id: alias}) is filled in as topic ids are first seen, after those the run
    learnt from Metadata (``Run.topic_ids``)."""
    own_groups = {run.names[g] for g in GROUPS}

    def topic_alias(topic_id: str, topic: str | None) -> str:
        """ "id-of-<topic>" for the first id seen with that name, "id-of-<topic>#2" for a
        second, so a topic whose id changes between answers shows as a difference."""
        if topic_id not in topic_ids and topic_id in run.topic_ids:
            topic_ids[topic_id] = run.topic_ids[topic_id]
        if topic_id not in topic_ids:
            taken = set(topic_ids.values())
            alias = f"id-of-{topic}"
            count = 1
            while alias in taken:
                count += 1
                alias = f"id-of-{topic}#{count}"
            topic_ids[topic_id] = alias
        return topic_ids[topic_id]

    def walk(value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            out = {k: walk(v, k) for k, v in value.items() if k not in DROPPED_FIELDS}
            if "topic_id" in out and value["topic_id"] is not None:
                out["topic_id"] = topic_alias(value["topic_id"], value.get("name"))
            return out
        if isinstance(value, list):
            items = [walk(v) for v in value]
            if key == "members" and answer.api in _MEMBER_LISTS:
                items.sort(key=lambda m: str(m.get("member_id")))
            # KIP-848 assignments are sets: partitions and topics in any order.
            if answer.api in _KIP848 and key == "partitions":
                items.sort()
            if answer.api in _KIP848 and key in ("topic_partitions", "topics"):
                items.sort(key=lambda t: str(t.get("topic_id")))
            if answer.api == ApiKey.OFFSET_FETCH and key in ("topics", "partitions"):
                items.sort(key=lambda t: (t.get("name", ""), t.get("partition_index", 0)))
            # DescribeConfigs' clients map results by resource and entries by name: Kafka
            # answers both in an order of its own.
            if answer.api == ApiKey.DESCRIBE_CONFIGS and key == "results":
                items.sort(key=lambda r: (r["resource_type"], r["resource_name"]))
            if answer.api == ApiKey.DESCRIBE_CONFIGS and key == "configs":
                items.sort(key=lambda c: c["name"])
            if (answer.api, key) in _BY_GROUP:
                items.sort(key=lambda g: g["group_id"])
            if key == "groups" and answer.api == ApiKey.LIST_GROUPS:
                items = sorted(
                    (g for g in items if g["group_id"] in own_groups), key=lambda g: g["group_id"]
                )
            return items
        if isinstance(value, str):
            return run.aliases.get(value, value)
        return value

    return walk(answer.body)


def error_codes(value: Any) -> set[str]:
    """Every error code (by name) anywhere in a plain answer."""
    if isinstance(value, dict):
        found = {value["error_code"]} if "error_code" in value else set()
        return found.union(*(error_codes(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(error_codes(v) for v in value))
    return set()


def differences(kafka: Any, groupcoord: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every (field path, kafka value, groupcoord value) where two normalised answers differ."""
    if isinstance(kafka, dict) and isinstance(groupcoord, dict):
        out = []
        for key in dict.fromkeys([*kafka, *groupcoord]):
            out += differences(kafka.get(key), groupcoord.get(key), f"{path}.{key}")
        return out
    if isinstance(kafka, list) and isinstance(groupcoord, list) and len(kafka) == len(groupcoord):
        out = []
        for index, (k, g) in enumerate(zip(kafka, groupcoord, strict=True)):
            out += differences(k, g, f"{path}[{index}]")
        return out
    return [] if kafka == groupcoord else [(path or ".", kafka, groupcoord)]
