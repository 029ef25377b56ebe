"""Topic administration on the wire without sockets: a CreateTopics request's changes, and the
bound on how many one request may ask for (``wire.topics``)."""

from groupcoord.coordinator import Errors
from groupcoord.wire import ApiKey, Connection, apis
from groupcoord.wire.topics import MAX_CHANGES_PER_REQUEST, too_many_changes, topic_changes

from .frames import build_nested, request_frame


def create_topics(count: int):
    cls = apis.request_class(ApiKey.CREATE_TOPICS, 7)
    topic = {
        "name": "t",
        "num_partitions": 3,
        "replication_factor": 1,
        "assignments": [],
        "configs": [],
        "_assignments": "CreatableReplicaAssignment",
        "_configs": "CreatableTopicConfig",
    }
    values = {
        "topics": [topic | {"name": f"t{i}"} for i in range(count)],
        "_topics": "CreatableTopic",
        "timeout": apis.ZERO_MS,
        "validate_only": False,
    }
    (request,) = Connection().receive_data(request_frame(build_nested(cls, values)))
    return request


def test_a_create_topics_asks_for_one_change_per_topic():
    changes = topic_changes(create_topics(3))
    assert [(c.kind, c.name, c.partitions) for c in changes] == [
        ("create", "t0", 3),
        ("create", "t1", 3),
        ("create", "t2", 3),
    ]
    assert too_many_changes(changes) is None


def test_a_request_over_the_bound_is_refused_whole():
    changes = topic_changes(create_topics(MAX_CHANGES_PER_REQUEST + 1))
    refused = too_many_changes(changes)
    assert refused is not None and refused.error == Errors.INVALID_REQUEST
    assert str(MAX_CHANGES_PER_REQUEST) in (refused.message or "")
    assert too_many_changes(changes[:MAX_CHANGES_PER_REQUEST]) is None
