"""Issue 73: `per_worker_task_queue_size` (`AgentSettings.max_held_tasks`, which bounds the capacity a worker's hello
says: `AgentCore.capacity`) at its edges, with the real scheduler, the real worker agent and processors on the real
processor core, on simulated time (`scaler_rehearsal.testing.simulated_stack`): every task runs, and each worker
computes as many at once as its slots and the setting allow, round after round of long tasks.

Checked to fail with the scheduler withdrawing a prefetch whatever the worker's credit (`WorkerRecord.restage`'s
`has_prefetch` without `self.capacity > self.slots`): a worker of one task runs its first task and nothing more (the
issue's hang: "not within 120 simulated seconds: every result"), and one of two tasks on four slots computes two at
once in its first round, then one.
"""

from __future__ import annotations

import itertools

import pytest

from scaler_rehearsal.testing.simulated_client import SimulatedFuture
from scaler_rehearsal.testing.simulated_stack import SimulatedStack

TASK_SECONDS = 3.0  #: long (STAGED_WAIT_SECONDS and more): the scheduler learns so from the first results
TASKS = 8


def at_once(stack: SimulatedStack, worker: str) -> list[int]:
    """How many of the worker's tasks started together, round by round (tasks of one length start together)."""
    starts = sorted(run.started_at for run in stack.log.runs if run.worker == worker)
    return [len(list(group)) for _, group in itertools.groupby(starts)]


def rounds(tasks: int, at_a_time: int) -> list[int]:
    return [min(at_a_time, tasks - done) for done in range(0, tasks, at_a_time)]


@pytest.mark.parametrize(
    ("workers", "slots", "max_held_tasks"),
    [(4, 1, 1), (1, 1, 2), (1, 4, 1), (1, 4, 2), (1, 4, 3)],
    ids=["issue-four-workers-of-one", "two-on-one-slot", "one-on-four-slots", "two-on-four-slots", "three-on-four"],
)
def test_every_task_runs_and_each_worker_computes_what_its_setting_allows(
    workers: int, slots: int, max_held_tasks: int
) -> None:
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=workers, slots=slots, max_held_tasks=max_held_tasks)
        client = await stack.client()
        futures: list[SimulatedFuture] = client.submit(
            [stack.task(client, TASK_SECONDS, function="slow") for _ in range(TASKS)]
        )
        await stack.until(lambda: all(future.done() for future in futures), "every result", within=120.0)
        assert [future.answers[0][0] for future in futures] == ["result"] * TASKS
        per_worker = TASKS // workers
        expected = rounds(per_worker, min(slots, max_held_tasks))
        assert {name: at_once(stack, name) for name in stack.workers} == {name: expected for name in stack.workers}

    stack.run(scenario())
