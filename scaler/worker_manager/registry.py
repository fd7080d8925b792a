"""Worker manager types: the one table from a `scaler_worker_manager` sub-command to the code that runs it.

Adding a manager type is one module (its `run(config) -> exit code`) plus one line in `MANAGER_TYPES`;
the command line, `scaler FILE` and the launcher's child processes all dispatch through `run_worker_manager`.
Runner modules are imported only when their type is run, so a cloud SDK is never imported by a local stack.
"""

from __future__ import annotations

import dataclasses
import importlib
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from scaler.config.sections import WORKER_MANAGER_SECTIONS, WorkerManagerSettings
from scaler.protocol.exit_codes import EXIT_CONFIGURATION

Runner = Callable[[WorkerManagerSettings], int]


@dataclass(frozen=True, slots=True)
class ManagerType:
    name: str  #: the sub-command and the `type` of a [[worker_manager]] entry
    runner: str  #: "module:function" taking the type's settings section and returning an exit code
    summary: str  #: one line for `scaler_worker_manager -h`

    def load(self) -> Callable[[WorkerManagerSettings], int]:
        module_name, _, function_name = self.runner.partition(":")
        return cast(
            Callable[[WorkerManagerSettings], int], getattr(importlib.import_module(module_name), function_name)
        )


MANAGER_TYPES: dict[str, ManagerType] = {
    entry.name: entry
    for entry in (
        ManagerType(
            "baremetal_native",
            "scaler.worker_manager.baremetal_native.manager:run",
            "local worker processes, scheduler-driven (dynamic) or a fixed pool",
        ),
        ManagerType("aws_raw_ecs", "scaler.worker_manager.aws_raw_ecs.manager:run", "workers in AWS ECS Fargate tasks"),
        ManagerType("orb_aws_ec2", "scaler.worker_manager.orb_aws_ec2.manager:run", "workers on AWS EC2 instances"),
        ManagerType("aws_hpc", "scaler.worker_manager.aws_hpc.manager:run", "each task as an AWS Batch job"),
        ManagerType("symphony", "scaler.worker_manager.symphony.manager:run", "each task as an IBM Symphony task"),
    )
}


def available_types() -> tuple[str, ...]:
    return tuple(MANAGER_TYPES)


def with_manager_id(config: WorkerManagerSettings) -> WorkerManagerSettings:
    """A manager started without --worker-manager-id is `<type>@<host name>` (stable across restarts,
    so it adopts its workers; a second one on the same host is refused as a duplicate, with a message)."""
    if config.worker_manager_id:
        return config
    return dataclasses.replace(config, worker_manager_id=f"{type_name_of(config)}@{socket.gethostname()}")


def type_name_of(config: WorkerManagerSettings) -> str:
    return next(name for name, kind in WORKER_MANAGER_SECTIONS.items() if kind is type(config))


def unavailable_type_problem(config: WorkerManagerSettings) -> str | None:
    """Why these settings name a manager type this version cannot run, or None."""
    name = type_name_of(config)
    if name in MANAGER_TYPES:
        return None
    return f"worker manager type {name!r} is not available in this version; available: {', '.join(MANAGER_TYPES)}"


def run_worker_manager(config: WorkerManagerSettings) -> int:
    """Run the manager these settings describe; its exit code."""
    import sys

    config = with_manager_id(config)
    problem = unavailable_type_problem(config)
    if problem is not None:
        print(f"scaler_worker_manager: {problem}", file=sys.stderr)
        return EXIT_CONFIGURATION
    return MANAGER_TYPES[type_name_of(config)].load()(config)
