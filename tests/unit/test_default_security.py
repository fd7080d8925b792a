"""Secure by default without processes: the user's keys (made once, private), which keys a server and a
connecting side take without settings, and how a connection file is found (a wildcard bind from a local address,
an insecure server's file, a remote address)."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import pytest

from scaler.config.sections import SchedulerConfig, WorkerConfig
from scaler.security.connection_files import (
    MONITOR_SERVICE,
    SCHEDULER_SERVICE,
    discovered_connection,
    register_connection,
    unregister_connection,
)
from scaler.security.find import ServedAddresses, find_keys, local_key_settings, server_keys, with_discovered_keys
from scaler.security.key_files import KeyFileError
from scaler.security.key_folder import stack_keys, user_keys


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
    resolved = server_keys(SchedulerConfig(bind_address="tcp://127.0.0.1:8516"), "the scheduler")
    assert resolved.security is not None and resolved.user_keys is not None
    with caplog.at_level(logging.WARNING):
        plain = server_keys(SchedulerConfig(bind_address="tcp://127.0.0.1:8516", insecure=True), "the scheduler")
    assert plain.security is None and plain.insecure
    assert "anyone who can reach its ports can submit tasks" in caplog.text


def test_a_wildcard_bind_is_found_from_local_addresses_with_the_keys_of_each_role() -> None:
    served = server_keys({"curve_authorized_keys": None}, "the scheduler")
    with ServedAddresses(served, {SCHEDULER_SERVICE: "tcp://0.0.0.0:8516"}):
        for address in ("tcp://127.0.0.1:8516", "tcp://localhost:8516"):
            client, worker = local_key_settings(address, "client"), local_key_settings(address, "worker")
            assert client is not None and client["curve_secret_key"].endswith("client.key_secret")
            assert worker is not None and worker["curve_secret_key"].endswith("workers.key_secret")
    assert local_key_settings("tcp://192.0.2.7:8516", "client") is None, "a remote address: plain TCP"


def test_local_sides_of_an_insecure_server_use_no_keys_and_others_the_user_keys() -> None:
    insecure = server_keys({"curve_authorized_keys": None, "insecure": True}, "the scheduler")
    with ServedAddresses(insecure, {SCHEDULER_SERVICE: "tcp://127.0.0.1:8516"}):
        assert find_keys("client", "tcp://127.0.0.1:8516").security is None
        assert find_keys("client", "tcp://127.0.0.1:9999").security is not None, "no file: the user's keys"
    worker = with_discovered_keys(
        WorkerConfig(scheduler_address="tcp://127.0.0.1:9999"), "tcp://127.0.0.1:9999", "worker"
    )
    assert worker.curve_secret_key is not None and worker.curve_secret_key.endswith("workers.key_secret")


def test_keys_that_cannot_be_made_are_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", "/proc/no-such-folder")
    with pytest.raises(KeyFileError, match="cannot read or make the user's CURVE keys"):
        user_keys()
    assert local_key_settings("tcp://127.0.0.1:8516", "client") is None


def test_a_starting_stack_publishes_its_keys_and_the_service_at_each_address() -> None:
    """A cloud stack registers its connection files before its hub boots (`starting_until`): a side that looks
    then finds the stack's keys and that it is starting (it waits instead of guessing the user's keys), and each
    file says which service answers at its address and where the others are (a side at the wrong port is told).
    Checked by hand: without the early registration, find_keys gives the user's keys here."""
    keys = stack_keys("starting")
    services = {SCHEDULER_SERVICE: "tcp://127.0.0.1:8516", MONITOR_SERVICE: "tcp://127.0.0.1:8518"}
    register_connection(services, keys, ship_local_modules=True, starting_until=time.time() + 60)
    try:
        found = find_keys("client", "tcp://127.0.0.1:8516")
        assert found.starting and not found.fixed and found.ship_local_modules
        assert found.source.startswith("the connection file") and found.security is not None
        assert found.same_keys(find_keys("client", "tcp://localhost:8516")), "one stack, one key pair"
        assert discovered_connection("tcp://127.0.0.1:8516") is None, "not up yet for those who need it up"
        monitor = find_keys("client", "tcp://127.0.0.1:8518")
        assert monitor.wrong_service(SCHEDULER_SERVICE) == (
            "tcp://127.0.0.1:8518 is the monitor address of a scaler server, not a scheduler; the scheduler is at "
            "tcp://127.0.0.1:8516"
        )
        assert found.wrong_service(SCHEDULER_SERVICE) is None
        register_connection(services, keys, ship_local_modules=True)  # the stack is up
        assert not found.again().starting and discovered_connection("tcp://127.0.0.1:8516") is not None
    finally:
        unregister_connection(list(services.values()))
    assert not find_keys("client", "tcp://127.0.0.1:8516").same_keys(found), "gone: the user's keys again"


def test_given_keys_are_never_found_again() -> None:
    given = find_keys("client", "tcp://127.0.0.1:8516", user_keys().connecting_settings("client"))
    assert given.fixed and given.again() is given
