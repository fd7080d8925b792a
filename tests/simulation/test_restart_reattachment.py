"""A restarted scheduler joins what its clients submit again with what its workers still hold: a task that
ran during the restart is neither run twice nor lost, and each client hears about each task once.

What a worker holds, its processors name in their links' hellos (link_sessions.py rule 5). Checked with reattachment
off, by hand: with `Reattachment.worker_holds` returning at once (the new instance forgets what processors say they
hold), the first test fails: the early result is not delivered."""

from __future__ import annotations

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID, TaskID
from scaler.scheduler.core.reattachment import WINDOW_SECONDS
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler_rehearsal.testing.simulation import PYTHON, FakeClient, FakeWorker, SimulatedCluster, hello, success, task

OLD, NEW = b"old-instance", b"new-instance"
CLIENT, WORKER = b"Client|c", b"Worker|SIM|w"


def restarted() -> SimulatedCluster:
    return SimulatedCluster(CoreSettings("tcp://sim:1", "tcp://sim:2", PYTHON, instance_id=NEW))


def tid(number: int) -> TaskID:
    return task(CLIENT, number).task_id


def worker_back(sim: SimulatedCluster, held: list[int], capacity: int = 4) -> FakeWorker:
    """A worker of the old instance registers with the new one; its processor says hello again on its link, naming
    what it still holds."""
    worker = sim.workers[PeerID(WORKER)] = FakeWorker(PeerID(WORKER), capacity, [tid(n) for n in held], started=1)
    sim.send(WORKER, m.Hello(m.PROTOCOL_VERSION, PYTHON, 1, "sim", m.WorkerInfo((), capacity, "", "SIM"), OLD))
    link = PeerID(WORKER + b"/p1")
    worker.links.append(link)
    worker.where.update((task_id, link) for task_id in worker.held)
    info = m.ProcessorInfo(b"p1", PeerID(WORKER), held_tasks=tuple(worker.held), max_staged_tasks=64)
    sim.send(link, m.Hello(m.PROTOCOL_VERSION, PYTHON, 1, "sim", info, OLD))
    return worker


def client_back(sim: SimulatedCluster) -> FakeClient:
    client = sim.clients[PeerID(CLIENT)] = FakeClient(PeerID(CLIENT))
    sim.send(CLIENT, m.Hello(m.PROTOCOL_VERSION, PYTHON, 1, "sim", m.ClientInfo("c"), OLD))
    return client


def tasks_sent_to_worker(sim: SimulatedCluster) -> list[TaskID]:
    """The tasks sent on the links of the worker's processors."""
    return [e.message.task_id for e in sim.effects if getattr(e, "peer", b"").startswith(WORKER + b"/") and isinstance(
        getattr(e, "message", None), m.Task)]  # fmt: skip


def test_held_tasks_are_adopted_early_results_delivered_and_nothing_runs_twice() -> None:
    sim = restarted()
    sim.advance(0.1)
    worker = worker_back(sim, held=[1, 2])
    sim.finish(worker, tid(1))  # its result comes before the client submitted the task again
    client = client_back(sim)
    sim.submit(client, [task(CLIENT, n) for n in (1, 2, 3)])
    assert tasks_sent_to_worker(sim) == [], "tasks of a re-attaching client wait for the workers to come back"
    sim.advance(WINDOW_SECONDS)
    assert client.answers[tid(1)] == [("result", "success")], "the early result is delivered at once"
    assert tasks_sent_to_worker(sim) == [tid(3)], "task 2 runs on where it was; only the new task is sent"
    sim.finish(worker, tid(2))
    sim.finish(worker, tid(3))
    assert all(answers == [("result", "success")] for answers in client.answers.values()), client.answers
    assert sim.core.reattachment.adopted == 2
    sim.check_invariants()


def test_a_new_client_is_not_held_back_and_a_forged_early_result_is_dropped() -> None:
    sim = restarted()
    sim.advance(0.1)
    worker_back(sim, held=[5])
    sim.send(WORKER + b"/p1", success(tid(6)))  # a result for a task the processor did not say it held: dropped
    client = sim.add_client("c")
    sim.submit(client, [task(CLIENT, 6)])
    assert tasks_sent_to_worker(sim) == [tid(6)], "a client that connects for the first time is served at once"
    assert client.answers[tid(6)] == []


def test_a_held_task_whose_worker_left_before_its_client_came_back_runs_again() -> None:
    sim = restarted()
    sim.advance(0.1)
    worker = worker_back(sim, held=[1])
    sim.kill(worker)
    other = sim.add_worker("other")
    client = client_back(sim)
    sim.submit(client, [task(CLIENT, 1)])
    sim.advance(WINDOW_SECONDS)
    sim.finish(other, tid(1))
    assert client.answers[tid(1)] == [("result", "success")]


def test_a_worker_given_up_on_by_the_same_instance_keeps_a_queued_task_and_drops_a_reassigned_one() -> None:
    sim = SimulatedCluster()
    client = sim.add_client("c")
    first = sim.add_worker("w", capacity=2)
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    assert first.held == [TaskID((1).to_bytes(16, "big")), TaskID((2).to_bytes(16, "big"))]
    sim.kill(first)  # the scheduler gives up on it: both tasks go back to the queue
    other = sim.add_worker("other", capacity=1)  # takes task 1
    assert other.held == [TaskID((1).to_bytes(16, "big"))]
    # the first worker was alive after all: it registers again, its processor naming both tasks
    first.alive, first.held = True, [TaskID((1).to_bytes(16, "big")), TaskID((2).to_bytes(16, "big"))]
    link = first.links[0]
    first.where.update((task_id, link) for task_id in first.held)
    sim.send(first.peer, hello(m.WorkerInfo((), 2, "", "SIM")))
    sim.send(link, hello(m.ProcessorInfo(b"p1", first.peer, held_tasks=tuple(first.held), max_staged_tasks=64)))
    assert first.held == [TaskID((2).to_bytes(16, "big"))], "task 1, now the other worker's, is cancelled here"
    sim.finish(first)
    sim.finish(other)
    assert all(answers == [("result", "success")] for answers in client.answers.values()), client.answers
    sim.check_invariants()
