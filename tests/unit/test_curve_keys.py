"""CURVE key files: made by scaler_keygen's function, read back, and every bad file refused naming it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from scaler.security.authorized_folder import AuthorizedFolder, authorized_keys
from scaler.security.curve import (
    SECRET_KEY_TEXT_VARIABLE,
    SERVER_KEY_TEXT_VARIABLE,
    curve_security,
    key_texts,
    security_from_environment,
    security_of,
)
from scaler.security.key_files import KeyFileError, make_key_pair, read_key_pair, read_public_key
from scaler.security.roles import may_connect, scheduler_refusal, storage_refusal


def test_a_key_pair_is_made_with_a_private_secret_and_read_back(tmp_path: Path) -> None:
    public, secret = make_key_pair(str(tmp_path), "alice")
    assert (public.name, secret.name) == ("alice.key", "alice.key_secret")
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    pair = read_key_pair(str(secret))
    assert read_public_key(str(public)) == pair[0] and len(pair[1]) == 40
    assert authorized_keys(str(tmp_path)) == {pair[0]: frozenset({"client"})}


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


def test_where_a_key_sits_in_the_authorised_folder_is_its_role(tmp_path: Path) -> None:
    keys, authorized = tmp_path / "keys", tmp_path / "authorized"
    pairs = {name: read_key_pair(str(make_key_pair(str(keys), name)[1]))[0] for name in ("al", "pool", "mgr", "eye")}
    for name, place in (("al", ""), ("pool", "workers"), ("mgr", "managers"), ("eye", "monitors"), ("al", "clients")):
        (authorized / place).mkdir(parents=True, exist_ok=True)
        (authorized / place / f"{name}.key").write_bytes((keys / f"{name}.key").read_bytes())
    roles = authorized_keys(str(authorized))
    assert roles == {pairs["al"]: frozenset({"client"}), pairs["pool"]: frozenset({"worker"}),
                     pairs["mgr"]: frozenset({"manager"}), pairs["eye"]: frozenset({"monitor"})}  # fmt: skip
    client, worker, manager, monitor = (roles[pairs[n]] for n in ("al", "pool", "mgr", "eye"))
    # a client key registers as a client only; the worker side may also open clients (nested tasks)
    assert scheduler_refusal(client, "client") is None
    assert "may not connect as a worker" in (scheduler_refusal(client, "worker") or "")
    assert "managers/" in (scheduler_refusal(worker, "manager") or "")
    assert all(scheduler_refusal(manager, role) is None for role in ("manager", "worker", "processor", "client"))
    # a worker's processors link to the scheduler with its keys; a client's key may not
    assert scheduler_refusal(worker, "processor") is None
    assert "workers/" in (scheduler_refusal(client, "processor") or "")
    assert scheduler_refusal(monitor, "client") is not None
    assert storage_refusal(client, "processor") is not None and storage_refusal(worker, "processor") is None
    assert storage_refusal(client, "scheduler") is not None
    assert "revoked" in (scheduler_refusal(frozenset(), "client") or "")
    # a monitor-only key finishes a handshake with the monitor feed alone
    assert may_connect(monitor, "monitor") and not may_connect(monitor, "")
    assert may_connect(client, "monitor") and may_connect(client, "") and not may_connect(frozenset(), "monitor")


def test_the_folder_view_follows_additions_and_removals(tmp_path: Path) -> None:
    server_public = read_key_pair(str(make_key_pair(str(tmp_path / "keys"), "server")[1]))[0]
    public = read_key_pair(str(make_key_pair(str(tmp_path / "keys"), "alice")[1]))[0]
    authorized = tmp_path / "authorized"
    authorized.mkdir()
    view = AuthorizedFolder(str(authorized), server=server_public)
    assert not view.callback("", public) and view.roles_of(server_public) == frozenset({"server"})
    (authorized / "workers").mkdir()
    (authorized / "workers" / "alice.key").write_bytes((tmp_path / "keys" / "alice.key").read_bytes())
    assert view.callback("", public)  # a handshake always reads the folder afresh
    assert view.roles_of(public) == frozenset({"worker"})
    (authorized / "workers" / "alice.key").unlink()
    assert not view.callback("", public) and view.roles_of(public) == frozenset()


def test_a_connecting_side_takes_its_keys_from_text_variables(tmp_path: Path) -> None:
    make_key_pair(str(tmp_path), "server")
    make_key_pair(str(tmp_path), "pool")
    security = curve_security(str(tmp_path / "pool.key_secret"), str(tmp_path / "server.key"))
    assert security is not None
    texts = key_texts(security)
    shipped = security_from_environment(texts)
    assert shipped is not None
    assert (shipped.public, shipped.secret, shipped.server_public) == (
        security.public,
        security.secret,
        security.server_public,
    )
    # the file's own text works too (what a cloud secret holds)
    files = {SECRET_KEY_TEXT_VARIABLE: (tmp_path / "pool.key_secret").read_text(),
             SERVER_KEY_TEXT_VARIABLE: (tmp_path / "server.key").read_text()}  # fmt: skip
    from_files = security_from_environment(files)
    assert from_files is not None and from_files.secret == security.secret
    assert security_from_environment({}) is None
    with pytest.raises(KeyFileError, match=f"{SERVER_KEY_TEXT_VARIABLE} is not set"):
        security_from_environment({SECRET_KEY_TEXT_VARIABLE: texts[SECRET_KEY_TEXT_VARIABLE]})
    with pytest.raises(KeyFileError, match="holds a public key"):
        security_from_environment({**texts, SECRET_KEY_TEXT_VARIABLE: texts[SERVER_KEY_TEXT_VARIABLE]})
    with pytest.raises(KeyFileError, match="holds a secret key"):
        security_from_environment({**texts, SERVER_KEY_TEXT_VARIABLE: texts[SECRET_KEY_TEXT_VARIABLE]})
    with pytest.raises(KeyFileError, match=f"{SECRET_KEY_TEXT_VARIABLE}: not a ZeroMQ certificate"):
        security_from_environment({**texts, SECRET_KEY_TEXT_VARIABLE: "garbage"})


def test_servers_never_take_keys_from_the_text_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    make_key_pair(str(tmp_path), "server")
    security = curve_security(str(tmp_path / "server.key_secret"), str(tmp_path / "server.key"))
    assert security is not None
    for name, value in key_texts(security).items():
        monkeypatch.setenv(name, value)
    assert security_of({"curve_secret_key": None, "curve_authorized_keys": None}) is None
    assert security_of({"curve_secret_key": None, "curve_server_key": None}) is not None
