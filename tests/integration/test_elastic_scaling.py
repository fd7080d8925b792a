"""Scheduler policies driving real dynamic `baremetal_native` managers: scale from zero and back, replace
a killed worker, fill a waterfall's tiers in order, refuse a duplicate manager id, adopt units after a
manager crash. Every check polls the scheduler's status snapshots with a deadline; none times anything.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator

import pytest

from scaler import Client
from scaler.protocol import messages as m
from tests.integration.conftest import Addresses, Launcher, ProcessWatch, Service, monitor, pid_is_alive, wait_for
from tests.integration.manager_harness import manager_of, start_manager, worker_processes_with_setting, workers_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

#: Scaling up needs worker start-up (Python imports) on a possibly loaded machine; scaling down waits for
#: the policy (vanilla's ratio, work's cooldown) and the manager's heartbeats.
SCALE_DEADLINE_SECONDS = 90.0


def sleep_then_double(seconds: float, value: int) -> int:
    time.sleep(seconds)
    return value * 2


@pytest.fixture
def make_stack(launcher: Launcher, processes: ProcessWatch) -> Iterator[Callable[..., Addresses]]:
    """`make_stack(*scheduler_args)`: object storage + scheduler without workers. At teardown, after every
    process the test started is stopped, no worker of those schedulers may be left (a manager that was
    killed leaves its workers running on purpose, so they are not descendants of anything watched)."""
    made: list[Addresses] = []

    def make(*scheduler_args: str) -> Addresses:
        addresses, _scheduler, _storage = launcher.stack(workers=0, scheduler_args=scheduler_args)
        made.append(addresses)
        return addresses

    yield make
    processes.stop_all()
    deadline = time.monotonic() + 15.0
    while (left := [p for a in made for p in worker_processes_with_setting(a.scheduler)]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)
    for process in left:
        process.kill()
    assert not left, f"worker processes left behind: {[process.pid for process in left]}"


def terminate(service: Service) -> int:
    """SIGTERM a manager and return its exit code."""
    service.popen.send_signal(signal.SIGTERM)
    return service.wait_exit(60.0)


def run_while_watching(
    client: Client, next_snapshot: Callable[..., m.StatusSnapshot], count: int, seconds: float
) -> tuple[list[int], list[m.StatusSnapshot]]:
    """Submit `count` tasks; keep the snapshots published until every result is in."""
    futures = [client.submit(sleep_then_double, seconds, n) for n in range(count)]
    seen: list[m.StatusSnapshot] = []

    def done(snapshot: m.StatusSnapshot) -> bool:
        seen.append(snapshot)
        return all(future.done() for future in futures)

    next_snapshot(done, SCALE_DEADLINE_SECONDS)
    return [future.result() for future in futures], seen


def assert_no_worker_left(addresses: Addresses) -> None:
    wait_for(lambda: not worker_processes_with_setting(addresses.scheduler), "every worker process of the test to exit")


# ---------------------------------------------------------------- (a) from zero, and back to zero


def test_workers_follow_the_load_from_zero_and_back(launcher: Launcher, make_stack: Callable[..., Addresses]) -> None:
    """With the default policy's scaling (vanilla). The work policy's way back to zero (a full cooldown without work)
    runs here in the cost policy's test, which descends as work does (CostScaling is a WorkScaling), and on a
    simulated clock in tests/simulation/test_scaling_simulation.py::test_scales_to_zero_when_idle."""
    addresses = make_stack("--policy-content", "allocate=even_load; scaling=vanilla")
    manager = start_manager(launcher, addresses, "m1", "-mtc", "4")
    with monitor(addresses.monitor) as next_snapshot:
        first = next_snapshot(lambda snapshot: manager_of(snapshot, "m1") is not None)
        assert first.workers == ()
        with Client(addresses.scheduler) as client:
            results, seen = run_while_watching(client, next_snapshot, 50, 0.2)
        assert results == [n * 2 for n in range(50)]
        peak = max(len(workers_of(snapshot, "m1")) for snapshot in seen)
        assert 1 <= peak <= 4, f"the manager ran {peak} workers (at most 4 allowed)"
        next_snapshot(
            lambda snapshot: not snapshot.workers and getattr(manager_of(snapshot, "m1"), "units", -1) == 0,
            SCALE_DEADLINE_SECONDS,
        )
    assert_no_worker_left(addresses)
    assert terminate(manager) == 0
    assert "launching" in manager.log_text()


# ---------------------------------------------------------------- (b) a dead worker is replaced


def test_a_worker_killed_by_hand_is_replaced(launcher: Launcher, make_stack: Callable[..., Addresses]) -> None:
    addresses = make_stack("--policy-content", "allocate=even_load; scaling=work; cooldown_seconds=60")
    manager = start_manager(launcher, addresses, "m1", "-mtc", "2")
    with monitor(addresses.monitor) as next_snapshot, Client(addresses.scheduler) as client:
        futures = [client.submit(sleep_then_double, 2.0, n) for n in range(8)]
        full = next_snapshot(lambda snapshot: len(workers_of(snapshot, "m1")) == 2, SCALE_DEADLINE_SECONDS)
        victim = workers_of(full, "m1")[0]
        os.killpg(victim.pid, signal.SIGKILL)  # the worker agent leads its unit's process group
        wait_for(lambda: not pid_is_alive(victim.pid), "the killed worker to be gone")
        replaced = next_snapshot(
            lambda snapshot: (
                len(workers_of(snapshot, "m1")) == 2
                and victim.worker_id not in {worker.worker_id for worker in snapshot.workers}
            ),
            SCALE_DEADLINE_SECONDS,
        )
        assert {worker.worker_id for worker in workers_of(replaced, "m1")} != {
            worker.worker_id for worker in workers_of(full, "m1")
        }
        assert [future.result(timeout=SCALE_DEADLINE_SECONDS) for future in futures] == [n * 2 for n in range(8)]
    assert terminate(manager) == 0
    assert "ended on its own" in manager.log_text()
    assert_no_worker_left(addresses)


# ---------------------------------------------------------------- (c) waterfall: tier 1 first


def test_waterfall_fills_the_first_tier_before_the_second(
    launcher: Launcher, make_stack: Callable[..., Addresses]
) -> None:
    addresses = make_stack("--policy-engine-type", "waterfall_v1", "--policy-content", "1, tier1, 2\n2, tier2, 2")
    tier1 = start_manager(launcher, addresses, "tier1", "-mtc", "2")
    tier2 = start_manager(launcher, addresses, "tier2", "-mtc", "2")
    with monitor(addresses.monitor) as next_snapshot, Client(addresses.scheduler) as client:
        next_snapshot(lambda s: manager_of(s, "tier1") is not None and manager_of(s, "tier2") is not None)
        # 10 tasks: the waterfall wants ceil(10 / 10) = 1 worker, which tier 1 has room for
        results, light = run_while_watching(client, next_snapshot, 10, 0.5)
        assert results == [n * 2 for n in range(10)]
        assert any(workers_of(snapshot, "tier1") for snapshot in light)
        assert not any(workers_of(snapshot, "tier2") for snapshot in light)
        assert all(_target(snapshot, "tier2") == 0 for snapshot in light)
        # 40 tasks: 4 workers wanted, tier 1 holds 2, the other 2 spill over to tier 2
        results, heavy = run_while_watching(client, next_snapshot, 40, 0.5)
        assert results == [n * 2 for n in range(40)]
    assert any(workers_of(snapshot, "tier2") for snapshot in heavy)
    for index, snapshot in enumerate(heavy):
        assert len(workers_of(snapshot, "tier1")) <= 2 and len(workers_of(snapshot, "tier2")) <= 2
        if _target(snapshot, "tier2") > 0:  # tier 1 is full around then (targets are sent one heartbeat apart)
            nearby = heavy[max(0, index - 3) : index + 4]
            assert any(_target(other, "tier1") == 2 for other in nearby), "tier 2 was used while tier 1 had room"
    with monitor(addresses.monitor) as next_snapshot:
        next_snapshot(lambda snapshot: not snapshot.workers, SCALE_DEADLINE_SECONDS)
    assert terminate(tier2) == 0 and terminate(tier1) == 0
    assert_no_worker_left(addresses)


def _target(snapshot: m.StatusSnapshot, manager_id: str) -> int:
    manager = manager_of(snapshot, manager_id)
    return manager.target_workers if manager is not None else 0


# ---------------------------------------------------------------- (d) duplicate manager id


def test_a_second_manager_with_the_same_id_is_refused(launcher: Launcher, make_stack: Callable[..., Addresses]) -> None:
    addresses = make_stack("--policy-content", "allocate=even_load; scaling=vanilla")
    first = start_manager(launcher, addresses, "m1", "-mtc", "2")
    with monitor(addresses.monitor) as next_snapshot:
        next_snapshot(lambda snapshot: manager_of(snapshot, "m1") is not None)
        second = start_manager(launcher, addresses, "m1", "-mtc", "2")
        assert second.wait_exit(60.0) != 0
        assert "already connected" in second.log_text() and "refused" in second.log_text()
        assert first.is_running()
        next_snapshot(lambda snapshot: manager_of(snapshot, "m1") is not None)  # the first one still serves
    assert terminate(first) == 0


# ---------------------------------------------------------------- adoption after a manager crash


def test_a_restarted_manager_adopts_the_workers_of_its_predecessor(
    launcher: Launcher, make_stack: Callable[..., Addresses]
) -> None:
    addresses = make_stack("--policy-content", "allocate=even_load; scaling=work; cooldown_seconds=60")
    crashed = start_manager(launcher, addresses, "m1", "-mtc", "2")
    with monitor(addresses.monitor) as next_snapshot, Client(addresses.scheduler) as client:
        futures = [client.submit(sleep_then_double, 1.0, n) for n in range(30)]
        full = next_snapshot(lambda snapshot: len(workers_of(snapshot, "m1")) == 2, SCALE_DEADLINE_SECONDS)
        before = {worker.worker_id for worker in workers_of(full, "m1")}
        crashed.popen.send_signal(signal.SIGKILL)  # its workers are not its process group: they live on
        crashed.wait_exit()
        restarted = start_manager(launcher, addresses, "m1", "-mtc", "2")
        restarted.wait_for_log("registered with the scheduler")
        next_snapshot(lambda snapshot: getattr(manager_of(snapshot, "m1"), "units", 0) == 2, SCALE_DEADLINE_SECONDS)
        assert {worker.worker_id for worker in workers_of(next_snapshot(), "m1")} == before
        assert [future.result(timeout=SCALE_DEADLINE_SECONDS) for future in futures] == [n * 2 for n in range(30)]
    assert "launching" not in restarted.log_text()  # adopted, not doubled
    assert terminate(restarted) == 0  # and it stops the adopted units too
    assert_no_worker_left(addresses)


# ---------------------------------------------------------------- (f) cost policy: cheapest first, within a budget


def test_the_cost_policy_buys_the_cheap_manager_first_within_the_budget_and_shows_the_spend(
    launcher: Launcher, make_stack: Callable[..., Addresses]
) -> None:
    # 12 tasks of 1 s to finish in 2 s: more than the cheap tier's 3 workers (1 s boot) can do; a budget of
    # 0.5/hour: 2 dear workers (0.40) or the cheap tier's 3 (0.15) plus 1 dear one (0.20)
    policy = "allocate=even_load; scaling=cost; cooldown_seconds=3; target_finish_seconds=2; max_cost_per_hour=0.5"
    addresses = make_stack("--policy-content", policy)
    dear = start_manager(launcher, addresses, "dear", "-mtc", "4", "--worker-cost-per-hour", "0.2")
    cheap = start_manager(
        launcher, addresses, "cheap", "-mtc", "3", "--worker-cost-per-hour", "0.05", "--expected-boot-seconds", "1"
    )
    with monitor(addresses.monitor) as next_snapshot, Client(addresses.scheduler) as client:
        known = next_snapshot(lambda s: manager_of(s, "dear") is not None and manager_of(s, "cheap") is not None)
        dear_view, cheap_view = manager_of(known, "dear"), manager_of(known, "cheap")
        assert dear_view is not None and cheap_view is not None
        assert (dear_view.worker_cost_per_hour, cheap_view.worker_cost_per_hour) == (0.2, 0.05)
        assert cheap_view.boot_seconds == 1.0, "the declared boot time, not a measured one"
        results, seen = run_while_watching(client, next_snapshot, 12, 1.0)
        assert results == [n * 2 for n in range(12)]
    spends = [sum(manager.spend_per_hour for manager in snapshot.managers) for snapshot in seen]
    assert max(_target(snapshot, "cheap") for snapshot in seen) == 3, "the cheap tier is filled"
    assert max(_target(snapshot, "dear") for snapshot in seen) == 1, "the budget leaves room for one dear worker"
    assert max(spends) <= 0.5 + 1e-9 and max(spends) > 0
    with monitor(addresses.monitor) as next_snapshot:
        after = next_snapshot(lambda snapshot: not snapshot.workers, SCALE_DEADLINE_SECONDS)
    dear_after = manager_of(after, "dear")
    assert dear_after is not None and dear_after.boot_seconds > 0, "a manager that declares none measures it"
    assert terminate(dear) == 0 and terminate(cheap) == 0
    assert_no_worker_left(addresses)


# ---------------------------------------------------------------- warm capacity (docs/guide/sharing.md)


def test_warm_capacity_keeps_min_workers_idle_and_a_buffer_beyond_the_queue(
    launcher: Launcher, make_stack: Callable[..., Addresses]
) -> None:
    """With the work policy and no task at all, a manager with --min-workers 2 runs two idle workers, and the
    status shows its warm capacity. Checked by making keep_warm_capacity return its target unchanged: the
    manager then stays at zero workers and this times out."""
    addresses = make_stack("--policy-content", "allocate=even_load; scaling=work; cooldown_seconds=1")
    start_manager(launcher, addresses, "warm", "-mtc", "4", "--min-workers", "2", "--buffer-workers", "1")
    with monitor(addresses.monitor) as next_snapshot:
        idle = next_snapshot(lambda s: len(workers_of(s, "warm")) == 2, SCALE_DEADLINE_SECONDS)
        manager = manager_of(idle, "warm")
        assert manager is not None and (manager.min_workers, manager.buffer_workers) == (2, 1)
        assert idle.scheduler.queued == 0 and idle.scheduler.running == 0
