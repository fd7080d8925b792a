"""The cost policy (`scaling=cost`): cheapest managers first, a dearer and faster one only when the cheap one
cannot finish the work in time, never more than `max_cost_per_hour` across managers; the first worker of work
nothing is known of from the fastest manager; booting workers credited only what is left after their boot; work
held on a dear manager moved to a cheap one that can start it in time; idle workers kept for half a boot."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaler.policy.decision import ScalingMemory, ScalingStep, target_total
from scaler.policy.registry import make_policy
from scaler.policy.scaling import CostScaling
from scaler.policy.scaling.budget_split import parts, split_limit
from scaler.policy.scaling.cost import default_deadline
from scaler.policy.snapshot import (
    ClientWork,
    FunctionTasks,
    ManagerView,
    RunTime,
    ScalingSnapshot,
    TaskGroup,
    WorkerView,
)
from scaler.protocol.messages import ManagerTarget, TargetEntry

pytestmark = pytest.mark.timeout(30)

#: a cheap tier that boots slowly (spot instances) and a dear one that boots fast (Fargate)
CHEAP = ManagerView("cheap", max_workers=50, worker_cost_per_hour=0.05, boot_seconds=60.0)
FAST = ManagerView("fast", max_workers=50, worker_cost_per_hour=0.20, boot_seconds=5.0)


def snapshot(
    queued: int, mean_seconds: float | None = None, running: tuple[float, ...] = (), **kwargs: object
) -> ScalingSnapshot:
    """`queued` tasks of `f` (and `running` ones, by how long each has run); `mean_seconds`: its learned run time."""
    group = TaskGroup((), queued, len(running), functions=(FunctionTasks("f", queued, running),))
    run_times = () if mean_seconds is None else (RunTime("f", (), mean_seconds),)
    managers = kwargs.pop("managers", (FAST, CHEAP))
    now = kwargs.pop("now", 100.0)
    return ScalingSnapshot(now=now, task_groups=(group,), managers=managers, run_times=run_times, **kwargs)  # type: ignore[arg-type]


def totals(policy: CostScaling, view: ScalingSnapshot, memory: ScalingMemory | None = None) -> dict[str, int]:
    return totals_of(policy.decide(view, ScalingMemory() if memory is None else memory))


def totals_of(step: ScalingStep) -> dict[str, int]:
    return {manager_id: target_total(target) for manager_id, target in step.decision.items()}


#: memory of a policy that has decided for both managers before (so neither is held for a cooldown on first sight)
SEEN = ScalingMemory(tracked_manager_ids=frozenset({"cheap", "fast"}))


def holding(manager: ManagerView, workers: int) -> ManagerView:
    """The manager after it was last sent a target of `workers` (launches in flight count as held)."""
    return ManagerView(
        manager.manager_id,
        max_workers=manager.max_workers,
        last_target=ManagerTarget((TargetEntry((), workers),)),
        worker_cost_per_hour=manager.worker_cost_per_hour,
        boot_seconds=manager.boot_seconds,
    )


def test_without_a_deadline_t_is_twice_the_slowest_boot_and_at_least_a_minute() -> None:
    assert default_deadline((FAST, CHEAP)) == 120.0
    assert default_deadline((FAST,)) == 60.0
    assert default_deadline(()) == 60.0
    # 40 tasks of 10 s: 400 s of work in 120 s; a cheap worker does 60 s of it after its boot: 7 workers
    step = CostScaling().decide(snapshot(40, 10.0), ScalingMemory())
    assert totals_of(step) == {"cheap": 7, "fast": 0}
    assert "to finish in 120 s (no target_finish_seconds: twice the slowest manager's boot" in step.reasons["cheap"]


def test_without_a_deadline_a_first_burst_no_longer_gets_a_worker_per_task() -> None:
    # 300 tasks of a function never seen: 0.5 s each, 150 s in 120 s: 3 cheap workers, and one fast one that
    # starts at once and teaches the policy how long the tasks really take
    assert totals(CostScaling(), snapshot(300)) == {"cheap": 3, "fast": 1}


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
    policy = CostScaling(target_finish_seconds=100.0, max_cost_per_hour=2.0)
    view = snapshot(80, 100.0)  # 8,000 s of work: 50 cheap (2.50/h) + 30 fast (6.00/h) even cheapest first
    assert totals(policy, view) == {"cheap": 40, "fast": 0}


def test_the_budget_never_stops_busy_workers() -> None:
    busy = tuple(WorkerView(f"w{index}", "fast", assigned=1) for index in range(8))
    view = snapshot(12, 20.0, running=(5.0,) * 8, workers=busy)  # 240 s queued, 120 s left of the running ones
    # the cheap manager takes the work in time (6 workers, 0.30/h) and the 8 busy fast ones (1.60/h) finish theirs
    assert totals(CostScaling(max_cost_per_hour=2.2), view) == {"cheap": 6, "fast": 8}
    # over the budget already: no new worker, and the busy ones finish their tasks
    assert totals(CostScaling(max_cost_per_hour=1.0), view) == {"cheap": 0, "fast": 8}


def test_work_on_idle_dear_workers_moves_to_a_cheaper_manager_that_can_start_it_in_time() -> None:
    idle_fast = tuple(WorkerView(f"w{index}", "fast") for index in range(6))
    # 10 tasks of 10 s in 120 s: two cheap workers (60 s each after their boot) instead of the six fast ones
    assert totals(CostScaling(), snapshot(10, 10.0, workers=idle_fast), SEEN) == {"cheap": 2, "fast": 0}


def test_dear_workers_keep_work_no_cheaper_manager_can_start_in_time() -> None:
    idle_fast = tuple(WorkerView(f"w{index}", "fast") for index in range(6))
    # T = 30 s: a cheap worker would connect after the deadline, so the fast ones already there keep the work
    assert totals(CostScaling(target_finish_seconds=30.0), snapshot(10, 10.0, workers=idle_fast), SEEN) == {
        "cheap": 0,
        "fast": 4,
    }


def test_booting_workers_count_only_the_deadline_left_after_half_a_boot() -> None:
    # 600 s of work in 120 s; the cheap manager holds 5 workers that are still booting: each does 120 - 30 = 90 s
    # (450 s), so 150 s are left, and 3 more cheap workers (60 s each) are bought. Were they counted as connected
    # (120 s each, 600 s), none would be, and the work would finish a boot late.
    view = snapshot(60, 10.0, managers=(FAST, holding(CHEAP, 5)))
    assert totals(CostScaling(), view) == {"cheap": 8, "fast": 0}
    connected = tuple(WorkerView(f"w{index}", "cheap") for index in range(5))
    assert totals(CostScaling(), snapshot(60, 10.0, managers=(FAST, holding(CHEAP, 5)), workers=connected)) == {
        "cheap": 5,
        "fast": 0,
    }


def test_the_first_worker_of_unknown_work_comes_from_the_fastest_manager_until_run_times_are_known() -> None:
    assert totals(CostScaling(), snapshot(20)) == {"cheap": 1, "fast": 1}
    # once a run time is learned, or a task runs (its run time is being measured), the cheap manager has it all
    assert totals(CostScaling(), snapshot(20, 1.0)) == {"cheap": 1, "fast": 0}
    assert totals(CostScaling(), snapshot(20, running=(0.5,))) == {"cheap": 1, "fast": 0}


def test_idle_workers_are_kept_for_half_a_boot_when_that_is_longer_than_the_cooldown() -> None:
    policy = CostScaling(cooldown_seconds=15.0)
    busy = CostScaling().decide(snapshot(40, 10.0, now=0.0), ScalingMemory())
    assert totals_of(busy)["cheap"] == 7
    held = (FAST, holding(CHEAP, 7))
    connected = tuple(WorkerView(f"w{index}", "cheap") for index in range(7))
    memory = busy.memory
    for now in (1.0, 20.0, 29.0):  # no work left: the cooldown (15 s) has passed, half the 60 s boot has not
        step = policy.decide(ScalingSnapshot(now=now, managers=held, workers=connected), memory)
        assert totals_of(step)["cheap"] == 7, now
        memory = step.memory
    step = policy.decide(ScalingSnapshot(now=31.0, managers=held, workers=connected), memory)
    assert totals_of(step)["cheap"] == 0
    early = policy.decide(ScalingSnapshot(now=2.0, managers=held), busy.memory)
    assert "for the 30 s cooldown" in early.reasons["cheap"]


def test_a_dear_worker_kept_only_because_it_is_busy_goes_once_it_is_idle() -> None:
    policy = CostScaling(cooldown_seconds=0.0)
    busy_fast = (WorkerView("w0", "fast", assigned=1),)
    step = policy.decide(snapshot(10, 10.0, running=(2.0,), workers=busy_fast), SEEN)
    assert totals_of(step) == {"cheap": 2, "fast": 1}  # the busy floor, not the policy's level
    idle_fast = (WorkerView("w0", "fast"),)
    later = policy.decide(snapshot(10, 10.0, workers=idle_fast, now=110.0), step.memory)
    assert totals_of(later)["fast"] == 0
    assert later.decision["fast"].drain == ("w0",)


def test_the_registry_builds_it_from_policy_content_and_refuses_bad_values() -> None:
    policy = make_policy("simple", "allocate=capability; scaling=cost; target_finish_seconds=30; max_cost_per_hour=2")
    assert policy.scaling.name == (
        "cost(tasks_per_worker=1, cooldown_seconds=15, target_finish_seconds=30, max_cost_per_hour=2)"
    )
    with pytest.raises(ValueError, match="max_cost_per_hour='-1' must be a finite number > 0"):
        make_policy("simple", "allocate=capability; scaling=cost; max_cost_per_hour=-1")
    with pytest.raises(ValueError, match="max_cost_per_hour applies to scaling=cost, not scaling=work"):
        make_policy("simple", "allocate=capability; scaling=work; max_cost_per_hour=1")


# ---------------------------------------------------------------- the budget split per client or key


def two_clients(a: ClientWork, b: ClientWork) -> ScalingSnapshot:
    """200 tasks of 10 s on the cheap tier alone: 2,000 s of work in 120 s; on time would take 34 workers (1.70/hour),
    over a 1.00 budget, so the most work for the money: 17 workers (120 s each), 0.85/hour planned. `a` and `b`
    say whose tasks they are."""
    return snapshot(200, 10.0, managers=(CHEAP,), clients=(a, b))


def test_parts_of_the_budget_follow_the_shares_or_the_keys_own() -> None:
    a, b = ClientWork("a", 3.0, queued=(((), 5),)), ClientWork("b", 1.0, running=2)
    assert parts(1.0, (a, b)) == {"a": 0.75, "b": 0.25}
    assert parts(1.0, (a, ClientWork("idle", 5.0))) == {"a": 1.0}, "a client without work takes no part"
    keyed = ClientWork("k", 1.0, running=1, max_cost_per_hour=0.4)
    assert parts(1.0, (a, b, keyed)) == pytest.approx({"k": 0.4, "a": 0.45, "b": 0.15})


def test_one_client_cannot_take_the_whole_budget_while_another_has_work() -> None:
    """a (190 tasks) and b (10) of equal shares under 1.00/hour: a is planned 0.8075/hour, over its part 0.50; b's
    0.0425 is within its part. The cap is 0.5425/hour: 10 cheap workers, where one budget for all gave a's work 17.
    Checked by switching it off (`_capped` not calling split_limit): 17 workers and the test fails."""
    policy = CostScaling(max_cost_per_hour=1.0)
    a, b = ClientWork("a", queued=(((), 190),)), ClientWork("b", queued=(((), 10),))
    assert totals(policy, snapshot(200, 10.0, managers=(CHEAP,))) == {"cheap": 17}
    step = policy.decide(two_clients(a, b), ScalingMemory())
    assert totals_of(step) == {"cheap": 10}
    assert (
        "0.54 of max_cost_per_hour=1 (the budget is split per client: a planned 0.81/hour over its part 0.50)"
        in (step.reasons["cheap"])
    )


def test_the_split_follows_the_shares_and_a_keys_own_part() -> None:
    policy = CostScaling(max_cost_per_hour=1.0)
    a, b = ClientWork("a", 3.0, queued=(((), 190),)), ClientWork("b", queued=(((), 10),))
    assert totals(policy, two_clients(a, b)) == {"cheap": 15}  # a's part 0.75 + b's 0.0425: 0.7925/hour
    keyed = replace(a, share=1.0, max_cost_per_hour=0.2)
    assert totals(policy, two_clients(keyed, b)) == {"cheap": 4}  # the key's own 0.20 + b's 0.0425
    alone = snapshot(200, 10.0, managers=(CHEAP,), clients=(ClientWork("a", queued=(((), 200),)),))
    assert totals(policy, alone) == {"cheap": 17}, "a client alone has the whole budget"


def test_a_part_smaller_than_a_worker_counts_one_worker_within_the_whole_budget() -> None:
    """Four clients under 0.10/hour: parts of 0.025, half a cheap worker each. Each counts one worker (0.05) so that
    no client's work stalls, and the whole budget still bounds the sum: 2 workers, not 4, and not 0 (which a part
    rounded down would give)."""
    four = tuple(ClientWork(name, queued=(((), 50),)) for name in "abcd")
    view = snapshot(200, 10.0, managers=(CHEAP,), clients=four)
    assert totals(CostScaling(max_cost_per_hour=0.1), view) == {"cheap": 2}
    assert split_limit(0.1, four, 0.85, 0.05)[0] == pytest.approx(0.1)
    assert split_limit(1.0, four, 0.85, 0.05)[0] == pytest.approx(0.85)  # parts of 0.25 cover each one's 0.2125
