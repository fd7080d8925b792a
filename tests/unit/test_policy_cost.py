"""The cost policy (`scaling=cost`): cheapest managers first, a dearer and faster one only when the cheap one
cannot finish the work in time, and never more than `max_cost_per_hour` across managers."""

from __future__ import annotations

import pytest

from scaler.policy.decision import ScalingMemory, target_total
from scaler.policy.registry import make_policy
from scaler.policy.scaling import CostScaling
from scaler.policy.snapshot import FunctionTasks, ManagerView, RunTime, ScalingSnapshot, TaskGroup, WorkerView

pytestmark = pytest.mark.timeout(30)

#: a cheap tier that boots slowly (spot instances) and a dear one that boots fast (Fargate)
CHEAP = ManagerView("cheap", max_workers=50, worker_cost_per_hour=0.05, boot_seconds=60.0)
FAST = ManagerView("fast", max_workers=50, worker_cost_per_hour=0.20, boot_seconds=5.0)


def snapshot(queued: int, mean_seconds: float | None = None, **kwargs: object) -> ScalingSnapshot:
    group = TaskGroup((), queued, 0, functions=(FunctionTasks("f", queued),))
    run_times = () if mean_seconds is None else (RunTime("f", (), mean_seconds),)
    managers = kwargs.pop("managers", (FAST, CHEAP))
    return ScalingSnapshot(now=100.0, task_groups=(group,), managers=managers, run_times=run_times, **kwargs)  # type: ignore[arg-type]


def totals(policy: CostScaling, view: ScalingSnapshot) -> dict[str, int]:
    step = policy.decide(view, ScalingMemory())
    return {manager_id: target_total(target) for manager_id, target in step.decision.items()}


def test_without_a_deadline_the_cheapest_manager_takes_the_work_up_to_its_maximum() -> None:
    assert totals(CostScaling(), snapshot(30)) == {"cheap": 30, "fast": 0}
    assert totals(CostScaling(), snapshot(80)) == {"cheap": 50, "fast": 30}


def test_a_deadline_shorter_than_the_cheap_boot_goes_to_the_fast_manager() -> None:
    # 40 tasks of 10 s: 400 s of work; in 30 s, a fast worker does 25 s of it (5 s boot): 16 workers
    assert totals(CostScaling(target_finish_seconds=30.0), snapshot(40, 10.0)) == {"cheap": 0, "fast": 16}


def test_a_deadline_the_cheap_manager_can_meet_stays_cheap() -> None:
    # 400 s of work in 300 s: a cheap worker does 240 s of it after its 60 s boot: 2 workers
    assert totals(CostScaling(target_finish_seconds=300.0), snapshot(40, 10.0)) == {"cheap": 2, "fast": 0}


def test_when_the_fast_manager_is_full_the_rest_still_gets_cheap_workers() -> None:
    small_fast = ManagerView("fast", max_workers=4, worker_cost_per_hour=0.20, boot_seconds=5.0)
    view = snapshot(40, 10.0, managers=(small_fast, CHEAP))
    # 4 fast workers do 100 s in time; the 300 s left are late whatever happens: 10 cheap workers (30 s each)
    assert totals(CostScaling(target_finish_seconds=30.0), view) == {"cheap": 10, "fast": 4}


def test_a_deadline_the_budget_cannot_pay_for_buys_the_most_work_cheapest_first() -> None:
    # on time needs 16 fast workers (3.20/hour); within 1.00/hour, 14 cheap ones (0.70) do the 400 s soonest
    policy = CostScaling(target_finish_seconds=30.0, max_cost_per_hour=1.0)
    assert totals(policy, snapshot(40, 10.0)) == {"cheap": 14, "fast": 0}


def test_the_budget_caps_the_spend_and_the_reason_says_so() -> None:
    policy = CostScaling(target_finish_seconds=30.0, max_cost_per_hour=0.5)
    step = policy.decide(snapshot(40, 10.0), ScalingMemory())
    assert target_total(step.decision["cheap"]) == 10  # 10 x 0.05 = 0.50 per hour
    assert "budget: 4 worker(s) held back" in step.reasons["cheap"]
    assert "max_cost_per_hour=0.5" in step.reasons["cheap"]
    assert step.capped_manager_ids == frozenset({"cheap"})


def test_the_budget_trims_the_dearest_manager_first() -> None:
    policy = CostScaling(max_cost_per_hour=2.0)
    view = snapshot(80)  # 50 cheap (2.50/h) + 30 fast (6.00/h) wanted
    assert totals(policy, view) == {"cheap": 40, "fast": 0}


def test_the_budget_never_stops_busy_workers() -> None:
    busy = tuple(WorkerView(f"w{index}", "fast", assigned=1) for index in range(8))
    # 8 busy fast workers cost 1.60/h: with room for 0.60/h more, the 12 other tasks get cheap workers
    assert totals(CostScaling(max_cost_per_hour=2.2), snapshot(20, workers=busy)) == {"cheap": 12, "fast": 8}
    # over the budget already: no new worker, and the busy ones finish their tasks
    assert totals(CostScaling(max_cost_per_hour=1.0), snapshot(20, workers=busy)) == {"cheap": 0, "fast": 8}


def test_work_already_on_a_dear_manager_is_not_moved_to_a_cheaper_one() -> None:
    held = tuple(WorkerView(f"w{index}", "fast") for index in range(6))
    assert totals(CostScaling(), snapshot(10, workers=held)) == {"cheap": 4, "fast": 6}


def test_the_registry_builds_it_from_policy_content_and_refuses_bad_values() -> None:
    policy = make_policy("simple", "allocate=capability; scaling=cost; target_finish_seconds=30; max_cost_per_hour=2")
    assert policy.scaling.name == (
        "cost(tasks_per_worker=1, cooldown_seconds=15, target_finish_seconds=30, max_cost_per_hour=2)"
    )
    with pytest.raises(ValueError, match="max_cost_per_hour='-1' must be a finite number > 0"):
        make_policy("simple", "allocate=capability; scaling=cost; max_cost_per_hour=-1")
    with pytest.raises(ValueError, match="max_cost_per_hour applies to scaling=cost, not scaling=work"):
        make_policy("simple", "allocate=capability; scaling=work; max_cost_per_hour=1")
