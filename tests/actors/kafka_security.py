"""What the secured-listener tests share (test_kafka_security_inproc.py and
test_kafka_security_admin.py): the users, the ACLs and the TLS files, a SASL_PLAINTEXT
partition listener per module (in this process, and served by network processes), and SCRAM
spoken by hand over a raw socket."""

from __future__ import annotations

import base64
import gc
import hashlib
import hmac
import json
import socket
import struct

import pytest
from confluent_kafka import Consumer
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from groupcoord.actors.security import ListenerSecurity, UsersFile, read_acl_file

from ..wire.frames import request_frame, split_response
from .kafka_inproc import WirePartition
from .tls import self_signed_cert

TOPICS = {"events": 2}
IO_TIMEOUT_S = 10
PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw", "admin": "admin-pw"}
ACLS = {
    "super_users": ["User:admin"],
    "acls": [
        {"principal": "User:alice", "group": "app-", "pattern": "prefixed", "operations": ["Read"]},
        {
            "principal": "User:bob",
            "group": "app-",
            "pattern": "prefixed",
            "operations": ["Describe"],
        },
    ],
}


@pytest.fixture
def free_clients():
    """librdkafka clients end when freed; one held by a ``pytest.raises`` traceback cycle
    would otherwise outlive its test's listener and retry that address every second."""
    yield
    gc.collect()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("security")
    users = UsersFile(str(root / "users.json"))
    for name, password in PASSWORDS.items():
        users.add(name, password)
    acl_path = root / "acls.json"
    acl_path.write_text(json.dumps(ACLS))
    cert, key = self_signed_cert(root)
    return root, users.path, str(acl_path), str(cert), str(key)


# Also served by network processes (WireConfig.network_processes): the same listener code in
# other processes, with the users file, the ACLs and the TLS files read there.
@pytest.fixture(scope="module", params=[0, 2], ids=["own-loop", "network-processes"])
def sasl_plaintext(files, request):
    root, users, acl_file, _, _ = files
    security = ListenerSecurity(
        "SASL_PLAINTEXT",
        sasl_mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        users_file=users,
        acls=read_acl_file(acl_file),
    )
    served = WirePartition(
        str(root / f"plain-log-{request.param}"),
        TOPICS,
        security=security,
        network_processes=request.param,
    )
    address = served.start()
    yield served, address
    served.stop()


def sasl_config(address: str, user: str, mechanism: str, password: str | None = None, **extra):
    return {
        "bootstrap.servers": address,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": PASSWORDS[user] if password is None else password,
        **extra,
    }


def connect(address: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", int(address.rsplit(":")[1])), IO_TIMEOUT_S)
    sock.settimeout(IO_TIMEOUT_S)
    return sock


def read_answer(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
    return sock.recv(size, socket.MSG_WAITALL)


def scram_login(sock: socket.socket, user: str) -> None:
    """SCRAM-SHA-512 by hand (RFC 5802's client side), leaving ``sock`` authenticated."""
    sock.sendall(request_frame(SaslHandshakeRequest(mechanism="SCRAM-SHA-512")))
    assert struct.unpack(">ih", read_answer(sock)[:6]) == (7, 0)
    bare = f"n={user},r=client-nonce"
    sock.sendall(request_frame(SaslAuthenticateRequest(auth_bytes=f"n,,{bare}".encode())))
    server_first = authenticate_answer(sock).auth_bytes.decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha512", PASSWORDS[user].encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    without_proof = f"c=biws,r={fields['r']}"
    message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha512(client_key).digest(), message, "sha512").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
    final = f"{without_proof},p={proof.decode()}".encode()
    sock.sendall(request_frame(SaslAuthenticateRequest(auth_bytes=final)))
    answer = authenticate_answer(sock)
    assert answer.error_code == ErrorCode.none and answer.auth_bytes.startswith(b"v=")


def authenticate_answer(sock: socket.socket):
    frame = read_answer(sock)
    _, body = split_response(
        struct.pack(">i", len(frame)) + frame, SaslAuthenticateResponse, header_version=1
    )
    return body


def consumer_for(config: dict, group: str) -> Consumer:
    return Consumer(
        config
        | {
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
