"""The cost policy in the simulator (the real scheduler core, policy and reconcilers on a simulated clock):
a cheap tier that boots slowly and a dear one that boots fast, as in config/cost_tiers.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.policy.registry import make_policy
from scaler.policy.trace_csv import parse_trace_csv
from scaler.policy.traces import TaskArrival, Trace
from scaler.policy_simulator.cluster_simulation import SimulatedManager, SimulationReport, SimulationSettings, simulate

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
SPOT = SimulatedManager("spot", (), 40, 60.0, worker_cost_per_hour=0.05, expected_boot_seconds=60.0)
FARGATE = SimulatedManager("fargate", (), 20, 5.0, worker_cost_per_hour=0.20, expected_boot_seconds=5.0)
PRICES = {"spot": 0.05, "fargate": 0.20}
#: one 5 s task at t = 0 (so the run time of `f` is known), then 200 more at t = 100: 1,000 s of work
LEARNED_BURST: Trace = (TaskArrival(0.0, 5.0), *(TaskArrival(100.0, 5.0) for _ in range(200)))


def bursty() -> Trace:
    return parse_trace_csv((ROOT / "benchmarks" / "traces" / "bursty.csv").read_text(), "bursty.csv")


def replay(content: str, trace: Trace | None = None) -> SimulationReport:
    policy = make_policy("simple", content).scaling
    return simulate(policy, bursty() if trace is None else trace, (SPOT, FARGATE), SimulationSettings())


def most_after(report: SimulationReport, manager_id: str, seconds: float) -> int:
    return max((point.of(manager_id) for point in report.timeline if point.at_seconds >= seconds), default=0)


def test_on_the_bursty_trace_the_cost_policy_spends_less_than_work_finishes_everything_and_follows_the_target() -> None:
    cost = replay("allocate=capability; scaling=cost; target_finish_seconds=120")
    work = replay("allocate=capability; scaling=work")
    assert cost.unfinished_tasks == 0 and work.unfinished_tasks == 0
    assert cost.cost < 0.5 * work.cost
    assert cost.killed_tasks == 0
    # Before the booting workers were credited only what is left of the deadline after their boot and unknown
    # work was learned on the fast tier first, the p95 was 192 s for a 120 s target (1.6 T); now about 1.2 T.
    assert cost.latency_p95_seconds <= 1.3 * 120


def test_a_burst_the_cheap_tier_can_finish_in_time_is_served_without_buying_the_dear_tier() -> None:
    # in 300 s, a spot worker does 240 s of the 1,000 s after its boot: spot alone meets the deadline
    report = replay("allocate=capability; scaling=cost; target_finish_seconds=300", LEARNED_BURST)
    assert report.unfinished_tasks == 0
    assert most_after(report, "fargate", 100.0) == 0
    assert most_after(report, "spot", 100.0) >= 5
    assert report.latency_max_seconds <= 300


def test_a_deadline_the_cheap_tier_cannot_meet_buys_the_dear_tier() -> None:
    # in 40 s a spot worker (60 s boot) does nothing of the burst: the fast tier takes it
    report = replay("allocate=capability; scaling=cost; target_finish_seconds=40", LEARNED_BURST)
    assert report.unfinished_tasks == 0
    assert most_after(report, "fargate", 100.0) >= 10
    assert report.latency_max_seconds <= 60


def test_without_a_target_a_first_burst_does_not_get_a_worker_per_task() -> None:
    # a fresh scheduler, 200 tasks of 0.2 s: T defaults to 120 s (twice the spot boot); 40 s of work needs one
    # worker, and the fast tier lends one while nothing is known of the tasks
    one_shot: Trace = tuple(TaskArrival(0.0, 0.2) for _ in range(200))
    cost = replay("allocate=capability; scaling=cost", one_shot)
    work = replay("allocate=capability; scaling=work", one_shot)
    assert cost.unfinished_tasks == 0
    assert cost.peak_workers <= 3
    assert work.peak_workers >= 40


def test_the_units_never_cost_more_than_the_budget_and_the_capped_time_is_counted() -> None:
    # the trace's first burst (358 tasks in its first 100 s) is enough: without the budget the units cost 6 $/h
    first_burst = tuple(arrival for arrival in bursty() if arrival.arrival_seconds < 100.0)
    report = replay("allocate=capability; scaling=cost; target_finish_seconds=30; max_cost_per_hour=1", first_burst)
    assert report.unfinished_tasks == 0
    spends = [sum(count * PRICES[manager_id] for manager_id, count in point.workers) for point in report.timeline]
    assert max(spends) <= 1.0 + 1e-9
    assert max(spends) >= 0.8, "the budget is used, not left idle"
    assert report.capped_seconds > 0
