"""CURVE key files: made by scaler_keygen's function, read back, and every bad file refused naming it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from scaler.io.curve import KeyFileError, authorized_keys, curve_security, make_key_pair, read_key_pair, read_public_key


def test_a_key_pair_is_made_with_a_private_secret_and_read_back(tmp_path: Path) -> None:
    public, secret = make_key_pair(str(tmp_path), "alice")
    assert (public.name, secret.name) == ("alice.key", "alice.key_secret")
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    pair = read_key_pair(str(secret))
    assert read_public_key(str(public)) == pair[0] and len(pair[1]) == 40
    assert authorized_keys(str(tmp_path)) == {pair[0]}


def test_bad_key_files_are_refused_naming_the_file(tmp_path: Path) -> None:
    public, secret = make_key_pair(str(tmp_path), "bob")
    garbage = tmp_path / "garbage.key"
    garbage.write_text("this is not a certificate\n")
    with pytest.raises(KeyFileError, match=f"{tmp_path / 'missing.key_secret'}: no such key file"):
        read_key_pair(str(tmp_path / "missing.key_secret"))
    with pytest.raises(KeyFileError, match=f"{garbage}: not a ZeroMQ certificate"):
        read_public_key(str(garbage))
    with pytest.raises(KeyFileError, match="this is a public key file; give the secret one"):
        read_key_pair(str(public))
    with pytest.raises(KeyFileError, match="this is a secret key file; give the public one"):
        read_public_key(str(secret))
    with pytest.raises(KeyFileError, match="no such folder of authorised public keys"):
        curve_security(str(secret), None, str(tmp_path / "nowhere"))
    with pytest.raises(KeyFileError, match="--curve-server-key"):
        curve_security(str(secret))
    assert curve_security(None) is None
