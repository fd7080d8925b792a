"""Certificates the TLS tests make for themselves: a certificate authority, server certificates it signs (for
127.0.0.1 and localhost, expired, or for another name), and a second authority nobody trusts. `cryptography` is a
test dependency (pyproject's `test` extra)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ServerFiles:
    cert: str  #: the server's certificate then its authority's (the chain it presents), PEM
    key: str  #: its private key, PEM, unencrypted


@dataclass(frozen=True)
class Authority:
    ca: str  #: the authority's certificate (what connecting sides trust), PEM
    good: ServerFiles  #: for 127.0.0.1 and localhost, valid for a day
    expired: ServerFiles  #: for 127.0.0.1 and localhost, expired yesterday
    wrong_host: ServerFiles  #: valid, for another name only
    untrusted: ServerFiles  #: valid, for 127.0.0.1, signed by an authority nobody was given


def make_authority(folder: Path) -> Authority:
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _authority("scaler-test-ca")
    other_key, other_cert = _authority("scaler-test-other-ca")
    now = datetime.datetime.now(datetime.timezone.utc)
    day = datetime.timedelta(days=1)
    local = ("127.0.0.1", "localhost")
    ca_path = folder / "ca.pem"
    ca_path.write_bytes(_pem(ca_cert))
    return Authority(
        str(ca_path),
        _server(folder, "good", ca_key, ca_cert, local, now - day, now + day),
        _server(folder, "expired", ca_key, ca_cert, local, now - 3 * day, now - day),
        _server(folder, "wrong-host", ca_key, ca_cert, ("scheduler.example.com",), now - day, now + day),
        _server(folder, "untrusted", other_key, other_cert, local, now - day, now + day),
    )


def _authority(name: str) -> tuple[Any, Any]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=10))
        .not_valid_after(now + datetime.timedelta(days=10))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _server(
    folder: Path,
    name: str,
    ca_key: Any,
    ca_cert: Any,
    hosts: tuple[str, ...],
    not_before: datetime.datetime,
    not_after: datetime.datetime,
) -> ServerFiles:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_path, key_path = folder / f"{name}.pem", folder / f"{name}.key"
    cert_path.write_bytes(_pem(cert) + _pem(ca_cert))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)
    return ServerFiles(str(cert_path), str(key_path))


def _pem(cert: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return bytes(cert.public_bytes(serialization.Encoding.PEM))
