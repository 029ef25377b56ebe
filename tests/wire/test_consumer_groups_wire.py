"""KIP-848 on the wire: ConsumerGroupHeartbeat and ConsumerGroupDescribe bytes, at v0 and v1,
through Connection -> wire.consumer_groups -> a real Shard -> back to kio's decoder, with topic
ids mapped to the core's topic names and back."""

import datetime
import uuid

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

from groupcoord.coordinator import (
    CoordinatorConfig,
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    SequentialIds,
    Shard,
)
from groupcoord.coordinator.consumer_protocol import Subscription, encode_subscription
from groupcoord.wire import SUPPORTED_VERSIONS, ApiKey, Connection, apis
from groupcoord.wire.consumer_groups import (
    CLASSIC_MEMBER_TYPE,
    CONSUMER_MEMBER_TYPE,
    consumer_describe_from_core,
    consumer_describe_to_core,
    consumer_heartbeat_from_core,
    consumer_heartbeat_to_core,
)

from .frames import build_nested, request_frame, split_response

GROUP = "kip848"
TOPIC_IDS = {"orders": uuid.UUID(int=1), "payments": uuid.UUID(int=2)}
UNKNOWN_TOPIC_ID = uuid.UUID(int=99)
REBALANCE_TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=30))


class Client:
    """One client connection talking to one loaded Shard that knows the catalog."""

    def __init__(self) -> None:
        self.shard = Shard(
            0, 1, CoordinatorConfig(consumer_group_heartbeat_interval_ms=500), ids=SequentialIds(0)
        )
        self.shard.on_loaded(0)
        self.shard.update_topics(0, {"orders": 4, "payments": 2})
        self.conn = Connection()
        self.now = 0

    def call(self, key: ApiKey, version: int, **values):
        body = build_nested(apis.request_class(key, version), values)
        (request,) = self.conn.receive_data(request_frame(body, client_id="client-1"))
        if key == ApiKey.CONSUMER_GROUP_HEARTBEAT:
            core = consumer_heartbeat_to_core(request, TOPIC_IDS, client_host="/10.0.0.1")
            respond = consumer_heartbeat_from_core
        else:
            core = consumer_describe_to_core(request)
            respond = consumer_describe_from_core
        replies = dict(self.shard.handle(self.now, "r", core).replies)
        frame = self.conn.send_response(request, respond(request, replies["r"], TOPIC_IDS))
        return split_response(frame, apis.response_class(key, version), header_version=1)[1]

    def heartbeat(self, version: int, member_id: str, epoch: int, **values):
        defaults = {
            "group_id": GROUP,
            "member_id": member_id,
            "member_epoch": epoch,
            "topic_partitions": None,
        }
        if values.get("topic_partitions") is not None:
            defaults["_topic_partitions"] = "TopicPartitions"
        if epoch == 0:  # a join names its rebalance timeout (INVALID_REQUEST otherwise)
            defaults["rebalance_timeout"] = REBALANCE_TIMEOUT
        return self.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, version, **{**defaults, **values})


def owned(response) -> dict[uuid.UUID, set[int]]:
    return {tp.topic_id: set(tp.partitions) for tp in response.assignment.topic_partitions}


def test_both_apis_are_advertised_at_v0_and_v1():
    assert SUPPORTED_VERSIONS[ApiKey.CONSUMER_GROUP_HEARTBEAT] == (0, 1)
    assert SUPPORTED_VERSIONS[ApiKey.CONSUMER_GROUP_DESCRIBE] == (0, 1)


def test_v1_join_gets_the_catalogs_topic_ids_and_a_second_member_shares():
    client = Client()
    first = client.heartbeat(
        1,
        "member-a",
        0,
        subscribed_topic_names=("orders", "payments"),
        topic_partitions=(),
    )
    assert first.error_code == ErrorCode.none
    assert first.member_id == "member-a"
    assert first.member_epoch == 2
    assert first.heartbeat_interval.total_seconds() == 0.5
    assert owned(first) == {TOPIC_IDS["orders"]: {0, 1, 2, 3}, TOPIC_IDS["payments"]: {0, 1}}

    # A full heartbeat that owns its assignment, plus a topic id no topic has: the unknown id
    # is left out (it can match no assignment) and the member stays as it is.
    steady = client.heartbeat(
        1,
        "member-a",
        2,
        subscribed_topic_names=("orders", "payments"),
        topic_partitions=(
            {"topic_id": TOPIC_IDS["orders"], "partitions": (0, 1, 2, 3)},
            {"topic_id": TOPIC_IDS["payments"], "partitions": (0, 1)},
            {"topic_id": UNKNOWN_TOPIC_ID, "partitions": (0,)},
        ),
    )
    assert steady.error_code == ErrorCode.none
    assert steady.member_epoch == 2

    second = client.heartbeat(
        1, "member-b", 0, subscribed_topic_names=("orders", "payments"), topic_partitions=()
    )
    assert second.error_code == ErrorCode.none
    assert second.member_epoch == 3
    # member-a must revoke first: member-b gets nothing that member-a still owns.
    assert owned(second) == {}

    revoke = client.heartbeat(1, "member-a", 2)
    kept = owned(revoke)
    assert sum(len(p) for p in kept.values()) == 3
    acked = client.heartbeat(
        1,
        "member-a",
        2,
        topic_partitions=tuple(
            {"topic_id": topic_id, "partitions": tuple(sorted(parts))}
            for topic_id, parts in kept.items()
        ),
    )
    assert acked.member_epoch == 3
    given = owned(client.heartbeat(1, "member-b", 3, topic_partitions=()))
    for topic_id, count in ((TOPIC_IDS["orders"], 4), (TOPIC_IDS["payments"], 2)):
        mine, theirs = kept.get(topic_id, set()), given.get(topic_id, set())
        assert not mine & theirs and mine | theirs == set(range(count)), (kept, given)


def test_v0_generates_the_member_id_and_v1_requires_one():
    client = Client()
    v0 = client.heartbeat(0, "", 0, subscribed_topic_names=("orders",), topic_partitions=())
    assert v0.error_code == ErrorCode.none
    assert v0.member_id  # the coordinator's
    assert owned(v0) == {TOPIC_IDS["orders"]: {0, 1, 2, 3}}

    v1 = client.heartbeat(1, "", 0, subscribed_topic_names=("orders",), topic_partitions=())
    assert v1.error_code == ErrorCode.invalid_request
    assert v1.assignment is None


def test_describe_names_topics_by_id_and_name_and_v1_the_member_type():
    client = Client()
    client.heartbeat(1, "member-a", 0, subscribed_topic_names=("payments",), topic_partitions=())
    for version in (0, 1):
        answer = client.call(
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            version,
            group_ids=(GROUP, "no-such-group"),
            include_authorized_operations=False,
        )
        described, missing = answer.groups
        assert described.error_code == ErrorCode.none
        assert (described.group_epoch, described.assignment_epoch) == (2, 2)
        assert described.assignor_name == "uniform"
        (member,) = described.members
        assert member.member_id == "member-a"
        assert member.client_host == "/10.0.0.1"
        assert member.subscribed_topic_names == ("payments",)
        for assignment in (member.assignment, member.target_assignment):
            (tp,) = assignment.topic_partitions
            assert (tp.topic_id, tp.topic_name, tp.partitions) == (
                TOPIC_IDS["payments"],
                "payments",
                (0, 1),
            )
        if version == 1:
            assert member.member_type == CONSUMER_MEMBER_TYPE
        assert missing.error_code == ErrorCode.group_id_not_found


def test_v1_describe_names_a_classic_member_in_a_consumer_group_classic():
    client = Client()
    client.heartbeat(1, "member-a", 0, subscribed_topic_names=("payments",), topic_partitions=())
    # A classic consumer joins the consumer group (JoinGroup, served inside it).
    subscription = encode_subscription(Subscription(("payments",), None, ()))
    join = JoinGroupRequest(
        GROUP,
        "",
        "consumer",
        [JoinGroupRequestProtocol("range", subscription)],
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        require_known_member_id=False,
    )
    client.shard.handle(client.now, "join", join)
    answer = client.call(
        ApiKey.CONSUMER_GROUP_DESCRIBE, 1, group_ids=(GROUP,), include_authorized_operations=False
    )
    (described,) = answer.groups
    types = {m.member_id: m.member_type for m in described.members}
    assert len(types) == 2 and types.pop("member-a") == CONSUMER_MEMBER_TYPE
    assert list(types.values()) == [CLASSIC_MEMBER_TYPE]
