"""What the Slurm manager's integration tests share: a stack (object storage and a scheduler whose policy asks a
worker per queued task) and a `scaler_worker_manager slurm` of one test, on the test process's local Slurm
(tests/integration/slurm_cluster.py).

Each manager has an id of its own, so its jobs have a name of their own (`scaler-<id>`) in the shared Slurm; when its
test ends it is stopped (which cancels its jobs) and must have left no job in squeue.
"""

from __future__ import annotations

import contextlib
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import COLD_START_SECONDS, Addresses, Launcher, ProcessWatch, Service
from tests.integration.slurm_cluster import SlurmCluster

#: A worker per queued task, gone two seconds after its work.
POLICY = "allocate=capability; scaling=work; work_tasks_per_worker=1; cooldown_seconds=2"


@contextlib.contextmanager
def slurm_stack(folder: Path) -> Iterator[Addresses]:
    """Object storage and a scheduler (no workers: the managers' jobs bring them), stopped after."""
    watch = ProcessWatch()
    addresses, _scheduler, _storage = Launcher(watch, folder).stack(
        workers=0, scheduler_args=("--policy-content", POLICY)
    )
    try:
        yield addresses
    finally:
        watch.stop_all()


@pytest.fixture(scope="module", name="stack")
def stack_fixture(slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Addresses]:
    """The module's stack, on the test process's Slurm (import it into a test module to use it as `stack`)."""
    with slurm_stack(tmp_path_factory.mktemp("slurm-stack")) as addresses:
        yield addresses


class Manager:
    """A `scaler_worker_manager slurm` of one test, its jobs named `scaler-<id>`."""

    def __init__(self, cluster: SlurmCluster, launcher: Launcher, addresses: Addresses, folder: Path) -> None:
        self.cluster, self.launcher, self.addresses = cluster, launcher, addresses
        self.id = f"t{uuid.uuid4().hex[:8]}"
        self.jobs_folder = folder / "jobs"
        self.services: list[Service] = []

    @property
    def job_name(self) -> str:
        return f"scaler-{self.id}"

    def start(self, *args: str) -> Service:
        service = self.launcher.start(
            "scaler_worker_manager", "slurm", self.addresses.scheduler, "-wmi", self.id, "-his", "1",
            "--slurm-output-folder", str(self.jobs_folder), "--slurm-poll-seconds", "0.5", *args,
        )  # fmt: skip
        self.services.append(service)
        service.wait_for_log("registered with the scheduler", COLD_START_SECONDS)
        return service

    def jobs(self, states: str = "") -> list[tuple[str, str, str]]:
        """(job id, state, reason) of the manager's jobs: those alive, or of `states` (`all`)."""
        return self.cluster.jobs(self.job_name, states)

    def states(self) -> dict[str, str]:
        """Job id -> state, of every job of the manager squeue still shows (ended ones too)."""
        return {job_id: state for job_id, state, _ in self.jobs("all")}

    def running(self) -> list[str]:
        return [job_id for job_id, state, _ in self.jobs() if state == "RUNNING"]


@contextlib.contextmanager
def slurm_manager(cluster: SlurmCluster, launcher: Launcher, addresses: Addresses, folder: Path) -> Iterator[Manager]:
    """A manager of one test; stopped after (SIGTERM: it cancels its jobs), asserting it left no job in squeue."""
    made = Manager(cluster, launcher, addresses, folder)
    try:
        yield made
    finally:
        for service in made.services:  # a manager stopping cancels its jobs
            if service.is_running():
                service.popen.send_signal(signal.SIGTERM)
                service.wait_exit()
        left = made.jobs()
        if left:
            cluster.run("scancel", f"--name={made.job_name}")
        assert not left, f"jobs left in squeue by the manager: {left}"


@pytest.fixture(name="manager")
def manager_fixture(
    slurm_cluster: SlurmCluster, stack: Addresses, launcher: Launcher, tmp_path: Path
) -> Iterator[Manager]:
    """The test's manager on the module's stack (import it with `stack_fixture` to use it as `manager`)."""
    with slurm_manager(slurm_cluster, launcher, stack, tmp_path) as made:
        yield made
