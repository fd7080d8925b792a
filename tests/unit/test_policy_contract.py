"""One contract, every scaling policy (style.md point 12): random snapshots, the same promises.

For seeded random sequences of snapshots (memory carried from one decision to the next):
- targets go only to online managers; every entry is > 0 and the total is <= max_workers when limited;
- an entry names only a capability set the manager's capabilities cover;
- drain lists only that manager's idle workers, each once;
- decide() does not mutate the snapshot, and gives the same answer for the same inputs;
- every target comes with a reason in words, and only targets do;
- memory refers only to managers still in the snapshot (F37: per-manager state is forgotten).
"""

from __future__ import annotations

import copy
import pickle
import random
from dataclasses import replace

import pytest

from scaler.policy.capability import covers
from scaler.policy.content import WaterfallRule
from scaler.policy.decision import ScalingMemory, target_total
from scaler.policy.protocols import ScalingPolicy
from scaler.policy.registry import make_policy
from scaler.policy.scaling import (
    CapabilityScaling,
    CostScaling,
    NoScaling,
    VanillaScaling,
    WaterfallScaling,
    WorkScaling,
)
from scaler.policy.snapshot import (
    ClientWork,
    FunctionTasks,
    ManagerView,
    RunTime,
    ScalingSnapshot,
    TaskGroup,
    WorkerView,
)
from scaler.protocol.messages import Capabilities, ManagerTarget, TargetEntry

NAMES = ("gpu", "linux", "mem", "fpga")
MANAGER_IDS = ("m0", "m1", "m2", "m3")

POLICIES: dict[str, ScalingPolicy] = {
    "no": NoScaling(),
    "vanilla": VanillaScaling(),
    "vanilla-tight": VanillaScaling(upper_ratio=2.0, lower_ratio=0.5),
    "capability": CapabilityScaling(),
    "capability-1": CapabilityScaling(tasks_per_worker=1),
    "waterfall": WaterfallScaling(
        (WaterfallRule(1, "m2", 3), WaterfallRule(2, "m0"), WaterfallRule(2, "absent"), WaterfallRule(5, "m1", 0)),
        tasks_per_worker=10,
    ),
    "waterfall-1": WaterfallScaling((WaterfallRule(1, "m3"), WaterfallRule(2, "m1", 2)), tasks_per_worker=1),
    "waterfall-budget": WaterfallScaling(
        (WaterfallRule(1, "m0", 4), WaterfallRule(1, "m2"), WaterfallRule(2, "m1")), 1, max_cost_per_hour=0.8
    ),
    "work": WorkScaling(),
    "work-fast": WorkScaling(tasks_per_worker=3, cooldown_seconds=0.0),
    "work-registry": make_policy("simple", "allocate=even_load; scaling=work; cooldown_seconds=4").scaling,
    "work-target": WorkScaling(target_finish_seconds=30.0),
    "work-target-fast": WorkScaling(tasks_per_worker=2, cooldown_seconds=0.0, target_finish_seconds=0.5),
    "work-target-registry": make_policy(
        "simple", "allocate=capability; scaling=work; target_finish_seconds=10; cooldown_seconds=3"
    ).scaling,
    "cost": CostScaling(),
    "cost-target": CostScaling(target_finish_seconds=30.0, cooldown_seconds=0.0),
    "cost-budget": CostScaling(tasks_per_worker=2, target_finish_seconds=20.0, max_cost_per_hour=1.5),
    "cost-registry": make_policy(
        "simple", "allocate=capability; scaling=cost; target_finish_seconds=10; max_cost_per_hour=0.7"
    ).scaling,
}
FUNCTION_NAMES = ("f", "g", "h")


def random_capabilities(rng: random.Random) -> Capabilities:
    chosen = rng.sample(NAMES, rng.randint(0, 2))
    return tuple(sorted((name, rng.choice((-1, 1, 4))) for name in chosen))


def random_target(rng: random.Random) -> ManagerTarget | None:
    if rng.random() < 0.3:
        return None
    entries = tuple(TargetEntry(random_capabilities(rng), rng.randint(0, 12)) for _ in range(rng.randint(0, 2)))
    return ManagerTarget(entries)


def random_snapshot(rng: random.Random, now: float) -> ScalingSnapshot:
    manager_ids = rng.sample(MANAGER_IDS, rng.randint(0, len(MANAGER_IDS)))
    managers = tuple(
        ManagerView(
            manager_id,
            random_capabilities(rng),
            rng.choice((None, 0, 1, 3, 10)),
            random_target(rng),
            rng.choice((0.0, 1.5, 9.0, 25.0)),
            worker_cost_per_hour=rng.choice((0.0, 0.05, 0.2, 1.0)),
            boot_seconds=rng.choice((0.0, 5.0, 60.0)),
        )
        for manager_id in manager_ids
    )
    owners = [*manager_ids, "", "departed"]
    workers = tuple(
        WorkerView(
            f"w{index}",
            rng.choice(owners),
            random_capabilities(rng),
            capacity=rng.randint(1, 3),
            assigned=rng.choice((0, 0, 1, 2)),
            connected_since=now - rng.uniform(0.0, 100.0),
        )
        for index in range(rng.randint(0, 14))
    )
    groups = tuple(
        TaskGroup(random_capabilities(rng), rng.randint(0, 40), rng.randint(0, 8), rng.uniform(0.0, 30.0))
        for _ in range(rng.randint(0, 4))
    )
    groups = tuple(with_random_functions(rng, group) for group in groups)
    run_times = tuple(
        RunTime(rng.choice(FUNCTION_NAMES), random_capabilities(rng), rng.choice((0.0, 0.01, 1.0, 45.0, 600.0)))
        for _ in range(rng.choice((0, 0, 1, 3)))
    )
    clients = tuple(
        ClientWork(f"c{index}", rng.choice((1.0, 3.0)), rng.randint(0, 6),
                   tuple((group.capabilities, rng.randint(0, group.queued)) for group in groups[:2]),
                   rng.choice((0.0, 0.0, 0.1, 2.0)))
        for index in range(rng.choice((0, 0, 1, 3)))
    )  # fmt: skip
    return ScalingSnapshot(
        now=now, task_groups=groups, workers=workers, managers=managers, run_times=run_times, clients=clients
    )


def with_random_functions(rng: random.Random, group: TaskGroup) -> TaskGroup:
    """The group's tasks split by function: all of them, part of them, or (as from a hand-built view) none."""
    functions: list[FunctionTasks] = []
    queued, running = group.queued, group.running
    for name in rng.sample(FUNCTION_NAMES, rng.randint(0, len(FUNCTION_NAMES))):
        share_queued, share_running = rng.randint(0, queued), rng.randint(0, running)
        elapsed = tuple(rng.choice((0.0, 0.5, 30.0, 900.0)) for _ in range(share_running))
        functions.append(FunctionTasks(name, share_queued, elapsed))
        queued, running = queued - share_queued, running - share_running
    return replace(group, functions=tuple(functions))


def check_step(policy: ScalingPolicy, snapshot: ScalingSnapshot, memory: ScalingMemory) -> ScalingMemory:
    before = pickle.dumps(snapshot)  # every field, its derived ones too, as written: a change anywhere shows
    step = policy.decide(snapshot, memory)
    assert pickle.dumps(snapshot) == before, "decide() mutated the snapshot"
    assert policy.decide(snapshot, memory) == step, "decide() is not a function of its inputs"

    online = {manager.manager_id: manager for manager in snapshot.online_managers()}
    assert set(step.decision) <= set(online)
    assert set(step.reasons) == set(step.decision), "a reason for every target, and only for targets"
    assert all(step.reasons.values()), "an empty reason"
    for manager_id, target in step.decision.items():
        manager = online[manager_id]
        assert all(entry.workers > 0 for entry in target.entries)
        if manager.max_workers is not None:
            assert sum(entry.workers for entry in target.entries) <= manager.max_workers
        for entry in target.entries:
            assert covers(manager.capabilities, entry.capabilities), (manager, entry)
        own = [worker for worker in snapshot.workers if worker.manager_id == manager_id]
        idle = {worker.worker_id for worker in own if not worker.is_busy}
        assert set(target.drain) <= idle
        assert len(set(target.drain)) == len(target.drain)

    budget = getattr(policy, "max_cost_per_hour", None)
    if budget is not None:  # within the budget, unless busy workers alone cost more
        spend = floor = 0.0
        for manager_id, target in step.decision.items():
            cost = online[manager_id].worker_cost_per_hour
            busy = sum(1 for worker in snapshot.workers_of(manager_id) if worker.is_busy)
            spend += sum(entry.workers for entry in target.entries) * cost
            floor += max(0, min(busy, online[manager_id].max_workers or busy)) * cost
        assert spend <= max(budget, floor) + 1e-6, (spend, budget, floor)

    present = {manager.manager_id for manager in snapshot.managers}
    assert {owner for (owner, _names), _level in step.memory.levels} <= set(online)
    assert step.memory.tracked_manager_ids <= set(online)
    assert step.memory.warned_manager_ids <= present
    return step.memory


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_contract_over_random_sequences(name: str) -> None:
    policy = POLICIES[name]
    for seed in range(60):
        rng = random.Random(seed)
        memory, now = ScalingMemory(), rng.uniform(0.0, 1000.0)
        for _step in range(8):
            memory = check_step(policy, random_snapshot(rng, now), memory)
            now += rng.choice((0.0, 0.5, 2.0, 7.0, 20.0))


@pytest.mark.parametrize("name", sorted(name for name in POLICIES if name.startswith(("work", "cost"))))
def test_work_policy_never_asks_for_fewer_workers_than_are_busy(name: str) -> None:
    policy = POLICIES[name]
    for seed in range(60):
        rng = random.Random(seed)
        memory, now = ScalingMemory(), 0.0
        for _step in range(8):
            snapshot = random_snapshot(rng, now)
            step = policy.decide(snapshot, memory)
            for manager_id, target in step.decision.items():
                manager = next(manager for manager in snapshot.managers if manager.manager_id == manager_id)
                busy = sum(1 for worker in snapshot.workers_of(manager_id) if worker.is_busy)
                floor = busy if manager.max_workers is None else min(busy, manager.max_workers)
                assert sum(entry.workers for entry in target.entries) >= floor
            memory, now = step.memory, now + rng.choice((0.5, 2.0, 20.0))


@pytest.mark.parametrize("name", sorted(name for name in POLICIES if name.startswith("cost")))
def test_the_budget_split_per_client_only_lowers_what_the_cost_policy_spends(name: str) -> None:
    """With the clients in the snapshot, the cost policy never asks for more than without them (the split is a
    lower cap), nor fewer workers than are busy (checked above). Checked by switching it off: with the split
    adding instead of capping (`min(budget, limit)` replaced by `budget + limit`) this fails for cost-budget."""
    policy = POLICIES[name]
    for seed in range(60):
        rng = random.Random(seed)
        snapshot = random_snapshot(rng, rng.uniform(0.0, 1000.0))
        with_clients = policy.decide(snapshot, ScalingMemory())
        without = policy.decide(replace(snapshot, clients=()), ScalingMemory())
        for manager_id, target in with_clients.decision.items():
            alone = without.decision.get(manager_id)
            assert alone is not None and target_total(target) <= target_total(alone), (seed, manager_id)


def test_no_policy_never_emits() -> None:
    rng = random.Random(7)
    for _ in range(50):
        assert NoScaling().decide(random_snapshot(rng, 0.0), ScalingMemory()).decision == {}


# ---------------------------------------------------------------- warm capacity, whatever the policy


def warm_target(policy: ScalingPolicy, queued: int, min_workers: int, buffer_workers: int) -> tuple[int, bool]:
    """The workers the scheduler asks of manager m0 (max 6) with `queued` tasks, through the real hook, and whether
    a budget held the manager back."""
    from scaler.protocol import messages as m
    from scaler.protocol.handshake import local_python_version
    from scaler.protocol.ids import ClientID, PeerID, TaskID
    from scaler.scheduler.core.effects import Send
    from scaler.scheduler.core.events import Received
    from scaler.scheduler.core.scheduler_core import CoreSettings, SchedulerCore
    from scaler.scheduler.scaling_hook import PolicyScalingHook

    def hello(info: m.RoleInfo) -> m.Hello:
        return m.Hello(m.PROTOCOL_VERSION, local_python_version(), 1, "host", info)

    hook = PolicyScalingHook(policy)
    core = SchedulerCore(CoreSettings("s", "o", local_python_version()), hook, strict=True)
    manager, client = PeerID(b"Manager|m0"), PeerID(b"Client|c")
    info = m.ManagerInfo("m0", (), 6, "test", 0.5, 10.0, min_workers, buffer_workers)
    core.handle(Received(manager, hello(info), 0.0))
    core.handle(Received(client, hello(m.ClientInfo("c")), 0.0))
    for number in range(queued):
        core.handle(Received(client, m.Task(TaskID(number.to_bytes(16, "big")), ClientID(client), b"b", "f"), 0.0))
    effects = core.handle(Received(manager, m.Heartbeat(manager=m.ManagerStatus()), 1.0))
    targets = [e.message for e in effects if isinstance(e, Send) and isinstance(e.message, ManagerTarget)]
    return (sum(entry.workers for entry in targets[-1].entries) if targets else 0), hook.is_budget_capped


@pytest.mark.parametrize("name", [name for name in POLICIES if name != "no"])
def test_every_policy_keeps_the_warm_capacity_of_a_manager(name: str) -> None:
    """min_workers when idle, buffer_workers beyond what the queue needs, never above max_workers. Checked by
    making keep_warm_capacity return its target unchanged: the idle target is then 0 and this fails."""

    def target(queued: int, min_workers: int, buffer_workers: int) -> tuple[int, bool]:
        return warm_target(copy.deepcopy(POLICIES[name]), queued, min_workers, buffer_workers)

    assert target(0, min_workers=2, buffer_workers=0)[0] >= 2
    assert target(0, min_workers=0, buffer_workers=1)[0] >= 1
    assert target(0, min_workers=9, buffer_workers=9)[0] == 6  # never above max_workers
    plain, _ = target(3, min_workers=0, buffer_workers=0)
    buffered, capped = target(3, min_workers=0, buffer_workers=2)
    # beyond what the queue needs; a budget that counts the warm workers may hold the policy's own share back
    assert min(6, max(plain, 2) if capped else plain + 2) <= buffered <= 6
