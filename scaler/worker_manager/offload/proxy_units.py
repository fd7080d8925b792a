"""The units of an offloading manager: local proxy worker processes, started and stopped by the native
backend (records, adoption after a manager restart, graceful stop), with two differences:

- a unit runs `offload.proxy_process` (with the manager's settings) instead of a plain worker, and has as
  many task slots as the manager allows jobs in flight per proxy (`workers_per_unit`);
- when a proxy is found gone (killed, crashed) the jobs it had started are cancelled (`cancel_orphans`),
  so no remote job runs on without an owner; its tasks are re-dispatched by the scheduler like any dead
  worker's. A proxy stopped gracefully cancels its own jobs.

`run_offload_manager` is the whole of an offloading manager type's `run`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from scaler.config.manager_types import ManagerType, manager_type_of
from scaler.config.sections import WorkerManagerSettings, section_to_json
from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.worker_manager.backend import LaunchSpec, UnitInfo, UnitState, worker_type_for_unit
from scaler.worker_manager.baremetal_native.backend import NativeBackend
from scaler.worker_manager.baremetal_native.unit_records import state_directory_for
from scaler.worker_manager.offload.backend import OffloadError
from scaler.worker_manager.process import run_manager, settings_problem
from scaler.worker_manager.registry import offload_backend_factory

logger = logging.getLogger(__name__)

PROXY_MODULE = "scaler.worker_manager.offload.proxy_process"


class ProxyUnitBackend:
    def __init__(self, native: NativeBackend, row: ManagerType, settings: WorkerManagerSettings, slots: int) -> None:
        self._native = native
        self._row = row
        self._settings = settings
        self._slots = slots
        self._reaped: set[str] = set()

    @property
    def workers_per_unit(self) -> int:
        return self._slots

    async def launch(self, count: int, spec: LaunchSpec) -> list[str]:
        arguments = (self._row.name, section_to_json(self._settings), str(self._slots))
        return await self._native.launch(
            count, dataclasses.replace(spec, module=PROXY_MODULE, module_arguments=arguments)
        )

    async def list_units(self) -> list[UnitInfo]:
        units = await self._native.list_units()
        for unit in units:
            if unit.state is UnitState.GONE and unit.unit_id not in self._reaped:
                self._reaped.add(unit.unit_id)
                await self._cancel_orphans(unit.unit_id)
        return units

    async def terminate(self, unit_ids: list[str], reason: str) -> None:
        await self._native.terminate(unit_ids, reason)

    async def close(self) -> None:
        await self._native.close()

    async def _cancel_orphans(self, unit_id: str) -> None:
        prefix = worker_type_for_unit(self._row.worker_type, unit_id)
        try:
            backend = offload_backend_factory(self._row)(self._settings)
            cancelled = await asyncio.to_thread(backend.cancel_orphans, prefix)
            await asyncio.to_thread(backend.close)
        except Exception as error:  # logged; the remote system's own timeout ends those jobs eventually
            logger.warning("could not cancel the jobs of proxy %s, which is gone: %s", prefix, error)
            return
        if cancelled:
            logger.warning("proxy %s is gone: cancelled %d job(s) it had started", prefix, cancelled)


def unapplied_settings(config: WorkerManagerSettings, row: ManagerType) -> str | None:
    """What an offloading manager says, as a warning, of the processor settings it was given: its tasks run in the
    remote system's processes (a Batch job, a Symphony service), where no zygote imports and no preload runs."""
    given = [f"--{name.replace('_', '-')}" for name in ("preload", "preimport") if getattr(config, name)]
    if not given or row.offload is None:
        return None
    verb, state = ("does", "is") if len(given) == 1 else ("do", "are")
    return (
        f"{' and '.join(given)} {verb} not apply to the {row.name} worker manager and {state} ignored: each task "
        f"runs in {row.offload.system_name}'s own process, not in a scaler processor; import or set up what the task "
        "needs in the task's function"
    )


def run_offload_manager(config: WorkerManagerSettings, slots: int) -> int:
    """Run an offloading manager (the type `config` is of): proxies of `slots` task slots each, as many as the
    scheduler's target needs, their ids prefixed with the type's worker type (`Worker|BAT-<unit id>|...`)."""
    row = manager_type_of(config)
    problem = settings_problem(config, row.worker_type)
    if problem is not None:
        logger.error("%s", problem)
        return EXIT_CONFIGURATION
    ignored = unapplied_settings(config, row)
    if ignored is not None:
        logger.warning("%s", ignored)
    try:
        offload_backend_factory(row)(config).close()  # the remote system is reachable and the settings are usable
    except OffloadError as error:
        logger.error("%s", error)
        return EXIT_CONFIGURATION
    native = NativeBackend(
        config.worker_manager_id, state_directory_for(config.worker_manager_id, config.scheduler_address),
        workers_per_unit=slots,
    )  # fmt: skip
    return run_manager(config, ProxyUnitBackend(native, row, config, slots))
