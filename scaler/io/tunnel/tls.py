"""TLS for tunnels: a server's context from its certificate and key, a connecting side's context (the system's
certificate authorities, `SSL_CERT_FILE` as Python's own clients honour it, and the CA bundles this process was
given), and one line naming what is wrong with a file or with a peer's certificate."""

from __future__ import annotations

import os
import ssl
import threading
from dataclasses import dataclass


class TlsFileError(ValueError):
    """A certificate, key or CA bundle file that cannot be used: the message names the setting and the file."""


@dataclass(frozen=True)
class ServerCertificate:
    """What a server presents where it binds `tls://` or `wss://`: PEM files (`tls_cert`, `tls_key`)."""

    cert_file: str
    key_file: str


_trusted_lock = threading.Lock()
#: CA bundles this process trusts besides the system's (`tls_ca` settings); inherited by forked processes.
_trusted: list[str] = []
_client_context: ssl.SSLContext | None = None


def trust_ca_file(path: str, setting: str = "tls_ca") -> None:
    """Trust the certificate authorities of the PEM bundle `path` for every TLS connection this process makes, besides
    the system's. Raises TlsFileError naming `setting` and the file when it cannot be used."""
    global _client_context
    path = os.path.abspath(os.path.expanduser(path))
    with _trusted_lock:
        if path in _trusted:
            return
        probe = ssl.create_default_context()
        try:
            probe.load_verify_locations(cafile=path)
        except FileNotFoundError:
            raise TlsFileError(f"{setting} {path}: no such file; give the PEM bundle of the certificate authority "
                               "that signed the server's certificate") from None  # fmt: skip
        except (ssl.SSLError, OSError, ValueError) as error:
            raise TlsFileError(f"{setting} {path}: not a PEM bundle of certificates ({_reason(error)})") from None
        _trusted.append(path)
        _client_context = None


def trusted_ca_files() -> tuple[str, ...]:
    with _trusted_lock:
        return tuple(_trusted)


def client_context() -> ssl.SSLContext:
    """The context of every TLS connection this process opens: server certificates verified against the system's
    authorities (or `SSL_CERT_FILE`/`SSL_CERT_DIR` when set) and the bundles given to `trust_ca_file`, with the
    server's name checked against the address's host."""
    global _client_context
    with _trusted_lock:
        if _client_context is None:
            context = ssl.create_default_context()
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            for path in _trusted:
                context.load_verify_locations(cafile=path)
            _client_context = context
        return _client_context


def server_context(certificate: ServerCertificate) -> ssl.SSLContext:
    """A server's context from its PEM files; TlsFileError naming the setting and the file when they cannot be
    used (missing, not PEM, a key that is not the certificate's, a certificate that has expired)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    for setting, path in (("tls_cert", certificate.cert_file), ("tls_key", certificate.key_file)):
        if not os.path.isfile(path):
            raise TlsFileError(f"{setting} {path}: no such file; give the server's PEM {_WHAT[setting]}")
    try:
        context.load_cert_chain(certificate.cert_file, certificate.key_file)
    except ssl.SSLError as error:
        raise TlsFileError(
            f"tls_cert {certificate.cert_file} with tls_key {certificate.key_file}: {_reason(error)} (the key must "
            "be the certificate's, both PEM, the key unencrypted)"
        ) from None
    except OSError as error:
        raise TlsFileError(f"tls_cert {certificate.cert_file}: {error.strerror or error}") from None
    _check_validity(context, certificate)
    return context


_WHAT = {"tls_cert": "certificate (chain) file", "tls_key": "private key file"}


def _check_validity(context: ssl.SSLContext, certificate: ServerCertificate) -> None:
    """A handshake in memory with a side that trusts the certificate itself: what it refuses (an expired certificate,
    one not yet valid, one not for servers) every client would refuse."""
    checker = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    checker.check_hostname = False
    checker.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    checker.load_verify_locations(cafile=certificate.cert_file)
    client_in, client_out, server_in, server_out = (ssl.MemoryBIO() for _ in range(4))
    client = checker.wrap_bio(client_in, client_out)
    server = context.wrap_bio(server_in, server_out, server_side=True)
    for _ in range(10):
        done = 0
        for end, outgoing, peer_incoming in ((client, client_out, server_in), (server, server_out, client_in)):
            try:
                end.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLCertVerificationError as error:
                raise TlsFileError(f"tls_cert {certificate.cert_file}: {certificate_problem(error)}") from None
            except ssl.SSLError:
                return  # the server side failing after the client's refusal: the client's error is the one said
            peer_incoming.write(outgoing.read())
        if done == 2:
            return


def certificate_problem(error: ssl.SSLCertVerificationError) -> str:
    """What is wrong with a certificate, in words: 'the certificate has expired', 'it is not valid for the name
    x'..."""
    message = str(error.verify_message or error.reason or error)
    lowered = message.lower()
    if "expired" in lowered:
        return "the certificate has expired; renew it"
    if "not yet valid" in lowered:
        return "the certificate is not valid yet (its start date is in the future, or this machine's clock is wrong)"
    if "hostname mismatch" in lowered or "ip address mismatch" in lowered:
        return f"the certificate is not for this host name ({message})"
    if "self-signed" in lowered or "local issuer" in lowered or "unable to get issuer" in lowered:
        return (
            f"the certificate does not verify ({message}): its authority is not trusted here; give the CA bundle "
            "that signed it (the tls_ca setting, or SSL_CERT_FILE)"
        )
    return f"the certificate does not verify ({message})"


def _reason(error: BaseException) -> str:
    reason = getattr(error, "reason", None)
    return str(reason or error).replace("_", " ").lower() if reason else str(error)
