"""`scaling=vanilla` (surface.md §5.1), decided from hand-built snapshots."""

from __future__ import annotations

from scaler.policy.decision import ScalingMemory
from scaler.policy.scaling import VanillaScaling
from scaler.policy.snapshot import ManagerView, ScalingSnapshot, TaskGroup, WorkerView
from scaler.protocol.messages import ManagerTarget, TargetEntry, WorkerLimit


def workers(manager_id: str, count: int, busy: int = 0) -> tuple[WorkerView, ...]:
    return tuple(
        WorkerView(f"{manager_id}/{index}", manager_id, assigned=1 if index < busy else 0, connected_since=index)
        for index in range(count)
    )


def snapshot(
    tasks: int, own: int, others: int = 0, max_workers: WorkerLimit = None, running: int = 0
) -> ScalingSnapshot:
    return ScalingSnapshot(
        now=100.0,
        task_groups=(TaskGroup((), tasks - running, running),) if tasks else (),
        workers=workers("m", own) + workers("other", others),
        managers=(ManagerView("m", max_workers=max_workers),),
    )


def target_of(policy: VanillaScaling, view: ScalingSnapshot) -> int:
    target = policy.decide(view, ScalingMemory()).decision["m"]
    return sum(entry.workers for entry in target.entries)


def test_no_workers_anywhere_adds_one_when_there_are_tasks() -> None:
    policy = VanillaScaling()
    assert target_of(policy, snapshot(tasks=1, own=0)) == 1
    assert target_of(policy, snapshot(tasks=0, own=0)) == 0


def test_ramp_is_one_worker_per_decision_while_ratio_is_above_upper() -> None:
    policy = VanillaScaling()
    assert target_of(policy, snapshot(tasks=100, own=3)) == 4  # 100/3 > 10
    assert target_of(policy, snapshot(tasks=100, own=9)) == 10  # 100/9 > 10
    assert target_of(policy, snapshot(tasks=100, own=10)) == 10  # ratio 10 is not above 10: keep


def test_ratio_counts_every_worker_but_this_managers_count_is_the_base() -> None:
    policy = VanillaScaling()
    assert target_of(policy, snapshot(tasks=100, own=1, others=9)) == 1  # 100/10: keep own 1
    assert target_of(policy, snapshot(tasks=110, own=1, others=9)) == 2  # 110/10 > 10


def test_below_lower_ratio_shrinks_to_a_tenth_of_the_tasks() -> None:
    policy = VanillaScaling()
    assert target_of(policy, snapshot(tasks=0, own=5)) == 0
    assert target_of(policy, snapshot(tasks=3, own=5)) == 1  # max(1, ceil(0.3))
    assert target_of(policy, snapshot(tasks=25, own=30)) == 3  # ceil(25/10)
    assert target_of(policy, snapshot(tasks=5, own=5)) == 5  # ratio 1 is not below 1: keep


def test_tasks_are_queued_plus_running() -> None:
    assert target_of(VanillaScaling(), snapshot(tasks=44, own=4, running=4)) == 5  # 44/4 > 10


def test_clamped_to_max_workers_unless_unlimited() -> None:
    assert target_of(VanillaScaling(), snapshot(tasks=100, own=3, max_workers=3)) == 3
    assert target_of(VanillaScaling(), snapshot(tasks=100, own=3, max_workers=0)) == 0
    assert target_of(VanillaScaling(), snapshot(tasks=5000, own=300, max_workers=None)) == 301


def test_ratios_are_settable() -> None:
    policy = VanillaScaling(upper_ratio=2.0, lower_ratio=0.5)
    assert target_of(policy, snapshot(tasks=9, own=4)) == 5  # 9/4 > 2
    assert target_of(policy, snapshot(tasks=3, own=4)) == 4  # 0.75 within [0.5, 2]
    assert target_of(policy, snapshot(tasks=1, own=4)) == 1  # 0.25 < 0.5 -> max(1, ceil(1/2))


def test_target_is_one_wildcard_entry_with_idle_workers_to_drain_newest_first() -> None:
    view = ScalingSnapshot(
        now=0.0,
        task_groups=(TaskGroup((("gpu", -1),), 0, 2),),
        workers=workers("m", 4, busy=2),
        managers=(ManagerView("m"),),
    )
    target = VanillaScaling().decide(view, ScalingMemory()).decision["m"]
    assert target == ManagerTarget(
        entries=(TargetEntry((), 1),), drain=("m/3", "m/2"), connected=("m/0", "m/1", "m/2", "m/3")
    )


def test_zero_target_has_no_entries_and_is_still_sent() -> None:
    decision = VanillaScaling().decide(snapshot(tasks=0, own=2), ScalingMemory()).decision
    assert decision == {"m": ManagerTarget(entries=(), drain=("m/1", "m/0"), connected=("m/0", "m/1"))}


def test_offline_manager_gets_nothing() -> None:
    view = ScalingSnapshot(
        now=0.0,
        task_groups=(TaskGroup((), 5, 0),),
        managers=(ManagerView("alive", seconds_since_heartbeat=2.0), ManagerView("gone", seconds_since_heartbeat=11.0)),
    )
    assert set(VanillaScaling().decide(view, ScalingMemory()).decision) == {"alive"}


def test_memory_is_handed_back_unchanged() -> None:
    memory = ScalingMemory(warned_manager_ids=frozenset({"m"}))
    assert VanillaScaling().decide(snapshot(tasks=1, own=0), memory).memory is memory


def test_each_target_says_why_in_words() -> None:
    def reason(view: ScalingSnapshot) -> str:
        return VanillaScaling().decide(view, ScalingMemory()).reasons["m"]

    assert (
        reason(snapshot(tasks=40, own=2)) == "40 tasks on 2 workers (20 per worker, above 10): one more, vanilla policy"
    )
    assert reason(snapshot(tasks=40, own=2, max_workers=2)).endswith("one more (capped at 2), vanilla policy")
    assert reason(snapshot(tasks=0, own=2)) == "no tasks, vanilla policy"
    below = "below 1): {} to 1, 10 tasks each, vanilla policy"
    assert reason(snapshot(tasks=3, own=4)).endswith(below.format("shrink"))
    # a manager with no worker beside a fixed pool's four: the ratio is low, and this manager grows (walking
    # clusters.md, the log said "shrink" as the manager went from 0 to 1 worker)
    assert reason(snapshot(tasks=3, own=0, others=4)).endswith(below.format("grow"))
    assert reason(snapshot(tasks=3, own=1, others=4)).endswith(below.format("keep"))
