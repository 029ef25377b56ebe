"""``groupcoord topics mirror``: the topic catalog made to match an upstream Kafka cluster's.

A deployment coordinating consumers of a real Kafka cluster needs that cluster's topics and
partition counts in its catalog: Metadata answers, the classic assignors and KIP-848's target
assignments all read them, and a topic grown upstream must trigger the rebalance Kafka
triggers. ``mirror`` reads the cluster's Metadata (confluent-kafka's admin client, each round
trip bounded by ``end_offsets.KAFKA_TIMEOUT_S``) and applies what differs through the router,
as a Kafka admin client's CreateTopics and CreatePartitions would:

============================  ==================================================
upstream / catalog            action
============================  ==================================================
a topic the catalog lacks     ``create`` it with the upstream partition count
more partitions upstream      ``grow`` it to the upstream count
the same count                ``same``: nothing
fewer partitions upstream     ``kept``: a topic never shrinks (Kafka's rule)
a topic only in the catalog   ``kept``: mirroring never deletes
============================  ==================================================

Kafka's internal topics (``INTERNAL_TOPICS``) are not mirrored, nor topics the cluster answers
with an error. ``pattern`` (a regular expression matched against the whole name) limits which
upstream topics are mirrored. A change the catalog refuses (its bounds) is reported with
Kafka's error and the others still apply. ``dry_run`` asks the router to validate only.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import msgspec

from groupcoord.coordinator import Errors
from groupcoord.wire.topics import MAX_CHANGES_PER_REQUEST, TopicChange, TopicResult

from .end_offsets import KAFKA_TIMEOUT_S, kafka_admin, kafka_metadata

# Kafka's own topics (Topic.INTERNAL_TOPICS and KRaft's metadata log): never a consumer's.
INTERNAL_TOPICS = frozenset(
    ("__consumer_offsets", "__transaction_state", "__share_group_state", "__cluster_metadata")
)
COLUMNS = ("topic", "upstream", "before", "action", "result")


class MirrorRow(msgspec.Struct, frozen=True):
    """One topic of a mirror round: its partition counts upstream and in the catalog before
    (None: absent there), the action (module docstring), how it went or why it was kept, and
    whether the catalog refused it."""

    topic: str
    upstream: int | None
    before: int | None
    action: str
    result: str = ""
    refused: bool = False


def upstream_topics(servers: str, timeout_s: float = KAFKA_TIMEOUT_S) -> dict[str, int]:
    """{topic: partition count} of the Kafka cluster at ``servers`` ("host:port[,...]"), its
    internal topics and topics answered with an error left out. ConnectionError when no broker
    answers within ``timeout_s``; ValueError for a malformed ``servers`` or without
    confluent-kafka."""
    metadata = kafka_metadata(kafka_admin(servers), servers, timeout_s)
    return {
        name: len(topic.partitions)
        for name, topic in metadata.topics.items()
        if topic.error is None and name not in INTERNAL_TOPICS and topic.partitions
    }


def topic_matcher(pattern: str | None) -> Callable[[str], object] | None:
    """What ``--topic-pattern`` matches a whole topic name with (None: every topic);
    ValueError for a pattern that is not a regular expression."""
    try:
        return re.compile(pattern).fullmatch if pattern is not None else None
    except re.error as exc:
        raise ValueError(f"--topic-pattern {pattern!r}: {exc}") from None


def plan(upstream: dict[str, int], catalog: dict[str, int], pattern: str | None) -> list[MirrorRow]:
    """Every topic of either side (upstream ones matching ``pattern``), sorted, with its action
    (module docstring). ValueError for a pattern that is not a regular expression."""
    matches = topic_matcher(pattern)
    wanted = {t: n for t, n in upstream.items() if matches is None or matches(t)}
    rows = []
    for topic in sorted(wanted.keys() | catalog.keys()):
        there, here = wanted.get(topic), catalog.get(topic)
        action, why = "kept", ""
        if there is None:
            why = "not mirrored: mirroring never deletes"
        elif here is None:
            action = "create"
        elif there > here:
            action = "grow"
        elif there == here:
            action = "same"
        else:
            why = "fewer upstream: a topic never shrinks"
        rows.append(MirrorRow(topic, there, here, action, why))
    return rows


def apply(
    change_topics: Callable[[list[TopicChange]], list[TopicResult]],
    rows: list[MirrorRow],
    dry_run: bool,
) -> list[MirrorRow]:
    """``rows`` with each create and grow sent to ``change_topics`` (the router's; validated
    only with ``dry_run``) and its result filled in, in requests of at most
    ``MAX_CHANGES_PER_REQUEST`` changes."""
    todo = [i for i, row in enumerate(rows) if row.action in ("create", "grow")]
    done = list(rows)
    for start in range(0, len(todo), MAX_CHANGES_PER_REQUEST):
        batch = todo[start : start + MAX_CHANGES_PER_REQUEST]
        changes = [
            TopicChange(rows[i].action, rows[i].topic, rows[i].upstream or 0, dry_run)
            for i in batch
        ]
        for i, result in zip(batch, change_topics(changes), strict=True):
            if result.error == Errors.NONE:
                done[i] = msgspec.structs.replace(rows[i], result="valid" if dry_run else "done")
            else:
                outcome = f"{result.error.name}: {result.message or 'refused'}"
                done[i] = msgspec.structs.replace(rows[i], result=outcome, refused=True)
    return done


def mirror_once(
    servers: str,
    catalog: Callable[[], dict[str, int]],
    change_topics: Callable[[list[TopicChange]], list[TopicResult]],
    *,
    pattern: str | None = None,
    dry_run: bool = False,
    timeout_s: float = KAFKA_TIMEOUT_S,
) -> list[MirrorRow]:
    """One round: the upstream cluster's topics read, compared with ``catalog()`` and the
    differences applied (module docstring); every topic's row."""
    upstream = upstream_topics(servers, timeout_s)
    return apply(change_topics, plan(upstream, catalog(), pattern), dry_run)


def table(rows: list[MirrorRow]) -> list[dict]:
    return [msgspec.structs.asdict(row) for row in rows]
