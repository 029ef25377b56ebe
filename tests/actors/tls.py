"""TLS certificates made at test time with the openssl command-line tool: a self-signed one for
127.0.0.1 and localhost (clients verify the host name, hence the subject alternative names),
which also serves as the CA of client certificates."""

from __future__ import annotations

import pathlib
import subprocess


def self_signed_cert(directory: pathlib.Path) -> tuple[str, str]:
    """(certificate file, private key file), both PEM, valid for one day."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


def signed_client_cert(
    directory: pathlib.Path, ca_cert: str, ca_key: str, subject: str
) -> tuple[str, str]:
    """(certificate file, key file) for ``subject`` (``/O=acme/CN=carol``), signed by the CA."""
    name = subject.strip("/").replace("/", "_").replace("=", "-")
    cert, key, request = (directory / f"{name}.{x}" for x in ("pem", "key", "csr"))
    subprocess.run(
        [
            "openssl",
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(request),
            "-subj",
            subject,
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            "openssl",
            "x509",
            "-req",
            "-in",
            str(request),
            "-CA",
            ca_cert,
            "-CAkey",
            ca_key,
            "-CAcreateserial",
            "-out",
            str(cert),
            "-days",
            "1",
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)
