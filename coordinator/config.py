"""Coordinator configuration: Kafka's broker settings for groups and offsets, in milliseconds.

Defaults are Kafka's (spec §1). Every limit the coordinator enforces is here, with the error a
request gets when it is exceeded, so nothing in the core is unbounded.
"""

from __future__ import annotations

import msgspec

from .server_assignors import SERVER_ASSIGNORS

INT32_MAX = 2**31 - 1

DAY_MS = 24 * 60 * 60 * 1000


MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


class CoordinatorConfig(msgspec.Struct, frozen=True, kw_only=True):
    # -- Kafka's settings (spec §1) -----------------------------------------------------------
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = INT32_MAX  # GROUP_MAX_SIZE_REACHED
    offsets_retention_ms: int = 7 * DAY_MS
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096  # OFFSET_METADATA_TOO_LARGE (UTF-16 units)
    # Kafka hard-codes this (GroupCoordinator.NewMemberJoinTimeoutMs); a setting here for tests.
    new_member_join_timeout_ms: int = 300_000

    # -- Limits of our own, each answered with a Kafka error ----------------------------------
    # Kafka's strings carry an int16 length. Longer ids, names or hosts get INVALID_REQUEST
    # (INVALID_GROUP_ID for a group id), so nothing unbounded reaches a record.
    string_max_chars: int = 32_767
    member_protocols_max_bytes: int = 1_048_576  # INVALID_REQUEST: one member's protocol list
    member_protocols_max_count: int = 64  # INVALID_REQUEST
    # A group record (measured by record_size.record_bytes, as the log measures it) over this
    # is not written: the sync fails UNKNOWN_SERVER_ERROR. Bootstrap sizes the log from it.
    group_metadata_max_bytes: int = 8_388_608
    # INVALID_COMMIT_OFFSET_SIZE when the records of one commit (record_size.record_bytes)
    # total more than this (Kafka: RECORD_LIST_TOO_LARGE, mapped).
    offset_commit_max_bytes: int = 8_388_608
    max_parked_requests: int = 100_000  # COORDINATOR_NOT_AVAILABLE past this
    max_groups: int = 1_000_000  # COORDINATOR_NOT_AVAILABLE for a new group
    # Per-request bounds, so that one request cannot hold the partition's event loop for
    # seconds. Kafka has none for these APIs (socket.request.max.bytes bounds only bytes); the
    # numbers follow its CreateTopics bound of 10,000 partitions per request. Over a bound:
    # INVALID_REQUEST (an OffsetCommit: INVALID_COMMIT_OFFSET_SIZE on every partition), and
    # nothing changes. See shard_offsets' "Request bounds".
    max_groups_per_request: int = 10_000  # DescribeGroups, DeleteGroups
    max_members_per_request: int = 10_000  # LeaveGroup members, SyncGroup assignments
    max_topics_per_request: int = 10_000  # distinct topics: OffsetCommit/Fetch/Delete
    # OffsetCommit/Fetch/Delete; an OffsetFetch of all offsets answers at most this many.
    max_partitions_per_request: int = 10_000
    # Offsets the retention cleanup examines per timer turn; it resumes 1 ms later.
    offsets_cleanup_max_offsets_per_turn: int = 10_000

    # -- KIP-848 consumer groups (Kafka's group.consumer.* settings and defaults) -------------
    consumer_group_session_timeout_ms: int = 45_000
    consumer_group_heartbeat_interval_ms: int = 5_000
    consumer_group_max_size: int = INT32_MAX  # GROUP_MAX_SIZE_REACHED
    # Server-side assignors a member may name (server_assignors.SERVER_ASSIGNORS); the first is
    # the default. UNSUPPORTED_ASSIGNOR for any other name.
    consumer_group_assignors: tuple[str, ...] = ("uniform", "range")
    # Kafka's group.consumer.migration.policy: whether a classic group may become a consumer
    # group ("upgrade"), a consumer group a classic one ("downgrade"), both, or neither.
    consumer_group_migration_policy: str = "bidirectional"
    # Kafka 4.3's group.consumer.assignment.interval.ms (KIP-1263): a group's target assignment
    # is recomputed at most once per interval, by the first heartbeat after it, so members that
    # join together cost one assignor run. 0 (the default here; Kafka's is 1,000): in the
    # heartbeat that changed the group, as Kafka did before 4.3.
    consumer_group_assignment_interval_ms: int = 0
    # Not in Kafka: a member waiting for partitions that others must still release
    # (``unreleased_partitions``) is told to heartbeat this often (at most the heartbeat
    # interval), so it takes them soon after they are released instead of a whole interval
    # later; every other answer gives ``consumer_group_heartbeat_interval_ms``. Set it to the
    # heartbeat interval for Kafka's behaviour.
    consumer_group_unreleased_heartbeat_interval_ms: int = 100
    # Kafka's bounds on a group's own settings (``group_config``; Kafka's defaults): a value
    # outside them is INVALID_CONFIG. Unlike Kafka, the deployment's own values above are not
    # held to them (tests and demos run with shorter sessions than a group may ask for).
    consumer_group_min_session_timeout_ms: int = 45_000
    consumer_group_max_session_timeout_ms: int = 60_000
    consumer_group_min_heartbeat_interval_ms: int = 5_000
    consumer_group_max_heartbeat_interval_ms: int = 15_000
    consumer_group_min_assignment_interval_ms: int = 0
    consumer_group_max_assignment_interval_ms: int = 15_000

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            if name in ("consumer_group_assignors", "consumer_group_migration_policy"):
                continue
            value = getattr(self, name)
            if type(value) is not int:
                raise ValueError(f"CoordinatorConfig.{name} must be an int, got {value!r}")
        positive = (
            "group_max_size",
            "offsets_retention_ms",
            "offsets_retention_check_interval_ms",
            "string_max_chars",
            "member_protocols_max_bytes",
            "member_protocols_max_count",
            "group_metadata_max_bytes",
            "offset_commit_max_bytes",
            "max_parked_requests",
            "max_groups",
            "new_member_join_timeout_ms",
            "max_groups_per_request",
            "max_members_per_request",
            "max_topics_per_request",
            "max_partitions_per_request",
            "offsets_cleanup_max_offsets_per_turn",
            "consumer_group_session_timeout_ms",
            "consumer_group_heartbeat_interval_ms",
            "consumer_group_max_size",
            "consumer_group_unreleased_heartbeat_interval_ms",
        )
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(
                    f"CoordinatorConfig.{name} must be >= 1, got {getattr(self, name)}"
                )
        for name in (
            "group_initial_rebalance_delay_ms",
            "offset_metadata_max_bytes",
            "consumer_group_assignment_interval_ms",
            "consumer_group_min_session_timeout_ms",
            "consumer_group_max_session_timeout_ms",
            "consumer_group_min_heartbeat_interval_ms",
            "consumer_group_max_heartbeat_interval_ms",
            "consumer_group_min_assignment_interval_ms",
            "consumer_group_max_assignment_interval_ms",
        ):
            if getattr(self, name) < 0:
                raise ValueError(
                    f"CoordinatorConfig.{name} must be >= 0, got {getattr(self, name)}"
                )
        assignors = self.consumer_group_assignors
        if (
            type(assignors) is not tuple
            or not assignors
            or any(name not in SERVER_ASSIGNORS for name in assignors)
        ):
            raise ValueError(
                "CoordinatorConfig.consumer_group_assignors must be a non-empty tuple of "
                f"{sorted(SERVER_ASSIGNORS)}, got {assignors!r}"
            )
        if self.consumer_group_migration_policy not in MIGRATION_POLICIES:
            raise ValueError(
                "CoordinatorConfig.consumer_group_migration_policy must be one of "
                f"{', '.join(MIGRATION_POLICIES)}, got {self.consumer_group_migration_policy!r}"
            )
        # Kafka does not check min <= max; nor do we (every join then fails
        # INVALID_SESSION_TIMEOUT).

    @property
    def upgrade_allowed(self) -> bool:
        """Whether a classic group may be converted to a consumer group."""
        return self.consumer_group_migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_allowed(self) -> bool:
        """Whether a consumer group may be converted to a classic group."""
        return self.consumer_group_migration_policy in ("bidirectional", "downgrade")

    @classmethod
    def from_retention_minutes(cls, minutes: int, **kwargs) -> CoordinatorConfig:
        """Kafka's ``offsets.retention.minutes``, widened to 64-bit milliseconds (no overflow)."""
        return cls(offsets_retention_ms=minutes * 60 * 1000, **kwargs)
