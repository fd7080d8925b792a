"""Cancels with the real scheduler, worker agents and client core (`scaler_rehearsal.testing.simulated_stack`), on
simulated time: a task is cancelled wherever it is (queued in the scheduler, staged in a processor, computing: its
processor is killed) and answered once; a cancel that races the task's end, landed at chosen moments around it, gets
exactly one answer and never a second run."""

from __future__ import annotations

from scaler_rehearsal.testing.simulated_client import SimulatedFuture
from scaler_rehearsal.testing.simulated_stack import SimulatedStack

TINY_SECONDS = 0.0001


def all_done(futures: list[SimulatedFuture]) -> bool:
    return all(future.done() for future in futures)


def test_a_task_is_cancelled_wherever_it_is_and_answered_once() -> None:
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=1)
        client = await stack.client()
        warm = client.submit([stack.task(client, TINY_SECONDS, function="step") for _ in range(50)])
        await stack.until(lambda: all_done(warm), "the warm-up")
        (computing,) = client.submit([stack.task(client, 10.0, function="step")])
        await stack.until(lambda: bool(stack.log.runs_of(computing.task_id)), "the long task to compute")
        staged = client.submit([stack.task(client, TINY_SECONDS, function="step") for _ in range(3)])
        slow = client.submit([stack.task(client, 1.0, function="slow") for _ in range(100)])
        worker = stack.workers["w1"].core
        scheduler = stack.scheduler_core
        assert scheduler is not None
        await stack.until(lambda: all(f.task_id in stack.log.staged for f in staged), "tiny tasks to be staged")
        in_scheduler = slow[-1]
        assert scheduler.tasks.records[in_scheduler.task_id].state.value == "queued", "it waits in the queue"
        processors_before = set(worker.processors)
        client.cancel([staged[1].task_id])  # first: a cancel of the computing task would take its processor down
        await stack.until(lambda: stack.log.withdrawn == [staged[1].task_id], "the staged task to leave its processor")
        cancelled = [staged[1], in_scheduler, computing]
        client.cancel([future.task_id for future in cancelled[1:]])
        await stack.until(lambda: all_done(cancelled), "the cancels to be confirmed")
        assert all(future.cancelled for future in cancelled)
        assert not set(worker.processors) & processors_before, "the computing task's processor was killed"
        rest = [staged[0], staged[2], *slow[:-1]]
        await stack.until(lambda: all_done(rest), "the other tasks", within=1000)
        assert all(future.result is not None for future in rest)
        for future in [*cancelled, *rest]:
            assert len(future.answers) == 1, f"{future.task_id.hex()} answered {future.answers}"
        assert all(not stack.log.runs_of(future.task_id) for future in cancelled[:2]), "a cancelled task ran"
        assert all(len(stack.log.runs_of(future.task_id)) == 1 for future in rest)

    stack.run(scenario())


def test_a_cancel_racing_the_end_of_its_task_gets_one_answer() -> None:
    """Tasks of 1 s each on four workers; each one's cancel leaves the client at a chosen moment between 5 ms before
    and 5 ms after the task ends there: every task is answered once, a result or a cancel, and runs at most once."""
    stack = SimulatedStack()
    offsets = [step / 1000 for step in range(-5, 6)]

    async def scenario() -> None:
        await stack.start(workers=4)
        client = await stack.client()
        futures: list[SimulatedFuture] = []
        for offset in offsets:
            batch = client.submit([stack.task(client, 1.0, function="one_second") for _ in range(4)])
            await stack.until(
                lambda batch=batch: all(stack.log.runs_of(f.task_id) for f in batch), "the batch to start"
            )
            for future in batch:
                (run,) = stack.log.runs_of(future.task_id)
                delay = run.started_at + 1.0 + offset - stack.clock.now()
                stack.clock.call_later(max(0.0, delay), client.cancel, [future.task_id])
            await stack.until(lambda batch=batch: all_done(batch), "the batch's answers")
            futures += batch
        await stack.clock.sleep(5.0)  # late answers, if any, would arrive by now
        assert all(len(future.answers) == 1 for future in futures), [f.answers for f in futures]
        kinds = {future.answers[0][0] for future in futures}
        assert kinds == {"result", "cancelled"}, "cancels landed on both sides of the ends"
        assert all(len(stack.log.runs_of(future.task_id)) == 1 for future in futures)

    stack.run(scenario())
