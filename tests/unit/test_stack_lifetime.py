"""A `scaler FILE` stack's lifetime and keys (#28 items 3-4), the parts that need no process: when it stops by
itself, where local clients find its keys, which of a client's modules travel by value."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import cloudpickle
import pytest

from scaler.cluster.autostop import AutoStop
from scaler.payload.local_modules import is_local, register_local_modules
from scaler.protocol import messages as m
from scaler.security.connection_files import (
    SCHEDULER_SERVICE,
    discovered_connection,
    discovered_security,
    register_connection,
    unregister_connection,
)
from scaler.security.key_folder import stack_keys

ADDRESS = "tcp://127.0.0.1:8516"


def snapshot(queued: int = 0, clients: int = 0) -> m.StatusSnapshot:
    return m.StatusSnapshot(
        time=0.0, scheduler=m.SchedulerStats(queued=queued), clients=tuple(m.ClientSummary(b"c%d" % n) for n in
                                                                           range(clients)),
    )  # fmt: skip


def test_an_idle_stack_stops_after_its_idle_time_counted_from_the_last_work() -> None:
    stop = AutoStop(idle_seconds=60, no_client_seconds=0, started_at=0)
    stop.observe(snapshot(queued=3, clients=1), 30)
    assert stop.reason(89) is None
    assert stop.reason(90) == "no task queued or running for 60 s (idle_shutdown_seconds)"


def test_a_stack_without_clients_stops_and_both_clocks_start_with_the_stack() -> None:
    stop = AutoStop(idle_seconds=0, no_client_seconds=10, started_at=100)
    assert stop.reason(109) is None and stop.reason(110) is not None, "nobody ever came"
    stop.observe(snapshot(clients=1), 110)
    assert stop.reason(119) is None
    assert not AutoStop(0, 0, 0).enabled and AutoStop(0, 0, 0).reason(10**9) is None


def test_local_clients_find_the_keys_of_a_running_stack_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    keys = stack_keys("stack")
    assert oct(os.stat(keys.folder).st_mode & 0o777) == "0o700"
    assert stack_keys("stack").path("server.key") == keys.path("server.key"), "made once, kept"
    assert set(keys.authorized_texts()) == {"client.key", "managers/workers.key"}
    assert discovered_security(ADDRESS) is None
    register_connection({SCHEDULER_SERVICE: ADDRESS}, keys, ship_local_modules=True)
    security = discovered_security(ADDRESS)
    assert security is not None and discovered_connection(ADDRESS) is not None
    connection = next((tmp_path / "scaler" / "connections").glob("*.json"))
    assert oct(os.stat(connection).st_mode & 0o777) == "0o600"
    record = json.loads(connection.read_text())
    connection.write_text(json.dumps({**record, "pid": 2**22 + 12345}))  # its launcher is gone
    assert discovered_security(ADDRESS) is None
    unregister_connection([ADDRESS])
    assert connection.exists(), "another process's connection file is not this process's to remove"
    connection.write_text(json.dumps(record))
    unregister_connection([ADDRESS])
    assert not connection.exists()


def test_only_modules_nothing_installs_travel_by_value(tmp_path: Path) -> None:
    local = types.ModuleType("notebook_helpers")
    local.__file__ = str(tmp_path / "notebook_helpers.py")
    assert is_local(local)
    assert not is_local(json) and not is_local(pytest) and not is_local(sys.modules["scaler"])
    assert not is_local(sys.modules["__main__"])


def test_a_module_standing_in_under_another_name_is_not_shipped_by_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """scaler.compat.ray stands in for `ray` (sys.modules["ray"]): shipping it by value would ship its `ray.util`,
    which a processor without the alias imports by name and cannot find (seen as ModuleNotFoundError: 'ray')."""
    stand_in = types.ModuleType("scaler.compat.stand_in")
    stand_in.__file__ = str(tmp_path / "stand_in.py")
    renamed = types.ModuleType("helpers_by_another_name")
    renamed.__file__ = str(tmp_path / "helpers.py")
    local = types.ModuleType("notebook_helpers_here")
    local.__file__ = str(tmp_path / "notebook_helpers_here.py")
    monkeypatch.setitem(sys.modules, "stand_in", stand_in)
    monkeypatch.setitem(sys.modules, "alias", renamed)
    monkeypatch.setitem(sys.modules, "notebook_helpers_here", local)
    try:
        register_local_modules()
        registry = cloudpickle.list_registry_pickle_by_value()
        assert "notebook_helpers_here" in registry, "a local module of its own name travels"
        assert not {"scaler.compat.stand_in", "helpers_by_another_name", "alias"} & registry
        assert not is_local(stand_in), "no scaler module is the user's"
    finally:
        for module in (stand_in, renamed, local):
            if module.__name__ in cloudpickle.list_registry_pickle_by_value():
                cloudpickle.unregister_pickle_by_value(module)
