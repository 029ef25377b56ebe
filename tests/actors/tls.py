"""A self-signed TLS certificate for 127.0.0.1 and localhost, made at test time with the openssl
command-line tool (clients verify the host name, hence the subject alternative names)."""

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
