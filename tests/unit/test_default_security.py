"""Secure by default without processes: the user's keys (made once, private), which keys a server and a
connecting side take without settings, and how a connection file is found (a wildcard bind from a local address,
an insecure server's file, a remote address)."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from scaler.config.sections import SchedulerConfig, WorkerConfig
from scaler.io.curve import KeyFileError
from scaler.io.default_security import (
    ServedAddresses,
    connecting_security,
    local_key_settings,
    server_security,
    with_discovered_keys,
)
from scaler.io.key_folder import user_keys


@pytest.fixture(autouse=True)
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for name in ("SCALER_CURVE_SECRET_KEY_TEXT", "SCALER_CURVE_SERVER_KEY_TEXT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "scaler"


def test_the_user_keys_are_made_once_private_and_agreed_on_by_racing_processes(config_home: Path) -> None:
    made: list[str] = []
    threads = [threading.Thread(target=lambda: made.append(user_keys().path("server.key"))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    folder = config_home / "keys"
    assert set(made) == {str(folder / "server.key")}
    assert oct(os.stat(folder).st_mode & 0o777) == "0o700"
    assert all(oct(os.stat(p).st_mode & 0o777) == "0o600" for p in folder.glob("*.key_secret"))
    assert sorted(p.name for p in config_home.iterdir()) == ["keys"], "no partial folder left behind"
    assert set(user_keys().authorized_texts()) == {"client.key", "managers/workers.key"}


def test_a_server_without_settings_uses_the_user_keys_and_insecure_warns(caplog: pytest.LogCaptureFixture) -> None:
    resolved = server_security(SchedulerConfig(bind_address="tcp://127.0.0.1:8516"), "the scheduler")
    assert resolved.security is not None and resolved.user_keys is not None
    with caplog.at_level(logging.WARNING):
        plain = server_security(SchedulerConfig(bind_address="tcp://127.0.0.1:8516", insecure=True), "the scheduler")
    assert plain.security is None and plain.insecure
    assert "anyone who can reach its ports can submit tasks" in caplog.text


def test_a_wildcard_bind_is_found_from_local_addresses_with_the_keys_of_each_role() -> None:
    served = server_security({"curve_authorized_keys": None}, "the scheduler")
    with ServedAddresses(served, ["tcp://0.0.0.0:8516"]):
        for address in ("tcp://127.0.0.1:8516", "tcp://localhost:8516"):
            client, worker = local_key_settings(address, "client"), local_key_settings(address, "worker")
            assert client is not None and client["curve_secret_key"].endswith("client.key_secret")
            assert worker is not None and worker["curve_secret_key"].endswith("workers.key_secret")
    assert local_key_settings("tcp://192.0.2.7:8516", "client") is None, "a remote address: plain TCP"


def test_local_sides_of_an_insecure_server_use_no_keys_and_others_the_user_keys() -> None:
    insecure = server_security({"curve_authorized_keys": None, "insecure": True}, "the scheduler")
    with ServedAddresses(insecure, ["tcp://127.0.0.1:8516"]):
        assert connecting_security({}, "tcp://127.0.0.1:8516", "client") is None
        assert connecting_security({}, "tcp://127.0.0.1:9999", "client") is not None, "no file: the user's keys"
    worker = with_discovered_keys(
        WorkerConfig(scheduler_address="tcp://127.0.0.1:9999"), "tcp://127.0.0.1:9999", "worker"
    )
    assert worker.curve_secret_key is not None and worker.curve_secret_key.endswith("workers.key_secret")


def test_keys_that_cannot_be_made_are_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", "/proc/no-such-folder")
    with pytest.raises(KeyFileError, match="cannot read or make the user's CURVE keys"):
        user_keys()
    assert local_key_settings("tcp://127.0.0.1:8516", "client") is None
