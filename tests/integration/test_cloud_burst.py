"""Bursting to the (fake) cloud end to end: the example files start a stack whose ECS or EC2 manager grows
from zero units while work is queued and shrinks back to zero after it; a restarted manager adopts its units;
a unit whose worker is killed is replaced and the worker's tasks run again.

The fake cloud runs in this process (`fake_cloud` fixture): every ECS task or EC2 instance is a local process
group started by it, and `AWS_ENDPOINT_URL` points every command started here at it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from scaler import Client
from scaler.protocol import messages as m
from scaler.security.connection_files import discovered_connection
from scaler.worker_manager.backend import unit_id_of_worker
from tests.integration.cloud_harness import cloud_client, cloud_unit_processes, wait_for_cloud
from tests.integration.conftest import (
    Addresses,
    Launcher,
    Service,
    free_addresses,
    monitor,
    wait_for,
)
from tests.integration.manager_harness import manager_of, workers_of
from tests.integration.tcp_forwarder import TcpForwarder
from tests.integration.test_launcher import Stack, stack_file

pytestmark = [pytest.mark.integration, pytest.mark.cloud, pytest.mark.timeout(300)]

#: The example's cooldown (15 s) shortened, so that the return to zero is seen sooner.
SHORT_COOLDOWN = ("cooldown_seconds=15", "cooldown_seconds=2")
SCALING_ARGS = ("--policy-content", "allocate=even_load; scaling=work; cooldown_seconds=60")
ECS_FLAGS = ("--ecs-subnets", "default", "--ecs-task-cpu", "1", "--ecs-task-memory", "2")


def ecs_tasks(manager_id: str, desired: str = "RUNNING") -> list[dict[str, Any]]:
    ecs = cloud_client("ecs")
    try:
        arns = ecs.list_tasks(cluster="scaler-cluster", startedBy=manager_id, desiredStatus=desired)["taskArns"]
    except ecs.exceptions.ClusterNotFoundException:
        return []
    return list(ecs.describe_tasks(cluster="scaler-cluster", tasks=arns)["tasks"]) if arns else []


def ec2_instances(manager_id: str) -> list[dict[str, Any]]:
    ec2 = cloud_client("ec2")
    filters = [{"Name": "tag:scaler-manager-id", "Values": [manager_id]}]
    return [i for r in ec2.describe_instances(Filters=filters)["Reservations"] for i in r["Instances"]]


def live_units(kind: str, manager_id: str) -> int:
    if kind == "ecs":
        return len([task for task in ecs_tasks(manager_id) if task["lastStatus"] != "STOPPED"])
    return len([i for i in ec2_instances(manager_id) if i["State"]["Name"] in ("pending", "running")])


def units_ever(kind: str, manager_id: str) -> int:
    if kind == "ecs":
        return len(ecs_tasks(manager_id, "RUNNING")) + len(ecs_tasks(manager_id, "STOPPED"))
    return len(ec2_instances(manager_id))


def square_slowly(x: int) -> int:

    time.sleep(0.05)
    return x * x


def slow_identity(x: int) -> int:

    time.sleep(1.5)
    return x


@pytest.fixture
def example_stack(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Stack, Addresses]]:
    path, scheduler, monitor_address = stack_file(tmp_path, request.param)
    path.write_text(path.read_text().replace(*SHORT_COOLDOWN))
    storage = scheduler.rsplit(":", 1)[0] + f":{int(scheduler.rsplit(':', 1)[1]) + 1}"
    running = Stack(path, tmp_path / "scaler.log")
    try:
        yield running, Addresses(scheduler, storage, monitor_address)
    finally:
        if running.popen.poll() is None:
            running.kill_everything()
        running.popen.wait(timeout=30)


@pytest.mark.parametrize(
    ("example_stack", "kind", "manager_id"),
    [("aws_ecs.toml", "ecs", "ecs"), ("aws_ec2.toml", "ec2", "ec2")],
    ids=["ecs", "ec2"],
    indirect=["example_stack"],
)
def test_the_example_file_bursts_from_zero_units_and_returns_to_zero(
    fake_cloud: Any, example_stack: tuple[Stack, Addresses], kind: str, manager_id: str
) -> None:
    running, addresses = example_stack
    # the file runs the scheduler in a hub unit: the stack is up once it has registered its keys for the address
    wait_for(lambda: discovered_connection(addresses.scheduler) is not None, "the stack's hub to be up", 120)
    with monitor(addresses.monitor) as next_snapshot:
        registered = next_snapshot(lambda snapshot: manager_of(snapshot, manager_id) is not None)
        assert workers_of(registered, manager_id) == []
    assert live_units(kind, manager_id) == 0, "nothing runs in the cloud before there is work"

    # two tasks: one unit's worth at the file's work_tasks_per_worker=1 (two workers a unit); growing to several units
    # is the -mtc 2 tests' (test_a_unit_whose_worker_is_killed..., test_cloud_spot's), each unit a boot's CPU
    with Client(address=addresses.scheduler, timeout_seconds=60) as client:
        results = client.map(square_slowly, range(2))
    assert results == [0, 1]
    assert units_ever(kind, manager_id) >= 1

    wait_for_cloud(lambda: live_units(kind, manager_id) == 0, "every unit to be stopped after the work", 90)
    with monitor(addresses.monitor) as next_snapshot:
        next_snapshot(lambda snapshot: not workers_of(snapshot, manager_id), 60)
    wait_for(lambda: not unit_processes_of_manager(kind, manager_id), "the units' processes to exit", 30)
    assert "error" not in running.log().lower().replace("errors", ""), running.log()[-3000:]

    running.popen.send_signal(signal.SIGTERM)
    assert running.popen.wait(timeout=60) == 0
    assert running.leftovers() == []


def unit_processes_of_manager(kind: str, manager_id: str) -> list[psutil.Process]:
    """Live processes of the manager's units (their worker settings name the manager and the unit's type)."""
    markers = (f'"worker_manager_id": "{manager_id}"', f'"worker_type": "{kind.upper()}-')
    found = []
    for process in psutil.process_iter():
        try:
            line = " ".join(process.cmdline())
            if process.status() != psutil.STATUS_ZOMBIE and all(marker in line for marker in markers):
                found.append(process)
        except psutil.Error:
            continue
    return found


def wait_for_heartbeats(monitor_address: str, manager_id: str, count: int, status: m.ManagerStatus) -> None:
    """Wait for `count` heartbeats of the manager that each report `status` (its reconciler's count after its
    latest pass: the runner reconciles every second and heartbeats every second with -his 1, so three such
    heartbeats are about three passes, each of which would have launched units had it not adopted them). A
    heartbeat is told from the next by when it arrived: the snapshot's time less its seconds_since_heartbeat."""
    seen, last_arrival = 0, float("-inf")
    with monitor(monitor_address) as next_snapshot:
        while seen < count:
            snapshot = next_snapshot()
            summaries = [summary for summary in snapshot.managers if summary.manager_id == manager_id]
            arrival = snapshot.time - summaries[0].seconds_since_heartbeat if summaries else last_arrival
            if arrival > last_arrival + 0.1:
                reported = m.ManagerStatus(summaries[0].units, summaries[0].pending_units)
                seen = seen + 1 if reported == status else 0
                last_arrival = arrival


def start_ecs_manager(launcher: Launcher, addresses: Addresses, manager_id: str, *args: str) -> Service:
    return launcher.start(
        "scaler_worker_manager", "aws_raw_ecs", addresses.scheduler, "-wmi", manager_id, "-his", "1", "-ll", "INFO",
        *ECS_FLAGS, *args,
    )  # fmt: skip


def test_a_restarted_manager_adopts_its_units_instead_of_launching_more(fake_cloud: Any, launcher: Launcher) -> None:
    addresses, _scheduler, _storage = launcher.stack(
        workers=0, scheduler_args=("--policy-content", "allocate=even_load; scaling=work; cooldown_seconds=60")
    )
    manager_id = "ecs-adopt"
    first = start_ecs_manager(launcher, addresses, manager_id, "-mtc", "2")
    with Client(address=addresses.scheduler, timeout_seconds=120) as client:
        futures = [client.submit(slow_identity, x) for x in range(12)]
        wait_for_cloud(lambda: live_units("ecs", manager_id) == 2, "2 ECS tasks", 60)
        with monitor(addresses.monitor) as next_snapshot:
            next_snapshot(lambda snapshot: len(workers_of(snapshot, manager_id)) == 2, 60)
        os.kill(first.pid, signal.SIGKILL)  # no chance to stop its units
        first.wait_exit()
        assert live_units("ecs", manager_id) == 2, "the units outlive their manager"

        second = start_ecs_manager(launcher, addresses, manager_id, "-mtc", "2")
        second.wait_for_log("registered")
        assert [future.result() for future in futures] == list(range(12))
        wait_for_heartbeats(addresses.monitor, manager_id, 3, m.ManagerStatus(units=2))  # a pass each, target 2
        assert units_ever("ecs", manager_id) == 2, "the restarted manager launched units it already had"
        assert "launched unit" not in second.log_text()

    second.popen.send_signal(signal.SIGTERM)  # a manager that stops stops its units
    assert second.wait_exit(60) == 0
    wait_for_cloud(lambda: live_units("ecs", manager_id) == 0, "the units the manager stopped to be gone", 30)


def big_sum(blob: bytes) -> int:
    return len(blob)


def test_a_unit_whose_worker_is_killed_is_replaced_and_its_tasks_run_again(fake_cloud: Any, launcher: Launcher) -> None:
    """The units reach the scheduler and object storage only through the addresses given to them, as behind a NAT:
    the manager talks to the scheduler's own address, the units know -wsa for the scheduler and the scheduler's
    advertised object storage address (each a forwarder here, which counts what it carried). One unit's worker is
    killed mid-map: its unit is replaced and the tasks it held run again."""
    addresses = free_addresses()
    storage_port = int(addresses.object_storage.rsplit(":", 1)[1])
    scheduler_port = int(addresses.scheduler.rsplit(":", 1)[1])
    manager_id = "ecs-replace"
    with TcpForwarder(scheduler_port) as to_scheduler, TcpForwarder(storage_port) as to_storage:
        launcher.object_storage(addresses.object_storage)
        launcher.scheduler(
            addresses, *SCALING_ARGS, "--advertised-object-storage-address", f"tcp://127.0.0.1:{to_storage.port}"
        )
        start_ecs_manager(launcher, addresses, manager_id, "-mtc", "2", "-wsa", f"tcp://127.0.0.1:{to_scheduler.port}")
        with Client(address=addresses.scheduler, timeout_seconds=120) as client:
            stored = client.submit(big_sum, b"x" * 1_000_000)  # its argument stored, not inline
            futures = [client.submit(slow_identity, x) for x in range(16)]
            wait_for_cloud(lambda: live_units("ecs", manager_id) == 2, "2 ECS tasks", 60)
            with monitor(addresses.monitor) as next_snapshot:
                snapshot = next_snapshot(lambda snapshot: len(workers_of(snapshot, manager_id)) == 2, 60)
            victim_unit = unit_id_of_worker(workers_of(snapshot, manager_id)[0].worker_id.decode())
            assert victim_unit is not None
            unit_processes = cloud_unit_processes(victim_unit)
            agents = [p for p in unit_processes if "scaler.worker.process" in " ".join(p.cmdline())]
            assert agents, f"no worker process of unit {victim_unit}"
            agents[0].kill()

            assert [future.result() for future in futures] == list(range(16)), "every task ran, the killed ones again"
            assert stored.result() == 1_000_000
        stopped = ecs_tasks(manager_id, "STOPPED")
        assert any("exited" in str(task.get("stoppedReason")) for task in stopped), stopped
        assert units_ever("ecs", manager_id) >= 3, "the dead unit was replaced"
        assert to_scheduler.connections >= 2, "the units' workers connected through the -wsa address"
        # the client stored the argument and a worker fetched it, both through the advertised address
        assert to_storage.connections >= 2, to_storage.connections
