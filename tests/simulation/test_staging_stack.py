"""Tiny tasks staged in a processor behind the one it computes (the scheduler stages them on its link:
`WorkerRecord.learn`, `restage`), with the real scheduler, the real worker agent (shell and core) and processors on
the real processor core (`scaler_rehearsal.testing.simulated_stack`), on simulated time: tiny tasks are staged; a cancel
of a staged task withdraws it from its processor; the tasks staged behind a task that crashes, times out or is cancelled
are queued again and each run once; those behind a task that proves long are taken back (processor_links.py rule 3)
and run elsewhere. The integration tier keeps a crash among staged tasks in real processes
(tests/integration/test_staged_tasks.py).

How each test was checked with staging off: `max_staged_tasks=0` (the processors' word, in their links' hellos) is
the `staging-off` case of the first two tests, which then fail as shown in their assertions; the others assert first
that the tasks behind the first one were staged, which fails with staging off, and were run with
`ProcessorLink.gone` forgetting the staged tasks (REQUEUED made ANSWERED): their futures never complete.
"""

from __future__ import annotations

import pytest

from scaler.protocol import messages as m
from scaler_rehearsal.testing.simulated_client import SimulatedClient, SimulatedFuture
from scaler_rehearsal.testing.simulated_processors import CRASH, HANG
from scaler_rehearsal.testing.simulated_stack import SimulatedStack

TINY_SECONDS = 0.0001  #: well under the staging horizon (staging.STAGING_SECONDS)
WARM_UP_TASKS = 50  #: tiny tasks that teach the scheduler that the worker's tasks are tiny


def all_done(futures: list[SimulatedFuture]) -> bool:
    return all(future.done() for future in futures)


async def warm_client(stack: SimulatedStack, max_staged_tasks: int = 64, **worker_settings: float) -> SimulatedClient:
    """A client of a one-worker stack whose worker has seen WARM_UP_TASKS tiny calls of "step"."""
    await stack.start(workers=1, max_staged_tasks=max_staged_tasks, **worker_settings)
    client = await stack.client()
    warm = client.submit([stack.task(client, TINY_SECONDS, function="step") for _ in range(WARM_UP_TASKS)])
    await stack.until(lambda: all_done(warm), "the warm-up")
    return client


async def holder_and_tiny_tasks_behind(
    stack: SimulatedStack, client: SimulatedClient, ending: str = HANG, seconds: float = 0.0, count: int = 10
) -> tuple[SimulatedFuture, list[SimulatedFuture]]:
    """A "step" task that holds the only processor (until stopped, or `seconds` then `ending`) and `count` tiny ones
    behind it, once those reached the worker."""
    (holder,) = client.submit([stack.task(client, seconds, ending, function="step")])
    await stack.until(lambda: bool(stack.log.runs_of(holder.task_id)), "the holder to start")
    behind = client.submit([stack.task(client, TINY_SECONDS, function="step") for _ in range(count)])
    scheduler = stack.scheduler_core
    assert scheduler is not None

    def placed(future: SimulatedFuture) -> bool:
        record = scheduler.tasks.get(future.task_id)
        return future.task_id in stack.log.staged or (record is not None and record.state.value == "queued")

    await stack.until(lambda: all(placed(f) for f in behind), "the tasks behind to be staged, or queued")
    return holder, behind


def staged(stack: SimulatedStack, futures: list[SimulatedFuture]) -> list[bool]:
    return [future.task_id in stack.log.staged for future in futures]


def ran_once_each(stack: SimulatedStack, futures: list[SimulatedFuture]) -> bool:
    return all(len(stack.log.runs_of(future.task_id)) == 1 for future in futures)


@pytest.mark.parametrize("max_staged_tasks", [64, 0], ids=["staging", "staging-off"])
def test_tiny_tasks_are_staged_behind_the_computing_one_and_each_runs_once(max_staged_tasks: int) -> None:
    stack = SimulatedStack()

    async def scenario() -> None:
        client = await warm_client(stack, max_staged_tasks)
        holder, behind = await holder_and_tiny_tasks_behind(stack, client, ending="success", seconds=5.0)
        if max_staged_tasks:
            assert staged(stack, behind) == [True] * 10, "the tiny tasks wait in the processor, not in the scheduler"
        else:
            assert staged(stack, behind) == [False] * 10, "with staging off nothing waits in a processor"
        await stack.until(lambda: all_done([holder, *behind]), "every result")
        assert [future.answers[0][0] for future in [holder, *behind]] == ["result"] * 11
        assert ran_once_each(stack, [holder, *behind])

    stack.run(scenario())


@pytest.mark.parametrize("max_staged_tasks", [64, 0], ids=["staging", "staging-off"])
def test_a_cancelled_staged_task_is_withdrawn_from_its_processor_and_never_runs(max_staged_tasks: int) -> None:
    stack = SimulatedStack()

    async def scenario() -> None:
        client = await warm_client(stack, max_staged_tasks)
        holder, behind = await holder_and_tiny_tasks_behind(stack, client, ending="success", seconds=5.0)
        cancelled = [behind[2], behind[3], behind[7]]
        client.cancel([future.task_id for future in cancelled])
        await stack.until(lambda: all_done(cancelled), "the cancels to be confirmed")
        assert all(future.cancelled for future in cancelled)
        withdrawn = [future.task_id for future in cancelled]
        if max_staged_tasks:
            assert stack.log.withdrawn == withdrawn, "the processor took them out of its line"
        else:
            assert stack.log.withdrawn == [], "with staging off the scheduler drops them from its own queue"
        await stack.until(lambda: all_done([holder, *behind]), "every answer")
        kept = [future for future in behind if future not in cancelled]
        assert all(future.result is not None for future in kept)
        assert all(not stack.log.runs_of(future.task_id) for future in cancelled), "a cancelled staged task ran"
        assert ran_once_each(stack, kept)
        assert all(len(future.answers) == 1 for future in [holder, *behind])

    stack.run(scenario())


def test_the_tasks_staged_behind_a_task_that_crashes_each_run_once() -> None:
    """The task ahead kills its processor after 2 s: it fails with PROCESSOR_DIED, the staged ones go back to the
    scheduler's queue (taken back after 1 s, or queued again with the processor's loss) and run in the processor that
    replaces it, once each."""
    stack = SimulatedStack()

    async def scenario() -> None:
        client = await warm_client(stack)
        holder, behind = await holder_and_tiny_tasks_behind(stack, client, ending=CRASH, seconds=2.0)
        assert staged(stack, behind) == [True] * 10
        await stack.until(lambda: all_done([holder, *behind]), "every answer")
        assert holder.answers[0][0] == "result" and holder.result is not None
        assert holder.result.status is m.ResultStatus.PROCESSOR_DIED
        assert all(future.result is not None and future.result.status is m.ResultStatus.SUCCESS for future in behind)
        assert ran_once_each(stack, behind)

    stack.run(scenario())


def test_the_tasks_staged_behind_a_task_that_times_out_each_run_once() -> None:
    stack = SimulatedStack()

    async def scenario() -> None:
        client = await warm_client(stack, task_timeout_seconds=2.0)
        holder, behind = await holder_and_tiny_tasks_behind(stack, client)
        assert staged(stack, behind) == [True] * 10
        await stack.until(lambda: all_done([holder, *behind]), "every answer")
        assert holder.result is not None and holder.result.status is m.ResultStatus.TIMED_OUT
        assert all(future.result is not None and future.result.status is m.ResultStatus.SUCCESS for future in behind)
        assert ran_once_each(stack, behind)

    stack.run(scenario())


def test_the_tasks_staged_behind_a_cancelled_task_each_run_once() -> None:
    """Cancelling the computing task kills its processor; what was staged behind it runs in the next one."""
    stack = SimulatedStack()

    async def scenario() -> None:
        client = await warm_client(stack)
        holder, behind = await holder_and_tiny_tasks_behind(stack, client)
        assert staged(stack, behind) == [True] * 10
        client.cancel([holder.task_id])
        await stack.until(lambda: all_done([holder, *behind]), "every answer")
        assert holder.cancelled
        assert all(future.result is not None and future.result.status is m.ResultStatus.SUCCESS for future in behind)
        assert ran_once_each(stack, behind)

    stack.run(scenario())


def test_the_tasks_staged_behind_a_long_call_of_a_tiny_function_run_elsewhere_meanwhile() -> None:
    """A call that computes 100 s, where every call before was tiny (so are joblib's batches: one function for all of
    them; joblib's test_parallel_unordered_generator_returns_fastest_first got a fast call staged behind its 30 s one
    in CI): the tiny tasks staged behind it are taken back once it has computed STAGED_WAIT_SECONDS, and run on the
    other worker while it still computes, once each (processor_links.py rule 3). Checked to fail with
    `ProcessorLink.behind_long` returning None: they wait for the long call to end, past the deadline below."""
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=2)
        client = await stack.client()
        warm = client.submit([stack.task(client, TINY_SECONDS, function="step") for _ in range(WARM_UP_TASKS)])
        await stack.until(lambda: all_done(warm), "the warm-up")
        (holder,) = client.submit([stack.task(client, 100.0, "success", function="step")])
        await stack.until(lambda: bool(stack.log.runs_of(holder.task_id)), "the long call to start")
        behind = client.submit([stack.task(client, TINY_SECONDS, function="step") for _ in range(10)])
        await stack.until(lambda: all_done(behind), "the tiny tasks, while the long call computes", within=30.0)
        assert not holder.done()
        withdrawn = [future for future in behind if future.task_id in stack.log.handed_back]
        assert withdrawn, "some of them were staged behind the long call, and taken back from its processor"
        (long_call,) = stack.log.runs_of(holder.task_id)
        assert all(run.worker != long_call.worker for f in withdrawn for run in stack.log.runs_of(f.task_id))
        assert ran_once_each(stack, behind)
        await stack.until(lambda: holder.done(), "the long call")

    stack.run(scenario())
