"""The catalog topics each subscribed regular expression matches, resolved once per catalog change.

A KIP-848 member may subscribe by regular expression. The shard needs the topics it matches at
every join or subscription change (the group's partition metadata) and for every member at
every target assignment, and matching one regex against the whole catalog costs the catalog's
size: before this, each of those matched every member's regex against every topic again, so a
member joining a group of 20 regex members cost 2.6 s of the partition's loop at 90,000
topics, and 30 ms at 1,000 (``bench/catalog.py``'s "regex join" row). Kafka 4.0 keeps a
group's resolved regexes too, and refreshes them in the background when topics change.

Here each distinct regex is resolved once and kept (``RegexTopics``), until the catalog is
replaced (``clear``). A change of some topics (``changed``) updates each kept resolution by the
changed names alone, unless the change times the resolutions kept is more than
``MAX_CHANGE_CHECKS`` matches: then they are dropped and resolved again when next asked. At
most ``MAX_REGEXES`` resolutions naming ``MAX_RESOLVED_NAMES`` topics in all are kept, the
least recently used dropped first. What a resolution holds is always exactly the catalog
topics the regex matches in full (Kafka matches the whole name): the seeded KIP-848
simulation checks the shard against a twin that resolves everything afresh.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from .topic_regex import compile_regex

MAX_REGEXES = 1_024
MAX_RESOLVED_NAMES = 1_000_000
MAX_CHANGE_CHECKS = 100_000


class RegexTopics:
    """Kept resolutions of regexes against one catalog (see the module docstring)."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, frozenset[str]] = OrderedDict()
        self._names = 0

    def __len__(self) -> int:
        return len(self._held)

    def clear(self) -> None:
        """The catalog was replaced: resolve everything again when asked."""
        self._held.clear()
        self._names = 0

    def matching(self, regex: str, catalog: Mapping[str, int]) -> frozenset[str]:
        """The topics of ``catalog`` that ``regex`` (valid: checked when it was subscribed)
        matches in full; ``catalog`` must be the one the kept resolutions were made from."""
        held = self._held.get(regex)
        if held is not None:
            self._held.move_to_end(regex)
            return held
        pattern = compile_regex(regex)
        topics = frozenset(topic for topic in catalog if pattern.fullmatch(topic))
        self._held[regex] = topics
        self._names += len(topics)
        self._trim()
        return topics

    def changed(self, changes: Mapping[str, int | None]) -> None:
        """The catalog's topics ``changes`` names were created, grown (a count) or deleted
        (None): each kept resolution follows."""
        if len(changes) * len(self._held) > MAX_CHANGE_CHECKS:
            self.clear()
            return
        for regex, topics in list(self._held.items()):
            pattern = compile_regex(regex)
            gone = {name for name, count in changes.items() if count is None and name in topics}
            new = {
                name
                for name, count in changes.items()
                if count is not None and name not in topics and pattern.fullmatch(name)
            }
            if gone or new:
                self._held[regex] = (topics - gone) | new
                self._names += len(new) - len(gone)
        self._trim()

    def _trim(self) -> None:
        while len(self._held) > MAX_REGEXES or self._names > MAX_RESOLVED_NAMES:
            self._names -= len(self._held.popitem(last=False)[1])
