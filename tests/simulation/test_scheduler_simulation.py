"""Random cluster histories replayed against the real scheduler core on a fake clock.

Whatever happens (workers joining, finishing, dying, leaving; clients cancelling; results racing
cancels), every submitted task gets exactly one final answer, and the core's bookkeeping stays
consistent after every step.
"""

from __future__ import annotations

import pytest

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.testing.simulation import PYTHON, SimulatedCluster, task


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
