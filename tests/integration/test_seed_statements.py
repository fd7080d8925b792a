"""#13: what the seeds say of our commands is true of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from scaler import Client
from tests.integration.conftest import Launcher, free_addresses, probe_scheduler, wait_for

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
COMMANDS = [
    "scaler", "scaler_scheduler", "scaler_object_storage_server", "scaler_cluster", "scaler_worker_manager",
    "scaler_worker", "scaler_worker_adapter_native", "scaler_worker_adapter_symphony", "scaler_top",
    "scaler_fake_cloud",
]  # fmt: skip


def run(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_says_its_version(command: str) -> None:
    from scaler import __version__

    result = run(command, "--version")
    assert result.returncode == 0 and __version__ in result.stdout


@pytest.mark.timeout(60)
def test_the_scheduler_is_protected_by_default_and_names_its_monitor_address(launcher: Launcher) -> None:
    addresses = free_addresses()
    launcher.object_storage(addresses.object_storage)
    scheduler = launcher.start("scaler_scheduler", addresses.scheduler, "-osa", addresses.object_storage)
    probe_scheduler(addresses.scheduler)
    assert f"Scheduler: monitor address is {addresses.monitor}" in scheduler.log_text()
    with Client(address=addresses.scheduler) as client, pytest.raises(ValueError, match="protected"):
        client.shutdown()
    assert scheduler.is_running()


@pytest.mark.parametrize("address", ["127.0.0.1:8516", "tcp://127.0.0.1", "http://127.0.0.1:8516"])
def test_a_malformed_address_is_a_configuration_error_with_exit_code_2(address: str) -> None:
    for command in ("scaler_scheduler", "scaler_worker", "scaler_object_storage_server"):
        result = run(command, address)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert "tcp://HOST:PORT" in result.stdout + result.stderr


def test_the_config_file_may_come_before_the_manager_type_or_name_it(tmp_path: Path) -> None:
    path = tmp_path / "manager.toml"
    path.write_text('[[worker_manager]]\ntype = "baremetal_native"\nscheduler_address = "127.0.0.1:1"\n')
    for argv in (["-c", str(path), "baremetal_native"], ["-c", str(path)], ["--config", str(path)]):
        result = run("scaler_worker_manager", *argv)
        assert result.returncode == 2, result.stderr
        assert "malformed address '127.0.0.1:1'" in result.stdout + result.stderr  # the file was read


def test_a_manager_type_this_version_does_not_run_is_refused_before_anything_starts(tmp_path: Path) -> None:
    addresses = free_addresses()
    path = tmp_path / "stack.toml"
    path.write_text(
        f'[object_storage_server]\nbind_address = "{addresses.object_storage}"\n'
        f'[scheduler]\nbind_address = "{addresses.scheduler}"\nobject_storage_address = "{addresses.object_storage}"\n'
        f'[[worker_manager]]\ntype = "not_a_backend"\nscheduler_address = "{addresses.scheduler}"\n'
    )
    result = run("scaler", str(path))
    assert result.returncode == 2
    assert "not_a_backend" in result.stderr
    assert not [p for p in psutil.process_iter(["cmdline"]) if addresses.scheduler in " ".join(p.info["cmdline"] or [])]


@pytest.mark.timeout(90)
def test_python_dash_m_scaler_entry_point_runs_a_stack_like_the_scaler_command(tmp_path: Path) -> None:
    addresses = free_addresses()
    path = tmp_path / "stack.toml"
    path.write_text(
        f'[object_storage_server]\nbind_address = "{addresses.object_storage}"\n'
        f'[scheduler]\nbind_address = "{addresses.scheduler}"\nobject_storage_address = "{addresses.object_storage}"\n'
        f'[[worker_manager]]\ntype = "baremetal_native"\nscheduler_address = "{addresses.scheduler}"\n'
        f'mode = "fixed"\nmax_task_concurrency = 1\nworker_manager_id = "seed"\n'
    )
    stack = subprocess.Popen([sys.executable, "-m", "scaler.entry_points.scaler", str(path)])
    try:
        probe_scheduler(addresses.scheduler)
        with Client(address=addresses.scheduler) as client:
            assert client.submit(pow, 2, 10).result(timeout=60) == 1024
    finally:
        stack.terminate()
        assert stack.wait(60) == 0

    def left() -> list[psutil.Process]:
        return [p for p in psutil.process_iter(["cmdline"]) if str(path) in " ".join(p.info["cmdline"] or [])]

    wait_for(lambda: not left(), "every process of the stack to be gone", 10)
