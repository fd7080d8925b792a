"""The rehearsal's certificate authority and its API server's certificate (for 127.0.0.1 and localhost), made at each
start, and the kubeconfig that trusts that authority and carries the administrator's token, as a cluster's installer
writes one."""

from __future__ import annotations

import base64
import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Certificates:
    ca_pem: str
    server_pem: str  #: the server's certificate, then the CA's (the chain it presents)
    server_key_pem: str


def make_certificates(hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> Certificates:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "scaler-fake-kubernetes-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return Certificates(
        ca.public_bytes(pem).decode(),
        server.public_bytes(pem).decode() + ca.public_bytes(pem).decode(),
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode(),
    )


def kubeconfig_text(
    server_url: str, ca_pem: str, token: str, context: str = "fake-kubernetes", namespace: str = "default"
) -> str:
    ca = base64.b64encode(ca_pem.encode()).decode()
    return (
        "apiVersion: v1\nkind: Config\npreferences: {}\n"
        f"clusters:\n- name: {context}\n  cluster:\n    server: {server_url}\n    certificate-authority-data: {ca}\n"
        f"users:\n- name: {context}-admin\n  user:\n    token: {token}\n"
        f"contexts:\n- name: {context}\n  context:\n    cluster: {context}\n    user: {context}-admin\n"
        f"    namespace: {namespace}\ncurrent-context: {context}\n"
    )


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner reads (a kubeconfig holds a token; a key is a key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(text)
