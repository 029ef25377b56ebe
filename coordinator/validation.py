"""Value checks for requests: what Kafka's wire format would have rejected before the coordinator.

Kafka's schemas bound every field (int16-length UTF-8 strings, int32 and int64 numbers). Python
does not, and a value that cannot be encoded would fail the log append *after* the Shard applied
it: a poison request that fails its partition again on every retry. So every value that can reach
a record is checked here first, and a request that fails gets INVALID_REQUEST (INVALID_GROUP_ID
for the group id) and changes nothing.
"""

from __future__ import annotations

from .config import CoordinatorConfig

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def is_int32(n: int) -> bool:
    return INT32_MIN <= n <= INT32_MAX


def is_int64(n: int) -> bool:
    return INT64_MIN <= n <= INT64_MAX


def string_ok(s: str | None, config: CoordinatorConfig) -> bool:
    """Fits an int16-length string and is encodable as UTF-8 (no lone surrogates)."""
    if s is None:
        return True
    if len(s) > config.string_max_chars:
        return False
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def group_id_ok(group_id: str | None, config: CoordinatorConfig) -> bool:
    return group_id is not None and string_ok(group_id, config)


def utf16_length(s: str) -> int:
    """Java's ``String.length()``: code points above U+FFFF count twice."""
    if s.isascii():
        return len(s)
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


def join_request_ok(req, config: CoordinatorConfig) -> bool:
    if not (is_int32(req.session_timeout_ms) and is_int32(req.rebalance_timeout_ms)):
        return False
    for s in (
        req.member_id,
        req.group_instance_id,
        req.client_id,
        req.client_host,
        req.protocol_type,
        req.reason,
    ):
        if not string_ok(s, config):
            return False
    if len(req.protocols) > config.member_protocols_max_count:
        return False
    total_bytes = 0
    for protocol in req.protocols:
        if not string_ok(protocol.name, config):
            return False
        total_bytes += len(protocol.metadata)
    return total_bytes <= config.member_protocols_max_bytes


def member_fields_ok(
    member_id: str, group_instance_id: str | None, generation_id: int, config: CoordinatorConfig
) -> bool:
    return (
        is_int32(generation_id)
        and string_ok(member_id, config)
        and string_ok(group_instance_id, config)
    )


def commit_chars(req, config: CoordinatorConfig) -> int | None:
    """None when a value of the OffsetCommit ``req`` cannot go into its records (the member
    fields of ``member_fields_ok``, the retention, a partition's numbers or strings; topic
    validity is separate); otherwise the characters of its partitions' topics and metadata,
    which bound its records' size (``record_size.offset_records_bytes_at_most``).

    One pass, and no call per partition unless it carries metadata: this is every commit's
    path. A commit names few topics for many partitions, usually in runs (Kafka's format
    groups partitions by topic): a topic equal to the one before is not checked again."""
    if not (
        INT32_MIN <= req.generation_id <= INT32_MAX
        and INT64_MIN <= req.retention_time_ms <= INT64_MAX
        and string_ok(req.member_id, config)
        and string_ok(req.group_instance_id, config)
    ):
        return None
    chars = 0
    checked = None
    for p in req.offsets:
        if not (
            INT64_MIN <= p.committed_offset <= INT64_MAX
            and INT32_MIN <= p.committed_leader_epoch <= INT32_MAX
            and INT32_MIN <= p.partition <= INT32_MAX
        ):
            return None
        topic, metadata = p.topic, p.committed_metadata
        if topic != checked:
            if not string_ok(topic, config):
                return None
            checked = topic
        chars += len(topic)
        if metadata:
            if not string_ok(metadata, config):
                return None
            chars += len(metadata)
    return chars


def topic_partition_exists(topic: str, partition: int) -> bool:
    """Without topic metadata, only names and numbers no Kafka topic can have are unknown."""
    return bool(topic) and partition >= 0


def partitions_within_limits(partitions, config: CoordinatorConfig) -> bool:
    """At most ``max_partitions_per_request`` entries, naming at most ``max_topics_per_request``
    distinct topics. Checked first, so the rest of a request's handling is bounded."""
    count = len(partitions)
    if count > config.max_partitions_per_request:
        return False
    if count <= config.max_topics_per_request:
        return True  # cannot name more topics than it has entries
    return len({p.topic for p in partitions}) <= config.max_topics_per_request
