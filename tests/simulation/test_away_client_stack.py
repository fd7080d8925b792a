"""A client away and back (#42 goal 1) with the real scheduler server and core, the real object storage server, real
worker agents and the real client core (`scaler_rehearsal.testing.simulated_stack`), on simulated time and network: a
client paused past its timeout, a client whose link is cut then restored, and one that comes back on a new connection
(another network) after answers were lost in the dead one and others were written to object storage; and past the
window. The integration tier does the same with real processes (tests/integration/test_away_clients.py).

Checked with the mechanism off: each test of the work surviving runs with the scheduler's window at 0
(`client_resume_seconds=0`, `off`), where the scheduler drops the client and cancels its tasks, and the client's
futures fail when it comes back (asserted); the move test was also checked by hand with the client core's
ClientResume left out (`on_disconnected` not asking): the answers lost in the dead connection never arrive and the
wait for them fails.
"""

from __future__ import annotations

from typing import Any

import pytest

from scaler.errors import DisconnectedError
from scaler_rehearsal.testing.simulated_client import SimulatedClient, SimulatedFuture
from scaler_rehearsal.testing.simulated_stack import SimulatedStack

TIMEOUT = 10.0
WINDOW = 300.0


def all_done(futures: list[SimulatedFuture]) -> bool:
    return all(future.done() for future in futures)


def results(futures: list[SimulatedFuture]) -> list[str]:
    return [future.answers[0][0] for future in futures]


def start(stack: SimulatedStack, window: float, **settings: Any) -> None:
    stack.start_storage()
    stack.start_scheduler(client_timeout_seconds=TIMEOUT, client_resume_seconds=window, **settings)
    for number in (1, 2):
        stack.add_worker(f"w{number}")


async def a_client(stack: SimulatedStack) -> SimulatedClient:
    await stack.until(lambda: stack.registered_workers() == 2, "two workers")
    # its link left to follow the scheduler's window, as a Client's by default
    return await stack.client(timeout_seconds=None, scheduler_lost_grace_seconds=None)


@pytest.mark.parametrize("window", [WINDOW, 0.0], ids=["resume", "off"])
def test_a_client_paused_past_its_timeout_gets_every_result_once_when_it_wakes(window: float) -> None:
    """Six 20 s tasks on two workers; the client is paused 100 s (10 s timeout): the scheduler shows it away, the
    tasks run on and their results wait; woken, it gets each once, and each task ran once."""
    stack = SimulatedStack()

    async def scenario() -> None:
        start(stack, window)
        client = await a_client(stack)
        assert client.core.link.settings.timeout_seconds == max(60.0, window), "the link follows the window"
        futures = client.submit([stack.task(client, seconds=20.0) for _ in range(6)])
        await stack.until(lambda: len(stack.log.runs) >= 2, "two tasks running")
        client.pause()
        await stack.clock.sleep(2 * TIMEOUT)
        core = stack.scheduler_core
        assert core is not None
        if window:
            (summary,) = core.view().clients
            assert summary.away_seconds > TIMEOUT, "the status shows the client away"
        await stack.clock.sleep(80.0)
        client.wake()
        await stack.until(lambda: all_done(futures), "every future")
        if not window:
            assert {type(future.answers[0][1]) for future in futures} == {DisconnectedError}
            assert "dropped this client" in str(futures[0].answers[0][1])
            return
        assert results(futures) == ["result"] * 6 and all(len(f.answers) == 1 for f in futures)
        assert [len(stack.log.runs_of(f.task_id)) for f in futures] == [1] * 6, "a task ran twice"
        assert client.closed_because is None and any("paused for" in text for text in client.warnings)

    stack.run(scenario())


def test_a_client_cut_off_then_healed_gets_every_result_once() -> None:
    """The link is cut for 120 s (past the timeout), the connection survives (TCP carries what waited): away, then
    back by its heartbeat, each result once."""
    stack = SimulatedStack()

    async def scenario() -> None:
        start(stack, WINDOW)
        client = await a_client(stack)
        futures = client.submit([stack.task(client, seconds=5.0) for _ in range(8)])
        await stack.until(lambda: len(stack.log.runs) >= 1, "a task running")
        stack.network.cut(client.sockets)
        await stack.clock.sleep(120.0)
        core = stack.scheduler_core
        assert core is not None and core.clients[client.identity].is_away
        stack.network.heal(client.sockets)
        await stack.until(lambda: all_done(futures), "every future")
        assert results(futures) == ["result"] * 8 and all(len(f.answers) == 1 for f in futures)
        assert [len(stack.log.runs_of(f.task_id)) for f in futures] == [1] * 8

    stack.run(scenario())


@pytest.mark.parametrize("window", [WINDOW, 0.0], ids=["resume", "off"])
def test_a_client_back_on_a_new_connection_gets_what_the_dead_one_lost_and_what_waited_in_storage(
    window: float,
) -> None:
    """Cut while tasks finish: the first results go into the dead connection (lost), the next ones are held, past
    a 2 KB budget in object storage bundles. The client comes back on a new connection: it resumes, gets every result
    once, each task ran once, and the bundles are gone from storage. `off`: the lost connection drops the client."""
    stack = SimulatedStack()

    async def scenario() -> None:
        start(stack, window, held_answers_memory_bytes=2_000)
        client = await a_client(stack)
        futures = client.submit([stack.task(client, seconds=1.0 + 0.5 * n) for n in range(20)])
        await stack.until(lambda: len(stack.log.runs) >= 1, "a task running")
        stack.network.cut(client.sockets)
        await stack.clock.sleep(60.0)  # the scheduler notices the silence after 10 s; the tasks all end meanwhile
        core = stack.scheduler_core
        assert core is not None
        if window:
            log = core.clients[client.identity].answers
            assert log.bundles, "held answers went to object storage"
        stack.network.move(client.sockets)
        await stack.until(lambda: all_done(futures), "every future")
        assert (
            all(len(f.answers) == 1 for f in futures) and max(len(stack.log.runs_of(f.task_id)) for f in futures) == 1
        )
        if not window:  # what had not finished when the scheduler dropped the client is cancelled, and fails here
            assert DisconnectedError in {type(future.answers[0][1]) for future in futures}
            return
        assert results(futures) == ["result"] * 20 and all(len(f.answers) == 1 for f in futures)
        assert [len(stack.log.runs_of(f.task_id)) for f in futures] == [1] * 20, "a task ran twice"
        await stack.until(lambda: not core.clients[client.identity].answers.bundles, "the bundles read back")
        assert any("reconnected" in text for text in client.warnings)

    stack.run(scenario())


def test_a_client_away_past_its_window_finds_its_work_cancelled_and_can_go_on() -> None:
    stack = SimulatedStack()

    async def scenario() -> None:
        start(stack, 60.0)
        client = await a_client(stack)
        futures = client.submit([stack.task(client, seconds=500.0) for _ in range(2)])
        await stack.until(lambda: len(stack.log.runs) >= 2, "both running")
        client.pause()
        await stack.clock.sleep(120.0)
        client.wake()
        await stack.until(lambda: all_done(futures), "the futures")
        errors = [future.answers[0][1] for future in futures]
        assert all(isinstance(e, DisconnectedError) and "resume window of 60 s" in str(e) for e in errors), errors
        more = client.submit([stack.task(client, seconds=1.0)])
        await stack.until(lambda: all_done(more), "new work")
        assert results(more) == ["result"]

    stack.run(scenario())
