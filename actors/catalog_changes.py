"""A topic catalog's changes between two of its versions, so that a change costs its own size.

Every change to the catalog (``catalog.TopicCatalog``) is a new version. A partition that holds
version h could be handed the whole catalog at the new version v, but that costs the catalog's
size in every partition's process for every change (decoding 90,000 topics took 113–123 ms;
bench/catalog.py's "read back" row), however small the change. Instead the router hands it
``CatalogChanges``: for each name that changed between a base version b and v, its value at v.

Theory of operation
-------------------
* **Applicable from any version in [b, v).** Every name changed after b is in the changes with
  its value at v, and every other name is the same at every version from b to v. So changes
  over b bring a catalog held at any h with b <= h < v exactly to v: pushes and refreshes may
  cross (two changes published at once arrive in either order) and a receiver still never
  goes backwards or half-way. One held at h < b cannot take them: it keeps h and asks for
  the changes over h (``PartitionListener`` at its next refresh, the router when a push is
  answered with an older version).
* **Kept in memory for a while.** The router keeps the changes of the latest versions
  (``ChangeHistory``): at most ``MAX_HELD_VERSIONS`` of them naming at most
  ``MAX_CHANGED_NAMES`` names in all, oldest out first. Over a version it no longer holds (a
  listener that was away, a router that just started) it hands the whole catalog, as before.
* **One function applies them** (``apply_changes``), in place, to the dictionaries their
  holder owns: the listener's directory, a network process's view, the runtime's copy.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Mapping, Sequence

import msgspec

MAX_HELD_VERSIONS = 256
# Beyond this many names the whole catalog costs about what its changes would.
MAX_CHANGED_NAMES = 10_000


class CatalogChanges(msgspec.Struct, frozen=True):
    """Catalog version ``base_version`` to ``catalog_version``: for each topic that changed, its
    partition count and topic id at ``catalog_version`` (None: deleted); for each group whose
    own settings changed, its settings (None: none)."""

    base_version: int
    catalog_version: int
    topics: dict[str, int | None]
    topic_ids: dict[str, uuid.UUID | None]
    group_configs: dict[str, dict[str, int] | None]

    def names(self) -> int:
        return len(self.topics) + len(self.group_configs)

    def applies_to(self, held_version: int) -> bool:
        """Whether a catalog held at ``held_version`` can take these (module docstring)."""
        return self.base_version <= held_version < self.catalog_version


def merged(changes: Sequence[CatalogChanges]) -> CatalogChanges:
    """Consecutive changes (each one's base the version before it) as one: the later value of
    a name wins."""
    topics: dict[str, int | None] = {}
    topic_ids: dict[str, uuid.UUID | None] = {}
    group_configs: dict[str, dict[str, int] | None] = {}
    for one in changes:
        topics.update(one.topics)
        topic_ids.update(one.topic_ids)
        group_configs.update(one.group_configs)
    return CatalogChanges(
        changes[0].base_version, changes[-1].catalog_version, topics, topic_ids, group_configs
    )


class ChangeHistory:
    """The changes of the catalog's latest versions, one entry a version, bounded (module
    docstring)."""

    def __init__(self) -> None:
        self._held: deque[CatalogChanges] = deque()
        self._names = 0

    def record(self, changes: CatalogChanges) -> None:
        """The changes that made the newest version; a gap (changes not over the newest
        version held) forgets everything before them."""
        held = self._held
        if held and held[-1].catalog_version != changes.base_version:
            held.clear()
            self._names = 0
        held.append(changes)
        self._names += changes.names()
        while held and (len(held) > MAX_HELD_VERSIONS or self._names > MAX_CHANGED_NAMES):
            self._names -= held.popleft().names()

    def since(self, version: int) -> CatalogChanges | None:
        """The changes over ``version`` to the newest version held, or None when they are not
        all held (``version`` too old, unknown, or already the newest)."""
        held = self._held
        if not held or not held[0].base_version <= version < held[-1].catalog_version:
            return None
        # Consecutive: the first entry past ``version`` has its base at or before it.
        return merged([one for one in held if one.catalog_version > version])


def put(mapping: dict, key: str, value) -> None:
    """``mapping[key] = value``, or no ``key`` at all for None."""
    if value is None:
        mapping.pop(key, None)
    else:
        mapping[key] = value


def put_all(mapping: dict, changed: Mapping) -> None:
    """``put`` each of ``changed``'s names."""
    for key, value in changed.items():
        put(mapping, key, value)


def apply_changes(
    changes: CatalogChanges,
    topics: dict[str, int],
    topic_ids: dict[str, uuid.UUID],
    group_configs: dict[str, dict[str, int]],
) -> None:
    """Bring a catalog (its topics, topic ids and groups' settings, changed in place) to
    ``changes.catalog_version``; the caller checks ``applies_to`` first."""
    put_all(topics, changes.topics)
    put_all(topic_ids, changes.topic_ids)
    put_all(group_configs, changes.group_configs)
