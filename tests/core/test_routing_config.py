"""Group routing (spec §7.1 test vectors) and configuration validation (spec §1)."""

import pytest

from groupcoord.coordinator import CoordinatorConfig, Shard, java_string_hashcode, partition_for

VECTORS = [  # group, String.hashCode, partition of 2, partition of 50
    ("groupId", 293428218, 0, 18),
    ("otherGroup", -204443313, 1, 13),
    ("foo", 101574, 0, 24),
    ("", 0, 0, 0),
    ("my-group", -1906497762, None, 12),
    ("polygenelubricants", -2147483648, 0, 0),
    ("é-grp", 216623617, None, 17),
    ("😀", 1772899, None, 49),
]


@pytest.mark.parametrize("group,hashcode,p2,p50", VECTORS)
def test_routing_vectors(group, hashcode, p2, p50):
    assert java_string_hashcode(group) == hashcode
    assert partition_for(group, 50) == p50
    if p2 is not None:
        assert partition_for(group, 2) == p2


def test_kafka_defaults():
    c = CoordinatorConfig()
    assert (c.group_min_session_timeout_ms, c.group_max_session_timeout_ms) == (6000, 1800000)
    assert c.group_initial_rebalance_delay_ms == 3000 and c.group_max_size == 2**31 - 1
    assert c.offsets_retention_ms == 7 * 24 * 3600 * 1000
    assert c.offsets_retention_check_interval_ms == 600000 and c.offset_metadata_max_bytes == 4096


def test_retention_minutes_do_not_overflow():
    c = CoordinatorConfig.from_retention_minutes(2**31 - 1)
    assert c.offsets_retention_ms == (2**31 - 1) * 60 * 1000


@pytest.mark.parametrize(
    "field,value",
    [
        ("group_max_size", 0),
        ("offsets_retention_ms", 0),
        ("offsets_retention_check_interval_ms", 0),
        ("group_max_size", "4"),
        ("max_parked_requests", -1),
        ("group_initial_rebalance_delay_ms", -1),
        ("offset_metadata_max_bytes", 1.5),
        ("consumer_group_assignment_interval_ms", -1),
    ],
)
def test_invalid_config_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        CoordinatorConfig(**{field: value})


@pytest.mark.parametrize("args", [(2, 2), (-1, 2), (0, 0), ("0", 2)])
def test_invalid_shard_arguments(args):
    with pytest.raises(ValueError):
        Shard(*args)


def test_unknown_request_type_raises_without_change():
    shard = Shard(0, 1)
    shard.on_loaded(0)
    with pytest.raises(ValueError, match="unsupported request"):
        shard.handle(0, 1, object())
    with pytest.raises(ValueError):
        shard.replay("not a record")
