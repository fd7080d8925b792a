"""`scaler FILE --down`: list and terminate whatever the cloud managers of FILE left in the cloud (their units and
the stack's hub), found by the tags every unit carries, for a launcher that was killed or a laptop that never came
back. It needs only the file and the credentials; it waits until the units have stopped (at most `WAIT_SECONDS`).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from scaler.cluster.cloud_units import backend_of, cloud_managers, hub_settings
from scaler.config.loader import LauncherFile

WAIT_SECONDS = 300.0
POLL_SECONDS = 2.0


def take_down(file: LauncherFile) -> int:
    """Terminate every live unit of the file's cloud managers and their hub; exit code 0 when none is left."""
    managers = cloud_managers(file)
    if not managers:
        print("scaler: the file has no cloud worker manager: nothing runs in the cloud for it")
        return 0
    backends: list[tuple[str, Any]] = []
    for manager in managers:
        backends.append((manager.worker_manager_id, backend_of(manager, image_mode=True)))
        hub = hub_settings(manager)
        backends.append((hub.worker_manager_id, backend_of(hub, image_mode=True)))
    return asyncio.run(_take_down(backends))


async def _take_down(backends: list[tuple[str, Any]]) -> int:
    found = 0
    for manager_id, backend in backends:
        alive = [unit for unit in await backend.list_units() if unit.is_alive]
        for unit in alive:
            print(f"scaler: {manager_id}: unit {unit.unit_id} {unit.state.value} ({unit.detail})", flush=True)
        if alive:
            found += len(alive)
            await backend.terminate([unit.unit_id for unit in alive], "scaler FILE --down")
    if not found:
        print("scaler: nothing of this file runs in the cloud", flush=True)
        return 0
    print(f"scaler: terminating {found} unit(s)", flush=True)
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        left = [unit for _, backend in backends for unit in await backend.list_units() if unit.is_alive]
        if not left:
            print("scaler: every unit is terminated", flush=True)
            return 0
        await asyncio.sleep(POLL_SECONDS)
    print(f"scaler: {len(left)} unit(s) still stopping after {WAIT_SECONDS:g} s", file=sys.stderr, flush=True)
    return 1
