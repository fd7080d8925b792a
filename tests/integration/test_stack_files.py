"""#34 item 3: every command that reads a stack file (`scaler FILE`, `scaler_simulate_policy --config FILE`, and
the per-component commands given `-c FILE`) accepts and refuses the same files. A worker manager that names no
`scheduler_address` takes the file's [scheduler] address; without a [scheduler] section every command refuses
the file with the same message. Real processes, real sockets.

Checked by switching the inheritance off (`_inherit_scheduler_address` returning its section unchanged): every
command then refuses the file without addresses, and the tests that run it fail.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from scaler import Client
from tests.integration.conftest import (
    BIN_DIR,
    Addresses,
    Launcher,
    ProcessWatch,
    free_addresses,
    probe_scheduler,
    wait_for_workers,
)

pytestmark = pytest.mark.integration

MANAGER = (
    '[[worker_manager]]\ntype = "baremetal_native"\nworker_manager_id = "local"\nmode = "fixed"\n'
    "max_task_concurrency = 1\n"
)
TRACE = "arrival_seconds,duration_seconds\n0,1\n1,1\n"


def stack_without_manager_addresses(addresses: Addresses) -> str:
    return (
        f'[object_storage_server]\nbind_address = "{addresses.object_storage}"\n\n'
        f'[scheduler]\nbind_address = "{addresses.scheduler}"\nobject_storage_address = "{addresses.object_storage}"\n'
        f'policy_content = "allocate=even_load; scaling=no"\n\n{MANAGER}'
    )


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN_DIR / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=60, cwd=cwd,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def one_task(address: str) -> int:
    with Client(address=address, timeout_seconds=30) as client:
        return int(client.submit(pow, 2, 10).result(timeout=60))


@pytest.mark.timeout(120)
def test_scaler_and_the_policy_simulator_take_a_file_whose_manager_names_no_address(
    tmp_path: Path, processes: ProcessWatch
) -> None:
    addresses = free_addresses()
    (tmp_path / "stack.toml").write_text(stack_without_manager_addresses(addresses))
    (tmp_path / "trace.csv").write_text(TRACE)
    simulated = run("scaler_simulate_policy", "trace.csv", "--config", "stack.toml", "--policy", "config", cwd=tmp_path)
    assert simulated.returncode == 0, simulated.stderr
    assert "managers: local (1 fixed" in simulated.stdout
    stack = processes.add(
        subprocess.Popen(
            [str(BIN_DIR / "scaler"), "stack.toml"], cwd=tmp_path, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
    )  # fmt: skip
    probe_scheduler(addresses.scheduler)
    wait_for_workers(addresses.monitor, 1)
    assert one_task(addresses.scheduler) == 1024
    processes.remember()
    stack.send_signal(signal.SIGTERM)
    output, _ = stack.communicate(timeout=60)
    assert stack.returncode == 0, output
    assert f"worker manager 'local' (baremetal_native) for {addresses.scheduler}" in output


@pytest.mark.timeout(120)
def test_the_per_component_commands_take_the_same_file(tmp_path: Path, launcher: Launcher) -> None:
    addresses = free_addresses()
    path = tmp_path / "stack.toml"
    path.write_text(stack_without_manager_addresses(addresses))
    launcher.start("scaler_object_storage_server", "-c", str(path))
    launcher.start("scaler_scheduler", "-c", str(path))
    probe_scheduler(addresses.scheduler)
    launcher.start("scaler_worker_manager", "-c", str(path))
    wait_for_workers(addresses.monitor, 1)
    assert one_task(addresses.scheduler) == 1024


def test_without_a_scheduler_section_every_command_refuses_the_file_alike(tmp_path: Path) -> None:
    (tmp_path / "managers.toml").write_text(MANAGER)
    (tmp_path / "trace.csv").write_text(TRACE)
    refusals = {
        "scaler": run("scaler", "managers.toml", cwd=tmp_path),
        "scaler_simulate_policy": run("scaler_simulate_policy", "trace.csv", "-c", "managers.toml", cwd=tmp_path),
        "scaler_worker_manager": run("scaler_worker_manager", "-c", "managers.toml", cwd=tmp_path),
    }
    for name, done in refusals.items():
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        assert "missing setting scheduler_address" in done.stderr, (name, done.stderr)
        assert "by a [scheduler] section in managers.toml" in done.stderr, (name, done.stderr)
