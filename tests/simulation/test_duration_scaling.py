"""Duration-aware `work` targets (issue #17) in the pure simulator: the real scheduler core learns run times
from the tasks that finish, and `target_finish_seconds` sizes the pool by them. Simulated time only."""

from __future__ import annotations

from scaler.policy.protocols import ScalingPolicy
from scaler.policy.registry import make_policy
from scaler.policy.traces import TaskArrival, Trace, merge_traces, one_shot_trace
from scaler.policy_simulator.cluster_simulation import SimulatedManager, SimulationReport, simulate

WORK = "allocate=even_load; scaling=work"
MANAGERS = (SimulatedManager("native", max_workers=200, boot_seconds=5.0),)


def policy(content: str) -> ScalingPolicy:
    return make_policy("simple", content).scaling


def seen_before(count: int, task_seconds: float, burst_at: float) -> Trace:
    """One task of the function at t = 0 (the scheduler learns its run time), then `count` more at `burst_at`."""
    burst = tuple(TaskArrival(burst_at, task_seconds) for _ in range(count))
    return merge_traces((TaskArrival(0.0, task_seconds),), burst)


def peak_from(report: SimulationReport, at_seconds: float) -> int:
    return max(point.total for point in report.timeline if point.at_seconds >= at_seconds)


def test_a_thousand_short_tasks_no_longer_burst_to_a_worker_each() -> None:
    trace = seen_before(1000, 0.01, burst_at=60.0)
    by_count = simulate(policy(WORK), trace, MANAGERS)
    by_time = simulate(policy(f"{WORK}; target_finish_seconds=30"), trace, MANAGERS)
    assert peak_from(by_count, 60.0) == 200  # one worker per task, up to the manager's maximum
    assert peak_from(by_time, 60.0) == 1  # 10 s of work fits one worker's 30 s
    assert by_time.unfinished_tasks == 0 and by_time.killed_tasks == 0
    assert by_time.worker_seconds < by_count.worker_seconds / 10


def test_twenty_thirty_second_tasks_get_the_twenty_workers_they_need() -> None:
    trace = seen_before(20, 30.0, burst_at=120.0)
    report = simulate(policy(f"{WORK}; target_finish_seconds=30"), trace, MANAGERS)
    assert 18 <= peak_from(report, 120.0) <= 20
    assert report.unfinished_tasks == 0 and report.killed_tasks == 0
    relaxed = simulate(policy(f"{WORK}; target_finish_seconds=60"), trace, MANAGERS)
    assert 9 <= peak_from(relaxed, 120.0) <= 10  # twice the time allowed: half the workers


def test_mixed_functions_are_sized_by_their_own_run_times() -> None:
    short = tuple(TaskArrival(60.0, 0.05, function_name="short") for _ in range(600))
    long = tuple(TaskArrival(60.0, 20.0, function_name="long") for _ in range(12))
    warm_up = (TaskArrival(0.0, 0.05, function_name="short"), TaskArrival(0.0, 20.0, function_name="long"))
    report = simulate(policy(f"{WORK}; target_finish_seconds=20"), merge_traces(warm_up, short, long), MANAGERS)
    # 30 s of short work + 240 s of long work: ceil(270 / 20) = 14 workers, not 612
    assert 12 <= peak_from(report, 60.0) <= 14
    assert report.unfinished_tasks == 0


def test_a_fresh_schedulers_first_burst_of_short_tasks_gets_one_worker_not_one_each() -> None:
    """Nothing finished yet: each task counts 0.5 s, so 50 tiny tasks (25 s of assumed work) ask for 1 worker."""
    report = simulate(policy(f"{WORK}; target_finish_seconds=30"), one_shot_trace(50, 0.01), MANAGERS)
    assert report.timeline[0].total == 1
    assert report.peak_workers == 1 and report.unfinished_tasks == 0


def test_a_fresh_schedulers_first_burst_of_long_tasks_grows_as_they_run() -> None:
    """40 tasks of 60 s, never seen: the pool starts small and grows while the first ones run without finishing
    (each counts twice the longest running one), up to a worker per task long before any finishes."""
    report = simulate(policy(f"{WORK}; target_finish_seconds=30"), one_shot_trace(40, 60.0), MANAGERS)
    assert report.timeline[0].total <= 2
    assert max(point.total for point in report.timeline if point.at_seconds < 40.0) == 40
    assert report.unfinished_tasks == 0


def test_a_function_whose_tasks_turn_long_grows_the_pool_before_one_of_them_finishes() -> None:
    """`f` is learned at 1 s; then 40 tasks of 60 s of it. With the learned mean they would be 40 s of work (two
    workers for 30 s) until one finishes, a minute later. Once the two running ones have both run past twice the
    mean, the mean is out of date and the pool grows as they run, in steps (the tasks new workers start say
    nothing until they too have run past twice the mean), to one worker per task before any finishes."""
    quick = tuple(TaskArrival(0.0, 1.0) for _ in range(3))
    burst = tuple(TaskArrival(60.0, 60.0) for _ in range(40))
    report = simulate(policy(f"{WORK}; target_finish_seconds=30"), merge_traces(quick, burst), MANAGERS)
    assert max(point.total for point in report.timeline if 60.0 <= point.at_seconds < 61.0) <= 2
    assert max(point.total for point in report.timeline if point.at_seconds < 120.0) == 40
    assert report.unfinished_tasks == 0
