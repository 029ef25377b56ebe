"""A driver for KIP-848 consumer-group scenarios against one Shard (on top of ``harness``).

``ConsumerHarness`` is a ``Harness`` (so every Step is checked for replay equivalence, classic
and consumer state alike) with a topic catalog and ConsumerGroupHeartbeat builders.
``assert_single_owners`` is the protocol's safety invariant: no partition is held (assigned or
pending revocation) by two members at once.
"""

from __future__ import annotations

from groupcoord.coordinator.consumer_messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatTopicPartitions,
)

from .harness import GROUP, Harness, replayed_shard

REBALANCE_MS = 5_000
CATALOG = {"foo": 6, "bar": 3, "zar": 2}


def tps(assignment: dict[str, set[int] | frozenset[int] | list[int]]):
    return [
        ConsumerGroupHeartbeatTopicPartitions(t, sorted(p)) for t, p in sorted(assignment.items())
    ]


def as_dict(assignment) -> dict[str, frozenset[int]]:
    """A response's assignment as topic -> partitions (empty topics left out)."""
    return {
        tp.topic: frozenset(tp.partitions) for tp in assignment.topic_partitions if tp.partitions
    }


def assert_single_owners(shard) -> None:
    for group in shard.consumer_groups():
        seen: dict[tuple[str, int], str] = {}
        for member in group.members.values():
            for topic, parts in member.owned_partitions().items():
                for p in parts:
                    other = seen.setdefault((topic, p), member.member_id)
                    assert other == member.member_id, (group.group_id, topic, p, other)
        assert seen == group.owners, group.group_id


class ConsumerHarness(Harness):
    def __init__(self, catalog=None, **config) -> None:
        super().__init__(**config)
        self.catalog = dict(catalog or CATALOG)
        self._absorb(self.shard.update_topics(self.now, self.catalog))

    def _absorb(self, step) -> None:
        super()._absorb(step)
        assert_single_owners(self.shard)

    def set_topics(self, catalog) -> None:
        self.catalog = dict(catalog)
        self._absorb(self.shard.update_topics(self.now, self.catalog))

    def reload(self, hand_catalog: bool = True) -> None:
        """A restart: a fresh shard rebuilt from every record so far, then loaded; the runtime
        hands it the topic catalog only if ``hand_catalog`` (else call ``set_topics`` later)."""
        self.shard = replayed_shard(self.shard, self.records)
        self._absorb(self.shard.on_loaded(self.now))
        if hand_catalog:
            self.set_topics(self.catalog)

    def hb(
        self,
        member_id,
        epoch,
        group_id=GROUP,
        names=None,
        regex=None,
        owned=None,
        instance_id=None,
        rebalance_ms=-1,
        assignor=None,
        rack_id=None,
        api_version=1,
    ):
        return self.call(
            ConsumerGroupHeartbeatRequest(
                group_id,
                member_id,
                epoch,
                instance_id=instance_id,
                rack_id=rack_id,
                rebalance_timeout_ms=rebalance_ms,
                subscribed_topic_names=names,
                subscribed_topic_regex=regex,
                server_assignor=assignor,
                topic_partitions=None if owned is None else tps(owned),
                client_id="client",
                client_host="/127.0.0.1",
                api_version=api_version,
            )
        )

    def subscribe(self, member_id, names=("foo", "bar"), group_id=GROUP, **kwargs):
        kwargs.setdefault("rebalance_ms", REBALANCE_MS)
        return self.hb(member_id, 0, group_id=group_id, names=list(names), owned={}, **kwargs)

    def member(self, member_id, group_id=GROUP):
        return self.shard.consumer_group(group_id).members[member_id]

    def group(self, group_id=GROUP):
        return self.shard.consumer_group(group_id)
