"""Kafka's own Java client authenticates to a groupcoord listener: `kafka-consumer-groups`
(Kafka 4.3's AdminClient) over SASL_SSL with SCRAM-SHA-512 and a PEM trust store lists the
groups its user may describe. The listener is one partition in this process
(tests/actors/kafka_inproc.py), with an ACL file. (Wrong passwords are refused to librdkafka in
tests/actors/test_kafka_security_inproc.py; one JVM start is this test's cost.)"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition

from groupcoord.actors.security import ListenerSecurity, UsersFile
from groupcoord.wire import AclFile, AclRule
from tests.actors.kafka_inproc import WirePartition
from tests.actors.tls import self_signed_cert
from tests.kafka.javakafka import CONSUMER_GROUPS_MAIN, run_tool

pytestmark = pytest.mark.timeout(300)
TOOL_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def listener(tmp_path_factory):
    root = tmp_path_factory.mktemp("java-sasl")
    cert, key = self_signed_cert(root)
    users = UsersFile(str(root / "users.json"))
    users.add("alice", "alice-pw", ["SCRAM-SHA-512"])
    users.add("admin", "admin-pw", ["SCRAM-SHA-512"])
    security = ListenerSecurity(
        "SASL_SSL",
        sasl_mechanisms=("SCRAM-SHA-512",),
        users_file=users.path,
        ssl_certfile=cert,
        ssl_keyfile=key,
        acls=AclFile(
            acls=(AclRule("User:alice", "java-", ("Read",), pattern="prefixed"),),
            super_users=("User:admin",),
        ),
    )
    served = WirePartition(str(root / "log"), {"events": 1}, security=security)
    address = served.start()
    yield address, cert, root
    served.stop()


def _commit(address: str, cert: str, group: str) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": address,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": cert,
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": "admin-pw",
            "group.id": group,
        }
    )
    consumer.commit(offsets=[TopicPartition("events", 0, 5)], asynchronous=False)
    consumer.close()


def _list_groups(address: str, cert: str, root, password: str):
    config = root / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={cert}\n"
    )
    args = ["--bootstrap-server", address, "--command-config", str(config), "--list"]
    return run_tool(CONSUMER_GROUPS_MAIN, args, TOOL_TIMEOUT_S)


def test_the_java_client_authenticates_with_scram_over_tls(listener):
    address, cert, root = listener
    for group in ("java-visible", "hidden"):
        _commit(address, cert, group)
    listed = _list_groups(address, cert, root, "alice-pw")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["java-visible"]  # no Describe on "hidden"
