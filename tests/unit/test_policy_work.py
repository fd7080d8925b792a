"""`scaling=work`: one-step targets, cooldown, busy floor, drain list, spreading, memory."""

from __future__ import annotations

from scaler.policy.capability import parse_capabilities as caps
from scaler.policy.decision import ScalingDecision, ScalingMemory, ScalingStep
from scaler.policy.scaling import WorkScaling
from scaler.policy.scaling.work import step_down_to
from scaler.policy.snapshot import ManagerView, ScalingSnapshot, TaskGroup, WorkerView
from scaler.protocol.messages import ManagerTarget, TargetEntry, WorkerLimit


def manager(
    manager_id: str = "m", capabilities: str = "", max_workers: WorkerLimit = None, last: int | None = None
) -> ManagerView:
    last_target = None if last is None else ManagerTarget((TargetEntry((), last),))
    return ManagerView(manager_id, caps(capabilities), max_workers, last_target)


def workers(manager_id: str, count: int, busy: int = 0) -> tuple[WorkerView, ...]:
    return tuple(
        WorkerView(f"{manager_id}/{index}", manager_id, assigned=1 if index < busy else 0, connected_since=index)
        for index in range(count)
    )


def view(
    now: float,
    queued: int = 0,
    running: int = 0,
    managers: tuple[ManagerView, ...] = (),
    connected: tuple[WorkerView, ...] = (),
) -> ScalingSnapshot:
    groups = (TaskGroup((), queued, running),) if queued or running else ()
    return ScalingSnapshot(now=now, task_groups=groups, workers=connected, managers=managers or (manager(),))


def totals(decision: ScalingDecision) -> dict[str, int]:
    return {manager_id: sum(entry.workers for entry in target.entries) for manager_id, target in decision.items()}


def run(policy: WorkScaling, *snapshots: ScalingSnapshot) -> list[ScalingStep]:
    memory, steps = ScalingMemory(), []
    for snapshot in snapshots:
        steps.append(policy.decide(snapshot, memory))
        memory = steps[-1].memory
    return steps


def test_target_is_the_outstanding_work_in_one_step() -> None:
    (first,) = run(WorkScaling(), view(0.0, queued=30))
    assert totals(first.decision) == {"m": 30}


def test_target_counts_running_tasks_and_is_clamped() -> None:
    (first,) = run(WorkScaling(), view(0.0, queued=20, running=10, managers=(manager(max_workers=8),)))
    assert totals(first.decision) == {"m": 8}


def test_tasks_per_worker_divides_the_work() -> None:
    (first,) = run(WorkScaling(tasks_per_worker=4), view(0.0, queued=30))
    assert totals(first.decision) == {"m": 8}


def test_scale_down_waits_for_a_full_cooldown_of_surplus() -> None:
    policy = WorkScaling(cooldown_seconds=15.0)
    steps = run(policy, view(0.0, queued=10), view(2.0), view(10.0), view(16.9), view(17.0), view(18.0))
    assert [totals(step.decision)["m"] for step in steps] == [10, 10, 10, 10, 0, 0]


def test_new_work_during_the_cooldown_restarts_it() -> None:
    policy = WorkScaling(cooldown_seconds=15.0)
    steps = run(policy, view(0.0, queued=10), view(10.0), view(12.0, queued=10), view(20.0), view(34.0), view(35.0))
    assert [totals(step.decision)["m"] for step in steps] == [10, 10, 10, 10, 10, 0]  # surplus again from 20.0


def test_partial_step_down_keeps_a_noise_margin_above_the_peak() -> None:
    policy = WorkScaling(cooldown_seconds=10.0)
    steps = run(policy, view(0.0, queued=20), view(5.0, queued=2), view(8.0, queued=4), view(15.0, queued=1))
    assert [totals(step.decision)["m"] for step in steps] == [20, 20, 20, 6]  # surplus since 5.0; peak 4 + sqrt(4)
    assert step_down_to(20, 4) == 6
    assert step_down_to(10, 7) == 10  # 7 + 3 > 10 - 4: not worth a step
    assert step_down_to(1, 0) == 0
    assert step_down_to(2, 1) == 2


def test_cooldown_zero_follows_the_work_down_at_once() -> None:
    steps = run(WorkScaling(cooldown_seconds=0.0), view(0.0, queued=5), view(2.0))
    assert [totals(step.decision)["m"] for step in steps] == [5, 0]


def test_never_below_busy_workers() -> None:
    policy = WorkScaling(tasks_per_worker=4, cooldown_seconds=0.0)
    (first,) = run(policy, view(0.0, running=3, connected=workers("m", 5, busy=3)))
    assert totals(first.decision) == {"m": 3}  # ceil(3/4) = 1, but 3 workers are busy
    assert first.decision["m"].drain == ("m/4", "m/3")


def test_drain_lists_idle_workers_only_newest_first() -> None:
    (first,) = run(WorkScaling(), view(0.0, running=2, connected=workers("m", 5, busy=2)))
    assert first.decision["m"].drain == ("m/4", "m/3", "m/2")


def test_first_sight_of_a_manager_holds_its_workers_for_a_cooldown() -> None:
    # a restarted scheduler: no memory, no last target, 4 idle workers connected
    policy = WorkScaling(cooldown_seconds=15.0)
    steps = run(policy, view(0.0, connected=workers("m", 4)), view(15.0, connected=workers("m", 4)))
    assert [totals(step.decision)["m"] for step in steps] == [4, 0]


def test_first_sight_uses_the_last_target_sent() -> None:
    steps = run(WorkScaling(cooldown_seconds=15.0), view(0.0, managers=(manager(last=6),)))
    assert totals(steps[0].decision) == {"m": 6}


def test_new_work_fills_managers_in_id_order_up_to_their_room() -> None:
    managers = (manager("b"), manager("a", max_workers=4))
    (first,) = run(WorkScaling(), view(0.0, queued=10, managers=managers))
    assert totals(first.decision) == {"a": 4, "b": 6}


def test_work_stays_where_the_workers_are() -> None:
    managers = (manager("a"), manager("b"))
    (first,) = run(WorkScaling(), view(0.0, running=5, managers=managers, connected=workers("b", 5, busy=5)))
    assert totals(first.decision) == {"a": 0, "b": 5}


def test_capability_sets_only_go_to_managers_covering_them() -> None:
    managers = (manager("a", "linux"), manager("b", "gpu,linux"))
    snapshot = ScalingSnapshot(
        now=0.0, task_groups=(TaskGroup(caps("gpu=1"), 3, 0), TaskGroup((), 2, 0)), managers=managers
    )
    decision = WorkScaling().decide(snapshot, ScalingMemory()).decision
    assert decision["a"].entries == (TargetEntry((), 2),)
    assert decision["b"].entries == (TargetEntry(caps("gpu=1"), 3),)


def test_levels_advance_even_when_a_decision_is_not_sent() -> None:
    # the scheduler sends only the heartbeating manager's target: last_target stays stale for "b"
    policy = WorkScaling(cooldown_seconds=10.0)
    managers = (manager("a"), manager("b", last=8))
    steps = run(policy, view(0.0, managers=managers), view(5.0, managers=managers), view(10.0, managers=managers))
    assert [totals(step.decision)["b"] for step in steps] == [8, 8, 0]


def test_memory_forgets_departed_managers() -> None:
    steps = run(WorkScaling(), view(0.0, queued=3, managers=(manager("a"), manager("b"))), view(1.0))
    assert {key[0] for key, _level in steps[0].memory.levels} == {"a"}
    assert steps[1].memory.levels == ()


def test_a_stale_last_target_does_not_bring_a_dropped_level_back() -> None:
    policy = WorkScaling(cooldown_seconds=10.0)
    managers = (manager("a"), manager("b", last=8))  # "b" has not heartbeated since: its last target is stale
    times = (0.0, 5.0, 10.0, 12.0, 14.0)
    steps = run(policy, *(view(now, managers=managers) for now in times))
    assert [totals(step.decision)["b"] for step in steps] == [8, 8, 0, 0, 0]
    assert steps[-1].memory.tracked_manager_ids == frozenset({"a", "b"})


def test_a_full_cooldown_without_any_work_lets_every_worker_go_in_one_step() -> None:
    """The tail of a batch (need falling from the level towards zero) may step the level down, but once
    there has been no work for a whole cooldown the target is zero, without waiting another cooldown."""
    policy = WorkScaling(cooldown_seconds=10.0)
    steps = run(policy, view(0.0, queued=8), view(0.5, running=3), view(1.0), view(10.9), view(11.0))
    assert [totals(step.decision)["m"] for step in steps] == [8, 8, 8, 5, 0]
