"""A manager's units reclaimed by the provider (a spot interruption): their workers get no new task, give back
what they have not started, and have the notice period for what runs; what is left then, or lost with the
unit, runs elsewhere without spending the task's retry budget."""

from __future__ import annotations

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler_rehearsal.testing.simulation import PYTHON, FakeWorker, SimulatedCluster, hello, task

MANAGER = b"Manager|spot"


def cluster() -> SimulatedCluster:
    # no retry at all: a task whose worker dies fails at once, unless its worker was drained
    sim = SimulatedCluster(CoreSettings("tcp://sim:1", "tcp://sim:2", PYTHON, max_task_retries=0))
    sim.send(MANAGER, hello(m.ManagerInfo("spot", (), None, "aws_raw_ecs")))
    return sim


def spot_worker(sim: SimulatedCluster, unit: str, capacity: int = 3) -> FakeWorker:
    peer = PeerID(f"Worker|ECS-{unit}|0123".encode())
    worker = sim.workers[peer] = FakeWorker(peer, capacity)
    sim.send(peer, hello(m.WorkerInfo((), capacity, "spot", f"ECS-{unit}")))
    sim.add_processor(worker)
    return worker


def test_a_reclaimed_units_worker_is_drained_and_its_tasks_move_at_no_retry_cost() -> None:
    sim = cluster()
    client = sim.add_client("c")
    doomed = spot_worker(sim, "unit1")
    sim.submit(client, [task(client.peer, n) for n in range(3)])
    assert len(doomed.held) == 3
    sim.send(MANAGER, m.UnitsReclaimed(("unit1",), 30.0))
    assert doomed.held == [task(client.peer, 0).task_id], "the two unstarted tasks were given back"
    spare = spot_worker(sim, "unit2", capacity=4)
    assert spare.held == [task(client.peer, 1).task_id, task(client.peer, 2).task_id]
    sim.submit(client, [task(client.peer, 3)])
    assert task(client.peer, 3).task_id not in doomed.held, "a draining worker gets no new task"
    sim.advance(31.0)  # the notice ends with task 0 still running there: it moves, its worker is told to stop it
    assert doomed.held == [] and task(client.peer, 0).task_id in spare.held
    sim.kill(doomed)
    while spare.held:
        sim.finish(spare)
    assert all(answers == [("result", "success")] for answers in client.answers.values()), client.answers
    sim.check_invariants()


def test_a_drained_worker_that_dies_before_its_notice_ends_costs_no_retry() -> None:
    sim = cluster()
    client = sim.add_client("c")
    doomed = spot_worker(sim, "unit1", capacity=1)
    sim.submit(client, [task(client.peer, 0)])
    sim.send(MANAGER, m.UnitsReclaimed(("unit1",), 120.0))
    sim.kill(doomed)  # the provider took it early
    spare = spot_worker(sim, "unit2")
    sim.finish(spare)
    assert client.answers[task(client.peer, 0).task_id] == [("result", "success")]


def test_another_managers_units_are_not_touched() -> None:
    sim = cluster()
    client = sim.add_client("c")
    other = sim.add_worker("native")  # no unit, no manager
    sim.submit(client, [task(client.peer, 0)])
    sim.send(MANAGER, m.UnitsReclaimed(("native",), 10.0))
    assert other.held == [task(client.peer, 0).task_id]
    assert sim.core.workers[other.peer].draining_until is None


# ---------------------------------------------------------------- a worker's own lifetime (a batch job's time limit)


def test_a_worker_whose_lifetime_ends_drains_hands_its_work_over_and_is_let_go() -> None:
    """Checked by switching it off: with WorkerLeaving's drainSeconds ignored the worker is dropped at once, its
    running task moves (and would fail with no retry left: max_task_retries=0)."""
    sim = cluster()
    client = sim.add_client("c")
    ending = sim.add_worker("ending", capacity=3)
    sim.submit(client, [task(client.peer, n) for n in range(3)])
    assert len(ending.held) == 3
    sim.send(ending.peer, m.WorkerLeaving("its lifetime of 3600 s ends in 60 s", 60.0))
    assert ending.peer in sim.core.workers, "it drains: it is not dropped yet"
    assert ending.held == [task(client.peer, 0).task_id], "the two unstarted tasks were given back"
    fresh = sim.add_worker("fresh", capacity=4)  # its replacement
    sim.submit(client, [task(client.peer, 3)])
    assert task(client.peer, 3).task_id not in ending.held, "a draining worker gets no new task"
    assert len(fresh.held) == 3
    sim.finish(ending)  # the task it ran ends in time, its result kept
    shutdowns = [e for e in sim.advance(0.5) if getattr(e, "peer", None) == ending.peer]
    assert ending.peer not in sim.core.workers, "holding nothing, it is let go"
    assert any(isinstance(getattr(e, "message", None), m.Shutdown) for e in shutdowns)
    while fresh.held:
        sim.finish(fresh)
    assert all(answers == [("result", "success")] for answers in client.answers.values()), client.answers
    sim.check_invariants()


def test_a_draining_workers_tasks_move_when_its_drain_ends_at_no_retry_cost() -> None:
    sim = cluster()
    client = sim.add_client("c")
    ending = sim.add_worker("ending", capacity=1)
    sim.submit(client, [task(client.peer, 0)])
    sim.send(ending.peer, m.WorkerLeaving("its lifetime ends in 10 s", 10.0))
    fresh = sim.add_worker("fresh")
    sim.advance(11.0)  # still running when the drain ends: moved, and the worker told to stop it
    assert ending.held == [] and fresh.held == [task(client.peer, 0).task_id]
    assert ending.peer not in sim.core.workers
    sim.finish(fresh)
    assert client.answers[task(client.peer, 0).task_id] == [("result", "success")]
    sim.check_invariants()


def test_an_idle_worker_asking_to_drain_leaves_at_once() -> None:
    sim = cluster()
    idle = sim.add_worker("idle")
    sim.send(idle.peer, m.WorkerLeaving("its lifetime ends in 60 s", 60.0))
    assert idle.peer not in sim.core.workers
