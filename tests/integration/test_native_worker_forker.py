"""The native backend's worker forker (scaler/worker_manager/baremetal_native/worker_forker.py): forked
workers are named after their unit and serve like any other; when the forker dies, the workers it forked
keep serving and new workers start as commands."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from scaler.config.sections import WorkerConfig
from scaler.worker_manager.backend import LaunchSpec, UnitState
from scaler.worker_manager.baremetal_native.backend import NativeBackend
from scaler.worker_manager.baremetal_native.worker_forker import start_worker_forker, worker_process_name
from tests.integration.conftest import DEADLINE_SECONDS, Launcher, monitor
from tests.integration.manager_harness import (
    forkers_with_setting,
    unit_processes,
    worker_processes_with_setting,
    workers_of,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def poll(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def test_a_dead_forker_leaves_its_workers_serving_and_new_workers_start_as_commands(
    launcher: Launcher, tmp_path: Path
) -> None:
    addresses, _scheduler, _storage = launcher.stack(
        workers=0, scheduler_args=("--policy-content", "allocate=even_load; scaling=no")
    )
    manager_id = f"forker-{uuid.uuid4().hex[:8]}"
    worker = WorkerConfig(
        scheduler_address=addresses.scheduler,
        worker_manager_id=manager_id,
        worker_type="NAT",
        heartbeat_interval_seconds=1,
        logging_paths=(str(tmp_path / "workers.log"),),
    )
    spec = LaunchSpec(manager_id, worker)

    async def scenario() -> None:
        forker = start_worker_forker(worker)
        backend = NativeBackend(manager_id, tmp_path / "units", grace_seconds=5.0, forker=forker)
        try:
            (forked,) = await backend.launch(1, spec)
            agent = next(p for p in unit_processes(forked) if p.name() == worker_process_name(forked))
            assert agent.ppid() == forker.pid, "a forked worker is the forker's child"

            forker.kill()
            await poll(lambda: not forkers_with_setting(manager_id), "the forker to be gone")
            (started,) = await backend.launch(1, spec)
            # started as a command: its own settings, naming the unit, are on its command line
            await poll(lambda: bool(worker_processes_with_setting(f"NAT-{started}")), "the command-started worker")

            with monitor(addresses.monitor) as next_snapshot:
                snapshot = next_snapshot(lambda s: len(workers_of(s, manager_id)) == 2, DEADLINE_SECONDS)
            units = {worker.worker_id.decode().split("|")[1] for worker in workers_of(snapshot, manager_id)}
            assert units == {f"NAT-{forked}", f"NAT-{started}"}
            listed = {unit.unit_id: unit.state for unit in await backend.list_units()}
            assert listed == {forked: UnitState.RUNNING, started: UnitState.RUNNING}

            await backend.terminate([forked, started], "test over")
            await poll(lambda: not unit_processes(forked) and not unit_processes(started), "both units to exit")
        finally:
            await backend.close()

    asyncio.run(scenario())
    assert not worker_processes_with_setting(manager_id)
