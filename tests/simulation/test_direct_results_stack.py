"""Results straight from processors to the scheduler (docs/architecture.md, "Results straight from processors"), with
the real scheduler server and core, the real worker agents and cores, processors on the real processor and route
cores, and the real client core (`scaler.testing.simulated_stack`), on simulated time: results leave on the
processors' own links and the agent forgets them once the scheduler names them; nothing is lost or run twice when
the scheduler restarts with results in flight, a processor dies around its result, the scheduler drops a processor's
result, a worker is killed or leaves while its processors send results. Cancels racing results run with direct
results in test_cancel_stack.py (the stack's default).

How each mechanism was checked off, by hand (the test then fails): with the journal keeping no processor's result
(`ResultJournal.sent_by_processor` doing nothing), the restart test loses the results sent into the outage (their
tasks, adopted by their workers, are never answered); with `ResultJournal.processor_gone` returning nothing, the
test of a processor dying before its message left answers its task only two heartbeat echoes later (rule 3b), past
its bound of one simulated second; with `ResultJournal.acknowledged` returning
nothing, the test of a dropped result never answers its task."""

from __future__ import annotations

import pytest

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.testing.memory_network import Delivery
from scaler.testing.simulated_client import SimulatedFuture
from scaler.testing.simulated_processors import CRASH_AFTER_SEND, CRASH_BEFORE_LEAVING
from scaler.testing.simulated_stack import SCHEDULER_ADDRESS, SimulatedStack

SCHEDULER = f"router@{SCHEDULER_ADDRESS}"
TINY_SECONDS = 0.0001


def all_done(futures: list[SimulatedFuture]) -> bool:
    return all(future.done() for future in futures)


def results_from(traffic: list[Delivery], sender_prefix: str) -> int:
    """TaskResults that reached the scheduler from senders whose name starts so."""
    return sum(
        isinstance(codec.decode(part), m.TaskResult)
        for delivery in traffic
        if delivery.receiver == SCHEDULER and delivery.sender.startswith(sender_prefix)
        for frame in delivery.frames
        for part in codec.split(frame)
    )


def answered_once_with_results(futures: list[SimulatedFuture]) -> None:
    for future in futures:
        assert len(future.answers) == 1, f"{future.task_id.hex()} answered {future.answers}"
        result = future.result
        assert result is not None and result.status is m.ResultStatus.SUCCESS, f"{future.task_id.hex()}: {result}"


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "through-the-agent"])
def test_results_go_from_processors_to_the_scheduler_and_the_agent_forgets_them_once_named(direct: bool) -> None:
    """200 tiny tasks and 5 longer ones on one worker: with direct results every result reaches the scheduler from a
    processor's link, none from the agent, and two heartbeats later the agent's journal holds none of them (the echoes
    named them). Checked with the mechanism off (`through-the-agent`): every result comes from the agent."""
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=1, slots=2, direct_results=direct)
        client = await stack.client()
        futures = client.submit([stack.task(client, TINY_SECONDS, function="tiny") for _ in range(200)])
        futures += client.submit([stack.task(client, 0.5, function="long") for _ in range(5)])
        await stack.until(lambda: all_done(futures), "every result")
        answered_once_with_results(futures)
        await stack.clock.sleep(5.0)  # two heartbeats and their echoes
        assert len(stack.workers["w1"].core.journal) == 0, "the echoes named every result"

    stack.run(scenario())
    from_processors = results_from(stack.network.traffic, "Worker|SIM|w1/")
    from_agent = results_from(stack.network.traffic, "Worker|SIM|w1") - from_processors
    assert (from_processors, from_agent) == ((205, 0) if direct else (0, 205))


def test_a_scheduler_restart_with_results_in_flight_loses_none_and_runs_none_twice() -> None:
    """Three workers run 0.3 s tasks; the scheduler is killed while they run and comes back 1 s later: the results
    their processors sent into the outage reach the new instance (each agent sends what its journal holds again when
    it registers again, and its processors say hello again), every future is answered once with its result, and
    every task ran once."""
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=3, direct_results=True)
        client = await stack.client()
        futures = client.submit([stack.task(client, 0.3, function="step") for _ in range(30)])
        await stack.until(lambda: len(stack.log.runs) >= 6, "tasks to run on every worker")
        stack.kill_scheduler()
        sent_before = sum(worker.processors.sent_on_links for worker in stack.workers.values())
        await stack.clock.sleep(1.0)
        sent_in_outage = sum(worker.processors.sent_on_links for worker in stack.workers.values()) - sent_before
        assert sent_in_outage >= 3, "processors sent results while no scheduler was there"
        stack.start_scheduler()
        await stack.until(lambda: all_done(futures), "every future")
        answered_once_with_results(futures)
        assert [len(stack.log.runs_of(future.task_id)) for future in futures] == [1] * 30, "a task ran again"

    stack.run(scenario())


@pytest.mark.parametrize("ending", [CRASH_AFTER_SEND, CRASH_BEFORE_LEAVING])
def test_a_processor_that_dies_around_its_result_loses_no_result(ending: str) -> None:
    """A processor dies right after it sent its result on its link, before the agent heard of it (the agent reports
    the processor's death for the task; the scheduler has its result already and keeps it), or right after it told
    the agent, before its message left (the agent sends the result itself when the processor is gone): either way the
    future gets the task's result, once, and the tasks after it run on a new processor."""
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=1, direct_results=True)
        client = await stack.client()
        warm = client.submit([stack.task(client, TINY_SECONDS, function="step") for _ in range(20)])
        await stack.until(lambda: all_done(warm), "the warm-up")
        (dying,) = client.submit([stack.task(client, 0.01, ending=ending, function="step")])
        # within one heartbeat interval (2 simulated seconds): at the processor's exit, not after two echoes
        await stack.until(dying.done, "its answer", within=1.0)
        # afterwards: a task staged behind it would be blamed for the death (processor protocol rule 7)
        after = client.submit([stack.task(client, TINY_SECONDS, function="step") for _ in range(20)])
        await stack.until(lambda: all_done([dying, *after]), "every future")
        answered_once_with_results([dying, *after])
        assert len(stack.log.runs_of(dying.task_id)) == 1

    stack.run(scenario())


def test_a_result_the_scheduler_dropped_is_sent_again_by_the_agent() -> None:
    """The scheduler forgets a processor's link while its task computes (as when its connection looked closed): the
    result it sends on it is refused (unknown peer), the processor says hello again, and the agent, whose journal was
    not told the scheduler read it, sends the result itself after two heartbeat echoes: the future gets it."""
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=1, direct_results=True)
        client = await stack.client()
        warm = client.submit([stack.task(client, TINY_SECONDS, function="step") for _ in range(5)])
        await stack.until(lambda: all_done(warm), "the warm-up")
        (future,) = client.submit([stack.task(client, 1.0, function="slow")])
        await stack.until(lambda: bool(stack.log.runs_of(future.task_id)), "the task to compute")
        core = stack.scheduler_core
        assert core is not None and len(core.processors) == 1
        core.worker_sessions.drop_processor(next(iter(core.processors)))
        await stack.until(future.done, "its answer", within=30)
        answered_once_with_results([future])
        assert len(core.processors) == 1, "the processor said hello again"

    stack.run(scenario())


def test_a_worker_killed_while_its_processors_send_results() -> None:
    """Two workers run tiny tasks; one is killed (its agent and processors at once) in the middle: every future is
    answered once with a result (what the dead worker held runs again on the other)."""
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=2, direct_results=True)
        client = await stack.client()
        futures = client.submit([stack.task(client, 0.002, function="step") for _ in range(400)])
        await stack.until(lambda: len(stack.log.runs) >= 100, "a quarter of the tasks to run")
        stack.kill_worker("w1")
        await stack.until(lambda: all_done(futures), "every future", within=1000)
        answered_once_with_results(futures)

    stack.run(scenario())


def test_a_worker_leaving_while_its_processors_send_results() -> None:
    """Two workers run short tasks; one leaves gracefully (SIGTERM) in the middle: every future is answered once with
    a result, the tasks the leaving worker held going to the other."""
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=2, direct_results=True)
        client = await stack.client()
        futures = client.submit([stack.task(client, 0.002, function="step") for _ in range(400)])
        await stack.until(lambda: len(stack.log.runs) >= 100, "a quarter of the tasks to run")
        stack.workers["w1"].agent.leave("received SIGTERM")
        await stack.until(lambda: all_done(futures), "every future", within=1000)
        answered_once_with_results(futures)
        assert stack.workers["w1"].exit_code == 0

    stack.run(scenario())
