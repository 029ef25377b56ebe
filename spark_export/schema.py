"""Schemas of the log source and of the three lake tables (one place, so docs and code agree).

The source yields one wide row per log entry (``kind`` = "offset" or "group"); the exporter
splits it into the tables below. Arrow schemas are the truth: Spark's view is derived from them
and every batch is cast to them before delta-rs commits it, so a table's schema never drifts.

offset_commits      append-only, partitioned by ``commit_date`` (UTC day of the commit;
                    null for tombstones, whose time the log does not record); unique on
                    (cluster, log_partition, log_offset).
offsets_latest      one row per (cluster, group_id, topic, partition), kept by MERGE; a
                    tombstone deletes the row.
group_generations   one row per group metadata record (a generation, a member change, or a
                    tombstone); members nested, assignments decoded when the protocol type
                    is ``consumer``.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema

OFFSET_COMMITS = "offset_commits"
OFFSETS_LATEST = "offsets_latest"
GROUP_GENERATIONS = "group_generations"
TABLES = (OFFSET_COMMITS, OFFSETS_LATEST, GROUP_GENERATIONS)

_PROVENANCE = [
    pa.field("cluster", pa.string(), nullable=False),
    pa.field("log_partition", pa.int32(), nullable=False),
    pa.field("log_offset", pa.int64(), nullable=False),
]

_OFFSET_VALUE = [
    pa.field("committed_offset", pa.int64()),  # null for a tombstone
    pa.field("leader_epoch", pa.int32()),
    pa.field("metadata", pa.string()),
    pa.field("commit_timestamp_ms", pa.int64()),
    pa.field("expire_timestamp_ms", pa.int64()),  # null: no explicit expiry
]

TOPIC_PARTITION = pa.struct([pa.field("topic", pa.string()), pa.field("partition", pa.int32())])

MEMBER = pa.struct(
    [
        pa.field("member_id", pa.string()),
        pa.field("group_instance_id", pa.string()),
        pa.field("client_id", pa.string()),
        pa.field("client_host", pa.string()),
        pa.field("rebalance_timeout_ms", pa.int32()),
        pa.field("session_timeout_ms", pa.int32()),
        pa.field("subscription", pa.binary()),
        pa.field("assignment", pa.binary()),
        pa.field("subscribed_topics", pa.list_(pa.string())),  # null: not a consumer protocol
        pa.field("assigned_partitions", pa.list_(TOPIC_PARTITION)),  # null: not decodable
    ]
)

_GROUP_VALUE = [
    pa.field("protocol_type", pa.string()),
    pa.field("generation", pa.int32()),
    pa.field("protocol", pa.string()),
    pa.field("leader", pa.string()),
    pa.field("state_timestamp_ms", pa.int64()),
    pa.field("member_count", pa.int32()),
    pa.field("members", pa.list_(MEMBER)),
]

# What the Spark source yields (the exporter adds ``cluster`` and the commit date).
SOURCE_SCHEMA = pa.schema(
    [
        pa.field("kind", pa.string(), nullable=False),  # "offset" | "group"
        pa.field("log_partition", pa.int32(), nullable=False),
        pa.field("log_offset", pa.int64(), nullable=False),
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        *_OFFSET_VALUE,
        pa.field("is_tombstone", pa.bool_(), nullable=False),
        *_GROUP_VALUE,
    ]
)

OFFSET_COMMITS_SCHEMA = pa.schema(
    [
        *_PROVENANCE,
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        *_OFFSET_VALUE,
        pa.field("is_tombstone", pa.bool_(), nullable=False),
        pa.field("commit_date", pa.date32()),
    ]
)

OFFSETS_LATEST_SCHEMA = pa.schema(
    [
        pa.field("cluster", pa.string(), nullable=False),
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        *_OFFSET_VALUE,
        pa.field("log_partition", pa.int32(), nullable=False),
        pa.field("log_offset", pa.int64(), nullable=False),
    ]
)

GROUP_GENERATIONS_SCHEMA = pa.schema(
    [
        *_PROVENANCE,
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("is_tombstone", pa.bool_(), nullable=False),
        *_GROUP_VALUE,
    ]
)

TABLE_SCHEMAS = {
    OFFSET_COMMITS: OFFSET_COMMITS_SCHEMA,
    OFFSETS_LATEST: OFFSETS_LATEST_SCHEMA,
    GROUP_GENERATIONS: GROUP_GENERATIONS_SCHEMA,
}
TABLE_PARTITION_BY = {OFFSET_COMMITS: ["commit_date"], OFFSETS_LATEST: [], GROUP_GENERATIONS: []}

# Log-end offsets supplied to the lag analytics (a Parquet or CSV file with these columns).
LOG_END_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("timestamp_ms", pa.int64(), nullable=False),
        pa.field("log_end_offset", pa.int64(), nullable=False),
    ]
)


def spark_schema(schema: pa.Schema):
    """Spark's StructType for an Arrow schema."""
    return from_arrow_schema(schema)


def schema_text() -> str:
    """The three table schemas as readable text (for the README and ``report --schemas``)."""
    lines = []
    for name in TABLES:
        part = TABLE_PARTITION_BY[name]
        lines.append(f"{name}" + (f"  (partitioned by {', '.join(part)})" if part else ""))
        for field in TABLE_SCHEMAS[name]:
            null = "" if field.nullable else " not null"
            lines.append(f"  {field.name:<22} {field.type}{null}")
    return "\n".join(lines)
