"""The program a cloud unit runs once booted: a pool of workers of one manager, connected straight to the
scheduler, whose lease is the scheduler link (docs/guide/bursting.md, "Nothing left running")."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from scaler.config.sections import WorkerConfig, section_to_json
from scaler.worker_manager.aws.unit_keys import unit_key_texts, without_key_paths
from scaler.worker_manager.backend import LaunchSpec

#: The module a unit runs (docs/worker_managers.md shows the container image that provides it).
POOL_MODULE = "scaler.worker_manager.baremetal_native.fixed_pool"
#: How long a unit's workers wait for a scheduler that closed their connection (a restarted one) before they
#: leave: short, so that a unit whose scheduler is gone ends soon after its lease.
UNIT_SCHEDULER_LOST_GRACE_SECONDS = 30.0


def unit_worker_config(spec: LaunchSpec, unit_id: str, lease_seconds: float) -> WorkerConfig:
    """A unit's worker settings: the manager's key file paths dropped (the workers take the keys' text from their
    environment), and the lease: a worker without its scheduler for `lease_seconds` exits, and the unit with it."""
    config = without_key_paths(spec.worker_config(unit_id))
    grace = min(config.scheduler_lost_grace_seconds, UNIT_SCHEDULER_LOST_GRACE_SECONDS, lease_seconds)
    return dataclasses.replace(config, death_timeout_seconds=lease_seconds, scheduler_lost_grace_seconds=grace)


def pool_program(spec: LaunchSpec, unit_id: str, workers: int, lease_seconds: float) -> list[str]:
    """`-m ...fixed_pool '<WorkerConfig>' N` (after the unit's python): N workers whose ids carry the unit id."""
    return ["-m", POOL_MODULE, section_to_json(unit_worker_config(spec, unit_id, lease_seconds)), str(workers)]


#: What a unit runs: (spec, unit id, workers) -> (program after `python -m`, its environment, the address its
#: workers must reach, or None). The default is a pool of workers; the launcher's hub runs the scheduler.
UnitProgram = Callable[[LaunchSpec, str, int], tuple[list[str], dict[str, str], str | None]]


def pool_unit(lease_seconds: float) -> UnitProgram:
    def program(spec: LaunchSpec, unit_id: str, workers: int) -> tuple[list[str], dict[str, str], str | None]:
        return pool_program(spec, unit_id, workers, lease_seconds), unit_key_texts(spec), spec.scheduler_address

    return program
