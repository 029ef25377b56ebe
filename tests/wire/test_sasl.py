"""SASL state machine (wire/sasl.py), sans-IO: RFC 7677's SCRAM-SHA-256 test vector, SCRAM-SHA-512
and PLAIN exchanges driven by real kio frames (and bare tokens after a v0 handshake), and
Kafka's refusals (wrong state, unknown mechanism, bad proof, unknown user)."""

import base64
import hashlib
import hmac
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.sasl_authenticate.v0.request import SaslAuthenticateRequest as AuthV0
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest as AuthV2
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from groupcoord.wire import ApiKey, Connection, apis
from groupcoord.wire.answer_cache import api_versions_answer
from groupcoord.wire.connection import encode_response
from groupcoord.wire.sasl import (
    SaslServer,
    ScramCredential,
    illegal_state_response,
    scram_credential,
)

from .frames import request_frame, split_response

# RFC 7677 §3.
RFC_PASSWORD = "pencil"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = (
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


class Users:
    """A credential table: {(user, mechanism): credential}."""

    def __init__(self) -> None:
        self.table: dict[tuple[str, str], ScramCredential] = {}

    def add(self, user: str, password: str, mechanism: str, salt: bytes = b"salt-of-16-bytes"):
        self.table[(user, mechanism)] = scram_credential(mechanism, password, salt, 4096)

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.table.get((user, mechanism))


def _request(body, version=None):
    connection = Connection()
    (request,) = connection.receive_data(request_frame(body, api_version=version))
    return request


def _server(users: Users, mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"), nonce="snonce"):
    return SaslServer(mechanisms, users.lookup, lambda: nonce)


def _handshake(server: SaslServer, mechanism: str):
    return server.receive(_request(SaslHandshakeRequest(mechanism=mechanism)))


def _auth(server: SaslServer, token: bytes, version: int = 2):
    body = (AuthV2 if version == 2 else AuthV0)(auth_bytes=token)
    return server.receive(_request(body))


def _client_final(mechanism: str, password: str, client_first_bare: str, server_first: str):
    """The client's side of RFC 5802 §3, written from the RFC, independent of the server."""
    name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(name, password.encode(), base64.b64decode(fields["s"]), 4096)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, name).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    server_key = hmac.new(salted, b"Server Key", name).digest()
    expected_final = (
        "v=" + base64.b64encode(hmac.new(server_key, auth_message, name).digest()).decode()
    )
    return f"{without_proof},p={base64.b64encode(proof).decode()}", expected_final


def test_rfc_7677_scram_sha_256_test_vector():
    users = Users()
    users.table[("user", "SCRAM-SHA-256")] = scram_credential(
        "SCRAM-SHA-256", RFC_PASSWORD, RFC_SALT, 4096
    )
    server = _server(users, nonce=RFC_SERVER_NONCE)
    assert _handshake(server, "SCRAM-SHA-256").response.error_code == ErrorCode.none
    first = _auth(server, f"n,,n=user,r={RFC_CLIENT_NONCE}".encode())
    assert first.response.error_code == ErrorCode.none and not first.close
    assert first.response.auth_bytes.decode() == RFC_SERVER_FIRST
    assert not server.complete
    final = _auth(server, RFC_CLIENT_FINAL.encode())
    assert final.response.error_code == ErrorCode.none and not final.close
    assert final.response.auth_bytes.decode() == RFC_SERVER_FINAL
    assert server.complete and server.principal == "User:user"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("auth_version", [0, 2])
def test_scram_exchange_authenticates_the_user(mechanism, auth_version):
    users = Users()
    users.add("alice,=x", "s3cret", mechanism)
    server = _server(users)
    versions = _request(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    answer = server.receive(versions).response
    assert answer == api_versions_answer(versions)  # the gateway's, encoded once per version
    _, decoded = split_response(
        encode_response(versions, answer),
        apis.response_class(ApiKey.API_VERSIONS, 3),
        header_version=0,
    )
    assert decoded.error_code == ErrorCode.none
    assert ApiKey.SASL_HANDSHAKE in {k.api_key for k in decoded.api_keys}
    handshake = _handshake(server, mechanism)
    assert set(handshake.response.mechanisms) == {"SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"}
    bare = "n=alice=2C=3Dx,r=cnonce"
    first = _auth(server, f"n,,{bare}".encode(), auth_version)
    server_first = first.response.auth_bytes.decode()
    assert server_first.startswith("r=cnoncesnonce,s=")
    final, expected = _client_final(mechanism, "s3cret", bare, server_first)
    last = _auth(server, final.encode(), auth_version)
    assert last.response.error_code == ErrorCode.none
    assert last.response.auth_bytes.decode() == expected
    assert server.principal == "User:alice,=x"


@pytest.mark.parametrize(
    "password, first_message, error_text",
    [
        ("wrong", "n,,n=bob,r=c", "Invalid user credentials"),
        ("right", "n,,n=nobody,r=c", "Invalid user credentials"),
        ("right", "p=tls-unique,,n=bob,r=c", "channel binding"),
        ("right", "n,a=eve,n=bob,r=c", "authorization id"),
        ("right", "n,,n=bob,r=c,tokenauth=true", "invalid SCRAM message"),
        ("right", "n,,n=b=ob,r=c", "invalid user name"),
    ],
)
def test_scram_failures_answer_sasl_authentication_failed_and_close(
    password, first_message, error_text
):
    users = Users()
    users.add("bob", "right", "SCRAM-SHA-512")
    server = _server(users)
    _handshake(server, "SCRAM-SHA-512")
    step = _auth(server, first_message.encode())
    if step.response.error_code == ErrorCode.none:  # the user exists: the proof decides
        final, _ = _client_final(
            "SCRAM-SHA-512", password, first_message[3:], step.response.auth_bytes.decode()
        )
        step = _auth(server, final.encode())
    assert step.response.error_code == ErrorCode.sasl_authentication_failed
    assert error_text in step.response.error_message
    assert step.close and not server.complete


def test_scram_final_message_with_another_nonce_or_header_fails():
    users = Users()
    users.add("bob", "right", "SCRAM-SHA-256")
    for tamper in (lambda m: m.replace("c=biws", "c=eSws"), lambda m: m.replace("snonce", "x")):
        server = _server(users)
        _handshake(server, "SCRAM-SHA-256")
        first = _auth(server, b"n,,n=bob,r=c")
        final, _ = _client_final(
            "SCRAM-SHA-256", "right", "n=bob,r=c", first.response.auth_bytes.decode()
        )
        step = _auth(server, tamper(final).encode())
        assert step.response.error_code == ErrorCode.sasl_authentication_failed and step.close


@pytest.mark.parametrize(
    "token, ok",
    [
        (b"\0carol\0pw-of-carol", True),
        (b"carol\0carol\0pw-of-carol", True),
        (b"\0carol\0wrong", False),
        (b"\0dave\0pw-of-carol", False),
        (b"eve\0carol\0pw-of-carol", False),
        (b"\0carol", False),
        (b"\xff\0carol\0pw", False),
    ],
)
def test_plain_checks_the_password_against_the_stored_scram_credential(token, ok):
    users = Users()
    users.add("carol", "pw-of-carol", "SCRAM-SHA-256")
    server = _server(users)
    _handshake(server, "PLAIN")
    step = _auth(server, token)
    expected = ErrorCode.none if ok else ErrorCode.sasl_authentication_failed
    assert step.response.error_code == expected
    assert step.close is not ok
    assert server.principal == ("User:carol" if ok else None)


def test_unsupported_mechanism_is_refused_with_the_enabled_ones():
    server = _server(Users(), mechanisms=("SCRAM-SHA-512",))
    step = _handshake(server, "PLAIN")
    assert step.response.error_code == ErrorCode.unsupported_sasl_mechanism
    assert step.response.mechanisms == ("SCRAM-SHA-512",)
    assert step.close


def test_requests_out_of_order_are_refused_as_kafka_does():
    # Before the handshake: anything but ApiVersions (once) and SaslHandshake closes unanswered.
    server = _server(Users())
    step = server.receive(_request(HeartbeatRequest(group_id="g", generation_id=1, member_id="m")))
    assert step.response is None and step.close
    step = _auth(_server(Users()), b"n,,n=bob,r=c")
    assert step.response is None and step.close
    server = _server(Users())
    versions = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    assert not server.receive(_request(versions)).close
    assert server.receive(_request(versions)).close
    # During the exchange: a second handshake is answered ILLEGAL_SASL_STATE, then closes.
    server = _server(Users())
    _handshake(server, "PLAIN")
    step = _handshake(server, "PLAIN")
    assert step.response.error_code == ErrorCode.illegal_sasl_state and step.close


def test_sasl_requests_after_authentication_get_illegal_sasl_state():
    request = _request(AuthV2(auth_bytes=b"x"))
    assert illegal_state_response(request, "done").error_code == ErrorCode.illegal_sasl_state
    handshake = _request(SaslHandshakeRequest(mechanism="PLAIN"))
    assert illegal_state_response(handshake, "done").error_code == ErrorCode.illegal_sasl_state


@pytest.mark.parametrize(
    "mechanism, salt, iterations",
    [("SCRAM-SHA-1", b"s", 4096), ("SCRAM-SHA-256", b"", 4096), ("SCRAM-SHA-256", b"s", 100)],
)
def test_bad_credential_parameters_are_refused(mechanism, salt, iterations):
    with pytest.raises(ValueError):
        scram_credential(mechanism, "pw", salt, iterations)


def test_unknown_mechanisms_are_refused():
    with pytest.raises(ValueError, match="GSSAPI"):
        SaslServer(("GSSAPI",), Users().lookup, lambda: "n")
    with pytest.raises(ValueError, match="at least one"):
        SaslServer((), Users().lookup, lambda: "n")


def test_handshake_v0_switches_to_bare_tokens_as_kafka_before_kip_152():
    users = Users()
    users.add("dora", "pw-d", "SCRAM-SHA-256")
    server = _server(users)
    connection = Connection()
    (handshake,) = connection.receive_data(
        request_frame(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), api_version=0)
    )
    step = server.receive(handshake)
    assert step.response.error_code == ErrorCode.none and server.raw_tokens
    connection.send_response(handshake, step.response)
    connection.raw_sasl_tokens = True  # what the listener does after a v0 handshake

    def exchange(token: bytes) -> bytes:
        (request,) = connection.receive_data(struct.pack(">i", len(token)) + token)
        assert request.raw_sasl_token
        answer = server.receive(request)
        assert not answer.close
        frame = connection.send_response(request, answer.response)
        (size,) = struct.unpack_from(">i", frame)
        assert size == len(frame) - 4  # a bare token: no correlation id, no header
        return frame[4:]

    server_first = exchange(b"n,,n=dora,r=abc").decode()
    final, expected = _client_final("SCRAM-SHA-256", "pw-d", "n=dora,r=abc", server_first)
    assert exchange(final.encode()).decode() == expected
    assert server.principal == "User:dora"


def test_a_failed_bare_token_exchange_closes_without_an_answer():
    users = Users()
    users.add("dora", "pw-d", "SCRAM-SHA-256")
    server = _server(users)
    server.receive(_request(SaslHandshakeRequest(mechanism="PLAIN"), version=0))
    connection = Connection()
    connection.raw_sasl_tokens = True
    token = b"\0dora\0wrong"
    (request,) = connection.receive_data(struct.pack(">i", len(token)) + token)
    step = server.receive(request)
    assert step.response is None and step.close and not server.complete
