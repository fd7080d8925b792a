"""`scaling=capability` (surface.md §5.1, worker-managers.md §1.3), from hand-built snapshots."""

from __future__ import annotations

from scaler.policy.capability import parse_capabilities as caps
from scaler.policy.decision import ScalingDecision, ScalingMemory
from scaler.policy.scaling import CapabilityScaling
from scaler.policy.snapshot import ManagerView, ScalingSnapshot, TaskGroup, WorkerView
from scaler.protocol.messages import ManagerTarget, TargetEntry, WorkerLimit


def manager(manager_id: str, capabilities: str = "", max_workers: WorkerLimit = None) -> ManagerView:
    return ManagerView(manager_id, caps(capabilities), max_workers)


def decide(
    groups: tuple[TaskGroup, ...], *managers: ManagerView, policy: CapabilityScaling | None = None
) -> ScalingDecision:
    view = ScalingSnapshot(now=0.0, task_groups=groups, managers=managers)
    return (policy or CapabilityScaling()).decide(view, ScalingMemory()).decision


def test_one_worker_per_five_tasks_at_least_one() -> None:
    decision = decide((TaskGroup((), 10, 2),), manager("m"))
    assert decision["m"].entries == (TargetEntry((), 3),)
    decision = decide((TaskGroup((), 1, 0),), manager("m"))
    assert decision["m"].entries == (TargetEntry((), 1),)


def test_groups_by_capability_names_and_carries_the_first_groups_values() -> None:
    groups = (TaskGroup(caps("gpu=1"), 4, 0), TaskGroup(caps("gpu=2"), 3, 0), TaskGroup((), 1, 0))
    decision = decide(groups, manager("m", "gpu,linux"))
    assert decision["m"].entries == (TargetEntry(caps("gpu=1"), 2), TargetEntry((), 1))


def test_only_managers_covering_a_set_get_its_entry() -> None:
    groups = (TaskGroup(caps("gpu"), 6, 0), TaskGroup((), 5, 0))
    decision = decide(groups, manager("cpu", "linux"), manager("gpu", "gpu,linux"))
    assert decision["cpu"].entries == (TargetEntry((), 1),)
    assert decision["gpu"].entries == (TargetEntry(caps("gpu"), 2), TargetEntry((), 1))


def test_without_tasks_every_manager_gets_an_empty_target() -> None:
    view = ScalingSnapshot(
        now=0.0,
        workers=(WorkerView("w1", "m", connected_since=1.0), WorkerView("w2", "m", assigned=1)),
        managers=(manager("m"),),
    )
    decision = CapabilityScaling().decide(view, ScalingMemory()).decision
    assert decision == {"m": ManagerTarget(entries=(), drain=("w1",), connected=("w1", "w2"))}


def test_sum_of_entries_clamped_to_max_workers_in_set_order() -> None:
    groups = (TaskGroup(caps("gpu"), 20, 0), TaskGroup((), 20, 0))
    decision = decide(groups, manager("m", "gpu", max_workers=5))
    assert decision["m"].entries == (TargetEntry(caps("gpu"), 4), TargetEntry((), 1))
    decision = decide(groups, manager("m", "gpu", max_workers=0))
    assert decision["m"].entries == ()


def test_tasks_per_worker_is_settable() -> None:
    decision = decide((TaskGroup((), 10, 0),), manager("m"), policy=CapabilityScaling(tasks_per_worker=2))
    assert decision["m"].entries == (TargetEntry((), 5),)


def test_each_target_says_why_in_words() -> None:
    groups = (TaskGroup(caps("gpu"), 6, 0), TaskGroup((), 5, 0))
    view = ScalingSnapshot(now=0.0, task_groups=groups, managers=(manager("cpu", "linux"), manager("gpu", "gpu")))
    reasons = CapabilityScaling().decide(view, ScalingMemory()).reasons
    assert reasons["gpu"] == "6 tasks need gpu; 5 tasks need nothing at 5 per worker, capability policy"
    assert reasons["cpu"] == "5 tasks need nothing at 5 per worker, capability policy"
    empty = ScalingSnapshot(now=0.0, managers=(manager("m"),))
    assert CapabilityScaling().decide(empty, ScalingMemory()).reasons["m"] == "no tasks it can run, capability policy"
