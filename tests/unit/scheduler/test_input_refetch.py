"""A task whose input could not be fetched (its processor's argument fetch: storage silent, unreachable, the read broken
off) is retried like one whose worker died, within the same budget, then ends naming the input and why (task_state
rule 6): issue 74, item 7.

Checked by switching the mechanism off: with `(DISPATCHED, INPUT_UNREACHABLE)` mapped to FINISH in
`task_state.TRANSITIONS`, the first two tests fail (the client gets `inputUnreachable` at the first failed fetch)."""

from __future__ import annotations

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler_rehearsal.testing.simulation import PYTHON, SimulatedCluster, task

UNREACHABLE = m.ResultStatus.INPUT_UNREACHABLE
WHY = "an object the task needs (object 0a0b) could not be fetched: object storage at tcp://x:1 sent nothing for 60 s"


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def unreachable(sim: SimulatedCluster, worker_name: str) -> None:
    """The worker's processor answers its task INPUT_UNREACHABLE, naming the object."""
    worker = next(each for each in sim.workers.values() if each.peer.endswith(worker_name.encode()))
    chosen = worker.held[0]
    worker.held.remove(chosen)
    sim.send(worker.where.pop(chosen), m.TaskResult(chosen, UNREACHABLE, error_message=WHY))


def last_result(sim: SimulatedCluster) -> m.TaskResult:
    return [e.message for e in sim.effects if isinstance(e, Send) and isinstance(e.message, m.TaskResult)][-1]


def test_a_task_whose_input_could_not_be_fetched_runs_again_and_succeeds() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, max_task_retries=2))
    client, worker = sim.add_client(), sim.add_worker("a")
    sim.submit(client, [task(client.peer, 1)])
    unreachable(sim, "a")
    assert worker.held == [tid(1)] and client.answers[tid(1)] == []  # queued again, and dispatched again
    unreachable(sim, "a")
    assert worker.held == [tid(1)] and client.answers[tid(1)] == []
    sim.finish(worker)
    assert client.answers[tid(1)] == [("result", "success")]
    sim.check_invariants()
    words = " | ".join(entry.cause for entry in sim.core.tasks.stories.story(tid(1)).entries)
    assert "retry 1 of 2" in words and "could not be fetched" in words, words


def test_past_the_retry_budget_it_ends_naming_the_input_and_why() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, max_task_retries=1))
    client, worker = sim.add_client(), sim.add_worker("a")
    sim.submit(client, [task(client.peer, 1)])
    unreachable(sim, "a")
    unreachable(sim, "a")
    assert client.answers[tid(1)] == [("result", "inputUnreachable")] and not worker.held
    text = last_result(sim).error_message
    assert text.startswith("the task's input could not be fetched 2 time(s), more than the retry budget of 1") and (
        "object 0a0b" in text and "sent nothing for 60 s" in text
    ), text
    assert not sim.core.tasks.records
    sim.check_invariants()


def test_a_lost_worker_and_a_failed_fetch_spend_one_budget() -> None:
    """Like a worker's death, each failed fetch is one attempt: one lost worker then one failed fetch spend a budget
    of one."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, max_task_retries=1))
    client, first = sim.add_client(), sim.add_worker("a")
    sim.submit(client, [task(client.peer, 1)])
    second = sim.add_worker("b")
    sim.kill(first)
    assert second.held == [tid(1)]
    unreachable(sim, "b")
    assert client.answers[tid(1)] == [("result", "inputUnreachable")]
    sim.check_invariants()
