"""``groupcoord users`` and ``serve``'s security flags: users files hold SCRAM credentials only
and listeners follow their changes, bad security settings are one-line errors before anything
starts, and a SASL_SSL deployment on Ray serves a Kafka client through its bootstrap and
partition listeners, with ACLs."""

from __future__ import annotations

import io
import ipaddress
import json
import os
import pickle
import stat

import pytest
import ray
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from groupcoord.actors import ListenerSecurity, WireConfig, connect, stop
from groupcoord.actors.cli import main
from groupcoord.actors.security import UsersFile, UserStore, certificate_principal

from .helpers import errors_until_refused, metric_value, scrape_metrics, wait_for
from .tls import self_signed_cert

NS = "gc-security"
ALICE_READS = {
    "principal": "User:alice",
    "group": "team-",
    "pattern": "prefixed",
    "operations": ["Read"],
}
BOB_DESCRIBES = {"principal": "User:bob", "group": "team-orders", "operations": ["Describe"]}


def _users(capsys, users_file, *argv) -> dict:
    capsys.readouterr()
    assert main(["users", *argv, "--users-file", str(users_file), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_users_add_list_delete(capsys, tmp_path, monkeypatch):
    users_file = tmp_path / "conf" / "users.json"
    _users(capsys, users_file, "add", "alice", "--password", "alice-secret-pw")
    monkeypatch.setattr("sys.stdin", io.StringIO("bob-secret-pw\n"))
    listed = _users(capsys, users_file, "add", "bob", "--mechanism", "SCRAM-SHA-512")
    assert listed["users"] == [
        {"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 4096},
        {"user": "alice", "mechanism": "SCRAM-SHA-512", "iterations": 4096},
        {"user": "bob", "mechanism": "SCRAM-SHA-512", "iterations": 4096},
    ]
    content = users_file.read_text()
    assert "secret" not in content and "stored_key" in content
    assert stat.S_IMODE(os.stat(users_file).st_mode) == 0o600
    assert [u["user"] for u in _users(capsys, users_file, "delete", "alice")["users"]] == ["bob"]
    assert main(["users", "delete", "nobody", "--users-file", str(users_file)]) == 2
    assert "no user 'nobody'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, complaint",
    [
        (["add", "x", "--password", ""], "password must not be empty"),
        (["add", " x", "--password", "p"], "user name"),
        (["add", "x", "--password", "p", "--iterations", "10"], "iterations"),
        (["add"], "needs a user name"),
    ],
)
def test_bad_users_commands_are_one_line_errors(capsys, tmp_path, argv, complaint):
    assert main(["users", *argv, "--users-file", str(tmp_path / "u.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and complaint in err
    assert not (tmp_path / "u.json").exists()


# Brackets nested past what msgspec's (and TOML's) readers decode: they raise RecursionError.
NESTED_TOO_DEEP = "[" * 100_000 + "]" * 100_000


def test_files_nested_too_deep_are_one_line_errors(capsys, tmp_path):
    users_file = tmp_path / "users.json"
    deep_credential = '{"SCRAM-SHA-512": {"x": ' + NESTED_TOO_DEEP + "}}"
    users_file.write_text('{"users": {"alice": ' + deep_credential + "}}")
    assert main(["users", "list", "--users-file", str(users_file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"users file {users_file}: nested too deep" in err
    acls = tmp_path / "acls.toml"
    acls.write_text("acls = " + "[" * 50_000)
    assert "nested too deep" in _refused(
        capsys, tmp_path, "--kafka-port", "0", "--acl-file", str(acls)
    )
    logs = tmp_path / "deep"
    logs.mkdir()
    (logs / "deployment.json").write_text('{"x": ' + NESTED_TOO_DEEP + "}")
    assert main(["serve", "--log-dir", str(logs)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "deployment.json is unreadable (nested too deep)" in err
    assert os.listdir(logs) == ["deployment.json"]  # nothing was started or written


def _refused(capsys, tmp_path, *flags) -> str:
    argv = ["serve", "--log-dir", str(tmp_path / "logs"), *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    return err


def test_bad_security_settings_are_refused_before_anything_starts(capsys, tmp_path):
    users_file = tmp_path / "users.json"
    bad_acls = tmp_path / "acls.toml"
    bad_acls.write_text('[[acls]]\nprincipal = "alice"\ngroup = "g"\noperations = ["Read"]\n')
    kafka = ["--kafka-port", "0"]
    sasl = [*kafka, "--kafka-security-protocol", "SASL_PLAINTEXT", "--users-file", str(users_file)]
    cases = [
        ([*kafka, "--kafka-host", "0.0.0.0"], "needs authentication"),
        (
            [
                *kafka,
                "--kafka-host",
                "0.0.0.0",
                "--kafka-security-protocol",
                "SSL",
                "--ssl-certfile",
                "c.pem",
            ],
            "needs authentication",
        ),
        ([*kafka, "--kafka-security-protocol", "SASL_SSL"], "certificate file"),
        ([*kafka, "--acl-file", str(bad_acls)], "User:"),
        ([*kafka, "--acl-file", str(tmp_path / "none.json")], "No such file"),
        (["--acl-file", str(bad_acls)], "--acl-file needs --kafka-port"),
        (sasl, "no users file"),
        ([*sasl, "--sasl-mechanisms", "GSSAPI"], "GSSAPI"),
        ([*kafka, "--sasl-mechanisms", "PLAIN"], "needs a SASL security protocol"),
        ([*kafka, "--kafka-security-protocol", "SSL", "--ssl-certfile", str(bad_acls)], "TLS"),
        (["--kafka-network-processes", "2"], "--kafka-network-processes needs --kafka-port"),
        ([*kafka, "--kafka-network-processes", "65"], "network_processes must be an int in"),
        ([*kafka, "--kafka-network-processes", "-1"], "network_processes must be an int in"),
        (["--kafka-idle-poll-us", "100"], "--kafka-idle-poll-us needs --kafka-port"),
        ([*kafka, "--kafka-idle-poll-us", "10001"], "idle_poll_us must be an int in [0, 10000]"),
        ([*kafka, "--kafka-idle-poll-us", "-1"], "idle_poll_us must be an int in [0, 10000]"),
    ]
    for flags, complaint in cases:
        assert complaint in _refused(capsys, tmp_path, *flags), flags
    assert not (tmp_path / "logs").exists()  # nothing was started or written


@pytest.fixture(scope="module")
def secured(ray_session, tmp_path_factory):
    root = tmp_path_factory.mktemp("secured")
    cert, key = self_signed_cert(root)
    acl_file = root / "acls.json"
    acl_file.write_text(json.dumps({"acls": [ALICE_READS, BOB_DESCRIBES]}))
    for user in ("alice", "bob"):
        assert main(["users", "add", user, "--password", f"{user}-pw", "--log-dir", str(root)]) == 0
    argv = [
        "serve",
        "--namespace",
        NS,
        "--partitions",
        "2",
        "--log-dir",
        str(root),
        "--detach",
        "--kafka-port",
        "0",
        "--kafka-security-protocol",
        "SASL_SSL",
        "--sasl-mechanisms",
        "SCRAM-SHA-512",
        "--ssl-certfile",
        cert,
        "--ssl-keyfile",
        key,
        "--acl-file",
        str(acl_file),
        # The partition listeners in processes of their own, each reading the TLS, users and
        # ACL files itself (WireConfig.network_processes), every loop polling after work.
        "--kafka-network-processes",
        "2",
        "--kafka-idle-poll-us",
        "300",
    ]
    assert main(argv) == 0
    deployment = connect(NS)
    assert all(len(i["network_processes"]["pids"]) == 2 for i in deployment.infos())
    assert all(i["idle_poll_turns"] is not None for i in deployment.infos())
    yield deployment, cert
    stop(deployment)


def _consumer(address: str, cert: str, user: str, group: str) -> Consumer:
    return Consumer(_config(address, cert, user, group))


def _config(address: str, cert: str, user: str, group: str) -> dict:
    return {
        "bootstrap.servers": address,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": cert,
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": f"{user}-pw",
        "group.id": group,
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }


def test_every_listener_of_a_deployment_authenticates_and_authorizes(secured):
    deployment, cert = secured
    # The partition listeners (the coordinators) share the bootstrap listener's security: the
    # consumer finds its coordinator through the bootstrap listener and joins there over TLS.
    consumer = _consumer(deployment.kafka, cert, "alice", "team-orders")
    consumer.commit(offsets=[TopicPartition("orders", 0, 17)], asynchronous=False)
    read = consumer.committed([TopicPartition("orders", 0)], timeout=10)
    assert read[0].offset == 17
    consumer.close()
    # Its partition's loop polled after the turns that served it (--kafka-idle-poll-us), and
    # so did the network process that served the connection (reported within a second).
    assert sum(i["idle_poll_turns"] for i in deployment.infos()) > 0
    wait_for(
        lambda: sum(i["kafka_listener"]["idle_poll_turns"] for i in deployment.infos()) > 0,
        10,
        "a network process's polling reported",
    )
    # Bob may find the group's coordinator (Describe) but not read or commit there (no Read):
    # the partition listener refuses him as the bootstrap listener would.
    outsider = _consumer(deployment.kafka, cert, "bob", "team-orders")
    with pytest.raises(KafkaException) as denied:
        outsider.commit(offsets=[TopicPartition("orders", 0, 99)], asynchronous=False)
    assert denied.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    outsider.close()
    again = _consumer(deployment.kafka, cert, "alice", "team-orders")
    assert again.committed([TopicPartition("orders", 0)], timeout=10)[0].offset == 17
    again.close()


def _status(capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["status", "--namespace", NS, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["partitions"]


def test_status_names_each_partitions_network_processes(secured, capsys):
    assert [p["net"] for p in _status(capsys)] == ["2", "2"]
    assert main(["status", "--namespace", NS]) == 0
    assert " net " in capsys.readouterr().out  # the table's column


def test_status_counts_the_connections_its_network_processes_serve(secured, capsys):
    deployment, cert = secured
    # Counted in the network processes, reported to their partition every second.
    consumer = _consumer(deployment.kafka, cert, "alice", "team-count")
    consumer.commit(offsets=[TopicPartition("orders", 0, 3)], asynchronous=False)
    wait_for(lambda: sum(p["conns"] for p in _status(capsys)) >= 1, 10, "a connection counted")
    consumer.close()
    wait_for(lambda: sum(p["conns"] for p in _status(capsys)) == 0, 10, "it closed")
    # A wrong password, at one partition's own listener.
    [first] = [i for i in deployment.infos() if i["partition"] == 0]
    failed = first["kafka_listener"]["authentication_failures"]
    errors: list = []
    wrong = Consumer(
        _config(first["kafka"], cert, "alice", "team-count")
        | {"sasl.password": "not-her-password", "error_cb": errors.append}
    )
    errors_until_refused(wrong, "orders", errors)
    assert KafkaError._AUTHENTICATION in {e.code() for e in errors}
    wait_for(
        lambda: (
            next(i for i in deployment.infos() if i["partition"] == 0)["kafka_listener"][
                "authentication_failures"
            ]
            > failed
        ),
        10,
        "the failed authentication counted",
    )


def test_status_counts_what_the_bootstrap_listener_refused(secured, capsys):
    deployment, cert = secured

    def bootstrap() -> dict:
        capsys.readouterr()
        assert main(["status", "--namespace", NS, "--json"]) == 0
        return json.loads(capsys.readouterr().out)["bootstrap_listener"]

    before = bootstrap()
    assert before["address"] == deployment.kafka
    errors: list = []
    wrong = Consumer(
        _config(deployment.kafka, cert, "alice", "team-count")
        | {"sasl.password": "not-her-password", "error_cb": errors.append}
    )
    errors_until_refused(wrong, "orders", errors)  # refused at the bootstrap listener
    assert KafkaError._AUTHENTICATION in {e.code() for e in errors}
    after = bootstrap()
    assert after["authentication_failures"] > before["authentication_failures"]
    assert main(["status", "--namespace", NS]) == 0
    line = f"Kafka bootstrap listener at {deployment.kafka}: "
    assert line in capsys.readouterr().out
    # And in Ray's metrics, labelled as the bootstrap listener's (every GAUGE_INTERVAL_S).
    wait_for(
        lambda: (
            metric_value(
                scrape_metrics(ray),
                "groupcoord_kafka_authentication_failures_total",
                partition="bootstrap",
            )
            >= 1
        ),
        40,
        "the bootstrap listener's failure in the metrics",
        interval_s=1.0,
    )


def test_a_wildcard_listener_advertises_this_nodes_address():
    sasl = ListenerSecurity("SASL_SSL", users_file="users.json", ssl_certfile="cert.pem")
    wildcard = WireConfig(host="0.0.0.0", security=sasl)
    assert ipaddress.ip_address(wildcard.advertised_host()) != ipaddress.ip_address("0.0.0.0")
    assert WireConfig(host="127.0.0.2").advertised_host() == "127.0.0.2"
    assert pickle.loads(pickle.dumps(wildcard)) == wildcard  # it travels to partition actors


def test_certificate_subjects_become_rfc_2253_principals():
    subject = (
        (("countryName", "DE"),),
        (("organizationName", "Acme, Inc."),),
        (("organizationalUnitName", "eng"), ("userId", "42")),
        (("commonName", " alice+bob "),),
    )
    assert (
        certificate_principal({"subject": subject})
        == "User:CN=\\ alice\\+bob\\ ,OU=eng+UID=42,O=Acme\\, Inc.,C=DE"
    )


def test_listeners_see_users_added_and_deleted_without_a_restart(tmp_path, caplog):
    users = UsersFile(str(tmp_path / "users.json"))
    users.add("alice", "pw-a")
    store = UserStore(users.path)
    assert store.lookup("alice", "SCRAM-SHA-512") is not None
    assert store.lookup("bob", "SCRAM-SHA-512") is None
    users.add("bob", "pw-b", ["SCRAM-SHA-256"])
    assert store.lookup("bob", "SCRAM-SHA-256") is not None
    assert store.lookup("bob", "SCRAM-SHA-512") is None
    users.delete("alice")
    assert store.lookup("alice", "SCRAM-SHA-512") is None
    (tmp_path / "users.json").write_text("{not json")  # a bad edit keeps the last good users
    assert store.lookup("bob", "SCRAM-SHA-256") is not None
    assert "keeping the previous users" in caplog.text
