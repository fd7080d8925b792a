"""The cost policy in the simulator (the real scheduler core, policy and reconcilers on a simulated clock):
a cheap slow tier and a dear fast one, the bursty trace of docs/scaling.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.policy.registry import make_policy
from scaler.policy.trace_csv import parse_trace_csv
from scaler.testing.cluster_simulation import SimulatedManager, SimulationReport, SimulationSettings, simulate

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
SPOT = SimulatedManager("spot", (), 40, 60.0, worker_cost_per_hour=0.05, expected_boot_seconds=60.0)
FARGATE = SimulatedManager("fargate", (), 20, 5.0, worker_cost_per_hour=0.20, expected_boot_seconds=5.0)
PRICES = {"spot": 0.05, "fargate": 0.20}


def replay(content: str) -> SimulationReport:
    trace = parse_trace_csv((ROOT / "benchmarks" / "traces" / "bursty.csv").read_text(), "bursty.csv")
    return simulate(make_policy("simple", content).scaling, trace, (SPOT, FARGATE), SimulationSettings())


def test_the_cost_policy_spends_less_than_the_work_policy_and_finishes_everything() -> None:
    cost = replay("allocate=capability; scaling=cost; target_finish_seconds=120")
    work = replay("allocate=capability; scaling=work")
    assert cost.unfinished_tasks == 0 and work.unfinished_tasks == 0
    assert cost.cost < 0.5 * work.cost
    assert cost.killed_tasks == 0


def test_the_units_never_cost_more_than_the_budget_and_the_capped_time_is_counted() -> None:
    report = replay("allocate=capability; scaling=cost; max_cost_per_hour=1")
    assert report.unfinished_tasks == 0
    spends = [sum(count * PRICES[manager_id] for manager_id, count in point.workers) for point in report.timeline]
    assert max(spends) <= 1.0 + 1e-9
    assert max(spends) >= 0.8, "the budget is used, not left idle"
    assert report.capped_seconds > 0
