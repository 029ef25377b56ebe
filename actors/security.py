"""The Kafka listeners' security: protocol, SASL users, TLS, group ACLs.

``ListenerSecurity`` is plain, serialisable config: it travels inside ``WireConfig`` to every
partition actor (which Ray may restart on another node), so it holds file paths and the parsed
ACLs, never open files or keys. The users file and the TLS files must be readable wherever a
partition actor runs (the log directory's shared filesystem is the natural place).

Security protocols are Kafka's: PLAINTEXT, SSL (TLS), SASL_PLAINTEXT and SASL_SSL (SASL,
without or over TLS). Clients are authenticated by SASL, or on an SSL listener with
``ssl_cafile`` by a client certificate that CA signed (Kafka's ``ssl.client.auth=required``;
the principal is ``User:`` and the certificate's subject as an RFC 2253 name, like Kafka's
default ``User:CN=alice,O=acme``); otherwise the principal is ``User:ANONYMOUS``. Only a
listener that authenticates may listen beyond loopback (``check_host``).

The users file is JSON, ``{"users": {name: {mechanism: credential}}}``, holding Kafka's SCRAM
credentials (salt, iterations, stored key, server key; bytes in base64) and never a password.
It is written whole to a temporary file, fsynced and renamed, mode 0600, under a lock file, so
a listener never reads half a file and two ``groupcoord users`` commands do not lose each
other's change. Listeners re-read it when it changes (``UserStore``), so users added or deleted
take effect on the next authentication without a restart.
"""

from __future__ import annotations

import fcntl
import ipaddress
import logging
import os
import secrets
import ssl
import tempfile
from collections.abc import Sequence

import msgspec

from groupcoord.wire.acl import AclFile, Authorizer, parse_acl_file
from groupcoord.wire.sasl import (
    MIN_ITERATIONS,
    SCRAM_HASHES,
    ScramCredential,
    check_mechanisms,
    scram_credential,
)

log = logging.getLogger("groupcoord.listener")

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_SASL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
USERS_FILE_NAME = "users.json"
SALT_BYTES = 32
MAX_USER_NAME_CHARS = 256


class ListenerSecurity(msgspec.Struct, frozen=True):
    """How every listener of a deployment authenticates and authorizes (module docstring)."""

    protocol: str = "PLAINTEXT"
    sasl_mechanisms: tuple[str, ...] = DEFAULT_SASL_MECHANISMS
    users_file: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    acls: AclFile | None = None
    ssl_cafile: str | None = None

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(
                f"unknown security protocol {self.protocol!r}: expected one of "
                + ", ".join(PROTOCOLS)
            )
        if self.sasl:
            check_mechanisms(self.sasl_mechanisms)
            if not self.users_file:
                raise ValueError(f"{self.protocol} needs a users file")
        elif self.users_file:
            raise ValueError(f"a users file needs SASL_PLAINTEXT or SASL_SSL, not {self.protocol}")
        if self.tls and not self.ssl_certfile:
            raise ValueError(f"{self.protocol} needs a certificate file (--ssl-certfile)")
        if not self.tls and (self.ssl_certfile or self.ssl_keyfile or self.ssl_cafile):
            raise ValueError(f"certificate files need SSL or SASL_SSL, not {self.protocol}")
        if self.sasl and self.ssl_cafile:
            raise ValueError("client certificates (--ssl-cafile) authenticate SSL listeners only")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    @property
    def client_certificates(self) -> bool:
        return self.ssl_cafile is not None

    @property
    def authenticates(self) -> bool:
        return self.sasl or self.client_certificates

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server's TLS context (None without TLS): TLS 1.2 or later, client certificates
        required and checked against ``ssl_cafile`` alone when it is set. OSError or
        ssl.SSLError for files that cannot be read or do not hold what they should."""
        if not self.tls:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)  # type: ignore[arg-type]
        if self.ssl_cafile:
            context.load_verify_locations(cafile=self.ssl_cafile)
            context.verify_mode = ssl.CERT_REQUIRED
        return context

    def authorizer(self) -> Authorizer | None:
        return Authorizer(self.acls) if self.acls is not None else None

    def check(self) -> None:
        """Read every file this config names, as a listener will: ValueError saying which one
        is missing or malformed (serve checks before it starts anything)."""
        try:
            self.ssl_context()
        except (OSError, ssl.SSLError) as exc:
            files = ", ".join(
                f for f in (self.ssl_certfile, self.ssl_keyfile, self.ssl_cafile) if f
            )
            raise ValueError(f"TLS files {files}: {exc}") from None
        if self.users_file:
            users = read_users(self.users_file, missing_ok=False)
            if not users:
                raise ValueError(
                    f"{self.users_file} has no users: add one with `groupcoord users add`"
                )


# RFC 4514's short names for the attributes Python's ssl module spells out.
_DN_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_DN_SPECIAL = ',+"\\<>;'


def _dn_value(value: str) -> str:
    escaped = "".join("\\" + c if c in _DN_SPECIAL else c for c in value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def certificate_principal(peer_certificate: dict) -> str:
    """``User:`` and the subject of a verified client certificate (``SSLSocket.getpeercert()``)
    as an RFC 2253 name, most specific part first: ``User:CN=alice,OU=eng,O=acme``."""
    rdns = [
        "+".join(f"{_DN_NAMES.get(k, k)}={_dn_value(v)}" for k, v in rdn)
        for rdn in reversed(peer_certificate.get("subject", ()))
    ]
    return "User:" + ",".join(rdns)


def read_acl_file(path: str) -> AclFile:
    """The ACLs of a ``.toml`` or ``.json`` file; ValueError naming the file and the problem."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ValueError(f"ACL file {path}: {exc.strerror or exc}") from None
    try:
        return parse_acl_file(data, toml=path.endswith(".toml"))
    except ValueError as exc:
        raise ValueError(f"ACL file {path}: {exc}") from None


# -- the users file ---------------------------------------------------------------------------

Users = dict[str, dict[str, ScramCredential]]


class _UsersDocument(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    users: Users = {}


def read_users(path: str, *, missing_ok: bool) -> Users:
    """The users file's credentials; ValueError for a malformed file, or a missing one unless
    ``missing_ok`` (then it has no users)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        if missing_ok:
            return {}
        raise ValueError(
            f"no users file at {path}: create users with `groupcoord users add`"
        ) from None
    except OSError as exc:
        raise ValueError(f"users file {path}: {exc.strerror or exc}") from None
    try:
        users = msgspec.json.decode(data, type=_UsersDocument).users
    except msgspec.DecodeError as exc:
        raise ValueError(f"users file {path}: {exc}") from None
    except RecursionError:  # msgspec's, for brackets nested past its depth limit
        raise ValueError(f"users file {path}: nested too deep") from None
    for name, credentials in users.items():
        for mechanism in credentials:
            if mechanism not in SCRAM_HASHES:
                raise ValueError(f"users file {path}: user {name!r} has unknown {mechanism!r}")
    return users


def _write_users(path: str, users: Users) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".users-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(msgspec.json.format(msgspec.json.encode(_UsersDocument(users))) + b"\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _check_user_name(name: str) -> None:
    too_long = len(name) > MAX_USER_NAME_CHARS
    if not name or too_long or not name.isprintable() or name != name.strip():
        raise ValueError(
            f"user name must be 1-{MAX_USER_NAME_CHARS} printable characters without "
            f"surrounding spaces, got {name!r}"
        )


class UsersFile:
    """Changes to one users file, each read-modify-write under an exclusive lock."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _locked(self):
        directory = os.path.dirname(os.path.abspath(self.path))
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise ValueError(f"users file {self.path}: {directory} is not a directory")
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise ValueError(
                f"users file {self.path}: cannot create {directory}: {exc.strerror or exc}"
            ) from None
        lock = open(self.path + ".lock", "a")  # noqa: SIM115 (closed by the caller's with)
        fcntl.flock(lock, fcntl.LOCK_EX)
        return lock

    def add(
        self,
        name: str,
        password: str,
        mechanisms: Sequence[str] = DEFAULT_SASL_MECHANISMS,
        iterations: int = MIN_ITERATIONS,
    ) -> None:
        """Create or replace ``name``'s credentials for ``mechanisms`` (SCRAM ones; a user's
        SCRAM credentials also check its PLAIN password), each with a fresh random salt."""
        _check_user_name(name)
        if not password:
            raise ValueError("the password must not be empty")
        for mechanism in mechanisms:
            if mechanism not in SCRAM_HASHES:
                raise ValueError(
                    f"credentials are stored for {', '.join(SCRAM_HASHES)} (PLAIN is checked "
                    f"against them), not {mechanism!r}"
                )
        fresh = {
            m: scram_credential(m, password, secrets.token_bytes(SALT_BYTES), iterations)
            for m in dict.fromkeys(mechanisms)
        }
        with self._locked():
            users = read_users(self.path, missing_ok=True)
            users[name] = users.get(name, {}) | fresh
            _write_users(self.path, users)

    def delete(self, name: str) -> None:
        """Remove ``name``; LookupError if there is no such user."""
        with self._locked():
            users = read_users(self.path, missing_ok=True)
            if name not in users:
                raise LookupError(f"no user {name!r} in {self.path}")
            del users[name]
            _write_users(self.path, users)

    def list(self) -> Users:
        return read_users(self.path, missing_ok=True)


class UserStore:
    """A listener's view of the users file: ``lookup(name, mechanism)`` re-reads the file when
    its identity, size or modification time changed, and keeps the last good contents (with a
    warning) if a change cannot be read. Listeners call it from worker threads: two racing
    lookups may both re-read the file, and each sees a whole table either way."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: tuple[int, int, int, int] | None = None
        self._users: Users = read_users(path, missing_ok=False)
        self._seen = self._stamp()

    def _stamp(self) -> tuple[int, int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def lookup(self, name: str, mechanism: str) -> ScramCredential | None:
        stamp = self._stamp()
        if stamp is not None and stamp != self._seen:
            self._seen = stamp  # a bad change is reported once, not on every lookup
            try:
                self._users = read_users(self.path, missing_ok=False)
            except ValueError as exc:
                log.warning("keeping the previous users: %s", exc)
        return self._users.get(name, {}).get(mechanism)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback IP address (a host name is not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_host(host: str, security: ListenerSecurity) -> None:
    """ValueError unless ``host`` is loopback or the listener authenticates its clients."""
    if not host:
        raise ValueError("listener host must not be empty")
    if not is_loopback(host) and not security.authenticates:
        raise ValueError(
            f"listener host {host} is not a loopback address: a non-loopback listener needs "
            f"authentication (security protocol SASL_SSL or SASL_PLAINTEXT, or SSL with client "
            f"certificates from --ssl-cafile; not {security.protocol} without)"
        )
