"""Kafka clients against secured groupcoord listeners (one partition in this process, no Ray).

Real clients authenticate as Kafka users do: librdkafka (confluent-kafka) with SCRAM-SHA-512 and
PLAIN over SASL_PLAINTEXT and with SCRAM over SASL_SSL (a self-signed certificate made here with
the openssl CLI, tls.py), kafka-python with SCRAM-SHA-256. A wrong password or an unauthenticated
request is refused and changes nothing. With an ACL file, a principal without Read cannot join
or commit, ListGroups hides the groups it may not Describe, DeleteGroups needs Delete,
and topic changes need a super user. On
an SSL listener with a CA file, a client certificate is the identity (``User:CN=...``).
What the ACLs let a principal see through admin requests: test_kafka_security_admin.py.
"""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KPTopicPartition
from kafka.structs import OffsetAndMetadata
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from groupcoord.actors.security import ListenerSecurity
from groupcoord.wire import parse_acl_file

from ..kafka.members import subscribe_knowing_topic
from ..wire.frames import request_frame
from .helpers import errors_until_refused, wait_for
from .kafka_inproc import WirePartition
from .kafka_security import (
    IO_TIMEOUT_S,
    PASSWORDS,
    TOPICS,
    authenticate_answer,
    connect,
    consumer_for,
    read_answer,
    sasl_config,
    scram_login,
)
from .tls import signed_client_cert

pytestmark = pytest.mark.usefixtures("free_clients")
POLL_LIMIT = 200  # polls of 0.05 s
COUNTED_WITHIN_S = 5  # a network process reports its counters every second


# TLS transports differ between loops; network processes run uvloop.
@pytest.fixture(scope="module", params=["asyncio", "uvloop", "network-processes"])
def sasl_ssl(files, request):
    root, users, _, cert, key = files
    security = ListenerSecurity(
        "SASL_SSL",
        sasl_mechanisms=("SCRAM-SHA-512",),
        users_file=users,
        ssl_certfile=cert,
        ssl_keyfile=key,
    )
    served = WirePartition(
        str(root / f"ssl-log-{request.param}"),
        TOPICS,
        security=security,
        loop="asyncio" if request.param == "network-processes" else request.param,
        network_processes=2 if request.param == "network-processes" else 0,
    )
    address = served.start()
    yield served, address, cert
    served.stop()


def _join_commit_fetch(config: dict, group: str) -> None:
    """Subscribe, get both partitions, commit, read the commits back, leave."""
    consumer = consumer_for(config, group)
    consumer.subscribe(["events"])
    for _ in range(POLL_LIMIT):
        message = consumer.poll(0.05)
        assert message is None or not message.error(), message.error()
        if len(consumer.assignment()) == 2:
            break
    assert {tp.partition for tp in consumer.assignment()} == {0, 1}
    offsets = [TopicPartition("events", p, 40 + p) for p in (0, 1)]
    consumer.commit(offsets=offsets, asynchronous=False)
    read = consumer.committed([TopicPartition("events", p) for p in (0, 1)], timeout=10)
    assert {tp.partition: tp.offset for tp in read} == {0: 40, 1: 41}
    consumer.close()


def _listed(address: str, user: str) -> set[str]:
    admin = AdminClient(sasl_config(address, user, "SCRAM-SHA-512"))
    result = admin.list_consumer_groups(request_timeout=10).result()
    return {g.group_id for g in result.valid}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_librdkafka_authenticates_over_sasl_plaintext(sasl_plaintext, mechanism):
    served, address = sasl_plaintext
    _join_commit_fetch(sasl_config(address, "alice", mechanism), f"app-rd-{mechanism}")
    assert f"app-rd-{mechanism}" in _listed(address, "admin")


def test_librdkafka_authenticates_over_sasl_ssl(sasl_ssl):
    served, address, cert = sasl_ssl
    config = sasl_config(address, "bob", "SCRAM-SHA-512", **{"ssl.ca.location": cert})
    config["security.protocol"] = "SASL_SSL"
    _join_commit_fetch(config, "over-tls")  # no ACLs on this listener: bob may do anything
    # The same listener does not speak plaintext: a client without TLS gets no answer.
    plain = socket.create_connection(("127.0.0.1", int(address.rsplit(":")[1])), IO_TIMEOUT_S)
    with plain:
        plain.settimeout(IO_TIMEOUT_S)
        plain.sendall(request_frame(SaslHandshakeRequest(mechanism="SCRAM-SHA-512")))
        assert _closed(plain)


def test_kafka_python_authenticates_with_scram(sasl_plaintext):
    served, address = sasl_plaintext
    consumer = KafkaConsumer(
        bootstrap_servers=address,
        group_id="app-kp",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="alice",
        sasl_plain_password=PASSWORDS["alice"],
    )
    subscribe_knowing_topic(consumer, "events")
    deadline = time.monotonic() + POLL_LIMIT * 0.1
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=100)
    assert {tp.partition for tp in consumer.assignment()} == {0, 1}
    consumer.commit({KPTopicPartition("events", p): OffsetAndMetadata(9, "", -1) for p in (0, 1)})
    assert consumer.committed(KPTopicPartition("events", 1)) == 9
    consumer.close()


def test_a_wrong_password_is_refused_and_changes_nothing(sasl_plaintext):
    served, address = sasl_plaintext
    # Counted by the listener, or by the network process that served the connection, which
    # reports its counters to the partition (network_process.COUNTERS_INTERVAL_S).
    failures = served.counters().authentication_failures
    errors = []
    config = sasl_config(address, "alice", "SCRAM-SHA-512", "not-her-password")
    errors_until_refused(
        consumer_for(config | {"error_cb": errors.append}, "app-x"), "events", errors
    )
    assert KafkaError._AUTHENTICATION in {e.code() for e in errors}
    assert "Invalid user credentials" in errors[0].str()
    wait_for(
        lambda: served.counters().authentication_failures > failures,
        COUNTED_WITHIN_S,
        "the failed authentication to be counted",
    )
    assert "app-x" not in _listed(address, "admin")


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1 << 16) == b""
    except ConnectionResetError:
        return True


def test_unauthenticated_requests_are_refused(sasl_plaintext):
    served, address = sasl_plaintext
    heartbeat = HeartbeatRequest(group_id="app-1", generation_id=1, member_id="m")
    with connect(address) as sock:  # a group request before SASL: closed unanswered
        sock.sendall(request_frame(heartbeat))
        assert _closed(sock)
    with connect(address) as sock:  # a mechanism the listener does not offer
        sock.sendall(request_frame(SaslHandshakeRequest(mechanism="GSSAPI")))
        frame = read_answer(sock)
        correlation_id, error_code = struct.unpack(">ih", frame[:6])
        assert (correlation_id, error_code) == (7, 33)  # UNSUPPORTED_SASL_MECHANISM
        assert _closed(sock)
    with connect(address) as sock:  # before authentication, frames are capped at 512 KiB
        sock.sendall(struct.pack(">i", 600 * 1024) + b"\0" * 1024)
        assert _closed(sock)
    # A client that does not speak SASL at all is disconnected and never reaches the group.
    errors = []
    consumer = consumer_for({"bootstrap.servers": address, "error_cb": errors.append}, "app-nosasl")
    errors_until_refused(consumer, "events", errors)
    assert {e.code() for e in errors} & {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
    assert "app-nosasl" not in _listed(address, "admin")


def test_acls_deny_join_and_commit_without_read(sasl_plaintext):
    served, address = sasl_plaintext
    bob = sasl_config(address, "bob", "SCRAM-SHA-512")
    committer = consumer_for(bob, "app-bob")
    with pytest.raises(KafkaException) as denied:
        committer.commit(offsets=[TopicPartition("events", 0, 5)], asynchronous=False)
    assert denied.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    committer.close()
    errors = errors_until_refused(consumer_for(bob, "app-bob"), "events")
    assert KafkaError.GROUP_AUTHORIZATION_FAILED in {e.code() for e in errors}
    assert "app-bob" not in _listed(address, "admin")


def test_acls_deny_a_consumer_protocol_heartbeat_without_read(sasl_plaintext):
    """KIP-848's ConsumerGroupHeartbeat needs Read on the group, as JoinGroup does."""
    served, address = sasl_plaintext
    bob = sasl_config(address, "bob", "SCRAM-SHA-512")
    member = Consumer(
        bob
        | {"group.id": "app-bob-kip848", "group.protocol": "consumer", "enable.auto.commit": False}
    )
    (error, *_) = errors_until_refused(member, "events")
    # librdkafka's new consumer treats the refusal as fatal: _FATAL, naming the broker's error.
    assert error.code() == KafkaError._FATAL, error
    assert "Group authorization failed" in error.str(), error
    assert "app-bob-kip848" not in _listed(address, "admin")


def test_list_groups_hides_groups_and_delete_needs_the_delete_acl(sasl_plaintext):
    served, address = sasl_plaintext
    admin = sasl_config(address, "admin", "SCRAM-SHA-512")
    for group in ("app-listed", "secret-1"):  # committed by the super user: both exist
        consumer = consumer_for(admin, group)
        consumer.commit(offsets=[TopicPartition("events", 0, 1)], asynchronous=False)
        consumer.close()
    assert {"app-listed", "secret-1"} <= _listed(address, "admin")
    seen_by_alice = _listed(address, "alice")
    assert "app-listed" in seen_by_alice and "secret-1" not in seen_by_alice

    alice_admin = AdminClient(sasl_config(address, "alice", "SCRAM-SHA-512"))
    future = alice_admin.delete_consumer_groups(["app-listed"], request_timeout=10)["app-listed"]
    with pytest.raises(KafkaException) as denied:
        future.result()
    assert denied.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert "app-listed" in _listed(address, "admin")  # still there
    super_admin = AdminClient(admin)
    super_admin.delete_consumer_groups(["app-listed"], request_timeout=10)["app-listed"].result()
    assert "app-listed" not in _listed(address, "admin")

    # The topic catalog has no ACLs of its own: only a super user may change it.
    created = alice_admin.create_topics([NewTopic("alices-topic", 1)], request_timeout=10)
    with pytest.raises(KafkaException) as refused:
        created["alices-topic"].result()
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "alices-topic" not in served.topics


def test_sasl_requests_without_an_exchange_get_illegal_sasl_state(sasl_plaintext, tmp_path):
    served, address = sasl_plaintext
    with connect(address) as sock:  # after authentication, as Kafka without re-authentication
        scram_login(sock, "alice")
        sock.sendall(request_frame(SaslAuthenticateRequest(auth_bytes=b"again")))
        answer = authenticate_answer(sock)
        assert answer.error_code == ErrorCode.illegal_sasl_state
        sock.sendall(request_frame(SaslHandshakeRequest(mechanism="PLAIN")))
        assert struct.unpack(">ih", read_answer(sock)[:6]) == (7, 34)  # and the connection stays
    plaintext = WirePartition(str(tmp_path / "log"), TOPICS)  # a listener without SASL
    plain_address = plaintext.start()
    try:
        with connect(plain_address) as sock:
            sock.sendall(request_frame(SaslHandshakeRequest(mechanism="PLAIN")))
            assert struct.unpack(">ih", read_answer(sock)[:6]) == (7, 34)
    finally:
        plaintext.stop()


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])  # the peer certificate is the transport's
def test_client_certificates_authenticate_on_an_ssl_listener(files, loop):
    root, _, _, cert, key = files
    carol_cert, carol_key = signed_client_cert(root, cert, key, "/O=acme, inc/CN=carol")
    carol = "User:CN=carol,O=acme\\, inc"
    acls = {
        "acls": [
            {"principal": carol, "group": "tls-", "pattern": "prefixed", "operations": ["Read"]},
            {"principal": carol, "group": "*", "operations": ["Describe"]},
        ]
    }
    security = ListenerSecurity(
        "SSL",
        ssl_certfile=cert,
        ssl_keyfile=key,
        ssl_cafile=cert,
        acls=parse_acl_file(json.dumps(acls).encode(), toml=False),
    )
    served = WirePartition(str(root / f"mtls-log-{loop}"), TOPICS, security=security, loop=loop)
    address = served.start()
    try:
        tls = {"bootstrap.servers": address, "security.protocol": "SSL", "ssl.ca.location": cert}
        with_cert = tls | {"ssl.certificate.location": carol_cert, "ssl.key.location": carol_key}
        _join_commit_fetch(with_cert, "tls-carol")  # User:CN=carol,O=acme\, inc may Read tls-*
        denied = consumer_for(with_cert, "other-group")
        with pytest.raises(KafkaException) as refused:
            denied.commit(offsets=[TopicPartition("events", 0, 1)], asynchronous=False)
        assert refused.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        denied.close()
        errors = []  # no client certificate: the TLS handshake fails
        anonymous = consumer_for(tls | {"error_cb": errors.append}, "tls-anonymous")
        errors_until_refused(anonymous, "events", errors)
        refused_codes = {KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
        assert {e.code() for e in errors} & refused_codes
        admin = AdminClient(with_cert)  # kept: a dropped client cancels its requests
        listed = admin.list_consumer_groups(request_timeout=10).result()
        assert {g.group_id for g in listed.valid} == {"tls-carol"}
    finally:
        served.stop()


def test_a_v0_handshake_authenticates_with_bare_tokens(sasl_plaintext):
    served, address = sasl_plaintext
    with connect(address) as sock:
        handshake = SaslHandshakeRequest(mechanism="PLAIN")
        sock.sendall(request_frame(handshake, api_version=0))
        assert struct.unpack(">ih", read_answer(sock)[:6]) == (7, 0)
        token = b"\0alice\0" + PASSWORDS["alice"].encode()
        sock.sendall(struct.pack(">i", len(token)) + token)  # no request header
        assert read_answer(sock) == b""  # PLAIN's empty challenge, as a bare token
        heartbeat = HeartbeatRequest(group_id="app-v0", generation_id=1, member_id="m")
        sock.sendall(request_frame(heartbeat, correlation_id=8))  # Kafka framing again
        frame = read_answer(sock)
        assert struct.unpack(">i", frame[:4]) == (8,)
        assert struct.unpack(">h", frame[9:11]) == (25,)  # UNKNOWN_MEMBER_ID: it was authorized
    with connect(address) as sock:  # a wrong password: closed, no answer
        sock.sendall(request_frame(SaslHandshakeRequest(mechanism="PLAIN"), api_version=0))
        read_answer(sock)
        token = b"\0alice\0wrong"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert _closed(sock)
