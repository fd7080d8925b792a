"""Worker manager types: one record per type (`ManagerType`), in one table (`MANAGER_TYPES`).

Everything that dispatches on a type reads its row: the command line (`scaler_worker_manager TYPE`, the 1.x
adapter commands), the config loader (the type's section and the TOML tables it reads), `scaler FILE` and its
child processes, the runners (the type's name on the wire and its workers' id prefix), the offloading proxies
(their remote system). Adding a type is one folder under `scaler/worker_manager/`, its settings section in
`manager_sections.py` and one row here (docs/worker_managers.md, "Adding a manager type").

The table lives in `scaler.config` because the loader needs it and config sits below `scaler.worker_manager`
in the layers. A type's code is named, not imported: `runner` and `Offload.backend` are "module:function"
strings that `scaler.worker_manager.registry` imports when that type runs, so a local stack never imports a
cloud SDK and this package imports nothing above it.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from scaler.config.manager_sections import (
    AWSHPCWorkerManagerConfig,
    EC2WorkerManagerConfig,
    ECSWorkerManagerConfig,
    KubernetesWorkerManagerConfig,
    NativeWorkerManagerConfig,
    SlurmWorkerManagerConfig,
    SymphonyWorkerManagerConfig,
    WorkerManagerSettings,
)


@dataclass(frozen=True, slots=True)
class Offload:
    """What an offloading type adds: its units are proxy workers that run each task on a remote system."""

    backend: str  #: "module:function" making the type's `OffloadBackend` from its settings
    system_name: str  #: the remote system's name in messages ("AWS Batch")


@dataclass(frozen=True, slots=True)
class ManagerType:
    #: the sub-command, the `type` of a [[worker_manager]] entry, the <SECTION> of its SCALER_ variables and the
    #: manager type the scheduler is told
    name: str
    section: type[WorkerManagerSettings]  #: its settings (`-h` lists them); `isinstance` tells a type's settings
    runner: str  #: "module:function" taking the settings and returning an exit code, imported when the type runs
    worker_type: str  #: prefix of its workers' ids, `Worker|<prefix>-<unit id>|...` (the worker type)
    summary: str  #: one line for `scaler_worker_manager -h`
    #: older tables `-c FILE` also reads after the [[worker_manager]] entry: the 1.24 managers', then the
    #: 1.12-1.15 adapters'
    toml_tables: tuple[str, ...] = ()
    offload: Offload | None = None  #: set for the types whose units are offloading proxies
    #: the extra of this package that installs what the type imports (`pip install 'scaler-compute[aws]'`), and
    #: the modules it provides, checked before the type runs (`missing_extra`)
    extra: str | None = None
    extra_modules: tuple[str, ...] = ()
    #: its tasks run where this machine's files are not (a cloud unit, a Batch job): the clients of a stack with
    #: such a manager send the functions of their working folder's modules by value (`ship_local_modules`)
    runs_elsewhere: bool = False

    @property
    def toml_sections(self) -> tuple[str, ...]:
        """Where `scaler_worker_manager <name> -c FILE` looks, in preference order."""
        return (f"worker_manager[type={self.name}]", *self.toml_tables)


#: What the `aws` extra installs for the AWS types (pyproject.toml's optional dependencies).
AWS_MODULES = ("boto3", "packaging")

MANAGER_TYPES: dict[str, ManagerType] = {
    row.name: row
    for row in (
        ManagerType(
            "baremetal_native", NativeWorkerManagerConfig, "scaler.worker_manager.baremetal_native.manager:run",
            "NAT", "local worker processes, scheduler-driven (dynamic) or a fixed pool",
            toml_tables=("native_worker_manager", "native_worker_adapter"),
        ),
        ManagerType(
            "aws_raw_ecs", ECSWorkerManagerConfig, "scaler.worker_manager.aws_raw_ecs.manager:run",
            "ECS", "workers in AWS ECS Fargate tasks", toml_tables=("ecs_worker_manager", "ecs_worker_adapter"),
            extra="aws", extra_modules=AWS_MODULES, runs_elsewhere=True,
        ),
        ManagerType(
            "orb_aws_ec2", EC2WorkerManagerConfig, "scaler.worker_manager.orb_aws_ec2.manager:run",
            "EC2", "workers on AWS EC2 instances", extra="aws", extra_modules=AWS_MODULES, runs_elsewhere=True,
        ),
        ManagerType(
            "aws_hpc", AWSHPCWorkerManagerConfig, "scaler.worker_manager.aws_hpc.manager:run",
            "BAT", "each task as an AWS Batch job", toml_tables=("aws_hpc_worker_manager",),
            offload=Offload("scaler.worker_manager.aws_hpc.batch_backend:make_backend", "AWS Batch"),
            extra="aws", extra_modules=AWS_MODULES, runs_elsewhere=True,
        ),
        ManagerType(
            "symphony", SymphonyWorkerManagerConfig, "scaler.worker_manager.symphony.manager:run",
            "SYM", "each task as an IBM Symphony task",
            toml_tables=("symphony_worker_manager", "symphony_worker_adapter"),
            offload=Offload("scaler.worker_manager.symphony.soam_backend:make_backend", "IBM Symphony"),
            runs_elsewhere=True,
        ),
        ManagerType(
            "slurm", SlurmWorkerManagerConfig, "scaler.worker_manager.slurm.manager:run", "SLU",
            "workers as Slurm batch jobs (sbatch, squeue, scancel)", runs_elsewhere=True,
        ),
        ManagerType(
            "kubernetes", KubernetesWorkerManagerConfig, "scaler.worker_manager.kubernetes.manager:run",
            "K8S", "workers as pods of a Kubernetes cluster", extra="kubernetes", extra_modules=("lightkube",),
            runs_elsewhere=True,
        ),
    )
}  # fmt: skip


def manager_type_of(settings: WorkerManagerSettings) -> ManagerType:
    """The row whose section these settings are (exactly: sections do not subclass each other)."""
    for row in MANAGER_TYPES.values():
        if type(settings) is row.section:
            return row
    raise ValueError(f"{type(settings).__name__} is not the settings section of a worker manager type")


def missing_extra(row: ManagerType) -> str | None:
    """One line naming the extra to install when a module the type imports is missing (found without importing
    it), else None: what `scaler_worker_manager TYPE` and `scaler FILE` say, with exit code 2, before they start."""
    missing = [name for name in row.extra_modules if importlib.util.find_spec(name) is None]
    if not missing or row.extra is None:
        return None
    return (
        f"the {row.name} worker manager needs the {row.extra} extra ({', '.join(missing)} not installed): "
        f"pip install 'scaler-compute[{row.extra}]'"
    )
