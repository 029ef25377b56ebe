"""Kafka clients' bytes, at each version, through Connection -> translate -> a real Shard ->
translate -> Connection -> kio's decoder: what a client of that version would read back."""

import datetime

import pytest
from kio.schema.errors import ErrorCode

from groupcoord.coordinator import CoordinatorConfig, SequentialIds, Shard
from groupcoord.coordinator import messages as core
from groupcoord.coordinator.errors import Errors
from groupcoord.wire import (
    ApiKey,
    Connection,
    apis,
    error_response,
    offset_fetch_from_core,
    offset_fetch_to_core,
    request_to_core,
    response_from_core,
)

from .frames import build_nested, request_frame, split_response

GROUP = "orders"
MS = datetime.timedelta(milliseconds=1)


class Client:
    """One connection of a Kafka client at fixed versions, talking to one Shard."""

    def __init__(self, shard: Shard) -> None:
        self.shard = shard
        self.conn = Connection()
        self.now = 0

    def wire(self, key: ApiKey, version: int, **values):
        cls = apis.request_class(key, version)
        body = build_nested(cls, values)
        (request,) = self.conn.receive_data(request_frame(body, client_id="client-1"))
        return request

    def answer(self, request, response):
        frame = self.conn.send_response(request, response)
        cls = apis.response_class(request.api_key, request.api_version)
        flexible = apis.request_is_flexible(request.api_key, request.api_version)
        return split_response(frame, cls, header_version=1 if flexible else 0)[1]

    def call(self, key: ApiKey, version: int, **values):
        request = self.wire(key, version, **values)
        step = self.shard.handle(self.now, "r", request_to_core(request, client_host="/10.0.0.1"))
        replies = dict(step.replies)
        while "r" not in replies:  # a parked join: let its timers fire
            self.now = self.shard.next_deadline_ms()
            replies.update(self.shard.on_timer(self.now).replies)
        return self.answer(request, response_from_core(request, replies["r"]))


def new_shard() -> Shard:
    shard = Shard(
        partition=0,
        num_partitions=1,
        ids=SequentialIds(0),
        config=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
    )
    shard.on_loaded(0)
    return shard


def join(client: Client, version: int, member_id: str = "", instance: str | None = None):
    return client.call(
        ApiKey.JOIN_GROUP,
        version,
        group_id=GROUP,
        member_id=member_id,
        protocol_type="consumer",
        session_timeout=10_000 * MS,
        rebalance_timeout=30_000 * MS,
        group_instance_id=instance,
        reason="test",
        protocols=[dict(name="range", metadata=b"sub")],
        _protocols="JoinGroupRequestProtocol",
    )


@pytest.mark.parametrize("version", range(10))
def test_join_group_at_every_version(version):
    client = Client(new_shard())
    instance = "static-1" if version >= 5 else None
    first = join(client, version, instance=instance)
    if version >= 4 and instance is None:
        # Only v4+ clients know MEMBER_ID_REQUIRED: they get an id and must rejoin with it.
        assert first.error_code == ErrorCode.member_id_required and first.member_id
        assert first.protocol_name == ("" if version < 7 else None)
        first = join(client, version, member_id=first.member_id)
    assert first.error_code == ErrorCode.none
    assert first.generation_id == 1 and first.leader == first.member_id
    assert first.protocol_name == "range"
    assert [m.metadata for m in first.members] == [b"sub"]
    if version >= 5:
        assert first.members[0].group_instance_id == instance
    if version >= 7:
        assert first.protocol_type == "consumer"
    group = client.shard.group(GROUP)
    member = group.members[first.member_id]
    assert member.client_id == "client-1" and member.client_host == "/10.0.0.1"
    assert member.rebalance_timeout_ms == (10_000 if version == 0 else 30_000)


def test_a_group_lives_through_sync_heartbeat_commit_fetch_and_leave_at_old_and_new_versions():
    shard = new_shard()
    old, new = Client(shard), Client(shard)
    joined = join(old, 3)
    member, generation = joined.member_id, joined.generation_id
    synced = old.call(
        ApiKey.SYNC_GROUP,
        0,
        group_id=GROUP,
        generation_id=generation,
        member_id=member,
        assignments=[dict(member_id=member, assignment=b"a")],
        _assignments="SyncGroupRequestAssignment",
    )
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"a")
    beat = new.call(
        ApiKey.HEARTBEAT,
        4,
        group_id=GROUP,
        generation_id=generation,
        member_id=member,
        group_instance_id=None,
    )
    assert beat.error_code == ErrorCode.none
    stale = new.call(
        ApiKey.HEARTBEAT, 0, group_id=GROUP, generation_id=generation + 1, member_id=member
    )
    assert stale.error_code == ErrorCode.illegal_generation

    committed = old.call(
        ApiKey.OFFSET_COMMIT,
        2,
        group_id=GROUP,
        generation_id_or_member_epoch=generation,
        member_id=member,
        retention_time=-1 * MS,
        _topics="OffsetCommitRequestTopic",
        topics=[
            dict(
                name="events",
                _partitions="OffsetCommitRequestPartition",
                partitions=[
                    dict(partition_index=0, committed_offset=10, committed_metadata=None),
                    dict(partition_index=1, committed_offset=11, committed_metadata="m"),
                ],
            )
        ],
    )
    assert [
        (t.name, [(p.partition_index, p.error_code) for p in t.partitions])
        for t in committed.topics
    ] == [("events", [(0, ErrorCode.none), (1, ErrorCode.none)])]
    committed = new.call(
        ApiKey.OFFSET_COMMIT,
        9,
        group_id=GROUP,
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=None,
        _topics="OffsetCommitRequestTopic",
        topics=[
            dict(
                name="clicks",
                _partitions="OffsetCommitRequestPartition",
                partitions=[
                    dict(
                        partition_index=0,
                        committed_offset=5,
                        committed_leader_epoch=3,
                        committed_metadata="",
                    )
                ],
            )
        ],
    )
    assert committed.topics[0].partitions[0].error_code == ErrorCode.none

    fetched = old.wire(
        ApiKey.OFFSET_FETCH,
        1,
        group_id=GROUP,
        _topics="OffsetFetchRequestTopic",
        topics=[dict(name="events", partition_indexes=(0, 1))],
    )
    answer = old.answer(
        fetched,
        offset_fetch_from_core(
            fetched, [shard.handle(0, "f", r).replies[0][1] for r in offset_fetch_to_core(fetched)]
        ),
    )
    assert [
        (p.partition_index, p.committed_offset, p.metadata) for p in answer.topics[0].partitions
    ] == [(0, 10, ""), (1, 11, "m")]

    # v8: two groups in one request, one of them unknown; null topics ask for everything.
    fetched = new.wire(
        ApiKey.OFFSET_FETCH,
        8,
        require_stable=True,
        _groups="OffsetFetchRequestGroup",
        groups=[dict(group_id=GROUP, topics=None), dict(group_id="nobody", topics=None)],
    )
    cores = offset_fetch_to_core(fetched)
    assert [(r.group_id, r.partitions, r.require_stable) for r in cores] == [
        (GROUP, None, True),
        ("nobody", None, True),
    ]
    answer = new.answer(
        fetched,
        offset_fetch_from_core(fetched, [shard.handle(0, "f", r).replies[0][1] for r in cores]),
    )
    assert [
        (
            g.group_id,
            g.error_code,
            sorted(
                (t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch)
                for t in g.topics
                for p in t.partitions
            ),
        )
        for g in answer.groups
    ] == [
        (
            GROUP,
            ErrorCode.none,
            [("clicks", 0, 5, 3), ("events", 0, 10, -1), ("events", 1, 11, -1)],
        ),
        ("nobody", ErrorCode.none, []),
    ]

    # LeaveGroup v0 names one member; v3+ a batch with per-member errors.
    left = old.call(ApiKey.LEAVE_GROUP, 0, group_id=GROUP, member_id="someone-else")
    assert left.error_code == ErrorCode.unknown_member_id
    left = new.call(
        ApiKey.LEAVE_GROUP,
        5,
        group_id=GROUP,
        _members="MemberIdentity",
        members=[
            dict(member_id=member, group_instance_id=None, reason="bye"),
            dict(member_id="ghost", group_instance_id=None, reason=None),
        ],
    )
    assert left.error_code == ErrorCode.none
    assert [(m.member_id, m.error_code) for m in left.members] == [
        (member, ErrorCode.none),
        ("ghost", ErrorCode.unknown_member_id),
    ]


def test_admin_apis_at_old_and_new_versions():
    shard = new_shard()
    client = Client(shard)
    joined = join(client, 9, instance="static-1")
    client.call(
        ApiKey.SYNC_GROUP,
        5,
        group_id=GROUP,
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        group_instance_id="static-1",
        protocol_type="consumer",
        protocol_name="range",
        assignments=[dict(member_id=joined.member_id, assignment=b"a")],
        _assignments="SyncGroupRequestAssignment",
    )
    listed = client.call(ApiKey.LIST_GROUPS, 0)
    assert [(g.group_id, g.protocol_type) for g in listed.groups] == [(GROUP, "consumer")]
    listed = client.call(
        ApiKey.LIST_GROUPS, 5, states_filter=("Stable",), types_filter=("Classic",)
    )
    assert [(g.group_id, g.group_state, g.group_type) for g in listed.groups] == [
        (GROUP, "Stable", "classic")
    ]
    listed = client.call(ApiKey.LIST_GROUPS, 5, states_filter=(), types_filter=("consumer",))
    assert listed.groups == ()
    listed = client.call(ApiKey.LIST_GROUPS, 4, states_filter=("Empty",))
    assert listed.groups == ()

    described = client.call(
        ApiKey.DESCRIBE_GROUPS, 5, groups=(GROUP,), include_authorized_operations=True
    )
    (group,) = described.groups
    assert (group.error_code, group.group_state, group.protocol_type, group.protocol_data) == (
        ErrorCode.none,
        "Stable",
        "consumer",
        "range",
    )
    assert [
        (
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.member_metadata,
            m.member_assignment,
        )
        for m in group.members
    ] == [(joined.member_id, "static-1", "client-1", "/10.0.0.1", b"sub", b"a")]
    described = client.call(ApiKey.DESCRIBE_GROUPS, 0, groups=(GROUP,))
    assert described.groups[0].members[0].member_id == joined.member_id

    deleted = client.call(ApiKey.DELETE_GROUPS, 2, groups_names=(GROUP, "nobody"))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        (GROUP, ErrorCode.non_empty_group),
        ("nobody", ErrorCode.group_id_not_found),
    ]
    offsets = client.call(
        ApiKey.OFFSET_DELETE,
        0,
        group_id="nobody",
        _topics="OffsetDeleteRequestTopic",
        topics=[
            dict(
                name="events",
                _partitions="OffsetDeleteRequestPartition",
                partitions=[dict(partition_index=0)],
            )
        ],
    )
    assert offsets.error_code == ErrorCode.group_id_not_found


def test_version_rules_applied_to_core_responses():
    shard_members = [core.JoinGroupResponseMember("leader-1", None, b"m")]
    static_rejoin = core.JoinGroupResponse(
        Errors.NONE, 3, "consumer", "range", "leader-1", True, "leader-1", shard_members
    )
    client = Client(new_shard())
    for version, members, leader in ((8, (), ""), (9, ("leader-1",), "leader-1")):
        request = join_request(client, version)
        answer = client.answer(request, response_from_core(request, static_rejoin))
        # KIP-814: before v9 a static leader that must not reassign is not told it leads.
        assert tuple(m.member_id for m in answer.members) == members
        assert (answer.leader, answer.member_id) == (leader, "leader-1")

    leave = core.LeaveGroupResponse(
        Errors.NONE, [core.LeaveGroupResponseMember("m", None, Errors.UNKNOWN_MEMBER_ID)]
    )
    request = client.wire(ApiKey.LEAVE_GROUP, 2, group_id=GROUP, member_id="m")
    assert client.answer(request, response_from_core(request, leave)).error_code == (
        ErrorCode.unknown_member_id
    )

    # OffsetFetch v1 has no top-level error: the group's error lands on each partition asked.
    request = client.wire(
        ApiKey.OFFSET_FETCH,
        1,
        group_id=GROUP,
        _topics="OffsetFetchRequestTopic",
        topics=[dict(name="t", partition_indexes=(0, 2))],
    )
    loading = core.OffsetFetchResponse(Errors.COORDINATOR_LOAD_IN_PROGRESS, [])
    answer = client.answer(request, offset_fetch_from_core(request, [loading]))
    assert [
        (p.partition_index, p.committed_offset, p.metadata, p.error_code)
        for p in answer.topics[0].partitions
    ] == [
        (0, -1, "", ErrorCode.coordinator_load_in_progress),
        (2, -1, "", ErrorCode.coordinator_load_in_progress),
    ]
    request = client.wire(ApiKey.OFFSET_FETCH, 2, group_id=GROUP, topics=None)
    answer = client.answer(request, offset_fetch_from_core(request, [loading]))
    assert answer.error_code == ErrorCode.coordinator_load_in_progress and answer.topics == ()
    with pytest.raises(ValueError, match="2 groups asked, 1 answers"):
        request = client.wire(
            ApiKey.OFFSET_FETCH,
            8,
            require_stable=False,
            _groups="OffsetFetchRequestGroup",
            groups=[dict(group_id="a", topics=None), dict(group_id="b", topics=None)],
        )
        offset_fetch_from_core(request, [loading])


def test_describe_groups_v6_names_an_unknown_group_not_found():
    """KIP-1043: from v6 a group that does not exist is GROUP_ID_NOT_FOUND (still "Dead"), with
    a message; before v6 it is Dead with no error. Other errors carry no message at any version,
    and an existing group is described alike at both."""
    client = Client(new_shard())
    committed = client.call(  # a simple group: it exists, Empty, with one offset
        ApiKey.OFFSET_COMMIT,
        9,
        group_id=GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        _topics="OffsetCommitRequestTopic",
        topics=[
            dict(
                name="events",
                _partitions="OffsetCommitRequestPartition",
                partitions=[dict(partition_index=0, committed_offset=5, committed_metadata="")],
            )
        ],
    )
    assert committed.topics[0].partitions[0].error_code == ErrorCode.none
    for version, code, message in (
        (5, ErrorCode.none, None),
        (6, ErrorCode.group_id_not_found, "Group nobody not found."),
    ):
        described = client.call(
            ApiKey.DESCRIBE_GROUPS,
            version,
            groups=("nobody", GROUP),
            include_authorized_operations=False,
        )
        unknown, known = described.groups
        assert (unknown.group_id, unknown.error_code, unknown.group_state) == (
            "nobody",
            code,
            "Dead",
        )
        assert getattr(unknown, "error_message", None) == message
        assert (known.error_code, known.group_state, known.members) == (ErrorCode.none, "Empty", ())
        assert getattr(known, "error_message", None) is None
    request = client.wire(
        ApiKey.DESCRIBE_GROUPS, 6, groups=("nobody",), include_authorized_operations=False
    )
    refused = core.DescribeGroupsResponse(
        [core.DescribedGroup(Errors.NOT_COORDINATOR, "nobody", "", "", "", [], -1, "")]
    )
    (group,) = client.answer(request, response_from_core(request, refused)).groups
    assert (group.error_code, group.error_message) == (ErrorCode.not_coordinator, None)


def test_offset_fetch_v1_has_no_null_topic_list():
    """Null ("all topics") arrived in v2; Kafka cannot read a v1 request holding it and closes
    the connection, and the listener does the same on this ValueError."""
    client = Client(new_shard())
    request = client.wire(ApiKey.OFFSET_FETCH, 1, group_id=GROUP, topics=None)
    with pytest.raises(ValueError, match="OffsetFetch v1"):
        offset_fetch_to_core(request)
    request = Client(new_shard()).wire(ApiKey.OFFSET_FETCH, 2, group_id=GROUP, topics=None)
    assert [r.partitions for r in offset_fetch_to_core(request)] == [None]


def join_request(client: Client, version: int):
    return client.wire(
        ApiKey.JOIN_GROUP,
        version,
        group_id=GROUP,
        member_id="leader-1",
        protocol_type="consumer",
        session_timeout=10_000 * MS,
        rebalance_timeout=30_000 * MS,
        group_instance_id="s",
        reason=None,
        protocols=[dict(name="range", metadata=b"")],
        _protocols="JoinGroupRequestProtocol",
    )


def test_non_core_apis_are_refused_by_request_to_core():
    client = Client(new_shard())
    request = client.wire(ApiKey.API_VERSIONS, 0)
    with pytest.raises(ValueError, match="no core request"):
        request_to_core(request)
    with pytest.raises(ValueError, match="no core response"):
        response_from_core(request, None)


ERROR_CASES = [
    (
        ApiKey.JOIN_GROUP,
        3,
        dict(
            group_id=GROUP,
            member_id="m",
            protocol_type="consumer",
            session_timeout=MS,
            rebalance_timeout=MS,
            protocols=(),
        ),
        lambda r: (r.error_code, r.member_id, r.protocol_name),
    ),
    (
        ApiKey.JOIN_GROUP,
        9,
        dict(
            group_id=GROUP,
            member_id="m",
            protocol_type="consumer",
            session_timeout=MS,
            rebalance_timeout=MS,
            protocols=(),
            group_instance_id=None,
            reason=None,
        ),
        lambda r: (r.error_code, r.member_id, r.protocol_name),
    ),
    (
        ApiKey.SYNC_GROUP,
        5,
        dict(
            group_id=GROUP,
            generation_id=1,
            member_id="m",
            group_instance_id=None,
            protocol_type=None,
            protocol_name=None,
            assignments=(),
        ),
        lambda r: (r.error_code, r.assignment),
    ),
    (
        ApiKey.HEARTBEAT,
        0,
        dict(group_id=GROUP, generation_id=1, member_id="m"),
        lambda r: (r.error_code,),
    ),
    (ApiKey.LEAVE_GROUP, 1, dict(group_id=GROUP, member_id="m"), lambda r: (r.error_code,)),
    (ApiKey.LEAVE_GROUP, 5, dict(group_id=GROUP, members=()), lambda r: (r.error_code,)),
    (
        ApiKey.OFFSET_COMMIT,
        8,
        dict(
            group_id=GROUP,
            generation_id_or_member_epoch=1,
            member_id="m",
            group_instance_id=None,
            _topics="OffsetCommitRequestTopic",
            topics=[
                dict(
                    name="t",
                    _partitions="OffsetCommitRequestPartition",
                    partitions=[
                        dict(
                            partition_index=4,
                            committed_offset=1,
                            committed_leader_epoch=-1,
                            committed_metadata=None,
                        )
                    ],
                )
            ],
        ),
        lambda r: [
            (t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions
        ],
    ),
    (
        ApiKey.OFFSET_FETCH,
        1,
        dict(
            group_id=GROUP,
            _topics="OffsetFetchRequestTopic",
            topics=[dict(name="t", partition_indexes=(4,))],
        ),
        lambda r: [(p.partition_index, p.error_code) for t in r.topics for p in t.partitions],
    ),
    (
        ApiKey.OFFSET_FETCH,
        9,
        dict(
            require_stable=False,
            _groups="OffsetFetchRequestGroup",
            groups=[dict(group_id="a", topics=None, member_id=None, member_epoch=-1)],
        ),
        lambda r: [(g.group_id, g.error_code) for g in r.groups],
    ),
    (
        ApiKey.DESCRIBE_GROUPS,
        2,
        dict(groups=("a", "b")),
        lambda r: [(g.group_id, g.error_code) for g in r.groups],
    ),
    (ApiKey.LIST_GROUPS, 3, {}, lambda r: (r.error_code, r.groups)),
    (
        ApiKey.DELETE_GROUPS,
        1,
        dict(groups_names=("a",)),
        lambda r: [(g.group_id, g.error_code) for g in r.results],
    ),
    (ApiKey.OFFSET_DELETE, 0, dict(group_id=GROUP, topics=()), lambda r: (r.error_code,)),
]
NC = ErrorCode.not_coordinator
EXPECTED = [
    (NC, "m", ""),
    (NC, "m", None),
    (NC, b""),
    (NC,),
    (NC,),
    (NC,),
    [("t", 4, NC)],
    [(4, NC)],
    [("a", NC)],
    [("a", NC), ("b", NC)],
    (NC, ()),
    [("a", NC)],
    (NC,),
]


@pytest.mark.parametrize(
    "case, expected",
    list(zip(ERROR_CASES, EXPECTED, strict=True)),
    ids=[f"{c[0].name}-v{c[1]}" for c in ERROR_CASES],
)
def test_error_response_puts_the_error_where_each_version_reads_it(case, expected):
    key, version, values, read = case
    client = Client(new_shard())
    request = client.wire(key, version, **values)
    assert read(client.answer(request, error_response(request, Errors.NOT_COORDINATOR))) == (
        expected
    )


@pytest.mark.parametrize("version", [5, 8, 9])
def test_a_static_leader_rejoining_a_stable_group_through_a_real_shard(version):
    client = Client(new_shard())
    joined = join(client, version, instance="static-1")
    client.call(
        ApiKey.SYNC_GROUP,
        3,
        group_id=GROUP,
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        group_instance_id="static-1",
        assignments=[dict(member_id=joined.member_id, assignment=b"a")],
        _assignments="SyncGroupRequestAssignment",
    )
    rejoined = join(client, version, instance="static-1")  # a restart: no member id
    assert rejoined.error_code == ErrorCode.none
    assert rejoined.member_id not in ("", joined.member_id)
    assert rejoined.generation_id == joined.generation_id
    if version >= 9:
        assert rejoined.skip_assignment and rejoined.leader == rejoined.member_id
        assert [m.member_id for m in rejoined.members] == [rejoined.member_id]
    else:
        assert rejoined.leader != rejoined.member_id and rejoined.members == ()
