"""Differential tests: the same scripted scenarios, request for request, against a real Apache
Kafka broker and against groupcoord's Kafka listeners, answers compared field by field.

Each scenario (``SCENARIOS``) is a list of steps played by a small driver (differential.py)
over raw wire connections (rawwire.py) found with FindCoordinator, as a client does. Both
servers play it at the same time, each with the same fresh group ids and topics. A scenario
runs at three version profiles: "latest" pins every API to the highest version both servers
announce in ApiVersions, "old" to an older version that still has the scenario's features,
"oldest" to the lowest version both announce. A request a server refuses to read is answered
by closing the connection, and that is compared too.

The KIP-848 scenarios (``CONSUMER_SCENARIOS``: ConsumerGroupHeartbeat, ConsumerGroupDescribe,
OffsetCommit with member epochs) run at the "latest" profile only: the two versions of each of
their APIs differ in who names a new member (v0 the coordinator, v1 the client), and these
scenarios' members name themselves. Assignments in their answers are compared as sets.

Answers are normalised (member ids become the scenario member's name, topic ids their topic's
name; throttle times, node ids, hosts and ports are dropped: ``differential.normalise``), and
any remaining difference fails the test, naming the step, the field path and both values,
unless it is listed in ``DELIBERATE_DIFFERENCES`` with its reason.

All groups of one run (and the empty group id) hash to the same groupcoord partition, so
requests naming several groups have one coordinator on both sides (Kafka's single broker
coordinates every group).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from groupcoord.coordinator import CoordinatorConfig, partition_for
from groupcoord.coordinator.group_config import (
    APPEND,
    ASSIGNMENT_INTERVAL,
    DELETE,
    HEARTBEAT_INTERVAL,
    SESSION_TIMEOUT,
)
from groupcoord.wire import ApiKey
from tests.kafka.diff_steps import (
    G2,
    G3,
    SHORT_REBALANCE_MS,
    T2,
    T,
    alter_configs,
    commit,
    consumer_describe,
    consumer_heartbeat,
    create_topics,
    delete_groups,
    describe,
    describe_acls,
    describe_cluster,
    describe_configs,
    fetch,
    find_coordinator,
    heartbeat,
    join,
    leave,
    list_groups,
    member,
    metadata,
    offset_delete,
    replace_configs,
    sync,
)
from tests.kafka.differential import (
    GROUPS,
    PROBE_GROUP,
    TOPICS,
    Await,
    Pause,
    Run,
    WaitForAssignable,
    WaitForGroupConfig,
    WaitForTopics,
    assignment,
    differences,
    epoch,
    error_codes,
    generation,
    name,
    new_member_id,
    normalise,
    subscription,
)
from tests.kafka.rawwire import api_versions

# groupcoord_listeners' deployment (conftest.py) has two partitions.
GROUPCOORD_PARTITIONS = 2

# DescribeConfigs' resource types (Kafka's ConfigResource.Type).
TOPIC_CONFIGS, BROKER_CONFIGS, GROUP_CONFIGS = 2, 4, 32
# Settings both servers have at the same value and source (javakafka.broker_properties sets
# the same initial delay and KIP-848 heartbeat interval as conftest's deployment).
COMPARED_BROKER_SETTINGS = (
    "group.min.session.timeout.ms",
    "group.initial.rebalance.delay.ms",
    "group.consumer.heartbeat.interval.ms",
    "group.max.size",
)
# A group's settings whose broker-level values both servers share (the assignment interval's
# default is 1,000 ms in Kafka 4.3, 0 in groupcoord: "Deliberate differences").
COMPARED_GROUP_SETTINGS = (SESSION_TIMEOUT, HEARTBEAT_INTERVAL)
# Two of Kafka's log settings of a topic, which groupcoord (no records) does not have.
KAFKA_TOPIC_SETTINGS = ("cleanup.policy", "retention.ms")

# Changes of a group's settings that both servers refuse, each with Kafka's code and message.
REFUSED_GROUP_SETTINGS = (
    ("set a session above the bounds", {SESSION_TIMEOUT: "90000"}),
    ("set a heartbeat above the bounds", {HEARTBEAT_INTERVAL: "60000"}),
    ("set a session that is not a number", {SESSION_TIMEOUT: "50000.0"}),
    ("set a negative assignment interval", {ASSIGNMENT_INTERVAL: "-1"}),
    ("set an unknown setting", {"no.such.setting": "1"}),
    ("append to a setting that is not a list", {SESSION_TIMEOUT: (APPEND, "1")}),
    ("set a session to null", {SESSION_TIMEOUT: None}),
)

SETUP = [
    create_topics("create T (2 partitions) and T2 (1)", {"T": 2, "T2": 1}),
    WaitForTopics("admin"),
]


def stable_group_of_a() -> list:
    return [
        join("a: first join, no member id", "a"),
        join("a: joins with the id it was given", "a"),
        sync(
            "a: leader syncs",
            "a",
            assignments=[member("a") | {"assignment": assignment({"T": [0, 1]})}],
        ),
    ]


SCENARIOS = {
    "topics": [
        *SETUP,
        create_topics("create T again", {"T": 2}),
        create_topics("create with 0 partitions", {"T9": 0}),
        metadata("metadata of T, T2 and an unknown topic", "T", "T2", "T9"),
        metadata("metadata with authorized operations", "T", "T9", operations=True),
    ],
    # What admin tools read and try to change besides groups: settings, the cluster, ACLs.
    "admin": [
        *SETUP,
        describe_configs(
            "configs of missing and illegal resources",
            (TOPIC_CONFIGS, name("T9"), None),
            (TOPIC_CONFIGS, "", None),
            (TOPIC_CONFIGS, "bad/name", None),
            (BROKER_CONFIGS, "x", None),
            (BROKER_CONFIGS, "7", None),
            (GROUP_CONFIGS, "", None),
        ),
        # (Kafka refuses a whole request naming a type it does not describe: kept apart.)
        describe_configs("configs of unsupported resource types", (8, "1", None), (0, "x", None)),
        describe_configs(
            "a broker's group settings, with synonyms",
            (BROKER_CONFIGS, "1", [*COMPARED_BROKER_SETTINGS, "no.such.setting"]),
            synonyms=True,
        ),
        describe_configs(
            "a group's settings", (GROUP_CONFIGS, name("G"), list(COMPARED_GROUP_SETTINGS))
        ),
        describe_configs("a topic's settings", (TOPIC_CONFIGS, T, list(KAFKA_TOPIC_SETTINGS))),
        describe_cluster("describe the cluster"),
        describe_cluster("describe the cluster with authorized operations", operations=True),
        describe_cluster("describe the controllers", endpoint_type=2),
        describe_cluster("describe an unknown endpoint type", endpoint_type=3),
        describe_acls("list ACLs without an authorizer"),
        alter_configs(
            "alter settings of missing and illegal resources",
            (TOPIC_CONFIGS, name("T9"), {"retention.ms": "1000"}),
            (BROKER_CONFIGS, "x", {"group.max.size": "10"}),
            (GROUP_CONFIGS, "", {"consumer.session.timeout.ms": "50000"}),
        ),
        alter_configs(
            "alter a broker's setting that cannot change while it runs",
            (BROKER_CONFIGS, "1", {"group.max.size": "10"}),
        ),
    ],
    # A group's own settings (kafka-configs --alter --entity-type groups): set, refused as
    # Kafka refuses them, deleted, replaced whole. Only the settings whose broker-level
    # values both servers share are described (the assignment interval's default differs).
    "group_configs": [
        *SETUP,
        alter_configs(
            "set G's session and heartbeat",
            (GROUP_CONFIGS, name("G"), {SESSION_TIMEOUT: "50000", HEARTBEAT_INTERVAL: "6000"}),
            validate_only=False,
        ),
        WaitForGroupConfig("admin", "G", HEARTBEAT_INTERVAL, "6000"),
        describe_configs(
            "G's own settings, with synonyms",
            (GROUP_CONFIGS, name("G"), list(COMPARED_GROUP_SETTINGS)),
            synonyms=True,
        ),
        alter_configs(
            "validate a session below the bounds",
            (GROUP_CONFIGS, name("G2"), {SESSION_TIMEOUT: "1000"}),
        ),
        *(
            alter_configs(label, (GROUP_CONFIGS, name("G2"), settings), validate_only=False)
            for label, settings in REFUSED_GROUP_SETTINGS
        ),
        alter_configs(
            "name G2 twice in one change",
            (GROUP_CONFIGS, name("G2"), {SESSION_TIMEOUT: "50000"}),
            (GROUP_CONFIGS, name("G2"), {SESSION_TIMEOUT: "55000"}),
            (GROUP_CONFIGS, name("G3"), {SESSION_TIMEOUT: "50000"}),
        ),
        alter_configs(
            "validate a change of G's session",
            (GROUP_CONFIGS, name("G"), {SESSION_TIMEOUT: "55000"}),
        ),
        alter_configs(
            "delete G's heartbeat and a setting that does not exist",
            (GROUP_CONFIGS, name("G"), {HEARTBEAT_INTERVAL: (DELETE, None)}),
            (GROUP_CONFIGS, name("G3"), {"no.such.setting": (DELETE, None)}),
            validate_only=False,
        ),
        WaitForGroupConfig("admin", "G", HEARTBEAT_INTERVAL, None),
        describe_configs(
            "G's settings after the delete",
            (GROUP_CONFIGS, name("G"), list(COMPARED_GROUP_SETTINGS)),
        ),
        replace_configs(
            "replace G's settings with a heartbeat alone",
            (GROUP_CONFIGS, name("G"), {HEARTBEAT_INTERVAL: "7000"}),
        ),
        replace_configs(
            "replace with an unknown setting",
            (GROUP_CONFIGS, name("G2"), {"no.such.setting": "1"}),
        ),
        WaitForGroupConfig("admin", "G", SESSION_TIMEOUT, None),
        describe_configs(
            "G's settings after the replace",
            (GROUP_CONFIGS, name("G"), list(COMPARED_GROUP_SETTINGS)),
        ),
        commit(
            "simple commit to G, which makes it a group",
            "c",
            {"T": {0: 42}},
            generation_id_or_member_epoch=-1,
            member_id="",
        ),
        delete_groups("delete G", "G"),
        describe_configs(
            "G's settings outlive the group",
            (GROUP_CONFIGS, name("G"), list(COMPARED_GROUP_SETTINGS)),
        ),
    ],
    "join_sync_heartbeat_commit": [
        *SETUP,
        *stable_group_of_a(),
        heartbeat("a: heartbeat", "a"),
        heartbeat("a: heartbeat at a later generation", "a", generation_id=generation(plus=1)),
        heartbeat("a: heartbeat at an older generation", "a", generation_id=generation(plus=-1)),
        heartbeat("unknown member heartbeats", "x", member_id="no-such-member"),
        heartbeat("heartbeat to an unknown group", "a", group_id=G2),
        sync("a: syncs again at a wrong generation", "a", generation_id=generation(plus=1)),
        commit("a: commits", "a", {"T": {0: 5, 1: 7}}),
        commit(
            "a: commits at a later generation",
            "a",
            {"T": {0: 6}},
            generation_id_or_member_epoch=generation(plus=1),
        ),
        commit(
            "unknown member commits",
            "x",
            {"T": {0: 6}},
            member_id="no-such-member",
            generation_id_or_member_epoch=generation("a"),
        ),
        commit("a: commits T2", "a", {"T2": {0: 3}}),
        fetch("fetch T's partitions and one unknown", {"G": {"T": [0, 1, 5]}}),
        fetch("fetch all of G", {"G": None}),
        fetch("fetch require_stable", {"G": {"T": [0]}}, require_stable=True),
        fetch("fetch an unknown group", {"G2": {"T": [0]}}),
        fetch("fetch two groups", {"G": {"T": [0]}, "G2": None}),
        describe("describe the stable group and an unknown one", "G", "G2"),
        describe("describe them with authorized operations", "G", "G2", operations=True),
        list_groups("list all groups"),
        list_groups("list Stable groups", ["Stable"]),
        list_groups("list Empty groups", ["Empty"]),
        offset_delete("offset delete of a subscribed topic", {"T": [0], "T2": [0]}),
        delete_groups("delete the non-empty group and an unknown one", "G", "G2"),
        leave(
            "a: leaves with an unknown member", "a", [member("a"), {"member_id": "no-such-member"}]
        ),
        describe("describe the empty group", "G"),
        offset_delete("offset delete once empty", {"T": [0]}),
        fetch("fetch after offset delete", {"G": None}),
        commit(
            "simple commit of an unknown partition",
            "c",
            {"T": {9: 1}},
            generation_id_or_member_epoch=-1,
            member_id="",
        ),
        delete_groups("delete the empty group", "G"),
        delete_groups("delete it again", "G"),
        describe("describe the deleted group", "G"),
    ],
    "rebalance_two_members": [
        *SETUP,
        *stable_group_of_a(),
        join("b: first join, no member id", "b"),
        join("b: joins with its id", "b", background=True),
        Pause(300),
        heartbeat("a: heartbeat during the rebalance", "a"),
        sync("a: syncs during the rebalance", "a"),
        commit("a: commits during the rebalance", "a", {"T": {0: 1}}),
        describe("describe during the rebalance", "G"),
        list_groups("list PreparingRebalance groups", ["PreparingRebalance"]),
        join("a: rejoins", "a", background=True),
        Await("a: rejoins"),
        Await("b: joins with its id"),
        sync("b: follower syncs first", "b", background=True),
        Pause(300),
        heartbeat("b: heartbeat while the leader has not synced", "b"),
        commit("b: commits before the leader synced", "b", {"T": {0: 2}}),
        describe("describe while the leader has not synced", "G"),
        sync(
            "a: leader syncs two assignments",
            "a",
            assignments=[
                member("a") | {"assignment": assignment({"T": [0]})},
                member("b") | {"assignment": assignment({"T": [1]})},
            ],
        ),
        Await("b: follower syncs first"),
        heartbeat("a: heartbeat", "a"),
        heartbeat("b: heartbeat", "b"),
        commit("b: commits", "b", {"T": {1: 11}}),
        describe("describe two stable members", "G"),
        leave("b: leaves", "b", [member("b", reason="done")]),
        heartbeat("a: heartbeat after b left", "a"),
        commit("a: commits at the old generation after b left", "a", {"T": {0: 3}}),
        join("a: rejoins alone", "a"),
        sync(
            "a: syncs alone",
            "a",
            assignments=[member("a") | {"assignment": assignment({"T": [0, 1]})}],
        ),
        heartbeat("b: heartbeat after leaving", "b"),
        fetch("fetch the committed offsets", {"G": None}),
    ],
    "rebalance_timeout": [
        *SETUP,
        join("a: first join", "a", rebalance_timeout=SHORT_REBALANCE_MS),
        join("a: joins with its id", "a", rebalance_timeout=SHORT_REBALANCE_MS),
        sync("a: leader syncs", "a"),
        join("b: first join", "b", rebalance_timeout=SHORT_REBALANCE_MS),
        join(
            "b: joins and waits for a", "b", background=True, rebalance_timeout=SHORT_REBALANCE_MS
        ),
        # a never rejoins: after the rebalance timeout the join completes without it.
        Await("b: joins and waits for a"),
        sync(
            "b: syncs alone",
            "b",
            assignments=[member("b") | {"assignment": assignment({"T": [0, 1]})}],
        ),
        heartbeat("a: heartbeat after being removed", "a"),
        describe("describe b alone", "G"),
    ],
    "sync_timeout": [
        *SETUP,
        join("a: first join", "a", rebalance_timeout=SHORT_REBALANCE_MS),
        join("a: joins, never syncs", "a", rebalance_timeout=SHORT_REBALANCE_MS),
        describe("describe before the sync deadline", "G"),
        Pause(3 * SHORT_REBALANCE_MS),
        describe("describe after the sync deadline", "G"),
        heartbeat("a: heartbeat after the sync deadline", "a"),
        sync("a: syncs too late", "a"),
    ],
    "static_members": [
        *SETUP,
        join("a: static first join", "a", group_instance_id="i-1"),
        sync(
            "a: leader syncs",
            "a",
            group_instance_id="i-1",
            assignments=[member("a", "i-1") | {"assignment": assignment({"T": [0, 1]})}],
        ),
        join("a2: same instance id replaces a", "a2", group_instance_id="i-1"),
        heartbeat("a: fenced heartbeat", "a", group_instance_id="i-1"),
        commit("a: fenced commit", "a", {"T": {0: 1}}, group_instance_id="i-1"),
        sync("a: fenced sync", "a", group_instance_id="i-1"),
        join("a: fenced rejoin", "a", group_instance_id="i-1"),
        heartbeat("a2: heartbeat", "a2", group_instance_id="i-1", generation_id=generation("a")),
        commit(
            "a2: commits",
            "a2",
            {"T": {0: 4}},
            group_instance_id="i-1",
            generation_id_or_member_epoch=generation("a"),
        ),
        describe("describe the static member", "G"),
        leave("leave i-1 with a's old id", "admin", [member("a", "i-1")]),
        leave(
            "leave i-1 by instance id and an unknown instance",
            "admin",
            [
                {"member_id": "", "group_instance_id": "i-1"},
                {"member_id": "", "group_instance_id": "i-9"},
            ],
        ),
        describe("describe after the static leave", "G"),
    ],
    "invalid_requests": [
        *SETUP,
        join("session timeout below the minimum", "a", session_timeout=1_000),
        join("session timeout above the maximum", "a", session_timeout=2_000_000),
        join("unknown member id in a new group", "x", member_id="no-such-member"),
        *stable_group_of_a(),
        join("b: other protocol type", "b", protocol_type="other"),
        join(
            "b: no protocol in common",
            "b",
            protocols=[{"name": "roundrobin", "metadata": subscription(T)}],
        ),
        join("b: empty protocol list", "b", protocols=[]),
        sync("sync to an unknown group", "a", group_id=G2),
        sync(
            "unknown member syncs", "x", member_id="no-such-member", generation_id=generation("a")
        ),
        leave("leave an unknown group", "a", [member("a")], group="G2"),
        offset_delete("offset delete in an unknown group", {"T": [0]}, group="G2"),
        commit(
            "simple commit (generation -1) to a new group",
            "c",
            {"T": {0: 42}},
            group_id=G3,
            generation_id_or_member_epoch=-1,
            member_id="",
        ),
        commit(
            "generation 1 commit with no member id",
            "c",
            {"T": {0: 43}},
            group_id=G3,
            generation_id_or_member_epoch=1,
            member_id="",
        ),
        commit(
            "member commit to the simple group",
            "c",
            {"T": {0: 44}},
            group_id=G3,
            generation_id_or_member_epoch=1,
            member_id="no-such-member",
        ),
        commit(
            "simple commit (generation -1) to a stable group",
            "c",
            {"T": {0: 45}},
            generation_id_or_member_epoch=-1,
            member_id="",
        ),
        fetch("fetch the simple group", {"G3": None}),
        describe("describe the simple group", "G3"),
        list_groups("list the run's groups"),
        list_groups("list classic groups", types=["classic"]),
        list_groups("list consumer-protocol groups", types=["consumer"]),
        sync("a: syncs naming another protocol", "a", protocol_name="roundrobin"),
        sync("a: syncs naming another protocol type", "a", protocol_type="other"),
        commit("a: commits too much metadata", "a", {"T": {0: 46}}, metadata="m" * 4097),
        join("unknown member id in a stable group", "x", member_id="no-such-member"),
        join("empty group id", "x", group_id=""),
        commit("commit to an empty group id", "c", {"T": {0: 47}}, group_id=""),
        offset_delete("offset delete of an unknown topic", {"T9": [0]}, group="G3"),
        delete_groups("delete the simple group", "G3"),
        find_coordinator("find G's coordinator", key_type=0),
        find_coordinator("find a transaction coordinator", key_type=1),
    ],
}

# KIP-848 scenarios (ConsumerGroupHeartbeat, ConsumerGroupDescribe): each heartbeat carries the
# member's id, epoch and owned partitions as its client would (diff_steps.consumer_heartbeat).
CONSUMER_SETUP = [*SETUP, WaitForAssignable("admin")]
CONSUMER_SCENARIOS = {
    "consumer_join_revoke_fence": [
        *CONSUMER_SETUP,
        consumer_heartbeat("a: first join", "a"),
        consumer_heartbeat("a: heartbeat", "a"),
        consumer_heartbeat("b: first join", "b"),
        consumer_heartbeat("a: heartbeat, told to revoke", "a"),
        consumer_heartbeat("b: heartbeat while a still owns its partition", "b"),
        consumer_describe("describe while a revokes", "G"),
        consumer_heartbeat("a: acknowledges the revocation", "a"),
        consumer_heartbeat("b: heartbeat, given its partition", "b"),
        consumer_heartbeat("a: heartbeat at a later epoch", "a", member_epoch=epoch(plus=1)),
        consumer_heartbeat("a: heartbeat at an older epoch", "a", member_epoch=epoch(plus=-2)),
        consumer_heartbeat(
            "unknown member heartbeats", "x", member_id=new_member_id(), member_epoch=3
        ),
        commit(
            "a: commits at its epoch",
            "a",
            {"T": {0: 5, 1: 6}},
            generation_id_or_member_epoch=epoch(),
        ),
        commit(
            "a: commits at an epoch before its partitions were assigned",
            "a",
            {"T": {0: 7, 1: 7}},
            generation_id_or_member_epoch=epoch(plus=-2),
        ),
        commit(
            "a: commits at a later epoch",
            "a",
            {"T": {0: 8}},
            generation_id_or_member_epoch=epoch(plus=1),
        ),
        fetch("fetch the committed offsets", {"G": None}),
        consumer_describe("describe two stable members and an unknown group", "G", "G2"),
        consumer_describe("describe them with authorized operations", "G", "G2", operations=True),
        consumer_heartbeat("a: leaves", "a", member_epoch=-1),
        consumer_heartbeat("a: heartbeat after leaving", "a"),
        consumer_heartbeat("b: heartbeat after a left", "b"),
        consumer_heartbeat("b: acknowledges", "b"),
        consumer_describe("describe b alone", "G"),
        list_groups("list consumer-protocol groups", types=["consumer"]),
    ],
    # A group's own heartbeat interval, told from the heartbeat after it was set.
    "consumer_group_configs": [
        *CONSUMER_SETUP,
        alter_configs(
            "set G's heartbeat interval",
            (GROUP_CONFIGS, name("G"), {HEARTBEAT_INTERVAL: "6000"}),
            validate_only=False,
        ),
        WaitForGroupConfig("admin", "G", HEARTBEAT_INTERVAL, "6000"),
        consumer_heartbeat("a: first join, told G's interval", "a"),
        consumer_heartbeat("a: heartbeat", "a"),
        alter_configs(
            "delete G's heartbeat interval",
            (GROUP_CONFIGS, name("G"), {HEARTBEAT_INTERVAL: (DELETE, None)}),
            validate_only=False,
        ),
        WaitForGroupConfig("admin", "G", HEARTBEAT_INTERVAL, None),
        consumer_heartbeat("a: heartbeat, told the broker's interval again", "a"),
    ],
    # KIP-1251 (Kafka 4.3): a's partitions keep the epoch they were assigned at when a moves on.
    "consumer_commit_epochs": [
        *CONSUMER_SETUP,
        consumer_heartbeat("a: first join", "a"),
        consumer_heartbeat("b: joins, subscribed to T2 only", "b", subscribed_topic_names=[T2]),
        consumer_heartbeat("a: heartbeat, to the new epoch", "a"),
        commit(
            "a: commits at an epoch before its partitions were assigned",
            "a",
            {"T": {0: 5}},
            generation_id_or_member_epoch=epoch(plus=-2),
        ),
        commit(
            "b: commits a partition of a's at its epoch",
            "b",
            {"T": {0: 5}},
            generation_id_or_member_epoch=epoch(),
        ),
        commit(
            "a: commits at its previous epoch, its partitions' assignment epoch",
            "a",
            {"T": {0: 6, 1: 6}},
            generation_id_or_member_epoch=epoch(plus=-1),
        ),
        commit(
            "a: commits at its epoch",
            "a",
            {"T": {0: 7, 1: 7}},
            generation_id_or_member_epoch=epoch(),
        ),
        fetch("fetch the committed offsets", {"G": None}),
    ],
    # Online migration: a consumer-protocol member joins a classic group, whose classic member
    # goes on through JoinGroup/SyncGroup/Heartbeat; when it leaves, the group is classic again.
    "consumer_upgrade_and_downgrade": [
        *CONSUMER_SETUP,
        *stable_group_of_a(),
        commit("a: commits", "a", {"T": {0: 5}}),
        consumer_heartbeat("b: joins the classic group", "b"),
        describe("describe the upgraded group", "G"),
        consumer_describe("consumer-describe the upgraded group", "G"),
        list_groups("list consumer-protocol groups", types=["consumer"]),
        heartbeat("a: classic heartbeat", "a"),
        join("a: rejoins", "a"),
        sync("a: syncs", "a"),
        consumer_heartbeat("b: heartbeat", "b"),
        heartbeat("a: heartbeat again", "a"),
        commit("a: commits in the consumer group", "a", {"T": {0: 6}}),
        consumer_describe("consumer-describe a and b", "G"),
        consumer_heartbeat("b: leaves", "b", member_epoch=-1),
        describe("describe after b left", "G"),
        list_groups("list classic groups", types=["classic"]),
        heartbeat("a: heartbeat after the downgrade", "a"),
        join("a: rejoins the classic group", "a"),
        fetch("fetch the committed offsets", {"G": None}),
    ],
    "consumer_static_and_invalid": [
        *CONSUMER_SETUP,
        consumer_heartbeat("a: static first join", "a", instance_id="i-1"),
        consumer_heartbeat("a: heartbeat", "a", instance_id="i-1"),
        consumer_heartbeat("a2: joins with a's instance id while a is in", "a2", instance_id="i-1"),
        consumer_heartbeat("a: static leave", "a", instance_id="i-1", member_epoch=-2),
        consumer_describe("describe after the static leave", "G"),
        consumer_heartbeat("a2: joins with a's instance id after it left", "a2", instance_id="i-1"),
        consumer_heartbeat("a: heartbeat after being replaced", "a", instance_id="i-1"),
        consumer_heartbeat("a2: heartbeat", "a2", instance_id="i-1"),
        consumer_heartbeat("b: joins", "b"),
        consumer_heartbeat("b: leaves", "b", member_epoch=-1),
        consumer_heartbeat("b: heartbeat after leaving", "b"),
        consumer_heartbeat("join without a subscription", "x", subscribed_topic_names=None),
        consumer_heartbeat("join without owned partitions", "x", topic_partitions=None),
        consumer_heartbeat("empty member id", "x", member_id=""),
        consumer_heartbeat("member epoch -3", "x", member_epoch=-3),
        consumer_heartbeat("empty group id", "x", group_id=""),
        consumer_heartbeat("static leave without an instance id", "x", member_epoch=-2),
        consumer_heartbeat("unsupported assignor", "x", server_assignor="no-such-assignor"),
        consumer_heartbeat(
            "invalid regex", "x", subscribed_topic_names=None, subscribed_topic_regex="t("
        ),
        consumer_heartbeat(
            "invalid regex beside no names",
            "x",
            subscribed_topic_names=[],
            subscribed_topic_regex="t(",
        ),
        consumer_heartbeat("invalid regex beside names", "x", subscribed_topic_regex="[z-a]"),
        consumer_heartbeat(
            "regex naming two groups alike",
            "x",
            subscribed_topic_names=None,
            subscribed_topic_regex="(?P<n>t)|(?P<n>u)",
        ),
        join("c: classic first join", "c", group="G3"),
        join("c: classic join with its id", "c", group="G3"),
        consumer_describe("describe G, a classic group and an unknown one", "G", "G3", "G2"),
    ],
}

# What each scenario is for: error codes Kafka's answers must include, so that a scenario that
# stopped reaching its paths (a typo, a changed default) fails instead of comparing nothing.
EXPECTED_KAFKA_ERRORS = {
    "topics": {"topic_already_exists", "invalid_partitions", "unknown_topic_or_partition"},
    "admin": {
        "unknown_topic_or_partition",
        "invalid_topic_exception",
        "invalid_request",
        "mismatched_endpoint_type",
        "unsupported_endpoint_type",
        "security_disabled",
    },
    "group_configs": {"invalid_config", "invalid_request"},
    "consumer_group_configs": set(),
    "join_sync_heartbeat_commit": {
        "member_id_required",
        "illegal_generation",
        "unknown_member_id",
        "group_subscribed_to_topic",
        "non_empty_group",
        "group_id_not_found",
        "unknown_topic_or_partition",
    },
    "rebalance_two_members": {"member_id_required", "rebalance_in_progress", "unknown_member_id"},
    "rebalance_timeout": {"unknown_member_id"},
    "static_members": {"fenced_instance_id", "unknown_member_id"},
    "sync_timeout": {"unknown_member_id"},
    "consumer_join_revoke_fence": {
        "fenced_member_epoch",
        "unknown_member_id",
        "stale_member_epoch",
        "group_id_not_found",
    },
    "consumer_commit_epochs": {"stale_member_epoch"},
    "consumer_upgrade_and_downgrade": {"rebalance_in_progress"},
    "consumer_static_and_invalid": {
        "unreleased_instance_id",
        "fenced_instance_id",
        "unknown_member_id",
        "invalid_request",
        "unsupported_assignor",
        "invalid_regular_expression",
        "group_id_not_found",
        "member_id_required",
    },
    "invalid_requests": {
        "invalid_session_timeout",
        "invalid_group_id",
        "offset_metadata_too_large",
        "inconsistent_group_protocol",
        "unknown_member_id",
        "group_id_not_found",
    },
}


# ---- deliberate differences -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Difference:
    """A deliberate difference: in answers to ``api`` (None: any) at a field path matching
    ``path`` (a regular expression), where ``when(kafka_value, groupcoord_value)`` holds,
    groupcoord answers differently from Kafka, for ``reason`` (README.md, "Deliberate
    differences from Kafka")."""

    api: ApiKey | None
    path: str
    when: Callable[[Any, Any], bool]
    reason: str


UNRELEASED_HEARTBEAT_MS = CoordinatorConfig().consumer_group_unreleased_heartbeat_interval_ms


def _both_text(kafka: Any, groupcoord: Any) -> bool:
    return isinstance(kafka, str) and isinstance(groupcoord, str)


DELIBERATE_DIFFERENCES = [
    Difference(
        None,
        r".*\.error_message",
        _both_text,
        "Error messages are free text; both servers send one where Kafka does, and the error "
        "codes are compared.",
    ),
    Difference(
        ApiKey.CREATE_TOPICS,
        r"\.topics\[\d+\]\.configs",
        lambda kafka, groupcoord: groupcoord == [],
        "CreateTopics v5+ answers with the new topic's configs; groupcoord's catalog keeps a "
        "partition count per topic and no configs, so it lists none.",
    ),
    Difference(
        ApiKey.METADATA,
        r"\.topics\[\d+\]\.partitions\[\d+\]\.leader_epoch",
        lambda kafka, groupcoord: groupcoord == -1,
        "Metadata names leader epoch -1 (unknown): groupcoord has no replicas or leader "
        "elections, and a known epoch makes consumers validate their positions with "
        "OffsetForLeaderEpoch, which groupcoord does not serve.",
    ),
    *(
        Difference(
            api,
            r"\.topics\[\d+\]\.partitions\[\d+\]\.error_code",
            lambda kafka, groupcoord: (kafka, groupcoord) == ("unknown_topic_or_partition", "none"),
            "OffsetCommit and OffsetDelete do not check topics against the catalog: the core "
            "has no topic metadata (the classic contract), and groupcoord's Ray clients commit "
            "without a catalog; Kafka refuses a partition its metadata does not have.",
        )
        for api in (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_DELETE)
    ),
    Difference(
        ApiKey.FIND_COORDINATOR,
        r"(\.coordinators\[\d+\])?\.error_code",
        # Kafka answers COORDINATOR_NOT_AVAILABLE until its transaction log exists.
        lambda kafka, groupcoord: groupcoord == "invalid_request",
        "FindCoordinator for a transactional id (key type 1) is INVALID_REQUEST: groupcoord "
        "coordinates groups only, it has no transactions (DESIGN.md).",
    ),
    Difference(
        ApiKey.DESCRIBE_GROUPS,
        r"\.groups\[\d+\]\.members\[\d+\]\.member_assignment",
        lambda kafka, groupcoord: groupcoord == b"",
        "Outside Stable, DescribeGroups shows members without metadata and without their "
        "assignment, as the spec (§2.9) and Kafka's coordinator before 4.0 do; Kafka 4's "
        "coordinator still shows each member's last assignment there.",
    ),
    Difference(
        ApiKey.OFFSET_COMMIT,
        r"\.topics\[\d+\]\.partitions\[\d+\]\.error_code",
        lambda kafka, groupcoord: (kafka, groupcoord) == ("none", "stale_member_epoch"),
        "A KIP-848 member's commit must carry its current member epoch (KIP-848's rule): "
        "groupcoord does not keep the epoch each partition was assigned at, which Kafka 4.3 "
        "(KIP-1251) uses to also accept an older epoch for partitions held since then. The "
        "client refreshes its epoch with its next heartbeat and commits again.",
    ),
    Difference(
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        r"\.heartbeat_interval",
        lambda kafka, groupcoord: groupcoord == UNRELEASED_HEARTBEAT_MS < kafka,
        "A member waiting for partitions that others must still release is told to heartbeat "
        "every consumer_group_unreleased_heartbeat_interval_ms (100 ms), not every group "
        "interval: it then takes them soon after their release instead of an interval later.",
    ),
    Difference(
        ApiKey.DESCRIBE_CONFIGS,
        r"\.results\[\d+\]\.configs",
        lambda kafka, groupcoord: (
            groupcoord == [] and {c["name"] for c in kafka} <= set(KAFKA_TOPIC_SETTINGS)
        ),
        "A topic has no configs: Kafka's topic settings are about storing records, which "
        "groupcoord does not do (CreateTopics accepts them and keeps none).",
    ),
    Difference(
        ApiKey.JOIN_GROUP,
        r"\.leader",
        lambda kafka, groupcoord: groupcoord == "",
        "Before JoinGroup v9, a static leader that replaces itself is not told it leads: "
        "Kafka names its previous member id as the leader, groupcoord an empty one (the "
        "core's answer does not carry the old id); clients read both as 'not the leader'.",
    ),
]


def deliberate(api: ApiKey, path: str, kafka: Any, groupcoord: Any) -> Difference | None:
    for known in DELIBERATE_DIFFERENCES:
        if (
            known.api in (None, api)
            and re.fullmatch(known.path, path)
            and known.when(kafka, groupcoord)
        ):
            return known
    return None


# ---- versions ---------------------------------------------------------------------------------

COMPARED_APIS = (
    ApiKey.METADATA,
    ApiKey.FIND_COORDINATOR,
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
    ApiKey.LIST_GROUPS,
    ApiKey.DESCRIBE_GROUPS,
    ApiKey.DELETE_GROUPS,
    ApiKey.OFFSET_DELETE,
    ApiKey.CREATE_TOPICS,
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.DESCRIBE_CLUSTER,
    ApiKey.DESCRIBE_ACLS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.ALTER_CONFIGS,
)
# "latest": the highest version both servers announce; "old": OLD_VERSIONS; "oldest": the
# lowest version both announce (not below OLDEST_FLOOR).
PROFILES = ("latest", "old", "oldest")
# JoinGroup v0 has no rebalance timeout: the session timeout (at least 6 s) stands in for it,
# which would make the timing scenarios slow. v1 differs from v0 in that field only.
OLDEST_FLOOR = {ApiKey.JOIN_GROUP: 1}
# Older versions that still carry what the scenarios use (static members: JoinGroup v5,
# batched leaves: LeaveGroup v3), most of them before flexible versions (KIP-482).
OLD_VERSIONS = {
    ApiKey.METADATA: 8,
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 5,
    ApiKey.SYNC_GROUP: 3,
    ApiKey.HEARTBEAT: 3,
    ApiKey.LEAVE_GROUP: 3,
    ApiKey.OFFSET_COMMIT: 7,
    ApiKey.OFFSET_FETCH: 7,
    ApiKey.LIST_GROUPS: 3,
    ApiKey.DESCRIBE_GROUPS: 4,
    ApiKey.DELETE_GROUPS: 1,
    ApiKey.OFFSET_DELETE: 0,
    ApiKey.CREATE_TOPICS: 4,
    ApiKey.DESCRIBE_CONFIGS: 2,
    ApiKey.DESCRIBE_CLUSTER: 1,
    ApiKey.DESCRIBE_ACLS: 1,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 0,
    ApiKey.ALTER_CONFIGS: 1,
}


@pytest.fixture(scope="module")
def servers(kafka_broker, groupcoord_listeners) -> dict[str, str]:
    return {"kafka": kafka_broker.bootstrap, "groupcoord": groupcoord_listeners.bootstrap}


@pytest.fixture(scope="module")
def announced(servers) -> dict[str, dict[int, tuple[int, int]]]:
    return {server: api_versions(address) for server, address in servers.items()}


def profile_versions(profile: str, announced) -> dict[ApiKey, int]:
    kafka, groupcoord = announced["kafka"], announced["groupcoord"]
    versions = {}
    for api in COMPARED_APIS:
        low = max(kafka[api][0], groupcoord[api][0])
        high = min(kafka[api][1], groupcoord[api][1])
        version = {
            "latest": high,
            "old": OLD_VERSIONS.get(api),
            "oldest": max(low, OLDEST_FLOOR.get(api, low)),
        }[profile]
        assert low <= version <= high, f"{api.name} v{version} outside both ranges {low}..{high}"
        versions[api] = version
    return versions


def run_names() -> dict[str, str]:
    """Fresh group ids and topic names for one run. The groups share the groupcoord partition
    of the empty group id, which some steps use."""
    token = uuid.uuid4().hex[:10]
    names = {t: f"diff-{token}-{t.lower()}" for t in (*TOPICS, "T9")}
    partition = partition_for("", GROUPCOORD_PARTITIONS)
    candidates = (f"diff-{token}-group-{n}" for n in itertools.count())
    groups = (g for g in candidates if partition_for(g, GROUPCOORD_PARTITIONS) == partition)
    placeholders = (*GROUPS, PROBE_GROUP)
    return names | dict(zip(placeholders, itertools.islice(groups, len(placeholders)), strict=True))


def test_groupcoord_versions_are_within_kafkas(announced):
    """Every version groupcoord announces for these APIs is one Kafka 4.3 speaks too."""
    kafka, groupcoord = announced["kafka"], announced["groupcoord"]
    outside = {
        ApiKey(api).name: (groupcoord[api], kafka.get(api))
        for api in COMPARED_APIS
        if not (kafka[api][0] <= groupcoord[api][0] and groupcoord[api][1] <= kafka[api][1])
    }
    assert outside == {}


# Versions Kafka 4.3 announces that groupcoord leaves out on purpose (wire/apis.py says why):
# topic ids (OffsetCommit and OffsetFetch v10, Fetch v13+, Produce v13), tiered storage
# (ListOffsets v11), a field nobody fills (Metadata v13), and Produce below Kafka 4's floor.
LEFT_OUT_VERSIONS = {
    ApiKey.OFFSET_COMMIT: {10},
    ApiKey.OFFSET_FETCH: {10},
    ApiKey.FETCH: set(range(13, 19)),
    ApiKey.PRODUCE: {0, 1, 2, 13},
    ApiKey.LIST_OFFSETS: {11},
    ApiKey.METADATA: {13},
}


def test_groupcoord_announces_every_version_kafka_does_but_those_left_out(announced):
    """A client negotiates the highest version both sides speak, and a version can change the
    answer (DescribeGroups v6 names a missing group GROUP_ID_NOT_FOUND): every API groupcoord
    serves is served at each version Kafka 4.3 announces, but for the ones left out."""
    kafka, groupcoord = announced["kafka"], announced["groupcoord"]

    def versions(ranges, api):
        low, high = ranges[api]
        return set(range(low, high + 1))

    missing = {
        ApiKey(api).name: sorted(
            versions(kafka, api) - versions(groupcoord, api) - LEFT_OUT_VERSIONS.get(api, set())
        )
        for api in groupcoord
    }
    assert {name: gap for name, gap in missing.items() if gap} == {}


def play_and_compare(
    steps: list, versions: dict[ApiKey, int], servers
) -> tuple[list[str], set[str]]:
    """Play a scenario's ``steps`` against both servers at once: every difference that is not
    deliberate, and the error codes of Kafka's answers."""
    names = run_names()
    runs = {server: Run(address, versions, names) for server, address in servers.items()}
    with ThreadPoolExecutor(max_workers=2) as pool:
        played = {s: pool.submit(run.play, steps) for s, run in runs.items()}
        answers = {s: future.result() for s, future in played.items()}
    topic_ids: dict[str, dict[str, str]] = {"kafka": {}, "groupcoord": {}}
    found = []
    for kafka, groupcoord in zip(answers["kafka"], answers["groupcoord"], strict=True):
        normalised = {
            server: normalise(answer, runs[server], topic_ids[server])
            for server, answer in (("kafka", kafka), ("groupcoord", groupcoord))
        }
        for path, kafka_value, groupcoord_value in differences(
            normalised["kafka"], normalised["groupcoord"]
        ):
            if deliberate(kafka.api, path, kafka_value, groupcoord_value) is None:
                found.append(
                    f"step {kafka.label!r} ({kafka.api.name} v{kafka.version}) {path}: "
                    f"kafka={kafka_value!r} groupcoord={groupcoord_value!r}"
                )
    return found, {error for answer in answers["kafka"] for error in error_codes(answer.body)}


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_same_answers_as_kafka(scenario, profile, servers, announced):
    found, kafka_errors = play_and_compare(
        SCENARIOS[scenario], profile_versions(profile, announced), servers
    )
    assert not found, "groupcoord answered differently from Kafka:\n" + "\n".join(found)
    # The lowest versions lack what some scenarios are about (MEMBER_ID_REQUIRED is v4+,
    # static members v5+): their answers are compared, their errors not expected.
    if profile != "oldest":
        missing = EXPECTED_KAFKA_ERRORS[scenario] - kafka_errors
        assert not missing, f"Kafka never answered {sorted(missing)}: the scenario misses them"


def consumer_versions(announced) -> dict[ApiKey, int]:
    """The "latest" profile with KIP-848's APIs at the highest version both servers speak."""
    versions = profile_versions("latest", announced)
    for api in (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE):
        versions[api] = min(announced["kafka"][api][1], announced["groupcoord"][api][1])
    return versions


@pytest.mark.parametrize("scenario", sorted(CONSUMER_SCENARIOS))
def test_consumer_groups_same_answers_as_kafka(scenario, servers, announced):
    """The KIP-848 scenarios: joins, revocation and its acknowledgement, fenced and unknown
    members, leaves (-1, static -2) and a static rejoin, invalid heartbeats, describes and
    epoch-checked commits."""
    found, kafka_errors = play_and_compare(
        CONSUMER_SCENARIOS[scenario], consumer_versions(announced), servers
    )
    assert not found, "groupcoord answered differently from Kafka:\n" + "\n".join(found)
    missing = EXPECTED_KAFKA_ERRORS[scenario] - kafka_errors
    assert not missing, (
        f"Kafka never answered {sorted(missing)}: the scenario misses them ({sorted(kafka_errors)})"
    )
