"""The contract between the shared manager runner and a provisioning backend.

A backend provisions *units*: places where workers run (a local process, an ECS task, a pod, a VM).
It implements four verbs and reports what exists; the runner decides everything else. Rules every
backend keeps (tests/integration/test_backend_contract.py checks them):

- `launch(count, spec)` starts `count` units and returns their ids (they may still be PENDING). A
  partial success returns the ids it got; a failure raises. Every unit is labelled with the manager
  id, so that `list_units` of a *fresh* backend instance finds it again (adoption after a restart).
- `list_units()` lists this manager's units only. Units that ended may be listed as GONE for a while or
  simply disappear; callers treat both alike.
- `terminate(unit_ids, reason)` starts a graceful stop (workers leave the scheduler, their tasks go back
  to the queue) and forces it after a grace period. It returns once the stop is under way; from then on
  the units are never listed as PENDING or RUNNING again. Unknown and already-gone ids are a no-op.
- `close()` releases what the backend holds (clients, timers, child handles) and completes the forced
  stops in flight. It does not stop other units: they stay adoptable by the next manager instance.
- A unit its provider keeps waiting in a queue (a Slurm job PENDING, a pod Pending `Unschedulable`) is listed
  PENDING with `wait`: the provider's reason and words, and its verdict when it says the unit can never start as
  asked (`UnitWait.never_starts`). A unit booting (an image pull, an instance starting) has no `wait`.

Worker ids carry their unit: a unit's workers run with worker type `<prefix>-<unit id>`, so their ids
are `Worker|<prefix>-<unit id>|<uuid hex>` and `unit_id_of_worker` maps the scheduler's drain list
(worker ids) back to units. Unit ids therefore contain neither `|` nor `-`.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from dataclasses import dataclass
from typing import Protocol

from scaler.config.sections import WorkerConfig, WorkerManagerSettings, section_to_json
from scaler.protocol.ids import unit_of_worker

#: The module a worker process runs: `python -m scaler.worker.process '<WorkerConfig as JSON>'`.
WORKER_MODULE = "scaler.worker.process"


class UnitState(enum.Enum):
    PENDING = "pending"  #: asked for, not running yet (cloud capacity, image pull, boot)
    RUNNING = "running"  #: its workers run (or are starting up)
    STOPPING = "stopping"  #: terminate was called; on its way out
    GONE = "gone"  #: ended, for whatever reason


#: States of a unit that counts towards the target.
ALIVE_STATES = frozenset({UnitState.PENDING, UnitState.RUNNING})


@dataclass(frozen=True, slots=True)
class UnitWait:
    """Why a unit has not started, as its provider says: it waits in the provider's queue."""

    #: a short code of the provider's: Resources, Priority, QOSMaxJobsPerUserLimit (Slurm), Unschedulable (Kubernetes)
    reason: str
    message: str = ""  #: the provider's own words, e.g. "0/3 nodes are available: 3 Insufficient cpu."
    #: the provider's verdict, read from what the cluster says: it can never start as asked (it asks more than any
    #: node of the partition has, a partition that does not take it); the reconciler then ends it (rule 12)
    never_starts: bool = False

    def describe(self) -> str:
        """`Resources`, or `Resources: <the provider's words>`."""
        return f"{self.reason}: {self.message}" if self.message and self.message != self.reason else self.reason


@dataclass(frozen=True, slots=True)
class UnitInfo:
    unit_id: str
    state: UnitState
    created_at: float  #: wall-clock seconds (time.time()) when it was launched; the reconciler's `now` clock
    worker_ids: tuple[str, ...] = ()  #: exact worker ids when the backend knows them; () otherwise
    detail: str = ""  #: for logs: pid, task ARN, exit status ...
    #: the provider takes it back at this wall-clock time (a spot interruption notice); None: not reclaimed
    reclaim_at: float | None = None
    #: a PENDING unit its provider keeps waiting in a queue, and why; None: not waiting (booting, running, gone)
    wait: UnitWait | None = None

    @property
    def is_alive(self) -> bool:
        return self.state in ALIVE_STATES


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """What every unit runs: workers of one manager, with the same settings."""

    manager_id: str
    worker: WorkerConfig  #: per-worker settings; `worker_type` is the id prefix, e.g. NAT
    workers_per_unit: int = 1
    #: what a unit's process runs: `python -m <module> '<WorkerConfig as JSON>' <module_arguments...>`
    module: str = WORKER_MODULE
    module_arguments: tuple[str, ...] = ()

    @property
    def scheduler_address(self) -> str:
        """The address the workers connect to (the manager's -wsa, else its scheduler address)."""
        return self.worker.scheduler_address

    @property
    def object_storage_address(self) -> str | None:
        """None: the workers use what the scheduler advertises."""
        return self.worker.object_storage_address

    def worker_type_for(self, unit_id: str) -> str:
        return worker_type_for_unit(self.worker.worker_type, unit_id)

    def worker_config(self, unit_id: str) -> WorkerConfig:
        return dataclasses.replace(self.worker, worker_type=self.worker_type_for(unit_id))

    def worker_module_args(self, unit_id: str) -> list[str]:
        """`python -m` arguments of one worker of this unit."""
        return [self.module, section_to_json(self.worker_config(unit_id)), *self.module_arguments]

    def worker_argv(self, unit_id: str) -> list[str]:
        """The command line of one worker of this unit, with this interpreter."""
        return [sys.executable, "-m", *self.worker_module_args(unit_id)]


class UnitBackend(Protocol):
    """The only thing a new provisioning backend implements (see the module docstring for the rules)."""

    @property
    def workers_per_unit(self) -> int: ...

    async def launch(self, count: int, spec: LaunchSpec) -> list[str]: ...

    async def list_units(self) -> list[UnitInfo]: ...

    async def terminate(self, unit_ids: list[str], reason: str) -> None: ...

    async def close(self) -> None: ...


# ---------------------------------------------------------------- worker id <-> unit id


def worker_type_for_unit(prefix: str, unit_id: str) -> str:
    if not unit_id or "|" in unit_id or "-" in unit_id:
        raise ValueError(f"unit id {unit_id!r} must be non-empty and contain neither '|' nor '-'")
    return f"{prefix}-{unit_id}"


def unit_id_of_worker(worker_id: str) -> str | None:
    """`Worker|NAT-3f2a9c1b0d4e|<uuid hex>` -> `3f2a9c1b0d4e`; None for a worker id without a unit."""
    return unit_of_worker(worker_id.encode())


def worker_config_of(manager: WorkerManagerSettings, worker_type: str) -> WorkerConfig:
    """The settings each worker of a manager runs with: the manager's worker flags, passed on as they are,
    its -wsa (else its scheduler address) and its manager id."""
    shared = {field.name for field in dataclasses.fields(WorkerConfig)}
    values = {name: value for name, value in dataclasses.asdict(manager).items() if name in shared}
    values["scheduler_address"] = manager.worker_scheduler_address or manager.scheduler_address
    values["worker_manager_id"] = manager.worker_manager_id
    values["worker_type"] = worker_type
    return WorkerConfig(**values)
