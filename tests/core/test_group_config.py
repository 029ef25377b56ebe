"""Groups' own settings (coordinator.group_config): Kafka's checks of a change, with its error
codes and messages (as Kafka 4.3 answers them), and a Shard serving each consumer group at its
own session timeout, heartbeat interval and assignment interval."""

import pytest

from groupcoord.coordinator import CoordinatorConfig, Errors
from groupcoord.coordinator.group_config import (
    APPEND,
    ASSIGNMENT_INTERVAL,
    DELETE,
    HEARTBEAT_INTERVAL,
    SESSION_TIMEOUT,
    SET,
    SUBTRACT,
    GroupConfigError,
    GroupConfigOp,
    altered,
    checked_configs,
    kafka_name,
)

from .consumer_harness import ConsumerHarness
from .harness import GROUP, replayed_shard

CONFIG = CoordinatorConfig()
PLAIN = "plain"  # a group of the harness's partition, as GROUP is, with no settings of its own


def change(*ops, current=None, replace=False, config=CONFIG):
    return altered(
        current or {}, [GroupConfigOp(*op) for op in ops], replace=replace, config=config
    )


def refusal(*ops, replace=False) -> tuple[Errors, str]:
    with pytest.raises(GroupConfigError) as caught:
        change(*ops, replace=replace)
    return caught.value.error, str(caught.value)


def test_a_set_value_is_kept_as_an_int_and_a_delete_drops_it():
    settings = change((SESSION_TIMEOUT, SET, "50000"), (HEARTBEAT_INTERVAL, SET, " 6000\t"))
    assert settings == {SESSION_TIMEOUT: 50_000, HEARTBEAT_INTERVAL: 6_000}  # trimmed, as Java
    assert change((SESSION_TIMEOUT, DELETE, None), current=settings) == {HEARTBEAT_INTERVAL: 6_000}


def test_deleting_what_is_not_set_or_does_not_exist_changes_nothing():
    current = {SESSION_TIMEOUT: 50_000}
    assert change(
        ("no.such", DELETE, None), (HEARTBEAT_INTERVAL, DELETE, "x"), current=current
    ) == (current)


def test_alter_configs_replaces_the_whole_set():
    current = {SESSION_TIMEOUT: 50_000}
    assert change((HEARTBEAT_INTERVAL, SET, "6000"), current=current, replace=True) == {
        HEARTBEAT_INTERVAL: 6_000
    }
    assert change(current=current, replace=True) == {}


@pytest.mark.parametrize(
    ("op", "error", "message"),
    [
        (
            (SESSION_TIMEOUT, SET, "1000"),
            Errors.INVALID_CONFIG,
            "consumer.session.timeout.ms must be greater than or equal to "
            "group.consumer.min.session.timeout.ms",
        ),
        (
            (SESSION_TIMEOUT, SET, "90000"),
            Errors.INVALID_CONFIG,
            "consumer.session.timeout.ms must be less than or equal to "
            "group.consumer.max.session.timeout.ms",
        ),
        (
            (HEARTBEAT_INTERVAL, SET, "60000"),
            Errors.INVALID_CONFIG,
            "consumer.heartbeat.interval.ms must be less than or equal to "
            "group.consumer.max.heartbeat.interval.ms",
        ),
        (
            (SESSION_TIMEOUT, SET, "abc"),
            Errors.INVALID_CONFIG,
            "Invalid value abc for configuration consumer.session.timeout.ms: "
            "Not a number of type INT",
        ),
        (
            (SESSION_TIMEOUT, SET, "50000.0"),
            Errors.INVALID_CONFIG,
            "Invalid value 50000.0 for configuration consumer.session.timeout.ms: "
            "Not a number of type INT",
        ),
        (
            (SESSION_TIMEOUT, SET, "99999999999"),  # past Java's int
            Errors.INVALID_CONFIG,
            "Invalid value 99999999999 for configuration consumer.session.timeout.ms: "
            "Not a number of type INT",
        ),
        (
            (ASSIGNMENT_INTERVAL, SET, "-1"),
            Errors.INVALID_CONFIG,
            "Invalid value -1 for configuration consumer.assignment.interval.ms: "
            "Value must be at least 0",
        ),
        (("no.such", SET, "1"), Errors.INVALID_CONFIG, "Unknown group config name: no.such"),
        (
            (SESSION_TIMEOUT, APPEND, "1"),
            Errors.INVALID_CONFIG,
            "Can't APPEND to key consumer.session.timeout.ms because its type is not LIST.",
        ),
        (
            (SESSION_TIMEOUT, SUBTRACT, "1"),
            Errors.INVALID_CONFIG,
            "Can't SUBTRACT to key consumer.session.timeout.ms because its type is not LIST.",
        ),
        (
            (SESSION_TIMEOUT, SET, None),
            Errors.INVALID_REQUEST,
            "Null value not supported for : consumer.session.timeout.ms",
        ),
        (
            (SESSION_TIMEOUT, 7, "1"),  # Kafka: UNKNOWN_SERVER_ERROR, no message
            Errors.INVALID_REQUEST,
            "unknown config operation 7 for consumer.session.timeout.ms",
        ),
    ],
)
def test_refusals_are_kafkas(op, error, message):
    assert refusal(op) == (error, message)


def test_a_name_twice_in_one_change_is_refused():
    ops = ((SESSION_TIMEOUT, SET, "48000"), (SESSION_TIMEOUT, SET, "49000"))
    assert refusal(*ops) == (Errors.INVALID_REQUEST, "Error due to duplicate config keys")


def test_bounds_come_from_the_deployment():
    config = CoordinatorConfig(consumer_group_min_session_timeout_ms=1_000)
    assert change((SESSION_TIMEOUT, SET, "1000"), config=config) == {SESSION_TIMEOUT: 1_000}
    assert kafka_name("consumer_group_max_assignment_interval_ms") == (
        "group.consumer.max.assignment.interval.ms"
    )


@pytest.mark.parametrize(
    "raw",
    [[], {"g": []}, {1: {}}, {"g": {"no.such": 1}}, {"g": {SESSION_TIMEOUT: "50000"}}],
)
def test_a_stored_set_of_the_wrong_shape_is_refused(raw):
    with pytest.raises(ValueError):
        checked_configs(raw)


# -- a Shard serving groups at their own settings ------------------------------------------------


def test_each_group_heartbeats_at_its_own_interval_from_its_next_heartbeat():
    h = ConsumerHarness()
    h.shard.update_group_configs({GROUP: {HEARTBEAT_INTERVAL: 6_000}})
    joined = h.subscribe("m1")
    assert joined.heartbeat_interval_ms == 6_000
    assert h.subscribe("o1", group_id=PLAIN).heartbeat_interval_ms == 5_000  # the default
    h.shard.update_group_configs({GROUP: {HEARTBEAT_INTERVAL: 7_000}})
    epoch, owned = joined.member_epoch, h.group().target["m1"]
    assert h.hb("m1", epoch, owned=owned).heartbeat_interval_ms == 7_000
    h.shard.update_group_configs({})
    assert h.hb("m1", epoch, owned=owned).heartbeat_interval_ms == 5_000


def test_each_group_is_fenced_at_its_own_session_timeout():
    h = ConsumerHarness()
    h.shard.update_group_configs({GROUP: {SESSION_TIMEOUT: 50_000}})
    h.subscribe("m1")
    h.subscribe("o1", group_id=PLAIN)
    h.advance(45_000)  # the deployment's timeout: the other group's member is gone
    assert "o1" not in h.group(PLAIN).members and "m1" in h.group().members
    h.advance(5_000)
    assert "m1" not in h.group().members


def test_a_reloaded_shard_arms_sessions_at_each_groups_own_timeout():
    h = ConsumerHarness()
    h.subscribe("m1")
    h.shard = replayed_shard(h.shard, h.records)
    h.shard.update_group_configs({GROUP: {SESSION_TIMEOUT: 60_000}})  # as the runtime does
    h._absorb(h.shard.on_loaded(h.now))
    h.set_topics(h.catalog)
    h.advance(59_999)
    assert "m1" in h.group().members
    h.advance(1)
    assert "m1" not in h.group().members


def test_the_assignment_interval_is_the_groups_own():
    h = ConsumerHarness()  # the deployment assigns at once (interval 0)
    h.shard.update_group_configs({GROUP: {ASSIGNMENT_INTERVAL: 1_000}})
    h.subscribe("m1")
    h.subscribe("m2")
    assert h.group().state.value == "Assigning"  # waits for the group's interval
    h.subscribe("o1", group_id=PLAIN)
    h.subscribe("o2", group_id=PLAIN)
    assert h.group(PLAIN).state.value != "Assigning"


def test_a_bad_mapping_changes_nothing():
    h = ConsumerHarness()
    h.shard.update_group_configs({GROUP: {HEARTBEAT_INTERVAL: 6_000}})
    with pytest.raises(ValueError):
        h.shard.update_group_configs({GROUP: {HEARTBEAT_INTERVAL: "7000"}})
    assert h.subscribe("m1").heartbeat_interval_ms == 6_000
