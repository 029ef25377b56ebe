"""SASL authentication of one Kafka connection, sans-IO: PLAIN and SCRAM-SHA-256/512.

``SaslServer`` is the state machine of Kafka's ``SaslServerAuthenticator`` for one connection
(KIP-43, KIP-152): before authentication only ApiVersions (once), SaslHandshake and then
SaslAuthenticate (v0-2) are accepted. After a SaslHandshake v0 the client sends bare SASL tokens
instead (``raw_tokens``; the listener switches its ``Connection`` to them), answered with bare
tokens, and a failure closes the connection without an answer. ``receive(request)`` returns a
``SaslStep``: the answer to write, and whether the connection must then close. As in Kafka:

* any other request before the handshake closes the connection without an answer;
* a mechanism that is not enabled is answered UNSUPPORTED_SASL_MECHANISM (with the enabled
  ones), then the connection closes;
* during the exchange, any request but SaslAuthenticate is answered ILLEGAL_SASL_STATE where it
  has an error code (SaslHandshake, ApiVersions), then the connection closes;
* a failed exchange is answered SASL_AUTHENTICATION_FAILED with a message, then closes.

Once ``complete``, ``principal`` is ``User:<name>`` and every request goes to the listener's
gateway; a SaslHandshake or SaslAuthenticate after that is answered ILLEGAL_SASL_STATE
(``illegal_state_response``), as Kafka's request handler does when re-authentication is off.

SCRAM follows RFC 5802 as Kafka implements it: gs2 header ``n,,`` (or ``y,,``; no channel
binding), an authorization id only if it equals the user name, no extensions (no delegation
tokens here), and failure at the first message for an unknown user. Credentials are Kafka's:
salt, iterations, stored key and server key (``scram_credential``); the password is never
stored. PLAIN (RFC 4616) checks a password by deriving the user's SCRAM credential from it with
the stored salt and iterations and comparing stored keys, so no plaintext is kept for it either.
Nothing here reads a clock or draws randomness: the caller supplies the server nonces (and the
salts, to ``scram_credential``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec
from kio.schema.errors import ErrorCode
from kio.static.protocol import Payload

from . import apis
from .answer_cache import api_versions_answer
from .apis import ApiKey
from .connection import EncodedResponse, WireRequest

PLAIN = "PLAIN"
SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS = (PLAIN, *SCRAM_HASHES)
# Kafka's ScramMechanism bounds on iterations; 4096 is also kafka-configs' default.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
ANONYMOUS = "User:ANONYMOUS"
# Kafka's sasl.server.max.receive.size: the largest frame read before authentication.
MAX_RECEIVE_BYTES = 512 * 1024

_INVALID_CREDENTIALS = "Authentication failed: Invalid user credentials"
_INVALID_PLAIN = "Authentication failed: Invalid username or password"


class ScramCredential(msgspec.Struct, frozen=True):
    """One user's credential for one SCRAM mechanism (RFC 5802 §3), as Kafka stores it."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


# (user name, SCRAM mechanism) -> that user's credential, or None.
Credentials = Callable[[str, str], "ScramCredential | None"]


def _hash(mechanism: str) -> str:
    if mechanism not in SCRAM_HASHES:
        raise ValueError(f"not a SCRAM mechanism: {mechanism!r} (one of {', '.join(SCRAM_HASHES)})")
    return SCRAM_HASHES[mechanism]


def _hmac(name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, name).digest()


def scram_credential(
    mechanism: str, password: str, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential of ``password`` (UTF-8, as Kafka's ScramFormatter) for ``mechanism``.
    ValueError for an unknown mechanism, an empty salt or iterations outside Kafka's
    [4096, 16384]."""
    name = _hash(mechanism)
    if not salt:
        raise ValueError("the salt must not be empty")
    if type(iterations) is not int or not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
    salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
    client_key = _hmac(name, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        iterations=iterations,
        stored_key=hashlib.new(name, client_key).digest(),
        server_key=_hmac(name, salted, b"Server Key"),
    )


def check_mechanisms(mechanisms: Sequence[str]) -> tuple[str, ...]:
    """``mechanisms`` without repeats; ValueError for none or an unknown one."""
    if not mechanisms:
        raise ValueError(f"at least one SASL mechanism is needed ({', '.join(MECHANISMS)})")
    for mechanism in mechanisms:
        if mechanism not in MECHANISMS:
            raise ValueError(
                f"unknown SASL mechanism {mechanism!r}: expected one of {', '.join(MECHANISMS)}"
            )
    return tuple(dict.fromkeys(mechanisms))


class _Failed(Exception):
    """The exchange failed; the message goes to the client (it never says whether a user
    exists beyond what Kafka's own messages say)."""


def _decode_saslname(name: str) -> str:
    """RFC 5802 §5.1: ``=2C`` is a comma and ``=3D`` an equals sign; any other ``=`` is bad."""
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            escape = name[i : i + 3]
            if escape not in ("=2C", "=3D"):
                raise _Failed("Authentication failed: invalid user name")
            out.append("," if escape == "=2C" else "=")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _Failed("Authentication failed: invalid SCRAM message") from None


def _attributes(message: str, names: str) -> list[str]:
    """The values of comma-separated ``x=value`` attributes, which must be exactly ``names``
    in that order (no extensions: Kafka's only one, tokenauth, needs delegation tokens)."""
    parts = message.split(",")
    if len(parts) != len(names) or any(
        not p.startswith(n + "=") for p, n in zip(parts, names, strict=True)
    ):
        raise _Failed("Authentication failed: invalid SCRAM message")
    return [p[2:] for p in parts]


class _Scram:
    """The two steps of one SCRAM exchange (RFC 5802 §5)."""

    def __init__(self, mechanism: str, credentials: Credentials, server_nonce: str) -> None:
        self.mechanism = mechanism
        self._hash = _hash(mechanism)
        self._credentials = credentials
        self._server_nonce = server_nonce
        self._step = 0
        self.user: str | None = None

    def evaluate(self, token: bytes) -> tuple[bytes, bool]:
        """The server's next message and whether the exchange is complete; _Failed if not."""
        try:
            text = token.decode()
        except UnicodeDecodeError:
            raise _Failed("Authentication failed: invalid SCRAM message") from None
        self._step += 1
        if self._step == 1:
            return self._first(text).encode(), False
        if self._step == 2:
            return self._final(text).encode(), True
        raise _Failed("Authentication failed: SCRAM exchange already finished")

    def _first(self, text: str) -> str:
        flag, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        if flag not in ("n", "y"):
            raise _Failed("Authentication failed: channel binding is not supported")
        name, client_nonce = _attributes(bare, "nr")
        user = _decode_saslname(name)
        if authzid and authzid != "a=" + name:
            raise _Failed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        if not client_nonce or not user:
            raise _Failed("Authentication failed: invalid SCRAM message")
        credential = self._credentials(user, self.mechanism)
        if credential is None:
            raise _Failed(_INVALID_CREDENTIALS)
        self.user, self._credential = user, credential
        self._gs2_header = f"{flag},{authzid},".encode()
        self._nonce = client_nonce + self._server_nonce
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._client_first_bare = bare
        return self._server_first

    def _final(self, text: str) -> str:
        without_proof, _, proof_part = text.rpartition(",")
        channel, nonce = _attributes(without_proof, "cr")
        (proof_b64,) = _attributes(proof_part, "p")
        if _unb64(channel) != self._gs2_header or nonce != self._nonce:
            raise _Failed("Authentication failed: invalid SCRAM message")
        proof = _unb64(proof_b64)
        auth_message = ",".join(
            (self._client_first_bare, self._server_first, without_proof)
        ).encode()
        credential = self._credential
        signature = _hmac(self._hash, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise _Failed(_INVALID_CREDENTIALS)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), credential.stored_key
        ):
            raise _Failed(_INVALID_CREDENTIALS)
        return "v=" + _b64(_hmac(self._hash, credential.server_key, auth_message))


class _Plain:
    """PLAIN's one step (RFC 4616): ``[authzid] NUL authcid NUL password``."""

    mechanism = PLAIN

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials
        self.user: str | None = None

    def evaluate(self, token: bytes) -> tuple[bytes, bool]:
        try:
            authzid, user, password = token.decode().split("\0")
        except (UnicodeDecodeError, ValueError):
            raise _Failed("Authentication failed: Invalid SASL/PLAIN response") from None
        if not user or not password:
            raise _Failed("Authentication failed: username or password not specified")
        if authzid and authzid != user:
            raise _Failed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        for mechanism in reversed(SCRAM_HASHES):  # the strongest hash the user has
            stored = self._credentials(user, mechanism)
            if stored is not None:
                derived = scram_credential(mechanism, password, stored.salt, stored.iterations)
                if hmac.compare_digest(derived.stored_key, stored.stored_key):
                    self.user = user
                    return b"", True
                break
        raise _Failed(_INVALID_PLAIN)


@dataclass(frozen=True, slots=True)
class SaslStep:
    """What to do with one request: write ``response`` (None: nothing), then close if ``close``;
    ``reason`` says why it closes (for the log)."""

    response: Payload | EncodedResponse | None
    close: bool = False
    reason: str = ""


class SaslServer:
    """The SASL state of one connection (see the module docstring). ``nonce()`` gives a fresh,
    unpredictable server nonce of printable characters without commas for each SCRAM exchange."""

    def __init__(
        self, mechanisms: Sequence[str], credentials: Credentials, nonce: Callable[[], str]
    ) -> None:
        self.mechanisms = check_mechanisms(mechanisms)
        self._credentials = credentials
        self._nonce = nonce
        self._versions_answered = False
        self._exchange: _Scram | _Plain | None = None
        self.principal: str | None = None
        self.raw_tokens = False  # SaslHandshake v0: bare tokens follow

    @property
    def complete(self) -> bool:
        return self.principal is not None

    def receive(self, request: WireRequest) -> SaslStep:
        """Answer one request received before authentication completed."""
        if self.complete:
            raise ValueError("authentication is complete: requests go to the gateway")
        key = request.api_key
        if self._exchange is None:
            if key == ApiKey.API_VERSIONS and not self._versions_answered:
                self._versions_answered = True
                return SaslStep(api_versions_answer(request))
            if key == ApiKey.SASL_HANDSHAKE:
                return self._handshake(request)
            return SaslStep(None, True, f"api key {key} before SASL authentication")
        if key == ApiKey.SASL_AUTHENTICATE and request.raw_sasl_token == self.raw_tokens:
            return self._authenticate(request)
        response = _illegal_state(request, f"api key {key} during SASL authentication")
        return SaslStep(response, True, f"api key {key} during SASL authentication")

    def _handshake(self, request: WireRequest) -> SaslStep:
        cls = apis.response_class(request.api_key, request.api_version)
        mechanism = request.body.mechanism
        if mechanism not in self.mechanisms:
            return SaslStep(
                cls(error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=self.mechanisms),
                True,
                f"SASL mechanism {mechanism!r} is not enabled",
            )
        self.raw_tokens = request.api_version == 0
        if mechanism == PLAIN:
            self._exchange = _Plain(self._credentials)
        else:
            self._exchange = _Scram(mechanism, self._credentials, self._nonce())
        return SaslStep(cls(error_code=ErrorCode.none, mechanisms=self.mechanisms))

    def _authenticate(self, request: WireRequest) -> SaslStep:
        cls = apis.response_class(request.api_key, request.api_version)
        exchange = self._exchange
        assert exchange is not None
        try:
            token, done = exchange.evaluate(request.body.auth_bytes)
        except _Failed as failed:
            reason = f"{exchange.mechanism} authentication failed for {exchange.user!r}: {failed}"
            if request.raw_sasl_token:  # a bare exchange has no way to say why
                return SaslStep(None, True, reason)
            return SaslStep(
                cls(
                    error_code=ErrorCode.sasl_authentication_failed,
                    error_message=str(failed),
                    auth_bytes=b"",
                ),
                True,
                reason,
            )
        if done:
            self.principal = f"User:{exchange.user}"
        return SaslStep(cls(error_code=ErrorCode.none, error_message=None, auth_bytes=token))


def _illegal_state(request: WireRequest, message: str) -> Payload | None:
    if request.api_key == ApiKey.API_VERSIONS:
        cls = apis.response_class(request.api_key, request.body_version)
        timing = {} if request.body_version == 0 else {"throttle_time": apis.ZERO_MS}
        return cls(error_code=ErrorCode.illegal_sasl_state, api_keys=(), **timing)
    if request.api_key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
        return illegal_state_response(request, message)
    return None


def illegal_state_response(request: WireRequest, message: str) -> Payload:
    """ILLEGAL_SASL_STATE for a SaslHandshake or SaslAuthenticate that comes when none is
    expected: after authentication, or on a listener without SASL."""
    cls = apis.response_class(request.api_key, request.api_version)
    if request.api_key == ApiKey.SASL_HANDSHAKE:
        return cls(error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    if request.api_key == ApiKey.SASL_AUTHENTICATE:
        return cls(error_code=ErrorCode.illegal_sasl_state, error_message=message, auth_bytes=b"")
    raise ValueError(f"api key {request.api_key} is not a SASL request")
