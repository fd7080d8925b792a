"""Scaling policies replayed against traces in the pure simulator (virtual clock, seeded traces).

No wall-clock timing: every number here is simulated time, and each run is deterministic.
"""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from scaler.policy.protocols import ScalingPolicy
from scaler.policy.registry import make_policy
from scaler.policy.traces import Trace, bursty_trace, one_shot_trace, steady_trace
from scaler.policy_simulator.cluster_simulation import (
    SimulatedManager,
    SimulationReport,
    SimulationSettings,
    TimelinePoint,
    simulate,
)
from scaler.policy_simulator.comparison import TRACES, compare

VANILLA = "allocate=even_load; scaling=vanilla"
WORK = "allocate=even_load; scaling=work"


def policy(content: str, engine_type: str = "simple") -> ScalingPolicy:
    return make_policy(engine_type, content).scaling


def one_manager(max_workers: int = 32) -> tuple[SimulatedManager, ...]:
    return (SimulatedManager("native", max_workers=max_workers, boot_seconds=5.0),)


def steady(seed: int) -> Trace:
    return steady_trace(random.Random(seed), rate_per_second=2.0, duration_seconds=600.0, task_seconds=3.0)


def bursty(seed: int) -> Trace:
    return bursty_trace(random.Random(seed), burst_size=40, period_seconds=60.0, bursts=5, task_seconds=5.0)


def direction_changes(timeline: tuple[TimelinePoint, ...], start: float, end: float) -> int:
    counts = [point.total for point in timeline if start <= point.at_seconds <= end]
    steps = [after - before for before, after in itertools.pairwise(counts) if after != before]
    return sum(1 for first, second in itertools.pairwise(steps) if (first > 0) != (second > 0))


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_work_policy_settles_on_a_steady_load(seed: int) -> None:
    report = simulate(policy(WORK), steady(seed), one_manager())
    assert report.unfinished_tasks == 0
    # after a one-minute warm-up, at most a few adjustments over nine minutes of Poisson arrivals
    assert direction_changes(report.timeline, 60.0, 600.0) <= 6


@pytest.mark.parametrize("content", [VANILLA, WORK, "allocate=capability; scaling=capability"])
@pytest.mark.parametrize("trace", ["one-shot", "bursty"])
def test_scales_to_zero_when_idle(content: str, trace: str) -> None:
    replay = one_shot_trace(100, 0.1) if trace == "one-shot" else bursty(1)
    report = simulate(policy(content), replay, one_manager(), SimulationSettings(tail_seconds=60.0))
    assert report.unfinished_tasks == 0
    assert report.timeline[-1].total == 0
    assert max(point.total for point in report.timeline) > 0


def test_work_policy_asks_for_the_burst_in_one_step() -> None:
    report = simulate(policy(WORK), one_shot_trace(100, 0.1), one_manager(max_workers=32))
    assert report.timeline[0].total == 32  # the first heartbeat launches everything at once
    vanilla = simulate(policy(VANILLA), one_shot_trace(100, 0.1), one_manager(max_workers=32))
    assert vanilla.timeline[0].total == 1  # vanilla ramps one worker per heartbeat


TIERS = (SimulatedManager("tier1", max_workers=4), SimulatedManager("tier2", max_workers=50))


def test_waterfall_fills_tier_one_first_and_drains_tier_two_first() -> None:
    report = simulate(policy("1, tier1\n2, tier2", "waterfall_v1"), one_shot_trace(120, 5.0), TIERS)
    timeline = report.timeline
    first_tier2 = next(index for index, point in enumerate(timeline) if point.of("tier2") > 0)
    assert timeline[first_tier2].of("tier1") == 4, "tier 2 only once tier 1 is full"
    last_tier2 = max(index for index, point in enumerate(timeline) if point.of("tier2") > 0)
    last_tier1 = max(index for index, point in enumerate(timeline) if point.of("tier1") > 0)
    assert last_tier2 < last_tier1, "tier 2 drains first"
    assert report.killed_tasks == 0, "busy workers finish their tasks before they go"
    assert timeline[-1].total == 0


def test_waterfall_without_tasks_keeps_tier_one_until_tier_two_is_gone() -> None:
    rules = "1, tier1\n2, tier2\ntasks_per_worker=1"
    report = simulate(policy(rules, "waterfall_v1"), one_shot_trace(40, 10.0), TIERS)
    after_launch = [point for point in report.timeline if point.at_seconds > 5.0]
    tier2_gone = next(point.at_seconds for point in after_launch if point.of("tier2") == 0)
    tier1_gone = next(point.at_seconds for point in after_launch if point.of("tier1") == 0)
    assert tier2_gone < tier1_gone
    assert report.unfinished_tasks == 0


@pytest.mark.parametrize("trace", ["steady", "bursty", "one-shot"])
def test_work_policy_never_kills_a_busy_worker(trace: str) -> None:
    replay = {"steady": steady(1), "bursty": bursty(1), "one-shot": one_shot_trace(100, 0.1)}[trace]
    report = simulate(policy(WORK), replay, one_manager(max_workers=16))
    assert report.unfinished_tasks == 0
    assert report.killed_tasks == 0


@pytest.mark.parametrize("trace", ["steady", "bursty"])
def test_vanilla_killed_tasks_are_recorded(trace: str, record_property: Callable[[str, object], None]) -> None:
    replay = steady(1) if trace == "steady" else bursty(1)
    report: SimulationReport = simulate(policy(VANILLA), replay, one_manager(max_workers=16))
    record_property("vanilla_killed_tasks", report.killed_tasks)  # the reference's vanilla stopped busy workers (O6)
    assert report.unfinished_tasks == 0
    assert report.killed_tasks == 0  # busy workers are kept until idle, whatever the policy


@pytest.mark.parametrize("trace", sorted(TRACES))
def test_docs_comparison_tables_are_current(trace: str) -> None:
    """docs/scaling.md shows `python -m scaler.policy_simulator.comparison` output; rerun it after changing a policy."""
    document = (Path(__file__).resolve().parents[2] / "docs" / "scaling.md").read_text()
    rows = [line for line in compare(trace, seed=1).splitlines() if line.startswith("| ")]
    missing = [row for row in rows if row not in document]
    assert not missing, f"docs/scaling.md is stale for the {trace} trace; regenerate it: {missing}"


@pytest.mark.timeout(120)
def test_the_documented_command_still_prints_the_comparison() -> None:
    """`python -m scaler.policy.comparison` (the command older docs and users know) runs the comparison, now
    `scaler.policy_simulator.comparison`."""
    command = [sys.executable, "-m", "scaler.policy.comparison", "--trace", "one-shot", "--seed", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=100, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == compare("one-shot", seed=1).strip()
