"""Which consumer groups a change of some topics concerns, without looking at every group.

A catalog change (``Shard.change_topics``) must refresh the partition metadata of every
consumer group that subscribes to a changed topic (Kafka's metadata-change rebalance), and of
no other: asking each group costs the partition's groups per change (13 ms at 20,000 groups,
and a partition may hold a million). Kafka's coordinator keeps its groups by subscribed topic
for the same reason (``groupsByTopics``).

``TopicWatchers`` keeps each group's watched topics (the topics of its partition metadata and
its members' subscribed names: ``ConsumerGroup.watched_topics``) indexed by topic, and the
groups with a member subscribed by regex, which any new topic may concern. It is kept up to
date lazily: a consumer record the shard applies, live or replayed, that can change what its
group watches marks the group stale (``applied``: a set insertion), and ``concerned`` first
re-reads the stale groups. So a change costs the groups touched since the last change, the
groups its topics concern, and the regex groups (each of their distinct regexes matched
against the changed names), never the rest.
"""

from __future__ import annotations

from collections.abc import Mapping

from .consumer_group import ConsumerGroup
from .consumer_records import (
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
)

_WATCHED_KEYS = (ConsumerGroupMemberMetadataKey, ConsumerGroupPartitionMetadataKey)


class TopicWatchers:
    """Consumer groups by watched topic (see the module docstring)."""

    def __init__(self) -> None:
        self._by_topic: dict[str, set[str]] = {}
        self._watched: dict[str, frozenset[str]] = {}  # group id -> its topics, as indexed
        self._by_regex: set[str] = set()  # groups with a member subscribed by regex
        self._stale: set[str] = set()

    def applied(self, key, value) -> None:
        """The shard applied a consumer record: its group is re-read before the next answer
        if the record can change what the group watches (a member's subscription, the
        group's partition metadata, the group's end); assignments and epochs cannot."""
        kind = type(key)
        if kind in _WATCHED_KEYS or (kind is ConsumerGroupMetadataKey and value is None):
            self._stale.add(key.group)

    def concerned(
        self, groups: Mapping[str, ConsumerGroup], names: frozenset[str]
    ) -> list[ConsumerGroup]:
        """The groups of ``groups`` (the shard's, by id) whose partition metadata a change of
        the topics ``names`` can change, in group id order."""
        for group_id in self._stale:
            self._reindex(group_id, groups.get(group_id))
        self._stale.clear()
        found: set[str] = set()
        for name in names:
            found.update(self._by_topic.get(name, ()))
        for group_id in self._by_regex - found:
            if groups[group_id].regex_matches_any(names):
                found.add(group_id)
        return [groups[group_id] for group_id in sorted(found)]

    def _reindex(self, group_id: str, group: ConsumerGroup | None) -> None:
        if group is not None:
            topics, by_regex = group.watched_topics()
            if topics == self._watched.get(group_id, frozenset()) and by_regex == (
                group_id in self._by_regex
            ):
                return  # most often: a member came or went, subscribing alike
        by_topic = self._by_topic
        for topic in self._watched.pop(group_id, ()):
            watchers = by_topic[topic]
            watchers.discard(group_id)
            if not watchers:
                del by_topic[topic]
        self._by_regex.discard(group_id)
        if group is None:  # deleted
            return
        if topics:
            self._watched[group_id] = topics
            for topic in topics:
                by_topic.setdefault(topic, set()).add(group_id)
        if by_regex:
            self._by_regex.add(group_id)
