"""Kafka's ConsumerProtocol layout: round trips, fixed bytes, and what does not parse."""

import struct

from hypothesis import given
from hypothesis import strategies as st

from groupcoord.coordinator.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    subscribed_topics,
)

topics = st.text(min_size=1, max_size=8)
partitions = st.lists(st.tuples(topics, st.integers(0, 2**31 - 1)), max_size=6)


def test_v0_subscription_bytes_are_kafkas():
    # version 0, topics ["t"], user_data null
    data = encode_subscription(Subscription(("t",)), version=0)
    assert data.hex() == "0000" + "00000001" + "0001" + "74" + "ffffffff"
    assert subscribed_topics(data) == {"t"}


def test_v0_assignment_bytes_are_kafkas():
    data = encode_assignment(Assignment((("t", 0), ("t", 2))))
    assert data.hex() == (
        "0000" + "00000001" + "0001" + "74" + "00000002" + "00000000" + "00000002" + "ffffffff"
    )
    assert decode_assignment(data).partitions == (("t", 0), ("t", 2))


@given(
    st.lists(topics, max_size=5),
    st.one_of(st.none(), st.binary(max_size=8)),
    partitions,
    st.integers(-1, 2**31 - 1),
    st.one_of(st.none(), topics),
    st.integers(0, 3),
)
def test_subscription_round_trip_at_every_version(ts, user_data, owned, generation, rack, version):
    sub = Subscription(tuple(ts), user_data, tuple(owned), generation, rack)
    back = decode_subscription(encode_subscription(sub, version))
    assert back.topics == sub.topics and back.user_data == sub.user_data
    if version >= 1:
        # owned partitions come back grouped by topic, in first-seen topic order
        assert sorted(back.owned_partitions) == sorted(sub.owned_partitions)
    if version >= 2:
        assert back.generation_id == generation
    if version >= 3:
        assert back.rack_id == rack
    assert subscribed_topics(encode_subscription(sub, version)) == frozenset(ts)


@given(st.binary(max_size=40))
def test_garbage_is_unknown_never_an_exception(data):
    result = subscribed_topics(data)
    assert result is None or isinstance(result, frozenset)


def test_truncated_negative_and_bad_utf8_are_unknown():
    good = encode_subscription(Subscription(("orders", "payments")), version=0)
    assert subscribed_topics(good[:-7]) is None  # cut inside a topic name
    assert subscribed_topics(b"") is None
    assert subscribed_topics(struct.pack(">hi", 0, -1)) is None  # negative topic count
    assert subscribed_topics(struct.pack(">h", -1)) is None  # negative version
    assert subscribed_topics(struct.pack(">hih", 0, 1, 1) + b"\xff") is None  # bad UTF-8


def test_newer_versions_read_by_their_known_prefix():
    data = encode_subscription(Subscription(("a",)), version=3) + b"future fields"
    assert decode_subscription(struct.pack(">h", 9) + data[2:]).topics == ("a",)
