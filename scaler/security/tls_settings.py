"""TLS from a component's settings (docs/security.md): the certificate a server presents where it binds `tls://` or
`wss://` (`tls_cert`, `tls_key`), checked before anything starts, and the certificate authorities a process trusts
when it connects to such an address (`tls_ca`, besides the system's and `SSL_CERT_FILE`'s)."""

from __future__ import annotations

from scaler.io.address import AddressError, parse_address
from scaler.io.tunnel.tls import ServerCertificate, TlsFileError, server_context, trust_ca_file


def server_certificate(settings: object, addresses: tuple[str, ...] = ()) -> ServerCertificate | None:
    """The certificate of a server's settings (None without `tls_cert`), its files checked (present, PEM, the key
    the certificate's, not expired); TlsFileError naming the setting and the file. With `addresses` (those it
    binds), a TLS address without a certificate is refused too. The CA bundle of `tls_ca` is trusted as well (a
    server connects too: the scheduler to its object storage)."""
    trust_settings(settings)
    cert, key = getattr(settings, "tls_cert", None), getattr(settings, "tls_key", None)
    if bool(cert) != bool(key):
        given, missing = ("tls_cert", "tls_key") if cert else ("tls_key", "tls_cert")
        raise TlsFileError(f"{given} is given without {missing}: a server needs both, PEM files")
    if not cert or not key:
        needing = [address for address in addresses if _uses_tls(address)]
        if needing:
            raise TlsFileError(
                f"{needing[0]} is a TLS address: give the server's certificate and key (tls_cert and tls_key, PEM "
                "files; docs/security.md says how to make them)"
            )
        return None
    certificate = ServerCertificate(str(cert), str(key))
    server_context(certificate)
    return certificate


def trust_settings(settings: object) -> None:
    """Trust the CA bundle a component's `tls_ca` setting names, in this process (and those it forks); TlsFileError
    naming it when it cannot be used."""
    bundle = getattr(settings, "tls_ca", None)
    if bundle:
        trust_ca_file(str(bundle))


def _uses_tls(address: str) -> bool:
    try:
        return parse_address(address).uses_tls
    except AddressError:
        return False
