"""A self-signed certificate for the tests' private TLS servers (openssl, as Debian
ships it): one file serves as the server's certificate and as the CA a client trusts."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certificate:
    cert: Path
    key: Path


def self_signed(directory: Path, host: str = "127.0.0.1") -> Certificate:
    """A certificate for `host` (an IP address), valid for a day, written to directory."""
    directory.mkdir(parents=True, exist_ok=True)
    made = Certificate(cert=directory / "cert.pem", key=directory / "key.pem")
    request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    request += ["-keyout", str(made.key), "-out", str(made.cert), "-subj", f"/CN={host}"]
    request += ["-addext", f"subjectAltName=IP:{host}"]
    subprocess.run(request, check=True, capture_output=True)
    return made
