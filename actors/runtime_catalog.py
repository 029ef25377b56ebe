"""The topic catalog a partition's runtime holds for its shard: ``PartitionRuntime``'s mixin.

The router hands every partition the catalog (consumer groups subscribe to its topics, and a
topic that grows rebalances them), whole (``update_topics``) or as the changes over the
version held (``apply_catalog_changes``, ``catalog_changes``): a change then costs its own
size, not the catalog's. The runtime keeps its own copy (``_catalog``, ``_group_configs``,
``catalog_version``) and hands the shard what arrives; a catalog that arrives while the log
loads is handed to the shard once it is loaded (``runtime_load``). A mixin of
``PartitionRuntime`` only: it works on the runtime's fields.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from groupcoord.coordinator.consumer_membership import check_topic_changes
from groupcoord.coordinator.group_config import checked_configs

from .catalog_changes import CatalogChanges, put_all


class CatalogMixin:
    """``PartitionRuntime``'s topic catalog (see the module docstring)."""

    def update_topics(
        self,
        version: int,
        topics: dict[str, int],
        group_configs: Mapping[str, Mapping[str, int]] | None = None,
    ) -> bool:
        """Hand the shard topic catalog ``version``: {topic: partition count} and the groups'
        own settings ({group id: {setting: value}}, ``coordinator.group_config``; None: none).
        An older or equal version than the one held is ignored (pushes and fetches can cross).
        Consumer groups need it: until the first one, their heartbeats get
        COORDINATOR_LOAD_IN_PROGRESS. Its records (a group's new partition metadata and epoch)
        are made durable like any request's. Returns whether it was taken; ValueError (and no
        change) for a bad catalog."""
        if type(version) is not int or not isinstance(topics, dict):
            raise ValueError("update_topics takes an int version and a dict of topics")
        if version <= self.catalog_version:
            return False  # before any work: every listener refresh hands the catalog in again
        configs = checked_configs({} if group_configs is None else group_configs)
        if self.state in ("loading", "serving"):
            # A loading shard takes it too (it only keeps it): the check is the same.
            shard = self._shard
            if not self._shard_step(lambda: shard.update_topics(self._clock_ms(), topics)):
                return False
        if self.state == "serving":  # a loading one gets them when loaded (runtime_load)
            self._shard.update_group_configs(configs)
        self.catalog_version, self._catalog = version, dict(topics)
        self._group_configs = configs
        self.catalogs_taken += 1
        return True

    def apply_catalog_changes(self, changes: CatalogChanges) -> bool:
        """``update_topics`` at a change's size: ``changes`` (``catalog_changes``) over a
        version at or before the one held. Returns whether they were taken: not when they are
        not over the version held (hand it the whole catalog then) or it holds theirs already.
        ValueError (and no change) for malformed changes."""
        if self._catalog is None or not changes.applies_to(self.catalog_version):
            return False
        check_topic_changes(changes.topics)
        group_changes = {g: v or None for g, v in changes.group_configs.items()}
        configs = checked_configs({g: v for g, v in group_changes.items() if v is not None})
        if self.state == "serving":  # a loading shard gets the catalog when loaded
            shard = self._shard

            def change() -> Any:
                step = shard.change_topics(self._clock_ms(), changes.topics)
                shard.change_group_configs(group_changes)  # checked above: cannot raise
                return step

            if not self._shard_step(change):
                return False
        put_all(self._catalog, changes.topics)
        # Checked copies, as update_topics keeps; an empty one is none.
        put_all(self._group_configs, {g: configs.get(g) for g in group_changes})
        self.catalog_version = changes.catalog_version
        self.catalog_changes_taken += 1
        return True

    def _shard_step(self, change: Callable[[], Any]) -> bool:
        """Process the Step ``change()`` (a shard's catalog call) returns. Its ValueError, raised
        before any change, is the caller's; anything else is a core bug that may have left
        memory half-changed: the partition fails (False)."""
        try:
            step = change()
        except ValueError:
            raise
        except Exception as exc:
            self._fail(exc)
            return False
        self._process(step)
        return True

    def _update_shard_topics(self, topics: dict[str, int]) -> None:
        self._run_step(self._shard.update_topics, self._clock_ms(), topics)
