"""The topic catalog: which topics exist and how many partitions each has.

groupcoord holds no records, but Kafka clients need topics: Metadata answers list them, a
consumer's subscription resolves against them, and a topic that grows makes the group's leader
rejoin (Kafka's metadata-change rebalance), so that the new partitions get owners.

One owner, one place. The router actor owns the catalog of a deployment; it lives in
``<log_dir>/topics.json`` (``{"version": n, "topics": {name: partitions}, "ids": {name: uuid},
"group_configs": {group id: {setting: value}}}``) and the log of the versions after that one
beside it, ``topics.json.changes`` (``catalog_file``: a change appends its line and fsyncs; the
whole file is rewritten atomically only now and then), so a restarted router reads back exactly
what it acknowledged. Every change bumps ``version``; listeners poll the
router for the catalog and compare versions. As in Kafka: topic names are 1-249 characters of ASCII
letters, digits, ``.``, ``_`` and ``-`` (not ``.`` or ``..``); a topic's partition count can only
grow; every topic has a topic id, a random (version 4) UUID given when it is created and kept until
it is deleted (Metadata and CreateTopics answers carry it; a topic created again after a delete
gets a new one). A file written before topics had ids gets one for each topic on its first open,
written back at once, so the ids clients see never change afterwards.

One owner at a time, also across a failover: a router that was cut off (a stalled node Ray
declared dead and whose router it started elsewhere) may run again beside its successor. Each
``TopicCatalog`` claims the catalog when it opens, before it reads it, by replacing
``<log_dir>/catalog-owner.json`` (a new file: a new inode), and before every write it checks
that the file is still the one it wrote (``check_owner``: one ``stat``). A replaced owner
refuses every change with Kafka's NOT_CONTROLLER (admin clients find the new one and retry)
and writes nothing; its router exits on its next check. As with the log's epoch (see
``storage.partition_log``), the check and the write are not one step: an owner stalled
between the two can still land one write. Each writer uses temporary files of its own, so two
never interleave inside one.

The catalog also keeps groups' own settings (``coordinator.group_config``: Kafka's group configs,
set with ``kafka-configs --alter --entity-type groups``), as Kafka keeps them in its metadata
rather than with the group: they exist whether or not the group does, and the shards get them
with the topics. At most ``MAX_CONFIGURED_GROUPS`` groups set any, their ids at most
``MAX_CONFIGURED_GROUP_ID_CHARS`` characters in all.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple, TypeVar

from groupcoord.coordinator import CoordinatorConfig, Errors
from groupcoord.coordinator.group_config import (
    GroupConfigError,
    GroupConfigOp,
    altered,
    checked_configs,
)
from groupcoord.storage.snapshot import write_atomically
from groupcoord.wire.topics import TopicChange, TopicResult

from .catalog_changes import CatalogChanges, ChangeHistory, put
from .catalog_file import CatalogFiles

_T = TypeVar("_T")
CATALOG_FILE = "topics.json"
OWNER_FILE = "catalog-owner.json"
MAX_TOPIC_NAME_CHARS = 249  # Kafka's limit
MAX_PARTITIONS_PER_TOPIC = 100_000
MAX_TOPICS = 100_000
# Every topic's partitions together. A Metadata answer naming every topic (an admin client
# listing topics, a consumer subscribed by pattern) lists each partition, built on a
# listener's loop at a few µs each, so this bounds how long one request holds a partition
# (without it, 100,000 topics of 100,000 partitions could be created, and each such answer
# would take hours). Kafka's own guidance for a cluster was long about this many.
MAX_CATALOG_PARTITIONS = 200_000
# Groups with settings of their own: at most this many, with ids of this many characters in
# all (a group id may be 32,767 characters long), so the catalog stays a few megabytes.
MAX_CONFIGURED_GROUPS = 100_000
MAX_CONFIGURED_GROUP_ID_CHARS = 4 * 1024 * 1024
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")


class CatalogError(ValueError):
    """A refused change; ``error`` is Kafka's code for it (what a Kafka admin client sees)."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error

    def __reduce__(self):  # it crosses from the router to callers: rebuild with both fields
        return (CatalogError, (self.error, str(self)))


def check_topic_name(name: object) -> str:
    """``name`` if it is a legal Kafka topic name, else CatalogError saying why."""
    if not isinstance(name, str) or not name:
        raise CatalogError(
            Errors.INVALID_TOPIC_EXCEPTION, f"a topic name must be a non-empty str, got {name!r}"
        )
    if len(name) > MAX_TOPIC_NAME_CHARS:
        raise CatalogError(
            Errors.INVALID_TOPIC_EXCEPTION,
            f"topic name {name[:40]!r}... is {len(name)} characters; "
            f"the most is {MAX_TOPIC_NAME_CHARS}",
        )
    if name in (".", "..") or not _LEGAL_NAME.fullmatch(name):
        raise CatalogError(
            Errors.INVALID_TOPIC_EXCEPTION,
            f"illegal topic name {name!r}: use ASCII letters, digits, '.', '_' "
            "and '-' (not '.' or '..')",
        )
    return name


def check_partitions(partitions: object) -> int:
    if type(partitions) is not int or not 1 <= partitions <= MAX_PARTITIONS_PER_TOPIC:
        raise CatalogError(
            Errors.INVALID_PARTITIONS,
            f"partitions must be an int in [1, {MAX_PARTITIONS_PER_TOPIC}], got {partitions!r}",
        )
    return partitions


class CatalogSnapshot(NamedTuple):
    """The catalog at one version, read-only (``TopicCatalog.snapshot``)."""

    version: int
    topics: Mapping[str, int]
    topic_ids: Mapping[str, uuid.UUID]
    group_configs: Mapping[str, Mapping[str, int]]


class TopicCatalog:
    """The catalog of one deployment, kept in ``directory``/topics.json and its log. Not
    thread-safe: one owner (the router actor) calls it."""

    def __init__(self, directory: str, config: CoordinatorConfig | None = None) -> None:
        """``config``: the deployment's, whose bounds a group's settings must keep to."""
        self.path = os.path.join(directory, CATALOG_FILE)
        self._config = config or CoordinatorConfig()
        self._owner_path = os.path.join(directory, OWNER_FILE)
        self._owner_identity = self._claim()  # before reading (module docstring)
        self._files = CatalogFiles(self.path)
        self.version, self._topics, self._ids, self._group_configs = self._read()
        self._id_chars = sum(map(len, self._group_configs))  # MAX_CONFIGURED_GROUP_ID_CHARS
        self._partition_count = sum(self._topics.values())  # MAX_CATALOG_PARTITIONS
        # What a change under ``_changing`` touched, with each name's value before it: the
        # new version's line, and what a refused or failed write restores.
        self._undo_topics: dict[str, tuple[int | None, uuid.UUID | None]] = {}
        self._undo_groups: dict[str, dict[str, int] | None] = {}
        self._snapshot: CatalogSnapshot | None = None  # snapshot()'s, of its version
        self._history = ChangeHistory()  # the latest versions' changes (changes_since)
        if self._ids.keys() != self._topics.keys():  # written before topics had ids
            missing = [name for name in self._topics if name not in self._ids]
            self._changing(lambda: self._give_ids(missing))

    def _claim(self) -> tuple[int, int, int]:
        """Replace the owner file with one of ours; returns what identifies it
        (``_file_identity``). Leftover temporary files of earlier owners go first."""
        directory = os.path.dirname(self.path)
        for name in os.listdir(directory):
            if name.endswith(".tmp") and name.startswith((CATALOG_FILE, OWNER_FILE)):
                os.remove(os.path.join(directory, name))  # a dead or replaced owner's
        try:
            with open(self._owner_path, "rb") as f:
                previous = json.loads(f.read()).get("owner", 0)
        except (OSError, ValueError, AttributeError, RecursionError):
            previous = 0  # none yet, or unreadable: the new claim replaces it anyway
        owner = previous + 1 if type(previous) is int and previous >= 0 else 1
        data = json.dumps({"owner": owner, "pid": os.getpid()}).encode()
        write_atomically(self._owner_path, [data])
        return _file_identity(self._owner_path)

    def check_owner(self) -> None:
        """CatalogError (NOT_CONTROLLER) when another ``TopicCatalog`` claimed the catalog
        after this one (module docstring)."""
        try:
            replaced = _file_identity(self._owner_path) != self._owner_identity
        except OSError:  # removed: someone meant to take it over
            replaced = True
        if replaced:
            raise CatalogError(
                Errors.NOT_CONTROLLER,
                f"{self._owner_path}: this router was replaced by a newer one, which owns the "
                "topic catalog now; it changes nothing more",
            )

    def _read(
        self,
    ) -> tuple[int, dict[str, int], dict[str, uuid.UUID], dict[str, dict[str, int]]]:
        raw = self._files.read()  # ValueError naming the file for damage
        try:
            topics = {
                check_topic_name(name): check_partitions(count)
                for name, count in raw["topics"].items()
            }
            ids = {name: _topic_id(text) for name, text in raw["ids"].items() if name in topics}
            group_configs = checked_configs(raw["group_configs"])
        except (CatalogError, ValueError) as exc:
            raise ValueError(f"{self.path}: {exc}") from None
        return raw["version"], topics, ids, group_configs

    def topics(self) -> dict[str, int]:
        """A copy: {topic: partition count}."""
        return dict(self._topics)

    def topic_ids(self) -> dict[str, uuid.UUID]:
        """A copy: {topic: its topic id}."""
        return dict(self._ids)

    def group_configs(self) -> dict[str, dict[str, int]]:
        """A copy: {group id: {setting: value}}, for the groups that set any."""
        return {group_id: dict(settings) for group_id, settings in self._group_configs.items()}

    def snapshot(self) -> CatalogSnapshot:
        """The catalog as read-only mappings, copied once per version: for readers that ask
        per request (the bootstrap listener), where a copy each time costs the catalog's size
        (1.4 ms at 90,000 topics, bench/catalog.py's "bootstrap" row). Every change is a new
        version, and one that fails leaves the catalog as it was at the old one."""
        held = self._snapshot
        if held is None or held.version != self.version:
            held = self._snapshot = CatalogSnapshot(
                self.version,
                MappingProxyType(self.topics()),
                MappingProxyType(self.topic_ids()),
                MappingProxyType(self.group_configs()),
            )
        return held

    def changes_since(self, version: int) -> CatalogChanges | None:
        """What changed after ``version``, for a holder of that version (``catalog_changes``);
        None when the latest versions' changes do not reach back to it."""
        return self._history.since(version)

    # -- changes: each is checked whole, then made in memory; ``_changing`` writes them -------

    def configure_group(
        self,
        group_id: str,
        ops: Sequence[GroupConfigOp],
        *,
        replace: bool,
        validate_only: bool = False,
    ) -> None:
        """Change group ``group_id``'s settings (``group_config.altered``; ``replace``: as
        AlterConfigs, the whole set). GroupConfigError or CatalogError, and no change, when
        refused; nothing is written when nothing changes."""
        self._changing(lambda: self._configure(group_id, ops, replace, validate_only))

    def create(
        self, name: str, partitions: int, *, validate_only: bool = False
    ) -> uuid.UUID | None:
        """Add a topic with a new topic id, returned (None when only validating); CatalogError
        if it exists (TOPIC_ALREADY_EXISTS) or is illegal."""
        return self._changing(lambda: self._create(name, partitions, validate_only))

    def alter(self, name: str, partitions: int, *, validate_only: bool = False) -> None:
        """Grow a topic to ``partitions``; CatalogError if unknown or not larger (Kafka's
        INVALID_PARTITIONS: a partition count never shrinks)."""
        self._changing(lambda: self._alter(name, partitions, validate_only))

    def delete(self, name: str) -> None:
        self._changing(lambda: self._delete(name))

    def apply(self, changes: list[TopicChange]) -> list[TopicResult]:
        """Each change in turn, answered as a Kafka admin client expects: one result per
        change, a refused one with its error code and message (the others still apply). The
        ones applied are written together, as one new version: a request of thousands of
        changes writes the file once, not once each."""
        try:
            return self._changing(lambda: [self._apply_one(change) for change in changes])
        except CatalogError as exc:  # replaced (check_owner): nothing was applied
            return [TopicResult(exc.error, str(exc)) for _ in changes]

    def _apply_one(self, change: TopicChange) -> TopicResult:
        topic_id = None
        try:
            if change.kind == "create":
                topic_id = self._create(change.name, change.partitions, change.validate_only)
            elif change.kind == "grow":
                self._alter(change.name, change.partitions, change.validate_only)
            elif change.kind == "delete":
                self._delete(change.name)
            elif change.kind in ("alter_group_configs", "replace_group_configs"):
                replace = change.kind == "replace_group_configs"
                self._configure(change.name, change.configs, replace, change.validate_only)
            else:
                raise CatalogError(Errors.INVALID_REQUEST, f"unknown change {change.kind!r}")
        except (CatalogError, GroupConfigError) as exc:
            return TopicResult(exc.error, str(exc))
        return TopicResult(Errors.NONE, None, change.partitions, topic_id)

    def _changing(self, make: Callable[[], _T]) -> _T:
        """``make()``'s result, once what it changed in memory is written as one new version;
        when ``make`` or the write raises, the catalog is as it was. Costs what was changed,
        not the catalog's size: the changes touch names (``_touch_topic``, ``_touch_group``)
        before they change them."""
        saved = self._id_chars, self._partition_count
        self._undo_topics, self._undo_groups = {}, {}
        try:
            result = make()
            if self._undo_topics or self._undo_groups:
                self._write()
        except BaseException:
            self._id_chars, self._partition_count = saved
            for name, (count, topic_id) in self._undo_topics.items():
                put(self._topics, name, count)
                put(self._ids, name, topic_id)
            for group_id, settings in self._undo_groups.items():
                put(self._group_configs, group_id, settings)
            raise
        finally:
            self._undo_topics, self._undo_groups = {}, {}
        return result

    def _touch_topic(self, name: str) -> None:
        if name not in self._undo_topics:
            self._undo_topics[name] = (self._topics.get(name), self._ids.get(name))

    def _touch_group(self, group_id: str) -> None:
        if group_id not in self._undo_groups:
            self._undo_groups[group_id] = self._group_configs.get(group_id)

    def _give_ids(self, names: Sequence[str]) -> None:
        for name in names:
            self._touch_topic(name)
            self._ids[name] = uuid.uuid4()

    def _configure(self, group_id: str, ops, replace: bool, validate_only: bool) -> None:
        if group_id == "":
            raise CatalogError(Errors.INVALID_REQUEST, "Default group resources are not allowed.")
        if len(group_id) > self._config.string_max_chars:
            raise CatalogError(
                Errors.INVALID_REQUEST,
                f"a group id is at most {self._config.string_max_chars} characters",
            )
        current = self._group_configs.get(group_id, {})
        settings = altered(current, ops, replace=replace, config=self._config)
        if not current and settings:
            self._check_room_for(group_id)
        if validate_only or settings == current:
            return
        self._touch_group(group_id)
        if settings:
            self._group_configs[group_id] = settings
            self._id_chars += 0 if current else len(group_id)
        else:
            del self._group_configs[group_id]
            self._id_chars -= len(group_id)

    def _check_room_for(self, group_id: str) -> None:
        """CatalogError unless one more group may have settings of its own."""
        if len(self._group_configs) >= MAX_CONFIGURED_GROUPS:
            raise CatalogError(
                Errors.INVALID_REQUEST,
                f"{MAX_CONFIGURED_GROUPS} groups already have settings of their own, the most "
                "the catalog keeps",
            )
        chars = self._id_chars + len(group_id)
        if chars > MAX_CONFIGURED_GROUP_ID_CHARS:
            raise CatalogError(
                Errors.INVALID_REQUEST,
                f"the ids of groups with settings of their own would total {chars} characters; "
                f"the most the catalog keeps is {MAX_CONFIGURED_GROUP_ID_CHARS}",
            )

    def _create(self, name: str, partitions: int, validate_only: bool) -> uuid.UUID | None:
        check_topic_name(name)
        check_partitions(partitions)
        if name in self._topics:
            raise CatalogError(
                Errors.TOPIC_ALREADY_EXISTS,
                f"topic {name!r} already exists with {self._topics[name]} partitions",
            )
        if len(self._topics) >= MAX_TOPICS:
            raise CatalogError(
                Errors.INVALID_REQUEST,
                f"the catalog already holds {MAX_TOPICS} topics, the most it may",
            )
        self._check_partition_count(name, partitions)
        if validate_only:
            return None
        self._touch_topic(name)
        topic_id = self._ids[name] = uuid.uuid4()
        self._topics[name] = partitions
        self._partition_count += partitions
        return topic_id

    def _alter(self, name: str, partitions: int, validate_only: bool) -> None:
        check_partitions(partitions)
        current = self._known(name)
        if partitions <= current:
            raise CatalogError(
                Errors.INVALID_PARTITIONS,
                f"topic {name!r} has {current} "
                f"partitions; a topic can only grow, not to {partitions}",
            )
        self._check_partition_count(name, partitions - current)
        if not validate_only:
            self._touch_topic(name)
            self._topics[name] = partitions
            self._partition_count += partitions - current

    def _check_partition_count(self, name: str, more: int) -> None:
        if self._partition_count + more > MAX_CATALOG_PARTITIONS:
            raise CatalogError(
                Errors.INVALID_PARTITIONS,
                f"topic {name!r}: {more} more partitions would make "
                f"{self._partition_count + more} in the catalog; the most it holds is "
                f"{MAX_CATALOG_PARTITIONS}",
            )

    def _delete(self, name: str) -> None:
        count = self._known(name)
        self._touch_topic(name)
        self._partition_count -= count
        del self._topics[name]
        self._ids.pop(name, None)

    def _known(self, name: str) -> int:
        count = self._topics.get(name)
        if count is None:
            raise CatalogError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}")
        return count

    def _write(self) -> None:
        """Make what ``_changing`` touched durable as a new version (``catalog_file``)."""
        version = self.version + 1
        topics, ids = self._topics, self._ids
        delta = {
            "topics": {name: topics.get(name) for name in self._undo_topics},
            "ids": {name: _id_text(ids.get(name)) for name in self._undo_topics},
            "group_configs": {g: self._group_configs.get(g) for g in self._undo_groups},
        }
        self.check_owner()
        self._files.write(version, delta, lambda: self._state(version))
        self._history.record(
            CatalogChanges(
                self.version,
                version,
                {name: topics.get(name) for name in self._undo_topics},
                {name: ids.get(name) for name in self._undo_topics},
                {
                    g: None if (settings := self._group_configs.get(g)) is None else dict(settings)
                    for g in self._undo_groups
                },
            )
        )
        self.version = version

    def _state(self, version: int) -> dict:
        """The whole catalog in the snapshot's format, as ``version``."""
        return {
            "version": version,
            "topics": self._topics,
            "ids": {t: str(i) for t, i in self._ids.items()},
            "group_configs": self._group_configs,
        }


def _id_text(topic_id: uuid.UUID | None) -> str | None:
    return None if topic_id is None else str(topic_id)


def _file_identity(path: str) -> tuple[int, int, int]:
    """What tells one file at ``path`` from any later one put there by a rename."""
    stat = os.stat(path)
    return stat.st_dev, stat.st_ino, stat.st_mtime_ns


def _topic_id(text: object) -> uuid.UUID:
    try:
        topic_id = uuid.UUID(text) if isinstance(text, str) else None
    except ValueError:
        topic_id = None
    if topic_id is None or topic_id.int == 0:
        raise CatalogError(Errors.INVALID_REQUEST, f"bad topic id {text!r}")
    return topic_id
