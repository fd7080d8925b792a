"""A scheduler killed with SIGKILL and started again at the same address, with real processes and sockets: the
client's futures complete as if nothing had happened (its unfinished tasks are submitted again), the workers
register again, and `scaler FILE` restarts its scheduler by itself. The new scheduler starts as soon as the old one
is gone, whether or not its peers noticed yet (both ways end in registering again). What the restart does with
graphs, long outages and a grace that runs out is in the simulation tier (tests/simulation/
test_scheduler_restart_stack.py: the real shells and cores on simulated time)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import psutil
import pytest

from scaler import Client
from tests.integration.conftest import (
    COLD_START_SECONDS,
    Launcher,
    Service,
    free_addresses,
    probe_scheduler,
    wait_for,
    wait_for_workers,
)
from tests.integration.test_launcher import Stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def slow_square(x: int) -> int:

    time.sleep(0.3)
    return x * x


def run_once_each(path: str, x: int, seconds: float) -> int:

    with open(path, "a") as runs:
        runs.write(f"{x}\n")
    time.sleep(seconds)
    return x * x


def test_futures_complete_across_a_scheduler_killed_and_started_again_and_no_task_runs_twice(
    launcher: Launcher, tmp_path: Path
) -> None:
    """Twenty tasks on two workers; the scheduler is SIGKILLed once one has finished and two are running, and a new
    instance that knows nothing starts at the same address: every future completes with its value, every task ran
    exactly once (those that ran through the restart were adopted, not run again), the workers registered again and
    new work runs. (One stack for what were two tests, a restart each: the simulation tier has the variations.)
    Checked with reattachment off by hand (`Reattachment.worker_holds` returning at once): tasks 2 and 3, running
    through the restart, ran twice and the last assertion failed. The tasks run on the processors' own links, their
    agents never see them: the processors name them in their links' hellos to the new instance (checked by hand with
    `ProcessorLinkState.hello` naming none: tasks running through the restart ran twice)."""
    addresses, scheduler, _storage = launcher.stack(workers=2)
    runs = tmp_path / "runs"
    runs.touch()
    with Client(address=addresses.scheduler, scheduler_lost_grace_seconds=60) as client:
        futures = [client.submit(run_once_each, str(runs), x, 1.5 if x < 4 else 0.3) for x in range(20)]
        wait_for(lambda: any(future.done() for future in futures), "a first result")
        wait_for(lambda: len(runs.read_text().split()) >= 3, "two more tasks running")
        scheduler.popen.send_signal(signal.SIGKILL)
        scheduler.wait_exit()
        assert not all(future.done() for future in futures)
        launcher.scheduler(addresses)  # the same address, a new instance that knows nothing
        assert [future.result(timeout=90) for future in futures] == [x * x for x in range(20)]
        wait_for_workers(addresses.monitor, 2)  # the workers registered again
        assert client.map(abs, [-1, -2]) == [1, 2]
    assert sorted(int(x) for x in runs.read_text().split()) == list(range(20)), "each task ran exactly once"


def test_the_launcher_restarts_its_scheduler_and_the_work_goes_on(tmp_path: Path) -> None:
    addresses = free_addresses()
    path = tmp_path / "stack.toml"
    path.write_text(
        f'[object_storage_server]\nbind_address = "{addresses.object_storage}"\n\n'
        f'[scheduler]\nbind_address = "{addresses.scheduler}"\nobject_storage_address = "{addresses.object_storage}"\n'
        'policy_content = "allocate=even_load; scaling=no"\n\n'
        f'[[worker_manager]]\ntype = "baremetal_native"\nmode = "fixed"\nscheduler_address = "{addresses.scheduler}"\n'
        'worker_manager_id = "pool"\nmax_task_concurrency = 2\n'
    )
    stack = Stack(path, tmp_path / "scaler.log")
    try:
        probe_scheduler(addresses.scheduler)
        wait_for_workers(addresses.monitor, 2)
        with Client(address=addresses.scheduler) as client:
            futures = [client.submit(slow_square, x) for x in range(10)]
            stack.remember()
            scheduler = next(p for p in stack.seen.values() if "scaler.scheduler.process" in " ".join(p.cmdline()))
            scheduler.kill()
            wait_for(lambda: "restarting it" in stack.log(), "the launcher to restart the scheduler", 30)
            assert [future.result(timeout=90) for future in futures] == [x * x for x in range(10)]
        assert stack.popen.poll() is None, "the stack lives on"
        assert "scheduler exited unexpectedly (killed by SIGKILL); restarting it (1 of" in stack.log()
    finally:
        stack.popen.send_signal(signal.SIGTERM)
        assert stack.popen.wait(timeout=60) == 0, stack.log()[-3000:]
    assert stack.leftovers() == []
    assert not [p for p in psutil.process_iter() if p.pid == stack.popen.pid]


def test_chaos_worker_and_scheduler_kills_lose_no_future(tmp_path: Path) -> None:
    """Chaos in small: tiny tasks (submit and map) while workers are SIGKILLed and the scheduler is
    SIGKILLed and restarted by `scaler FILE`; every future resolves with its value."""
    addresses = free_addresses()
    path = tmp_path / "stack.toml"
    path.write_text(
        f'[object_storage_server]\nbind_address = "{addresses.object_storage}"\n\n'
        f'[scheduler]\nbind_address = "{addresses.scheduler}"\nobject_storage_address = "{addresses.object_storage}"\n'
        'policy_content = "allocate=even_load; scaling=work; cooldown_seconds=60"\n\n'
        f'[[worker_manager]]\ntype = "baremetal_native"\nscheduler_address = "{addresses.scheduler}"\n'
        'worker_manager_id = "pool"\nmax_task_concurrency = 2\n'
    )
    stack = Stack(path, tmp_path / "scaler.log")
    try:
        probe_scheduler(addresses.scheduler)
        with Client(address=addresses.scheduler, scheduler_lost_grace_seconds=60) as client:
            submitted = [client.submit(slow_square, x) for x in range(20)]  # 0.3 s each: the kills land mid-run
            wait_for(lambda: sum(future.done() for future in submitted) >= 2, "the first results")
            stack.remember()
            manager = next(p for p in stack.seen.values() if "worker_manager" in " ".join(p.cmdline()))
            for worker in manager.children()[:1]:
                worker.kill()
            scheduler = next(p for p in stack.seen.values() if "scaler.scheduler.process" in " ".join(p.cmdline()))
            scheduler.kill()
            mapped = client.map(square_plain, range(2000))  # submitted while no scheduler answers
            assert [future.result(timeout=120) for future in submitted] == [x * x for x in range(20)]
            assert mapped == [x * x for x in range(2000)]
        assert "restarting it (1 of" in stack.log()
    finally:
        stack.popen.send_signal(signal.SIGTERM)
        assert stack.popen.wait(timeout=60) == 0, stack.log()[-3000:]
    assert stack.leftovers() == []


def square_plain(x: int) -> int:
    return x * x


@pytest.mark.timeout(240)
def test_a_standalone_scheduler_stopped_and_started_again_with_its_workers_finishes_the_map(
    launcher: Launcher, capfd: pytest.CaptureFixture[str]
) -> None:
    """issue 60: `scaler_scheduler ADDRESS` starts its own object storage, which stops with it: stopped with SIGINT
    during a map and started again (with its workers), it had lost the map's function, and the map failed with
    MissingObjects. The client stores again what it holds (the function) before its tasks go again, and names what
    it does not hold any more (an object it sent with send_object, whose bytes it did not keep). Checked to fail
    before: MissingObjects for "the task's function"."""
    addresses = free_addresses()

    def start_stack() -> tuple[Service, Service]:
        scheduler = launcher.start("scaler_scheduler", addresses.scheduler, "-ll", "INFO")  # its own storage
        probe_scheduler(addresses.scheduler, COLD_START_SECONDS, scheduler.popen)
        pool = launcher.cluster(addresses.scheduler, 2)
        wait_for_workers(addresses.monitor, 2, COLD_START_SECONDS)
        return scheduler, pool

    scheduler, pool = start_stack()
    with Client(address=addresses.scheduler) as client:
        kept = client.send_object(b"kept by storage only", name="the note")
        futures = [client.submit(slow_square, x) for x in range(40)]
        wait_for(lambda: any(future.done() for future in futures), "a first result")
        for service in (scheduler, pool):  # as Ctrl-C in their terminals
            service.popen.send_signal(signal.SIGINT)
            service.wait_exit()
        assert not all(future.done() for future in futures)
        start_stack()
        assert [future.result(timeout=120) for future in futures] == [x * x for x in range(40)]
        assert client.map(slow_square, range(4)) == [0, 1, 4, 9]  # its function is cached: stored again
    said = capfd.readouterr().err
    assert "lost this client's objects: 1 function(s) stored again" in said, said
    assert f"1 object(s) this client does not hold any more are lost (the note {kept.object_id.hex()})" in said
