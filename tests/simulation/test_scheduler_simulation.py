"""Random cluster histories replayed against the real scheduler core on a fake clock (strict: a handler
error fails the test).

Whatever happens (workers joining, finishing, dying, leaving; clients cancelling; results racing
cancels; graphs; balancing moving prefetched tasks; a manager booting and losing workers), every
submitted task and graph target gets exactly one final answer, and the core's bookkeeping stays
consistent after every step.
"""

from __future__ import annotations

import random

import pytest

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, GraphID, TaskID
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.scheduler.scaling_hook import make_scaling_hook
from scaler.testing.fake_managers import FakeManager, ManagerModel
from scaler.testing.simulation import PYTHON, FakeClient, SimulatedCluster, task


def run_history(seed: int, steps: int = 400) -> SimulatedCluster:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, max_task_retries=2), seed=seed)
    rng = sim.random
    client = sim.add_client()
    next_task = 0
    next_worker = 0
    for _ in range(steps):
        action = rng.random()
        live_workers = [w for w in sim.workers.values() if w.alive]
        if action < 0.30:
            batch = [task(client.peer, next_task + i, priority=rng.randrange(3)) for i in range(rng.randrange(1, 6))]
            next_task += len(batch)
            sim.submit(client, batch)
        elif action < 0.40 or not live_workers:
            sim.add_worker(f"w{next_worker}", capacity=rng.randrange(1, 4))
            next_worker += 1
        elif action < 0.70:
            worker = rng.choice(live_workers)
            if worker.held:
                status = rng.choice([m.ResultStatus.SUCCESS, m.ResultStatus.SUCCESS, m.ResultStatus.FAILED])
                sim.finish(worker, rng.choice(worker.held), status)
        elif action < 0.80:
            unanswered = [t for t, answers in client.answers.items() if not answers]
            if unanswered:
                sim.cancel(client, rng.sample(unanswered, k=min(len(unanswered), rng.randrange(1, 4))))
        elif action < 0.87:
            sim.kill(rng.choice(live_workers))
        elif action < 0.92:
            worker = rng.choice(live_workers)
            worker.alive = False
            worker.held.clear()
            sim.send(worker.peer, m.WorkerLeaving("scale down"))
        else:
            sim.advance(rng.random())
        sim.check_invariants()
    # drain: a fresh worker joins, and every live worker finishes everything it holds
    sim.add_worker("finisher", capacity=8)
    for _ in range(10 * next_task + 10):
        busy = [w for w in sim.workers.values() if w.alive and w.held]
        if not busy:
            break
        sim.finish(busy[0])
        sim.check_invariants()
    return sim


@pytest.mark.parametrize("seed", range(25))
def test_every_task_ends_exactly_once(seed: int) -> None:
    sim = run_history(seed)
    (client,) = sim.clients.values()
    assert client.answers, "the history submitted nothing"
    for task_id, answers in client.answers.items():
        assert len(answers) == 1, f"task {task_id.hex()} got {answers}"
    assert not sim.core.tasks.records
    assert not client.errors


def test_a_history_exercises_every_kind_of_ending() -> None:
    endings = set()
    for seed in range(10):
        (client,) = run_history(seed).clients.values()
        endings.update(answer for answers in client.answers.values() for answer in answers)
    assert {("result", "success"), ("result", "failed"), ("cancelled", "canceled")} <= endings
    assert ("result", "workerDied") in endings


def test_results_of_a_dead_worker_arriving_late_are_ignored() -> None:
    sim = SimulatedCluster()
    client, doomed = sim.add_client(), sim.add_worker("doomed")
    sim.submit(client, [task(client.peer, 1)])
    task_id: TaskID = doomed.held[0]
    sim.kill(doomed)
    survivor = sim.add_worker("survivor")
    sim.send(doomed.peer, m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"late"))
    assert client.answers[task_id] == []
    sim.finish(survivor)
    assert client.answers[task_id] == [("result", "success")]


# ---------------------------------------------------------------- graphs, balancing and managers in the mix


def random_graph(rng: random.Random, client: FakeClient, first: int) -> m.GraphTask:
    """A random DAG of 2-6 nodes (each depends on up to two earlier ones) with random targets."""
    graph_id = GraphID(f"graph-{first}".encode())
    ids = [TaskID((first + index).to_bytes(16, "big")) for index in range(rng.randint(2, 6))]
    nodes = tuple(
        m.Task(task_id, ClientID(client.peer), b"body", f"node{index}", rng.randrange(3), graph_id=graph_id,
               dependencies=tuple(rng.sample(ids[:index], k=rng.randint(0, min(2, index)))))
        for index, task_id in enumerate(ids)
    )  # fmt: skip
    return m.GraphTask(graph_id, ClientID(client.peer), nodes, tuple(rng.sample(ids, k=rng.randint(1, len(ids)))))


class MixedHistory:
    """Clients submit tasks and graphs and cancel; hand-run workers with prefetch join, finish, die and
    leave (so balancing moves tasks); a manager under the work policy boots workers that run tasks on
    their own, and loses some of its units."""

    def __init__(self, seed: int) -> None:
        settings = CoreSettings("s", "o", PYTHON, max_task_retries=2, load_balance_seconds=0.5)
        hook = make_scaling_hook("simple", "allocate=even_load; scaling=work; cooldown_seconds=3")
        self.sim = SimulatedCluster(settings, seed=seed, scaling=hook)
        self.rng, self.durations = self.sim.random, {}
        self.client = self.sim.add_client()
        model = ManagerModel("native", max_workers=4, boot_seconds=1.5, worker_capacity=2, heartbeat_seconds=1.0)
        self.manager = FakeManager(self.sim, model, lambda task: self.durations.get(task.task_id, 0.5))
        self.manager.start_heartbeats(0.0)
        self.next_task = self.next_worker = 0
        self.graph_targets: set[TaskID] = set()

    def step(self) -> None:
        sim, rng, client = self.sim, self.rng, self.client
        manual = [w for w in sim.workers.values() if w.alive and w.durations is None]
        action = rng.random()
        if action < 0.20:
            self.submit_tasks()
        elif action < 0.30:
            graph = random_graph(rng, client, self.next_task)
            self.next_task += len(graph.nodes)
            self.graph_targets.update(graph.targets)
            sim.submit_graph(client, graph)
        elif action < 0.38 or not manual:
            sim.add_worker(f"w{self.next_worker}", capacity=rng.randrange(1, 4))
            self.next_worker += 1
        elif action < 0.62:
            worker = rng.choice(manual)
            if worker.held:
                status = rng.choice([m.ResultStatus.SUCCESS, m.ResultStatus.SUCCESS, m.ResultStatus.FAILED])
                sim.finish(worker, rng.choice(worker.held), status)
        elif action < 0.70:
            unanswered = [t for t, answers in client.answers.items() if not answers]
            if unanswered:
                sim.cancel(client, rng.sample(unanswered, k=min(len(unanswered), rng.randrange(1, 4))))
        elif action < 0.75:
            sim.kill(rng.choice(manual))
        elif action < 0.79:
            sim.leave(rng.choice(manual))
        elif action < 0.82 and self.manager.units:
            self.manager.lose_unit(rng.choice(sorted(self.manager.units)))
        else:
            sim.advance(rng.choice((0.1, 0.5, 1.0)))

    def submit_tasks(self) -> None:
        batch = [task(self.client.peer, self.next_task + i, priority=self.rng.randrange(3)) for i in range(4)]
        for item in batch:
            self.durations[item.task_id] = self.rng.uniform(0.1, 2.0)
        self.next_task += len(batch)
        self.sim.submit(self.client, batch)

    def drain(self) -> None:
        """No more failures: a finisher joins; hand-run workers finish what they hold; time runs."""
        sim = self.sim
        sim.add_worker("finisher", capacity=4)
        for _ in range(50 * self.next_task + 100):
            if all(self.client.answers.values()):
                return
            busy = [w for w in sim.workers.values() if w.alive and w.durations is None and w.held]
            if busy:
                sim.finish(busy[0])
            else:
                sim.advance(1.0)
            sim.check_invariants()


@pytest.mark.parametrize("seed", range(20))
def test_every_task_and_graph_target_ends_exactly_once_with_graphs_balancing_and_managers(seed: int) -> None:
    history = MixedHistory(seed)
    for _ in range(300):
        history.step()
        history.sim.check_invariants()
    history.drain()
    client, core = history.client, history.sim.core
    for task_id, answers in client.answers.items():
        assert len(answers) == 1, f"task {task_id.hex()} got {answers}"
    assert not core.tasks.records and not core.graphs.graphs
    assert not client.errors


def test_mixed_histories_exercise_graphs_balancing_and_the_manager() -> None:
    returned = launched = lost = graph_answers = 0
    for seed in range(5):
        history = MixedHistory(seed)
        for _ in range(300):
            history.step()
        sent = [e.message for e in history.sim.effects if isinstance(e, Send)]
        returned += sum(1 for message in sent if isinstance(message, m.TaskReturn))
        launched += history.manager.launches
        lost += sum(1 for unit in history.manager.every_unit if unit.stopped_at is not None)
        answers = history.client.answers
        graph_answers += sum(1 for target in history.graph_targets if answers[target])
    assert returned and launched and lost and graph_answers
