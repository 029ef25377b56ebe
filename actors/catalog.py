"""The topic catalog: which topics exist and how many partitions each has.

groupcoord holds no records, but Kafka clients need topics: Metadata answers list them, a
consumer's subscription resolves against them, and a topic that grows makes the group's leader
rejoin (Kafka's metadata-change rebalance), so that the new partitions get owners.

One owner, one file. The router actor owns the catalog of a deployment; it lives in
``<log_dir>/topics.json`` (``{"version": n, "topics": {name: partitions}}``), replaced atomically
(write, fsync, rename, fsync the directory) on every change, so a restarted router reads back
exactly what it acknowledged. Every change bumps ``version``; listeners poll the router for the
catalog and compare versions. As in Kafka: topic names are 1-249 characters of ASCII letters,
digits, ``.``, ``_`` and ``-`` (not ``.`` or ``..``); a topic's partition count can only grow.
"""

from __future__ import annotations

import json
import os
import re

from groupcoord.storage.snapshot import write_atomically

CATALOG_FILE = "topics.json"
MAX_TOPIC_NAME_CHARS = 249                  # Kafka's limit
MAX_PARTITIONS_PER_TOPIC = 100_000
MAX_TOPICS = 100_000
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def check_topic_name(name: object) -> str:
    """``name`` if it is a legal Kafka topic name, else ValueError saying why."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a topic name must be a non-empty str, got {name!r}")
    if len(name) > MAX_TOPIC_NAME_CHARS:
        raise ValueError(f"topic name {name[:40]!r}... is {len(name)} characters; "
                         f"the most is {MAX_TOPIC_NAME_CHARS}")
    if name in (".", "..") or not _LEGAL_NAME.fullmatch(name):
        raise ValueError(f"illegal topic name {name!r}: use ASCII letters, digits, '.', '_' "
                         "and '-' (not '.' or '..')")
    return name


def check_partitions(partitions: object) -> int:
    if type(partitions) is not int or not 1 <= partitions <= MAX_PARTITIONS_PER_TOPIC:
        raise ValueError(f"partitions must be an int in [1, {MAX_PARTITIONS_PER_TOPIC}], "
                         f"got {partitions!r}")
    return partitions


class TopicCatalog:
    """The catalog of one deployment, kept in ``directory``/topics.json. Not thread-safe: one
    owner (the router actor) calls it."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, CATALOG_FILE)
        self.version, self._topics = self._read()

    def _read(self) -> tuple[int, dict[str, int]]:
        try:
            with open(self.path, "rb") as f:
                raw = json.loads(f.read())
        except FileNotFoundError:
            return 0, {}
        except (OSError, ValueError) as exc:
            raise ValueError(f"{self.path}: unreadable topic catalog ({exc})") from None
        if (not isinstance(raw, dict) or type(raw.get("version")) is not int
                or not isinstance(raw.get("topics"), dict)):
            raise ValueError(f"{self.path}: expected {{\"version\": int, \"topics\": {{...}}}}")
        try:
            topics = {check_topic_name(name): check_partitions(count)
                      for name, count in raw["topics"].items()}
        except ValueError as exc:
            raise ValueError(f"{self.path}: {exc}") from None
        return raw["version"], topics

    def topics(self) -> dict[str, int]:
        """A copy: {topic: partition count}."""
        return dict(self._topics)

    def create(self, name: str, partitions: int) -> None:
        """Add a topic; ValueError if it exists (Kafka's TOPIC_ALREADY_EXISTS) or is illegal."""
        check_topic_name(name)
        check_partitions(partitions)
        if name in self._topics:
            raise ValueError(f"topic {name!r} already exists with {self._topics[name]} partitions")
        if len(self._topics) >= MAX_TOPICS:
            raise ValueError(f"the catalog already holds {MAX_TOPICS} topics, the most it may")
        self._write({**self._topics, name: partitions})

    def alter(self, name: str, partitions: int) -> None:
        """Grow a topic to ``partitions``; ValueError if unknown or not larger (Kafka's
        INVALID_PARTITIONS: a partition count never shrinks)."""
        check_partitions(partitions)
        current = self._topics.get(name)
        if current is None:
            raise ValueError(f"unknown topic {name!r}")
        if partitions <= current:
            raise ValueError(f"topic {name!r} has {current} partitions; a topic can only grow, "
                             f"not to {partitions}")
        self._write({**self._topics, name: partitions})

    def delete(self, name: str) -> None:
        if name not in self._topics:
            raise ValueError(f"unknown topic {name!r}")
        self._write({t: n for t, n in self._topics.items() if t != name})

    def _write(self, topics: dict[str, int]) -> None:
        version = self.version + 1
        data = json.dumps({"version": version, "topics": topics}, sort_keys=True).encode()
        write_atomically(self.path, [data])        # fsyncs the file and the directory
        self.version, self._topics = version, topics
