"""`scaler_simulate_policy`'s computation (`scaler.policy_simulator.trace_replay`): managers from a stack's
settings, the policies it compares, fixed pools for `no`, and the sample in docs/scaling.md. Simulated time only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scaler.config.sections import NativeWorkerManagerConfig, WorkerManagerSettings
from scaler.policy.trace_csv import parse_trace_csv
from scaler.policy.traces import TaskArrival
from scaler.policy_simulator.cluster_simulation import SimulatedManager, SimulationSettings
from scaler.policy_simulator.trace_replay import (
    DEFAULT_MANAGER,
    contenders,
    default_names,
    format_report,
    managers_of,
    replay,
    trace_notes,
)

ROOT = Path(__file__).resolve().parents[2]
BURST = ROOT / "examples" / "traces" / "burst.csv"
TIERS = (SimulatedManager("cheap", max_workers=2), SimulatedManager("burst", max_workers=4))


def test_managers_come_from_the_worker_manager_entries_in_file_order() -> None:
    entries = [
        NativeWorkerManagerConfig(scheduler_address="tcp://s:1", worker_manager_id="local", max_task_concurrency=4),
        WorkerManagerSettings(
            scheduler_address="tcp://s:1",
            worker_manager_id="gpus",
            max_task_concurrency=-1,
            per_worker_capabilities="gpu",
        ),
        NativeWorkerManagerConfig(
            scheduler_address="tcp://s:1", worker_manager_id="pool", max_task_concurrency=3, mode="fixed"
        ),
    ]
    assert managers_of(entries, boot_seconds=2.0) == (
        SimulatedManager("local", (), 4, 2.0),
        SimulatedManager("gpus", (("gpu", -1),), None, 2.0),
        SimulatedManager("pool", (), 0, 2.0, initial_workers=3),  # a fixed pool: never scaled
    )


def test_every_policy_that_can_run_is_compared_by_default() -> None:
    assert default_names(False, None) == ("vanilla", "capability", "work", "cost", "waterfall_v1", "no")
    assert default_names(True, 30.0) == (
        "config", "vanilla", "capability", "work", "work_target", "cost", "waterfall_v1", "no"
    )  # fmt: skip


def test_waterfall_takes_the_managers_in_file_order_as_tiers() -> None:
    (waterfall,) = contenders(["waterfall_v1"], TIERS)
    assert (waterfall.engine_type, waterfall.content) == ("waterfall_v1", "1, cheap\n2, burst")


@pytest.mark.parametrize(
    ("names", "config_policy", "message"),
    [
        (["config"], None, "policy 'config' needs a --config file with a [scheduler] section"),
        (["work_target"], None, "policy 'work_target' needs --target-finish-seconds"),
        (["cheapest"], None, "unknown policy 'cheapest'"),
        (["config"], ("simple", "allocate=even_load; scaling=work; target_finish_seconds=0"), "policy config (simple)"),
    ],
)
def test_a_policy_that_cannot_run_is_refused_before_any_replay(
    names: list[str], config_policy: tuple[str, str] | None, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        contenders(names, TIERS, config_policy)


def test_no_runs_each_manager_as_a_fixed_pool_of_its_maximum() -> None:
    (fixed,) = contenders(["no"], TIERS)
    row = replay(fixed, (TaskArrival(0.0, 1.0),) * 12, TIERS, SimulationSettings(tail_seconds=10.0))
    assert (row.report.peak_workers, row.report.launches, row.report.unfinished_tasks) == (6, 0, 0)
    assert row.policy_name == "no (fixed pools: cheap 2, burst 4)"


def test_tasks_no_manager_can_run_are_pointed_out() -> None:
    trace = (TaskArrival(0.0, 1.0, (("gpu", -1),)), TaskArrival(0.0, 1.0), TaskArrival(1.0, 1.0, (("gpu", -1),)))
    assert trace_notes(trace, TIERS) == (
        "2 task(s) require gpu, which no worker manager offers: they never run (unfinished)",
    )


def test_duration_aware_work_costs_less_than_work_on_the_example_trace() -> None:
    trace = parse_trace_csv(BURST.read_text(), "burst.csv")
    work, target = contenders(["work", "work_target"], (DEFAULT_MANAGER,), target_finish_seconds=30.0)
    by_count = replay(work, trace, (DEFAULT_MANAGER,), SimulationSettings()).report
    by_time = replay(target, trace, (DEFAULT_MANAGER,), SimulationSettings()).report
    assert by_time.unfinished_tasks == by_count.unfinished_tasks == 0
    assert by_time.worker_seconds < by_count.worker_seconds
    assert by_time.launches < by_count.launches


def test_docs_sample_output_is_current() -> None:
    """docs/scaling.md shows `scaler_simulate_policy examples/traces/burst.csv --target-finish-seconds 30`; rerun it
    (and paste its table) after changing a policy, the dispatcher, the reconciler or the example trace."""
    trace = parse_trace_csv(BURST.read_text(), "examples/traces/burst.csv")
    managers, settings = (DEFAULT_MANAGER,), SimulationSettings()
    chosen = contenders(default_names(False, 30.0), managers, target_finish_seconds=30.0)
    output = format_report("examples/traces/burst.csv", trace, managers, settings, [
        replay(contender, trace, managers, settings) for contender in chosen
    ])  # fmt: skip
    document = (ROOT / "docs" / "scaling.md").read_text()
    missing = [line for line in output.splitlines() if line and line not in document]
    assert not missing, f"docs/scaling.md is stale; regenerate its scaler_simulate_policy sample: {missing}"
