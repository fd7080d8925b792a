"""A scheduler killed (SIGKILL) and started again at the same address, with the real scheduler server and core, the
real worker agents and cores and the real client core (`scaler_rehearsal.testing.simulated_stack`), on simulated time:
tasks that ran through the restart are not run again and their results are kept (reattachment), clients submit their
unfinished tasks and graphs again, a 50 s outage is survived, and one longer than a client's grace fails its futures.
The integration tier keeps the same restart with real processes and sockets (tests/integration/
test_scheduler_restart.py).

How the tests were checked with their mechanism off, by hand: with the client core's submitting again on a second
registration made to do nothing (`ClientCore`: `effects += self._submit_again()` replaced by `pass`), every test
but the one about the grace fails (futures of tasks the new instance never heard of are never answered); with the
scheduler core's reattachment made to forget what workers say they hold (`Reattachment.worker_holds` returning at
once), the first test's `reattachment` case fails (the tasks that ran through the restart run again), as its
`reattachment-off` case shows on every run."""

from __future__ import annotations

from typing import Any

import pytest

from scaler.errors import DisconnectedError
from scaler.protocol.ids import GraphID
from scaler.scheduler.core.scheduler_core import SchedulerCore
from scaler_rehearsal.testing.simulated_client import SimulatedFuture
from scaler_rehearsal.testing.simulated_stack import SimulatedStack


def all_done(futures: list[SimulatedFuture]) -> bool:
    return all(future.done() for future in futures)


def switch_off_reattachment(core: SchedulerCore) -> None:
    """The new instance learns nothing of what workers hold: held tasks are not adopted, early results dropped."""
    core.reattachment.worker_holds = lambda worker, task_ids, now: None  # type: ignore[method-assign]
    core.reattachment.result_for_held = lambda worker, result, now: False  # type: ignore[method-assign]


@pytest.mark.parametrize("reattachment", [True, False], ids=["reattachment", "reattachment-off"])
def test_tasks_running_through_a_restart_are_not_run_again_and_their_results_are_kept(reattachment: bool) -> None:
    """Two workers run 1.5 s tasks; the scheduler is killed while two of them run and comes back 1 s later: every
    future completes once, and every task ran once (the worker's held tasks are adopted, the results it finished
    while no scheduler answered are delivered). Checked with the mechanism off (`reattachment-off`: the new
    instance ignores what workers say they hold): the tasks that ran through the restart run a second time."""
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=2)
        client = await stack.client()
        futures = client.submit([stack.task(client, seconds=1.5) for _ in range(6)])
        await stack.until(lambda: len(stack.log.runs) >= 2, "two tasks running")
        stack.kill_scheduler()
        await stack.clock.sleep(1.0)
        core = stack.start_scheduler()
        if not reattachment:
            switch_off_reattachment(core)
        await stack.until(lambda: all_done(futures), "every future")
        assert [future.answers[0][0] for future in futures] == ["result"] * 6
        assert all(len(future.answers) == 1 for future in futures), "each task answered once"
        assert client.connections == 2, "the client registered again with the new instance"
        runs = [len(stack.log.runs_of(future.task_id)) for future in futures]
        if reattachment:
            assert runs == [1] * 6, "a task ran again"
            assert core.reattachment.adopted >= 2
        else:
            assert max(runs) == 2, "without reattachment the tasks that ran through the restart run again"

    stack.run(scenario())


def test_futures_complete_when_the_scheduler_comes_back_after_50_seconds() -> None:
    """A 50 s outage (shorter than the client's 90 s grace and the workers' 60 s one): the client heartbeats into the
    void, registers again when a scheduler answers, submits what is unfinished; the workers register again too."""
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=1)
        client = await stack.client(scheduler_lost_grace_seconds=90)
        futures = client.submit([stack.task(client, seconds=0.01) for _ in range(3)])
        late = client.submit([stack.task(client, seconds=1.0)])
        stack.kill_scheduler()
        await stack.clock.sleep(50.0)
        stack.start_scheduler()
        await stack.until(lambda: all_done(futures + late), "every future after the outage")
        assert [future.answers[0][0] for future in futures + late] == ["result"] * 4
        assert client.connections == 2
        await stack.until(lambda: stack.registered_workers() == 1, "the worker to register again")
        assert stack.clock.elapsed > 50.0

    stack.run(scenario())


def test_without_a_scheduler_back_within_the_grace_the_futures_fail() -> None:
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=1)
        client = await stack.client(scheduler_lost_grace_seconds=3)
        futures = client.submit([stack.task(client, seconds=60.0)])
        await stack.until(lambda: len(stack.log.runs) == 1, "the task to run")
        stack.kill_scheduler()
        await stack.until(lambda: all_done(futures), "the future to fail", within=30)
        kind, error = futures[0].answers[0]
        assert kind == "failed" and isinstance(error, DisconnectedError)
        assert "no scheduler answered there within 3 s" in str(error)

    stack.run(scenario())


def test_a_graph_is_submitted_again_to_a_restarted_scheduler() -> None:
    """b -> c -> d -> e (d also needs b), targets c and e; the scheduler dies once b is done and c runs. The client
    submits the graph again, whole; both targets get their answer once, and the finished graph is not kept."""
    stack = SimulatedStack()

    async def scenario() -> None:
        await stack.start(workers=2)
        client = await stack.client()
        graph = GraphID(b"g" * 16)

        def node(*needs: Any) -> Any:
            return stack.task(client, seconds=0.5, graph=graph, dependencies=tuple(n.task_id for n in needs))

        b = node()
        c = node(b)
        d = node(c, b)
        e = node(d)
        futures = client.submit_graph(graph, [b, c, d, e], [e.task_id, c.task_id])
        await stack.until(lambda: bool(stack.log.runs_of(c.task_id)), "c to run (b is done)")
        stack.kill_scheduler()
        await stack.clock.sleep(1.0)
        stack.start_scheduler()
        await stack.until(lambda: all_done(futures), "both targets")
        assert [len(future.answers) for future in futures] == [1, 1]
        assert [future.answers[0][0] for future in futures] == ["result", "result"]
        assert client.core.kept_graph_count == 0, "a finished graph is not kept"

    stack.run(scenario())
