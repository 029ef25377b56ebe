"""What the client accepts as a partition and an offset, checked before anything is sent.

Kafka's consumer refuses a negative offset when the caller builds it (``OffsetAndMetadata``), so
a bad commit never reaches the coordinator, which would store it: a committed -5 reads back as
-5, a committed -1 as "no offset". Partitions are int32 (``0 <= p < 2**31``) and offsets int64
in Kafka's schemas; ``bool`` is refused though Python counts it as an int, because
``{("t", 0): True}`` is a bug, not offset 1. Every client entry point (``GroupMember``,
``SyncGroupMember``, ``AdminClient``) goes through these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MAX_PARTITION = 2**31 - 1
MAX_OFFSET = 2**63 - 1
MAX_PORT = 65535  # a TCP port: listeners' settings, and HOST:PORT addresses on command lines


def decimal(text: str, most: int) -> int | None:
    """The number a plain decimal ``text`` names when it is within 0..``most``, else None. Only
    ASCII digits: ``str.isdigit`` also accepts superscripts, which ``int`` refuses."""
    if text.isascii() and text.isdigit():
        number = int(text)
        if number <= most:
            return number
    return None


def checked_partition(tp: Any) -> tuple[str, int]:
    """``tp`` as a ``(topic, partition)`` pair; ``ValueError`` naming the problem otherwise."""
    if not isinstance(tp, tuple) or len(tp) != 2:
        raise ValueError(f"a partition is a (topic, partition) tuple, got {tp!r}")
    topic, partition = tp
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"a topic is a non-empty str, got {topic!r}")
    if type(partition) is not int or not 0 <= partition <= MAX_PARTITION:
        raise ValueError(
            f"a partition number is an int in 0..{MAX_PARTITION}, "
            f"got {partition!r} for topic {topic!r}"
        )
    return topic, partition


def checked_offset(offset: Any, where: str) -> int:
    """``offset`` if it is a valid offset; ``where`` names it in the error."""
    if type(offset) is not int or not 0 <= offset <= MAX_OFFSET:
        raise ValueError(f"an offset is an int in 0..{MAX_OFFSET}, got {offset!r} for {where}")
    return offset


def checked_offsets(offsets: Any) -> dict[tuple[str, int], int]:
    """A commit's ``{(topic, partition): offset}`` mapping, every key and value checked."""
    if not isinstance(offsets, Mapping):
        raise ValueError(
            f"offsets are a mapping {{(topic, partition): offset}}, got {type(offsets).__name__}"
        )
    checked: dict[tuple[str, int], int] = {}
    for tp, offset in offsets.items():
        topic, partition = checked_partition(tp)
        checked[(topic, partition)] = checked_offset(offset, f"{topic}-{partition}")
    return checked


def checked_partitions(partitions: Iterable[Any] | None) -> list[tuple[str, int]] | None:
    """A list of partitions (``None`` stays ``None``: "all of them" where a call allows it)."""
    if partitions is None:
        return None
    if isinstance(partitions, (str, bytes)):  # iterating "t0" would name partitions t, 0
        raise ValueError(f"give a list of (topic, partition) pairs, not {partitions!r}")
    return [checked_partition(tp) for tp in partitions]


def checked_metadata(metadata: Any) -> str:
    if not isinstance(metadata, str):
        raise ValueError(f"commit metadata is a str, got {type(metadata).__name__}")
    return metadata
