"""The simulator's model and the trace generators, on tiny hand-checkable cases."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from scaler.policy.capability import parse_capabilities as caps
from scaler.policy.decision import ScalingMemory, ScalingStep
from scaler.policy.scaling import NoScaling
from scaler.policy.snapshot import ScalingSnapshot
from scaler.policy.traces import TaskArrival, bursty_trace, merge_traces, one_shot_trace, steady_trace
from scaler.policy_simulator.cluster_simulation import SimulatedManager, SimulationSettings, percentile, simulate
from scaler.protocol.messages import ManagerTarget, TargetEntry


@dataclass(frozen=True)
class Scripted:
    """A policy that asks for `workers` until `until`, then for none (no drain list)."""

    workers: int
    until: float

    @property
    def name(self) -> str:
        return "scripted"

    def decide(self, snapshot: ScalingSnapshot, memory: ScalingMemory) -> ScalingStep:
        count = self.workers if snapshot.now < self.until else 0
        entries = (TargetEntry((), count),) if count else ()
        return ScalingStep({manager.manager_id: ManagerTarget(entries) for manager in snapshot.managers}, memory)


def test_traces_are_reproducible_from_the_seed() -> None:
    assert steady_trace(random.Random(4), 2.0, 60.0, 1.0) == steady_trace(random.Random(4), 2.0, 60.0, 1.0)
    assert bursty_trace(random.Random(4), 5, 10.0, 3, 1.0) != bursty_trace(random.Random(5), 5, 10.0, 3, 1.0)


def test_trace_shapes() -> None:
    steady = steady_trace(random.Random(1), rate_per_second=5.0, duration_seconds=100.0, task_seconds=2.0)
    assert 400 < len(steady) < 600
    assert all(arrival.duration_seconds == 2.0 and 0 <= arrival.arrival_seconds < 100.0 for arrival in steady)
    bursty = bursty_trace(random.Random(1), burst_size=10, period_seconds=30.0, bursts=3, task_seconds=4.0)
    assert len(bursty) == 30
    assert {int(arrival.arrival_seconds // 30) for arrival in bursty} == {0, 1, 2}
    assert all(2.0 <= arrival.duration_seconds <= 6.0 for arrival in bursty)
    assert one_shot_trace() == (TaskArrival(0.0, 0.1),) * 100
    merged = merge_traces(one_shot_trace(1, 1.0), bursty)
    assert [arrival.arrival_seconds for arrival in merged] == sorted(arrival.arrival_seconds for arrival in merged)


def test_fixed_pool_runs_tasks_fifo() -> None:
    manager = SimulatedManager("fixed", initial_workers=2)
    report = simulate(NoScaling(), one_shot_trace(4, 1.0), (manager,), SimulationSettings(tail_seconds=0.0))
    assert report.completed_tasks == 4
    assert (report.latency_p50_seconds, report.latency_p95_seconds) == (1.0, 2.0)
    assert (report.launches, report.terminations, report.killed_tasks) == (0, 0, 0)
    assert report.worker_seconds == 4.0  # two workers from 0 to the last completion at 2 s


def test_no_policy_and_no_workers_leaves_tasks_unfinished_until_the_horizon() -> None:
    settings = SimulationSettings(horizon_seconds=30.0)
    report = simulate(NoScaling(), one_shot_trace(3, 1.0), (SimulatedManager("m"),), settings)
    assert (report.completed_tasks, report.unfinished_tasks) == (0, 3)
    assert math.isnan(report.latency_p50_seconds)
    assert report.end_seconds == 30.0


def test_boot_time_and_worker_seconds() -> None:
    report = simulate(
        Scripted(workers=1, until=1e9),
        (TaskArrival(0.0, 3.0),),
        (SimulatedManager("m", boot_seconds=5.0),),
        SimulationSettings(tail_seconds=0.0),
    )
    assert report.latency_p50_seconds == 8.0  # launched at 0, connected at 5, done at 8
    assert report.launches == 1
    assert report.worker_seconds == 8.0


def test_a_policy_dropping_a_busy_worker_waits_for_its_task() -> None:
    # the script asks for no worker from t = 6 while the only one runs a 10 s task: it is kept until idle
    report = simulate(
        Scripted(workers=1, until=6.0),
        (TaskArrival(0.0, 10.0),),
        (SimulatedManager("m", boot_seconds=1.0),),
        SimulationSettings(horizon_seconds=20.0),
    )
    assert report.killed_tasks == 0
    assert report.terminations == 1
    assert report.unfinished_tasks == 0


def test_capabilities_route_tasks_and_do_not_block_the_queue() -> None:
    managers = (SimulatedManager("cpu", initial_workers=1), SimulatedManager("gpu", caps("gpu"), initial_workers=1))
    trace = (TaskArrival(0.0, 5.0, caps("gpu")), TaskArrival(0.0, 5.0, caps("gpu")), TaskArrival(0.0, 1.0))
    report = simulate(NoScaling(), trace, managers, SimulationSettings(tail_seconds=0.0))
    assert report.completed_tasks == 3
    assert report.latency_p50_seconds == 5.0  # the plain task ran at once on the cpu worker
    assert report.latency_p95_seconds == 10.0  # the second gpu task waited for the only gpu worker


def test_percentile_is_nearest_rank() -> None:
    values = [float(value) for value in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 100)) == (50.0, 95.0, 100.0)
    assert percentile([3.0], 95) == 3.0
