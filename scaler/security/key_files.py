"""CURVE key files: ZeroMQ certificates made by `scaler_keygen DIR NAME`, `NAME.key` (public) and
`NAME.key_secret` (secret, mode 0600), and the same certificates given as text (an environment variable, a cloud
secret). Every function raises KeyFileError naming the file and what to do."""

from __future__ import annotations

import os
from pathlib import Path


class KeyFileError(ValueError):
    """A key file or folder that cannot be used; the message names it and says why."""


def read_key_pair(path: str) -> tuple[bytes, bytes]:
    """(public, secret) from a secret key file (`NAME.key_secret`)."""
    public, secret = _load(path)
    if secret is None:
        raise KeyFileError(f"{path}: this is a public key file; give the secret one (NAME.key_secret)")
    return public, secret


def read_public_key(path: str) -> bytes:
    """The public key of a key file (a public `NAME.key`; a secret file is refused, not to spread it)."""
    public, secret = _load(path)
    if secret is not None:
        raise KeyFileError(
            f"{path}: this is a secret key file; give the public one (NAME.key) and keep the secret one private"
        )
    return public


def _load(path: str) -> tuple[bytes, bytes | None]:
    import zmq.auth

    if not os.path.isfile(path):
        raise KeyFileError(f"{path}: no such key file (make keys with `scaler_keygen DIR NAME`)")
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as error:
        raise KeyFileError(f"{path}: not a ZeroMQ certificate ({error})") from None
    if public is None or len(public) != 40:
        raise KeyFileError(f"{path}: not a ZeroMQ certificate (no 40-character public key)")
    return public, secret


def read_key_text(text: str, source: str) -> tuple[bytes, bytes | None]:
    """(public, secret or None) from a certificate's text (a key file's content, e.g. from an environment
    variable or a cloud secret); `source` names where it came from in errors."""
    public = secret = None
    for line in text.splitlines():
        name, equals, value = line.strip().partition("=")
        if not equals:
            continue
        value = value.strip().strip('"')
        if name.strip() == "public-key":
            public = value.encode()
        elif name.strip() == "secret-key":
            secret = value.encode()
    if public is None or len(public) != 40 or (secret is not None and len(secret) != 40):
        raise KeyFileError(f"{source}: not a ZeroMQ certificate (no 40-character public-key line)")
    return public, secret


def make_key_pair(folder: str, name: str) -> tuple[Path, Path]:
    """`folder/name.key` and `folder/name.key_secret` (mode 0600); returns (public, secret) paths."""
    import zmq.auth

    os.makedirs(folder, exist_ok=True)
    public, secret = zmq.auth.create_certificates(folder, name)
    os.chmod(secret, 0o600)
    return Path(public), Path(secret)
