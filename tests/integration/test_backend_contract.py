"""The contract every provisioning backend keeps (scaler/worker_manager/backend.py), as one suite.

Each test runs against every entry of BACKENDS. Adding a backend is one more
`pytest.param(BackendKind(...))`: its manager type (a row of scaler/config/manager_types.py; a type whose units
are workers without an entry here fails `test_every_provisioning_manager_type_has_an_entry`), a factory for
fresh instances of a given manager (from its launch spec), and a way to find the local processes of a unit. The native
backend runs twice: forking workers from a worker forker (as the manager does) and starting them as
commands (what it falls back to without a forker). ECS and EC2 (on-demand instances; spot instances in the test
of launch, listing and terminate: EC2_SPOT) run against the fake cloud (moto, with every task or instance a local
process); Slurm against a real Slurm on this machine
(tests/integration/slurm_cluster.py), in the test process of the other Slurm tests (`xdist_group("slurm")`); the
other backends' tests in one process of their own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from scaler.config.manager_types import MANAGER_TYPES
from scaler.config.sections import WorkerConfig
from scaler.protocol import messages as m
from scaler.security.find import with_discovered_keys
from scaler.worker_manager.backend import LaunchSpec, UnitBackend, UnitInfo, UnitState
from scaler.worker_manager.baremetal_native.backend import NativeBackend
from scaler.worker_manager.baremetal_native.worker_forker import start_worker_forker
from tests.integration.cloud_harness import cloud_unit_processes, ec2_backend, ec2_spot_backend, ecs_backend
from tests.integration.conftest import Addresses, Launcher, ProcessWatch, is_alive, monitor
from tests.integration.kubernetes_harness import kubernetes_backend, rehearsal_fixture  # noqa: F401 - a fixture
from tests.integration.manager_harness import (
    forkers_with_setting,
    unit_processes,
    worker_processes_with_setting,
    workers_of,
)
from tests.integration.slurm_cluster import processes_of_job

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

DEADLINE_SECONDS = 30.0


@dataclass(frozen=True)
class BackendKind:
    #: the manager type whose backend this is (its row gives the workers' id prefix)
    manager_type: str
    #: (launch spec, state directory) -> a fresh backend instance; two instances of the same manager
    #: and directory see the same units (as a restarted manager does)
    new_backend: Callable[[LaunchSpec, Path], UnitBackend]
    #: live local processes of a unit (every process it started, or its harness started for it)
    unit_processes: Callable[[str], list[psutil.Process]]
    #: its units run elsewhere and stop in their own time (the fake cloud's, the Kubernetes rehearsal's)
    cloud: bool = False
    #: the fixture of the rehearsal it runs against
    rehearsal: str = "fake_cloud"
    #: runs against the local Slurm (the `slurm_cluster` fixture)
    slurm: bool = False

    @property
    def stops_in_its_own_time(self) -> bool:
        """A terminate is asked of a system that stops the unit when it gets to it (not done by `close`)."""
        return self.cloud or self.slurm


def native_forking_backend(spec: LaunchSpec, state_directory: Path) -> UnitBackend:
    return NativeBackend(spec.manager_id, state_directory, grace_seconds=5.0, forker=start_worker_forker(spec.worker))


def native_command_backend(spec: LaunchSpec, state_directory: Path) -> UnitBackend:
    return NativeBackend(spec.manager_id, state_directory, grace_seconds=5.0)


def slurm_backend(spec: LaunchSpec, state_directory: Path) -> UnitBackend:
    """A Slurm manager's backend for the manager of `spec` (its jobs named after it): one-CPU jobs of the default
    partition running the spec's workers, their output in the state directory."""
    from scaler.config.sections import section_to_json
    from scaler.worker_manager.slurm.backend import SlurmBackend
    from scaler.worker_manager.slurm.commands import SlurmCommands
    from scaler.worker_manager.slurm.job_script import JobRequest, job_name_of

    output = state_directory / "jobs"
    output.mkdir(parents=True, exist_ok=True)
    request = JobRequest(job_name_of(spec.manager_id), str(output), sys.executable, section_to_json(spec.worker))
    return SlurmBackend(SlurmCommands.find(), request, drain_seconds=0.0, poll_seconds=0.2)


def slurm_unit_processes(unit_id: str) -> list[psutil.Process]:
    """The processes of the local Slurm's job `unit_id` (their environment names the job and the cluster)."""
    return [process for process in processes_of_job(unit_id, os.environ.get("SLURM_CONF", "")) if is_alive(process)]


#: The suite's tests of every backend but Slurm run in one test process, one after the other: the longest-first order
#: would otherwise interleave them with other modules' tests, and the module fixtures (the scheduler, the Kubernetes
#: rehearsal) would start again each time it comes back to them.
IN_ONE_PROCESS = pytest.mark.xdist_group("backend_contract")

BACKENDS = [
    pytest.param(
        BackendKind("baremetal_native", native_forking_backend, unit_processes),
        id="native-forked",
        marks=IN_ONE_PROCESS,
    ),
    pytest.param(
        BackendKind("baremetal_native", native_command_backend, unit_processes),
        id="native-command",
        marks=IN_ONE_PROCESS,
    ),
    pytest.param(
        BackendKind("aws_raw_ecs", ecs_backend, cloud_unit_processes, cloud=True),
        id="ecs",
        marks=[pytest.mark.cloud, IN_ONE_PROCESS],
    ),
    pytest.param(
        BackendKind("orb_aws_ec2", ec2_backend, cloud_unit_processes, cloud=True),
        id="ec2",
        marks=[pytest.mark.cloud, IN_ONE_PROCESS],
    ),
    pytest.param(
        BackendKind("kubernetes", kubernetes_backend, cloud_unit_processes, cloud=True, rehearsal="rehearsal"),
        id="kubernetes",
        marks=[pytest.mark.kubernetes, IN_ONE_PROCESS],
    ),
    pytest.param(
        BackendKind("slurm", slurm_backend, slurm_unit_processes, slurm=True),
        id="slurm",
        marks=pytest.mark.xdist_group("slurm"),
    ),
]

#: The EC2 backend on spot capacity: the same backend as "ec2" but for how it launches (a one-time spot request) and
#: lists (the spot requests of its live instances are asked for AWS's warning), so it runs the one test of the
#: contract that launches, lists and terminates; the rest (adoption, closing, the unit id in the worker id) are the
#: same calls as on demand, proven by "ec2". What spot adds besides is proven in tests/unit/test_ec2_spot_backend.py
#: (the request's settings, a warned instance listed with its reclaim time, none asked for without a live spot
#: instance) and tests/integration/test_cloud_spot.py (an interrupted instance drained, replaced and terminated).
EC2_SPOT = pytest.param(
    BackendKind("orb_aws_ec2", ec2_spot_backend, cloud_unit_processes, cloud=True),
    id="ec2-spot",
    marks=[pytest.mark.cloud, IN_ONE_PROCESS],
)


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Addresses]:
    """One object storage and scheduler (`scaling=no`) for the whole module."""
    watch = ProcessWatch()
    addresses, _scheduler, _storage = Launcher(watch, tmp_path_factory.mktemp("scheduler")).stack(
        workers=0, scheduler_args=("--policy-content", "allocate=even_load; scaling=no")
    )
    try:
        yield addresses
    finally:
        watch.stop_all()
    leftovers = watch.leftovers()
    assert not leftovers, f"processes left behind: {leftovers}"


@dataclass
class Case:
    kind: BackendKind
    manager_id: str
    state_directory: Path
    spec: LaunchSpec

    def backend(self) -> UnitBackend:
        return self.kind.new_backend(self.spec, self.state_directory)


@pytest.fixture(params=BACKENDS)
def case(request: pytest.FixtureRequest, scheduler: Addresses, tmp_path: Path) -> Iterator[Case]:
    if request.param.cloud:
        request.getfixturevalue(request.param.rehearsal)
    if request.param.slurm:
        request.getfixturevalue("slurm_cluster")
    manager_id = f"contract-{uuid.uuid4().hex[:8]}"
    worker = WorkerConfig(
        scheduler_address=scheduler.scheduler,
        worker_manager_id=manager_id,
        worker_type=MANAGER_TYPES[request.param.manager_type].worker_type,
        heartbeat_interval_seconds=1,
        death_timeout_seconds=60,
        logging_paths=(str(tmp_path / "workers.log"),),
    )
    # the keys of the (secure by default) scheduler, as a manager hands them to its workers (cloud units see nothing
    # of this machine's files: they get them as text variables)
    worker = with_discovered_keys(worker, scheduler.scheduler, "worker")
    yield Case(request.param, manager_id, tmp_path / "units", LaunchSpec(manager_id, worker))
    # every worker of this test names the manager id, and so does the command line of its forkers
    left = worker_processes_with_setting(manager_id) + forkers_with_setting(manager_id)
    for process in left:
        process.kill()
    assert not left, f"processes left running: {[process.pid for process in left]}"


# ---------------------------------------------------------------- helpers


async def eventually(
    check: Callable[[], Awaitable[bool]], what: str, timeout_seconds: float = DEADLINE_SECONDS
) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_seconds
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout_seconds:g} s waiting for {what}")
        await asyncio.sleep(0.1)


def states(units: list[UnitInfo]) -> dict[str, UnitState]:
    return {unit.unit_id: unit.state for unit in units}


async def is_gone(backend: UnitBackend, unit_id: str) -> bool:
    return states(await backend.list_units()).get(unit_id, UnitState.GONE) is UnitState.GONE


async def all_running(backend: UnitBackend, unit_ids: list[str]) -> bool:
    listed = states(await backend.list_units())
    return all(listed.get(unit_id) is UnitState.RUNNING for unit_id in unit_ids)


async def stop_everything(backend: UnitBackend) -> None:
    """What a manager does when it stops: terminate every unit, wait until none is left, close."""
    try:

        async def nothing_left() -> bool:
            units = [unit for unit in await backend.list_units() if unit.state is not UnitState.GONE]
            running = [unit.unit_id for unit in units if unit.state is not UnitState.STOPPING]
            if running:
                await backend.terminate(running, "test teardown")
            return not units

        await eventually(nothing_left, "every unit to be gone")
    finally:
        await backend.close()


# ---------------------------------------------------------------- the contract


def test_every_provisioning_manager_type_has_an_entry() -> None:
    """Every manager type whose units are workers runs this suite. The offloading types' units are proxy processes
    started by the native backend (scaler/worker_manager/offload/proxy_units.py), which runs it; their remote
    systems have their own files (test_aws_hpc.py, test_symphony_manager.py)."""
    provisioning = {row.name for row in MANAGER_TYPES.values() if row.offload is None}
    assert {param.values[0].manager_type for param in BACKENDS} == provisioning


@pytest.mark.parametrize("case", [*BACKENDS, EC2_SPOT], indirect=True)
def test_launched_units_are_listed_running_and_terminate_stops_one_of_them(case: Case) -> None:
    async def scenario() -> None:
        backend = case.backend()
        try:
            victim, survivor = unit_ids = await backend.launch(2, case.spec)
            assert len(set(unit_ids)) == 2
            await eventually(lambda: all_running(backend, unit_ids), "2 RUNNING units")
            assert sorted(states(await backend.list_units())) == sorted(unit_ids)  # exactly the launched units
            await eventually(lambda: has_processes(case, victim), "the unit's processes")
            await backend.terminate([victim], "contract test")
            assert states(await backend.list_units()).get(victim) in (UnitState.STOPPING, UnitState.GONE, None)
            await eventually(lambda: is_gone(backend, victim), "the terminated unit to be GONE")
            await eventually(lambda: _true(not case.kind.unit_processes(victim)), "its processes to exit")
            assert states(await backend.list_units())[survivor] is UnitState.RUNNING
        finally:
            await stop_everything(backend)

    asyncio.run(scenario())


def test_terminate_of_unknown_or_gone_units_is_a_no_op(case: Case) -> None:
    async def scenario() -> None:
        backend = case.backend()
        try:
            await backend.terminate(["nosuchunit"], "contract test")
            (unit_id,) = await backend.launch(1, case.spec)
            await backend.terminate([unit_id], "contract test")
            await backend.terminate([unit_id], "contract test")  # twice while stopping
            await eventually(lambda: is_gone(backend, unit_id), "the unit to be GONE")
            await backend.terminate([unit_id, "nosuchunit"], "contract test")  # after it is gone
            assert all(unit.state is UnitState.GONE for unit in await backend.list_units())
        finally:
            await stop_everything(backend)

    asyncio.run(scenario())


def test_a_fresh_instance_adopts_the_units_of_its_manager(case: Case) -> None:
    async def scenario() -> None:
        first = case.backend()
        unit_ids = await first.launch(2, case.spec)
        await eventually(lambda: all_running(first, unit_ids), "2 RUNNING units")
        # a restarted manager: a new instance with the same manager id
        second = case.backend()
        try:
            assert states(await second.list_units()) == dict.fromkeys(unit_ids, UnitState.RUNNING)
            other_spec = dataclasses.replace(case.spec, manager_id=f"{case.manager_id}-other")
            other = case.kind.new_backend(other_spec, case.state_directory.parent / "other-units")
            assert await other.list_units() == []  # only this manager's units
            await other.close()
        finally:
            await stop_everything(second)
            await first.close()  # the instance that started them cleans up after them

    asyncio.run(scenario())


def test_launched_workers_carry_the_manager_id(case: Case, scheduler: Addresses) -> None:
    def first_worker() -> m.WorkerSummary:
        with monitor(scheduler.monitor) as next_snapshot:
            snapshot = next_snapshot(lambda snapshot: bool(workers_of(snapshot, case.manager_id)), DEADLINE_SECONDS)
        (worker,) = workers_of(snapshot, case.manager_id)
        return worker

    async def scenario() -> None:  # one event loop for the backend's whole life, as a manager's
        backend = case.backend()
        try:
            (unit_id,) = await backend.launch(1, case.spec)
            worker = await asyncio.to_thread(first_worker)
            assert f"-{unit_id}|" in worker.worker_id.decode()  # the unit id travels in the worker id
        finally:
            await stop_everything(backend)

    asyncio.run(scenario())


def test_close_after_stopping_leaves_nothing_running(case: Case) -> None:
    async def scenario() -> None:
        backend = case.backend()
        unit_ids = await backend.launch(2, case.spec)
        await eventually(lambda: all_running(backend, unit_ids), "2 RUNNING units")
        await backend.terminate(unit_ids, "contract test")
        await backend.close()  # a local backend completes the stops in flight at once
        if case.kind.stops_in_its_own_time:  # a cloud or Slurm stops them in its own time: GONE once it has
            for unit_id in unit_ids:
                await eventually(lambda unit_id=unit_id: is_gone(backend, unit_id), "the stopped units to be GONE")
                await eventually(lambda unit_id=unit_id: _true(not case.kind.unit_processes(unit_id)), "no process")
        for unit_id in unit_ids:
            assert not case.kind.unit_processes(unit_id)
        fresh = case.backend()
        assert [unit for unit in await fresh.list_units() if unit.state is not UnitState.GONE] == []
        await fresh.close()

    asyncio.run(scenario())


def test_close_leaves_other_units_running_for_adoption(case: Case) -> None:
    async def scenario() -> None:
        backend = case.backend()
        (unit_id,) = await backend.launch(1, case.spec)
        await eventually(lambda: all_running(backend, [unit_id]), "a RUNNING unit")
        await backend.close()
        await eventually(lambda: has_processes(case, unit_id), "the unit's processes, still running")
        await stop_everything(case.backend())
        assert not case.kind.unit_processes(unit_id)

    asyncio.run(scenario())


async def _true(value: bool) -> bool:
    return value


async def has_processes(case: Case, unit_id: str) -> bool:
    # polled: right after a launch a process may still be inside execve, with no command line to match
    return bool(case.kind.unit_processes(unit_id))
