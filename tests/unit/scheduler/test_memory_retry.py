"""A task whose processor ran out of memory runs again only on a worker with more memory (task_state rule 4):
a connected bigger worker (its reported limit or its declared `memory` capability), or one a worker manager
declares (the capability-aware scaling policies ask that manager); with neither, it fails as out of memory,
saying no bigger worker was available.

Checked by switching the mechanism off: with `(DISPATCHED, OUT_OF_MEMORY)` mapped to FINISH in
`task_state.TRANSITIONS`, 7 of the 8 fail (all but the cancel race, whose outcome is FINISH either way); with
`DispatchQueue.key_for` ignoring `outgrew_bytes` (no floor on the retry), 6 fail."""

from __future__ import annotations

from scaler.policy.capability import parse_capabilities
from scaler.policy.content import Allocation
from scaler.policy.decision import ScalingMemory
from scaler.policy.scaling import CapabilityScaling
from scaler.policy.snapshot import scaling_snapshot
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.scheduler.scaling_hook import make_scaling_hook
from scaler_rehearsal.testing.simulation import PYTHON, FakeWorker, SimulatedCluster, hello, task

MiB = 1 << 20
OOM = m.ResultStatus.OUT_OF_MEMORY


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def report_limit(sim: SimulatedCluster, worker: FakeWorker, limit_bytes: int) -> None:
    """The worker's heartbeat reports the memory limit it runs under."""
    sim.send(worker.peer, m.Heartbeat(worker=m.WorkerStatus(memory_limit_bytes=limit_bytes)))


def last_result(sim: SimulatedCluster) -> m.TaskResult:
    return [e.message for e in sim.effects if isinstance(e, Send) and isinstance(e.message, m.TaskResult)][-1]


def story_words(sim: SimulatedCluster, task_id: TaskID) -> str:
    reply = sim.core.tasks.stories.story(task_id)
    return " | ".join(f"{entry.what}: {entry.cause}" for entry in reply.entries)


def test_an_out_of_memory_task_runs_again_on_a_connected_bigger_worker() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, max_task_retries=0))
    client, small = sim.add_client(), sim.add_worker("small")
    report_limit(sim, small, 256 * MiB)
    sim.submit(client, [task(client.peer, 1)])
    assert small.held == [tid(1)]
    big = sim.add_worker("big")
    report_limit(sim, big, 1024 * MiB)
    sim.finish(small, status=OOM)
    assert big.held == [tid(1)] and not small.held and client.answers[tid(1)] == []
    sim.check_invariants()
    sim.submit(client, [task(client.peer, 2)])
    assert small.held == [tid(2)]  # other tasks still go to the small worker
    sim.finish(big)
    assert client.answers[tid(1)] == [("result", "success")]
    words = story_words(sim, tid(1))
    assert "out of memory on worker" in words and "256 MiB" in words and "more memory" in words, words


def test_not_retried_on_a_worker_of_the_same_size() -> None:
    sim = SimulatedCluster()
    client, first = sim.add_client(), sim.add_worker("first")
    report_limit(sim, first, 256 * MiB)
    sim.submit(client, [task(client.peer, 1)])
    second = sim.add_worker("second")
    report_limit(sim, second, 256 * MiB)
    sim.finish(first, status=OOM)
    assert client.answers[tid(1)] == [("result", "outOfMemory")] and not second.held
    text = last_result(sim).error_message
    assert "not retried" in text and "no worker with more than 256 MiB of memory" in text, text
    assert not sim.core.tasks.records
    sim.check_invariants()


def test_a_declared_memory_capability_counts_as_the_workers_memory() -> None:
    """Under capability allocation the retry keeps the task's own requirements too: the bigger worker without
    `gpu` is no place for it; the one with `gpu` and `memory=8GiB` (declared, no heartbeat) is."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, allocate=Allocation.CAPABILITY))
    client = sim.add_client()
    small = sim.add_worker("small", capabilities=parse_capabilities("gpu,memory=2GiB"))
    sim.submit(client, [task(client.peer, 1, capabilities=(("gpu", -1),))])
    assert small.held == [tid(1)]
    plain_big = sim.add_worker("plain", capabilities=parse_capabilities("memory=64GiB"))
    big = sim.add_worker("big", capabilities=parse_capabilities("gpu,memory=8GiB"))
    sim.finish(small, status=OOM)
    assert big.held == [tid(1)] and not plain_big.held
    sim.finish(big, status=OOM)  # nothing with gpu above 8 GiB: it fails now
    assert client.answers[tid(1)] == [("result", "outOfMemory")]
    assert "more than 8 GiB" in last_result(sim).error_message


def test_an_out_of_memory_task_waits_for_the_manager_that_declares_bigger_workers() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, max_task_retries=0))
    client, small = sim.add_client(), sim.add_worker("small")
    report_limit(sim, small, 256 * MiB)
    sim.send(b"Manager|big", hello(m.ManagerInfo("big", parse_capabilities("memory=4GiB"), max_workers=2)))
    sim.send(b"Manager|plain", hello(m.ManagerInfo("plain", (), max_workers=2)))
    sim.submit(client, [task(client.peer, 1)])
    sim.finish(small, status=OOM)
    assert client.answers[tid(1)] == [] and not small.held
    (group,) = [group for group in sim.core.view().pending if group.count]
    assert group.capabilities == (("memory", 256 * MiB + 1),)
    assert "memory >= 256 MiB" in group.reason, group.reason
    snapshot = scaling_snapshot(sim.core.view(), 60.0)
    decision = CapabilityScaling().decide(snapshot, ScalingMemory()).decision
    assert [entry.workers for entry in decision["big"].entries] == [1]
    assert decision["plain"].entries == ()  # its workers' memory is unknown: not asked
    sim.submit(client, [task(client.peer, 2)])
    assert small.held == [tid(2)]
    booted = sim.add_worker("booted", capabilities=parse_capabilities("memory=4GiB"))
    assert booted.held == [tid(1)]
    sim.finish(booted)
    assert client.answers[tid(1)] == [("result", "success")]


def test_a_manager_with_no_bigger_workers_does_not_keep_the_task() -> None:
    sim = SimulatedCluster()
    client, small = sim.add_client(), sim.add_worker("small")
    report_limit(sim, small, 4096 * MiB)
    sim.send(b"Manager|m", hello(m.ManagerInfo("m", parse_capabilities("memory=4GiB"))))
    sim.submit(client, [task(client.peer, 1)])
    sim.finish(small, status=OOM)
    assert client.answers[tid(1)] == [("result", "outOfMemory")]
    assert "no worker manager declares one" in last_result(sim).error_message


def test_a_worker_whose_memory_is_unknown_gives_no_floor_and_the_task_fails() -> None:
    sim = SimulatedCluster()
    client, small = sim.add_client(), sim.add_worker("small")
    sim.submit(client, [task(client.peer, 1)])
    big = sim.add_worker("big")
    report_limit(sim, big, 1024 * MiB)
    sim.finish(small, status=OOM)
    assert client.answers[tid(1)] == [("result", "outOfMemory")] and not big.held
    assert "memory of the worker it ran on is not known" in last_result(sim).error_message


def test_a_cancel_racing_an_out_of_memory_result_ends_the_task_once() -> None:
    sim = SimulatedCluster()
    client, small = sim.add_client(), sim.add_worker("small")
    report_limit(sim, small, 256 * MiB)
    sim.submit(client, [task(client.peer, 1)])
    big = sim.add_worker("big")
    report_limit(sim, big, 1024 * MiB)
    small.alive = False  # the cancel is on its way when the processor dies
    sim.cancel(client, [tid(1)])
    small.alive = True
    sim.send(small.link, m.TaskResult(tid(1), OOM, error_message="out of memory"))
    assert client.answers[tid(1)] == [("result", "outOfMemory")] and not big.held
    sim.check_invariants()


def test_balancing_never_moves_an_outgrown_task_to_a_smaller_idle_worker() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, load_balance_trigger_times=1))
    client, small = sim.add_client(), sim.add_worker("small", capacity=3)
    report_limit(sim, small, 256 * MiB)
    sim.submit(client, [task(client.peer, 1)])
    big = sim.add_worker("big", capacity=3)
    report_limit(sim, big, 1024 * MiB)
    sim.submit(client, [task(client.peer, n) for n in (2, 3)])  # to the least loaded: big gets one
    sim.finish(small, status=OOM)
    assert tid(1) in big.held
    for held in list(small.held):
        sim.finish(small, held)
    for _ in range(5):
        sim.advance(1.0)
    assert tid(1) in big.held and tid(1) not in small.held


def test_under_vanilla_scaling_the_manager_with_bigger_workers_still_starts_one() -> None:
    """`vanilla` reads no capabilities: one small worker and one queued task keep its target where it is. The hook
    raises the big manager's target by one while the outgrown task waits (and holds it while the unit boots), and
    leaves the manager without a `memory` capability alone. Checked by switching it off: with
    `make_room_for_outgrown` returning its target, the big manager's target stays 0 and this fails."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    client, small = sim.add_client(), sim.add_worker("small")
    report_limit(sim, small, 256 * MiB)
    sim.send(b"Manager|big", hello(m.ManagerInfo("big", parse_capabilities("memory=4GiB"), max_workers=2)))
    sim.send(b"Manager|plain", hello(m.ManagerInfo("plain", (), max_workers=2)))
    sim.submit(client, [task(client.peer, 1)])
    sim.finish(small, status=OOM)
    hook = make_scaling_hook("simple", "allocate=even_load; scaling=vanilla")
    assert hook is not None
    big, plain = hook.targets(sim.core.view(), "big"), hook.targets(sim.core.view(), "plain")
    assert big is not None and sum(entry.workers for entry in big.entries) == 1
    assert plain is not None and sum(entry.workers for entry in plain.entries) == 0
    assert "more memory than any connected worker" in hook.reason("big")
    booted = sim.add_worker("booted", capabilities=parse_capabilities("memory=4GiB"))
    assert booted.held == [tid(1)]
