"""Each client's quotas (scheduler/core/quotas.py): running tasks and workers' worth of spend, what they hold back
from dispatch and from the scaling policies, and the "why pending" words."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scaler.policy.decision import ScalingMemory
from scaler.policy.scaling.work import WorkScaling
from scaler.policy.snapshot import (
    FunctionTasks,
    ManagerView,
    ScalingSnapshot,
    TaskGroup,
    fewer_queued,
    scaling_snapshot,
)
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID
from scaler.scheduler.core.quotas import RUNNING_TASKS, WORKERS, ClientQuota, held_back, reason_words
from scaler_rehearsal.testing.simulation import SimulatedCluster, hello, task

A, B = ClientID(b"Client|a"), ClientID(b"Client|b")
GPU = (("gpu", -1),)


def test_the_smaller_quota_binds_and_the_workers_worth_says_spend() -> None:
    assert ClientQuota(running_tasks=5).held_limit == 5 and ClientQuota(running_tasks=5).binding == RUNNING_TASKS
    assert ClientQuota(workers=3).held_limit == 3 and ClientQuota(workers=3).binding == WORKERS
    assert ClientQuota(running_tasks=10, workers=2).held_limit == 2
    assert ClientQuota(running_tasks=2, workers=10).binding == RUNNING_TASKS
    assert ClientQuota(workers=1).words(7) == "7 at their client's quota of 1 worker's worth of spend (max_workers)"
    assert ClientQuota().held_limit == 0


def test_held_back_counts_what_could_not_start_on_free_workers_capability_sets_in_order() -> None:
    quotas = {A: ClientQuota(workers=3), B: ClientQuota(running_tasks=1)}
    queued = {A: {(): 2, GPU: 5}, B: {(): 4}, ClientID(b"Client|free"): {(): 100}}
    found = held_back(quotas, queued, {A: 1, B: 1})
    # a: room for 2 more, both taken by its () tasks, so its 5 gpu ones wait; b is at its quota: its 4 wait
    assert found == {GPU: {WORKERS: 5}, (): {RUNNING_TASKS: 4}}
    assert reason_words(quotas, {WORKERS: 5, RUNNING_TASKS: 4}) == (
        "5 at their client's quota of 3 workers' worth of spend (max_workers); "
        "4 at their client's quota of running tasks (max_running_tasks)"
    )


def test_a_workers_worth_quota_keeps_the_pool_from_growing_from_a_cold_start_and_holds_dispatch() -> None:
    """A client of max_workers=2 queues 50 tasks before any worker exists: the scaling policy sees 2 tasks of
    demand, not 50, and asks for 2 workers; on 4 workers it holds 2 at a time and the status says the quota is
    why. Checked by switching it off (held_back returning {}): the policy sees 50 and asks for its whole room."""
    sim = SimulatedCluster()
    capped = sim.add_client("capped", max_workers=2)
    sim.submit(capped, [task(capped.peer, n) for n in range(50)])
    snapshot = scaling_snapshot(sim.core.view(), 10.0)
    (demand,) = snapshot.task_groups
    assert demand.queued == 2
    elastic = ManagerView("elastic", max_workers=10)
    with_manager = ScalingSnapshot(snapshot.now, snapshot.task_groups, managers=(elastic,))
    step = WorkScaling().decide(with_manager, ScalingMemory())
    assert sum(entry.workers for entry in step.decision["elastic"].entries) == 2
    workers = [sim.add_worker(f"w{n}", capacity=4) for n in range(4)]
    assert sum(len(w.held) for w in workers) == 2
    (group,) = sim.core.view().pending
    assert group.reason.startswith("48 at their client's quota of 2 workers' worth of spend (max_workers)")
    sim.check_invariants()


def test_the_scaling_snapshot_carries_each_clients_work_share_and_keys_budget() -> None:
    """What the cost policy splits its budget by (policy/scaling/budget_split.py), from the real core: each client
    with work, its share, its tasks at workers, its queued tasks that could start (a quota's held back left out),
    and its key's budget (set on the hello by the shell, peer_keys.settle)."""
    sim = SimulatedCluster()
    wide = sim.add_client("wide", share=3.0)
    capped = sim.add_client("capped", max_workers=1)
    keyed_peer = b"Client|keyed"
    sim.send(keyed_peer, hello(replace(m.ClientInfo("keyed"), max_cost_per_hour=0.4)))
    worker = sim.add_worker("w", capacity=2)
    sim.submit(wide, [task(wide.peer, n) for n in range(10)])
    sim.submit(capped, [task(capped.peer, 100 + n) for n in range(5)])
    sim.send(keyed_peer, task(keyed_peer, 200))
    clients = {c.client_id: c for c in scaling_snapshot(sim.core.view(), 10.0).clients}
    assert len(clients) == 3, clients
    by_name = {client_id.rsplit("|", 1)[-1]: work for client_id, work in clients.items()}
    assert by_name["wide"].share == 3.0 and by_name["wide"].tasks == 10
    assert by_name["capped"].running + sum(n for _, n in by_name["capped"].queued) == 1, "its quota holds 4 back"
    assert by_name["keyed"].max_cost_per_hour == 0.4 and by_name["keyed"].tasks == 1
    assert len(worker.held) == 2
    sim.check_invariants()


def test_held_back_tasks_leave_the_per_function_counts_the_duration_policies_read_too() -> None:
    """`fewer_queued` cuts each function's queued tasks in proportion (largest remainders), so outstanding work in
    seconds does not count what a quota holds back (scaling_snapshot uses it). Checked by switching it off
    (`fewer_queued` replacing the group's count only): the functions keep 6 and 3 and this fails."""
    group = TaskGroup((), 10, 0, functions=(FunctionTasks("f", 6), FunctionTasks("g", 3)))
    cut = fewer_queued(group, 5)
    assert cut.queued == 5 and [f.queued for f in cut.functions] == [3, 1]  # 4 of the 9 known, f's remainder first
    assert fewer_queued(group, 10) is group and [f.queued for f in fewer_queued(group, 0).functions] == [0, 0]


@pytest.mark.parametrize("ending", ["result", "error", "cancel", "processor death", "worker loss"])
def test_a_client_at_a_quota_of_one_starts_its_next_task_however_its_running_one_leaves(ending: str) -> None:
    """Issue 73's shape: a bound that counts down must count back up on every way out. A task of a client at a quota
    of one leaves its worker (it ends, fails, is cancelled, its processor or its worker dies): one of its tasks is at a
    worker again. Checked to fail with `quota_freed` not called from `TaskTable._move` (result, error, cancel,
    processor death: the tasks set aside over the quota stayed aside); a lost worker's task is queued again itself,
    which brings none back."""
    sim = SimulatedCluster()
    client = sim.add_client("capped", max_running_tasks=1)
    workers = [sim.add_worker(f"w{n}", capacity=2) for n in range(2)]
    sim.submit(client, [task(client.peer, n) for n in range(1, 4)])
    (worker,) = [w for w in workers if w.held]
    (running,) = worker.held
    if ending == "result":
        sim.finish(worker)
    elif ending == "error":
        sim.finish(worker, status=m.ResultStatus.FAILED)
    elif ending == "cancel":
        sim.cancel(client, [running])
    elif ending == "processor death":
        sim.processor_died(worker, sim.link_of(running))
    else:
        sim.kill(worker)
    held = [t for w in workers if w.alive for t in w.held]
    assert len(held) == 1, f"after a {ending}, the client has {len(held)} task(s) at workers"
    sim.check_invariants()
