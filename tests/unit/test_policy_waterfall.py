"""`waterfall_v1` (surface.md §5.2), from hand-built snapshots."""

from __future__ import annotations

from scaler.policy.capability import parse_capabilities as caps
from scaler.policy.content import parse_waterfall_content
from scaler.policy.decision import ScalingDecision, ScalingMemory, ScalingStep
from scaler.policy.scaling import WaterfallScaling
from scaler.policy.snapshot import ManagerView, ScalingSnapshot, TaskGroup, WorkerView
from scaler.protocol.messages import TargetEntry, WorkerLimit

RULES = """
1, cheap, 2
2, cloud
"""


def policy(rules: str = RULES) -> WaterfallScaling:
    content = parse_waterfall_content(rules)
    return WaterfallScaling(content.rules, content.tasks_per_worker)


def manager(
    manager_id: str, capabilities: str = "", max_workers: WorkerLimit = None, silent: float = 0.0
) -> ManagerView:
    return ManagerView(manager_id, caps(capabilities), max_workers, seconds_since_heartbeat=silent)


def workers(manager_id: str, count: int, busy: int = 0) -> tuple[WorkerView, ...]:
    return tuple(
        WorkerView(f"{manager_id}/{index}", manager_id, assigned=1 if index < busy else 0, connected_since=index)
        for index in range(count)
    )


def step(
    waterfall: WaterfallScaling,
    tasks: tuple[TaskGroup, ...],
    managers: tuple[ManagerView, ...],
    connected: tuple[WorkerView, ...] = (),
    memory: ScalingMemory | None = None,
) -> ScalingStep:
    view = ScalingSnapshot(now=0.0, task_groups=tasks, workers=connected, managers=managers)
    return waterfall.decide(view, memory or ScalingMemory())


def totals(decision: ScalingDecision) -> dict[str, int]:
    return {manager_id: sum(entry.workers for entry in target.entries) for manager_id, target in decision.items()}


def test_fills_in_priority_order_with_overflow_to_the_next_tier() -> None:
    decision = step(policy(), (TaskGroup((), 50, 0),), (manager("cloud"), manager("cheap"))).decision
    assert totals(decision) == {"cheap": 2, "cloud": 3}  # ceil(50/10) = 5
    decision = step(policy(), (TaskGroup((), 15, 0),), (manager("cloud"), manager("cheap"))).decision
    assert totals(decision) == {"cheap": 2, "cloud": 0}


def test_at_least_one_worker_for_any_task() -> None:
    decision = step(policy(), (TaskGroup((), 0, 1),), (manager("cheap"), manager("cloud"))).decision
    assert totals(decision) == {"cheap": 1, "cloud": 0}


def test_effective_cap_is_the_smaller_of_rule_and_manager_maximum() -> None:
    managers = (manager("cheap", max_workers=1), manager("cloud", max_workers=4))
    decision = step(policy(), (TaskGroup((), 100, 0),), managers).decision
    assert totals(decision) == {"cheap": 1, "cloud": 4}


def test_offline_and_unknown_managers_are_skipped() -> None:
    managers = (manager("cheap", silent=30.0), manager("cloud"))
    decision = step(policy(), (TaskGroup((), 50, 0),), managers).decision
    assert totals(decision) == {"cloud": 5}
    decision = step(policy(), (TaskGroup((), 50, 0),), (manager("cloud"),)).decision
    assert totals(decision) == {"cloud": 5}


def test_capability_sets_only_go_to_managers_covering_them() -> None:
    managers = (manager("cheap", "linux"), manager("cloud", "gpu,linux"))
    tasks = (TaskGroup(caps("gpu=1"), 10, 0), TaskGroup(caps("linux"), 10, 0))
    decision = step(policy(), tasks, managers).decision
    assert decision["cheap"].entries == (TargetEntry(caps("linux"), 1),)
    assert decision["cloud"].entries == (TargetEntry(caps("gpu=1"), 1),)


def test_room_is_shared_by_the_sets_of_one_manager_most_specific_first() -> None:
    managers = (manager("cheap", "gpu"), manager("cloud", "gpu"))
    tasks = (TaskGroup((), 20, 0), TaskGroup(caps("gpu"), 10, 0))
    decision = step(policy(), tasks, managers).decision
    assert decision["cheap"].entries == (TargetEntry(caps("gpu"), 1), TargetEntry((), 1))
    assert decision["cloud"].entries == (TargetEntry((), 1),)


def test_without_tasks_the_cheap_tier_holds_while_a_later_tier_has_workers() -> None:
    managers = (manager("cheap"), manager("cloud"))
    decision = step(policy(), (), managers, workers("cheap", 2) + workers("cloud", 3)).decision
    assert totals(decision) == {"cheap": 2, "cloud": 0}
    assert decision["cloud"].drain == ("cloud/2", "cloud/1", "cloud/0")
    decision = step(policy(), (), managers, workers("cheap", 2)).decision
    assert totals(decision) == {"cheap": 0, "cloud": 0}


def test_drain_lists_idle_workers_only() -> None:
    managers = (manager("cheap"), manager("cloud"))
    decision = step(policy(), (), managers, workers("cloud", 3, busy=2)).decision
    assert decision["cloud"].drain == ("cloud/2",)


def test_manager_without_a_rule_gets_nothing_and_one_warning() -> None:
    managers = (manager("cheap"), manager("stray"))
    first = step(policy(), (TaskGroup((), 5, 0),), managers)
    assert "stray" not in first.decision
    assert first.warnings == ("worker manager 'stray' has no waterfall_v1 rule; it gets no target",)
    second = step(policy(), (TaskGroup((), 5, 0),), managers, memory=first.memory)
    assert second.warnings == ()
    gone = step(policy(), (), (manager("cheap"),), memory=second.memory)
    assert gone.memory.warned_manager_ids == frozenset()  # forgotten with the manager (F37)


def test_tasks_per_worker_line() -> None:
    decision = step(policy("1, a\ntasks_per_worker=2"), (TaskGroup((), 9, 0),), (manager("a"),)).decision
    assert totals(decision) == {"a": 5}


def test_each_target_says_why_in_words() -> None:
    reasons = step(policy(), (TaskGroup((), 40, 10),), (manager("cloud"), manager("cheap"))).reasons
    text = "40 tasks queued, 10 running at 10 per worker, tiers filled in priority order, waterfall_v1 policy"
    assert reasons == {"cheap": text, "cloud": text}
    reasons = step(
        policy(), (), (manager("cheap"), manager("cloud")), workers("cheap", 2) + workers("cloud", 1)
    ).reasons
    assert reasons["cheap"] == "no tasks: kept until the later tiers have drained, waterfall_v1 policy"
    assert reasons["cloud"] == "no tasks, waterfall_v1 policy"


# ---------------------------------------------------------------- prices and a budget


def priced(manager_id: str, cost: float, max_workers: WorkerLimit = None) -> ManagerView:
    return ManagerView(manager_id, (), max_workers, worker_cost_per_hour=cost)


def budgeted(rules: str) -> WaterfallScaling:
    content = parse_waterfall_content(rules)
    return WaterfallScaling(content.rules, content.tasks_per_worker, content.max_cost_per_hour)


def test_managers_of_equal_priority_fill_cheapest_first() -> None:
    rules = "1, dear, 3\n1, cheap, 3\ntasks_per_worker = 1"
    managers = (priced("dear", 0.20), priced("cheap", 0.05))
    assert totals(step(budgeted(rules), (TaskGroup((), 4, 0),), managers).decision) == {"cheap": 3, "dear": 1}
    free = (manager("dear"), manager("cheap"))  # no prices: the written order
    assert totals(step(budgeted(rules), (TaskGroup((), 4, 0),), free).decision) == {"dear": 3, "cheap": 1}


def test_a_budget_trims_the_last_tier_first_and_never_a_busy_worker() -> None:
    rules = "1, spot, 4\n2, fargate, 8\ntasks_per_worker = 1\nmax_cost_per_hour = 1"
    managers = (priced("spot", 0.05), priced("fargate", 0.20))
    done = step(budgeted(rules), (TaskGroup((), 12, 0),), managers)
    # wanted: 4 spot (0.20) + 8 fargate (1.60); within 1.00: 4 fargate (0.80)
    assert totals(done.decision) == {"spot": 4, "fargate": 4}
    assert "budget: 4 worker(s) held back" in done.reasons["fargate"] and done.capped_manager_ids == {"fargate"}
    busy = workers("fargate", 6, busy=6)
    kept = step(budgeted(rules), (TaskGroup((), 6, 6),), managers, busy)
    assert totals(kept.decision) == {"spot": 0, "fargate": 6}, "busy workers stay; the cheap tier is trimmed too"
    assert budgeted(rules).name == "waterfall_v1(1:spot; 2:fargate; tasks_per_worker=1; max_cost_per_hour=1)"


def test_a_bad_budget_line_is_refused_naming_it() -> None:
    for text, message in (("max_cost_per_hour = soon", "is not a number"), ("max_cost_per_hour = 0", "> 0")):
        try:
            parse_waterfall_content(f"1, spot\n{text}")
        except ValueError as error:
            assert f"waterfall_v1 line 2 ({text!r})" in str(error) and message in str(error)
        else:
            raise AssertionError(f"{text!r} was accepted")
