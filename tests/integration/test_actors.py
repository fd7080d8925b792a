"""Actors on real clusters (Client.actor, docs/guide/actors_and_streams.md): an instance lives on one worker, its
calls run there one at a time in the order they were made, its state kept; once built it takes no slot (tasks run
beside it on a worker of one slot); a worker killed under it builds it again elsewhere, failing only the calls that
were at it, up to its restart limit; it ends when stopped, when its handle is collected, or when its client leaves;
the scheduler's status lists it. The scheduler's
part alone is in tests/unit/scheduler/test_actors.py."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from typing import Any

import pytest

from scaler import ActorDiedError, ActorHandle, ActorRestartedError, AsyncClient, Client
from tests.integration.conftest import DEADLINE_SECONDS, agent_of_processor, monitor, wait_for, wait_for_workers

pytestmark = pytest.mark.integration


# ---------------------------------------------------------------- actor classes (run on workers)


class Ledger:
    """Keeps the calls it served, in order; each call may first wait until a file exists."""

    def __init__(self, opening: int) -> None:
        self.entries = [opening]

    def add(self, value: int, pause_seconds: float = 0.0) -> list[int]:
        import time

        time.sleep(pause_seconds)
        self.entries.append(value)
        return list(self.entries)

    def pid(self) -> int:
        return os.getpid()

    async def add_later(self, value: int) -> list[int]:
        import asyncio

        await asyncio.sleep(0.01)
        return self.add(value)

    def wait_for(self, path: str) -> str:
        import time

        while not os.path.exists(path):
            time.sleep(0.01)
        return "went on"


class Nester:
    """A call that waits on a task of its own (nested: it parks in its processor, then goes on)."""

    def __init__(self) -> None:
        self.total = 0

    def add_one_more(self, x: int) -> int:
        from scaler import Client

        with Client() as inner:
            self.total += inner.submit(plain, x).result()
        return self.total


class Meeting:
    """Two calls that each wait for the other: they end only when they run at once."""

    def __init__(self) -> None:
        import threading

        self.barrier = threading.Barrier(2)

    def meet(self) -> str:
        self.barrier.wait(timeout=20)
        return "met"


class Broken:
    def __init__(self) -> None:
        raise ValueError("no calibration data")

    def price(self) -> float:
        return 1.0


def plain(x: int) -> int:
    return x + 1


# ---------------------------------------------------------------- tests


def test_calls_run_in_the_order_they_were_made_on_one_instance_that_keeps_its_state(shared_cluster):
    """Calls made at once, the earlier ones slower, each see the entries of all the calls before them. Checked to
    fail with the calls run four at once (serve_actor's concurrency forced to 4): the slow ones came last."""
    with Client(shared_cluster.get_address()) as client:
        ledger = client.actor(Ledger, 0)
        futures = [ledger.add(i, 0.05 if i % 3 == 0 else 0.0) for i in range(1, 13)]
        results = [future.result(timeout=DEADLINE_SECONDS) for future in futures]
        assert results == [list(range(i + 1)) for i in range(1, 13)]
        assert ledger.add_later(13).result(timeout=DEADLINE_SECONDS) == list(range(14))  # an async method
        pids = {ledger.pid().result(timeout=DEADLINE_SECONDS) for _ in range(3)}
        assert len(pids) == 1  # one instance, in one processor
        ledger.stop()


def add_through(ledger: ActorHandle[Ledger], value: int) -> list[int]:
    return ledger.add(value).result()


def test_a_handle_sent_to_a_task_calls_the_same_actor_from_there(shared_cluster):
    """Checked to fail with ActorHandle.__reduce__ refusing to pickle (the task could not be submitted)."""
    with Client(shared_cluster.get_address()) as client:
        ledger = client.actor(Ledger, 0)
        assert client.submit(add_through, ledger, 1).result(timeout=DEADLINE_SECONDS) == [0, 1]
        assert ledger.add(2).result(timeout=DEADLINE_SECONDS) == [0, 1, 2]
        ledger.stop()


def test_max_concurrency_runs_that_many_calls_at_once(shared_cluster):
    """Checked to fail with serve_actor's concurrency forced to 1 (the first call waited alone, the barrier broke)."""
    with Client(shared_cluster.get_address()) as client:
        meeting = client.actor_verbose(Meeting, (), {}, max_concurrency=2)
        calls = [meeting.meet(), meeting.meet()]
        assert [call.result(timeout=DEADLINE_SECONDS) for call in calls] == ["met", "met"]
        meeting.stop()


def test_an_actor_started_from_an_async_client_gives_awaitable_calls(shared_cluster):
    async def run() -> list[list[int]]:
        async with AsyncClient(shared_cluster.get_address()) as client:
            ledger = client.actor_verbose(Ledger, (5,), {}, name="async-ledger")
            first = await ledger.add(6)
            found = await client.get_actor("async-ledger")
            second = await found.add(7)
            ledger.stop()
            return [first, second]

    assert asyncio.run(run()) == [[5, 6], [5, 6, 7]]


def test_a_constructor_that_raises_ends_the_actor_and_fails_its_calls_saying_why(shared_cluster):
    with Client(shared_cluster.get_address()) as client:
        broken = client.actor(Broken)
        with pytest.raises(ActorDiedError, match="no calibration data"):
            broken.price().result(timeout=DEADLINE_SECONDS)
        with pytest.raises(ValueError, match="no calibration data"):
            broken.started.result(timeout=DEADLINE_SECONDS)


@pytest.mark.timeout(180)
def test_a_built_actor_takes_no_slot_tasks_run_beside_it(make_cluster):
    """A worker of one slot holds an actor and runs a task while the actor waits in a call. Checked to fail with
    the agent not marking the actor's processor HOSTING (ProcessorTable.host doing nothing): the task waited."""
    cluster = make_cluster(1)
    with Client(cluster.get_address()) as client:
        ledger = client.actor(Ledger, 0)
        assert ledger.add(1).result(timeout=DEADLINE_SECONDS) == [0, 1]
        waiting = ledger.wait_for("/nonexistent/never")
        assert client.submit(plain, 1).result(timeout=DEADLINE_SECONDS) == 2
        assert not waiting.done()


@pytest.mark.timeout(180)
def test_a_call_that_waits_on_nested_tasks_goes_on_and_the_actor_still_takes_no_slot(make_cluster):
    """On a worker of one slot. Checked to fail with ProcessorTable.resume putting the actor's processor back to
    RUNNING (the actor held the slot after its first nested wait, and the plain task waited)."""
    cluster = make_cluster(1)
    with Client(cluster.get_address()) as client:
        nester = client.actor(Nester)
        assert [nester.add_one_more(i).result(timeout=DEADLINE_SECONDS) for i in range(3)] == [1, 3, 6]
        assert client.submit(plain, 1).result(timeout=DEADLINE_SECONDS) == 2
        assert nester.add_one_more(3).result(timeout=DEADLINE_SECONDS) == 10


@pytest.mark.timeout(180)
def test_stop_serves_the_calls_before_it_refuses_those_after_and_ends_the_actor(shared_cluster):
    """Checked to fail with ActorStop not passed on by the scheduler: the actor lived on (its start task never
    ended)."""
    with Client(shared_cluster.get_address()) as client:
        ledger = client.actor(Ledger, 0)
        before = ledger.add(1, 0.2)
        ledger.stop()
        after = ledger.add(2)
        assert before.result(timeout=DEADLINE_SECONDS) == [0, 1]
        with pytest.raises(ActorDiedError, match="asked to stop"):
            after.result(timeout=DEADLINE_SECONDS)
        assert ledger.started is not None and ledger.started.result(timeout=DEADLINE_SECONDS) is None


@pytest.mark.timeout(180)
def test_an_actor_whose_handle_is_collected_ends(shared_cluster):
    """Checked to fail with ActorHandle.__del__ doing nothing: the actor's start task never ended."""
    with Client(shared_cluster.get_address()) as client:
        ledger = client.actor(Ledger, 0)
        assert ledger.add(1).result(timeout=DEADLINE_SECONDS) == [0, 1]
        started = ledger.started
        del ledger
        gc.collect()
        assert started is not None and started.result(timeout=DEADLINE_SECONDS) is None


@pytest.mark.timeout(180)
def test_an_actor_ends_when_its_client_leaves_and_the_calls_of_other_clients_fail(shared_cluster):
    """Another client calls a named actor; its starter leaves: the waiting call fails saying the actor ended.
    Checked to fail with the scheduler's sweep not answering calls of an ended actor (the call waited forever)."""
    address = shared_cluster.get_address()
    with Client(address) as other:
        starter = Client(address)
        starter.actor_verbose(Ledger, (0,), {}, name="shared-ledger")
        found = wait_for(lambda: _named(other, "shared-ledger"), "the starter's actor to be known by its name")
        assert found.add(1).result(timeout=DEADLINE_SECONDS) == [0, 1]
        blocked = found.wait_for("/nonexistent/never")
        starter.disconnect()
        with pytest.raises(ActorDiedError, match="ended"):
            blocked.result(timeout=DEADLINE_SECONDS)
        wait_for(lambda: _named(other, "shared-ledger") is None, "the actor's name to be free")


@pytest.mark.timeout(240)
def test_a_worker_killed_under_an_actor_restarts_it_elsewhere_up_to_its_limit(make_cluster, tmp_path):
    """The call at the actor fails ActorRestartedError; later calls reach a new instance (built again: its state is
    the constructor's) in another processor; a second loss past max_restarts=1 ends it. Checked to fail with the
    scheduler not treating a lost worker's actors (Actors.worker_gone): the call at it was never answered."""
    cluster = make_cluster(2)
    wait_for_workers(cluster.monitor_address, 2)
    with Client(cluster.get_address()) as client:
        ledger = client.actor_verbose(Ledger, (0,), {}, max_restarts=1)
        assert ledger.add(1).result(timeout=DEADLINE_SECONDS) == [0, 1]
        first_pid = ledger.pid().result(timeout=DEADLINE_SECONDS)
        at_it = ledger.wait_for(str(tmp_path / "never"))
        queued = ledger.add(2)
        _kill_worker_of(first_pid)
        with pytest.raises(ActorRestartedError, match="restart 1"):
            at_it.result(timeout=DEADLINE_SECONDS)
        with pytest.raises(ActorRestartedError):
            queued.result(timeout=DEADLINE_SECONDS)  # it was at the worker too (sent behind the first)
        assert ledger.add(3).result(timeout=DEADLINE_SECONDS) == [0, 3]  # a new instance
        second_pid = ledger.pid().result(timeout=DEADLINE_SECONDS)
        assert second_pid != first_pid
        _kill_worker_of(second_pid)
        with pytest.raises(ActorDiedError, match="restarts are spent"):
            ledger.add(4).result(timeout=DEADLINE_SECONDS)


def test_the_status_lists_live_actors(shared_cluster):
    """scaler_top and the dashboard read the status snapshot. Checked to fail with the view's actors left empty."""
    with Client(shared_cluster.get_address()) as client:
        ledger = client.actor_verbose(Ledger, (0,), {}, name="listed")
        ledger.add(1).result(timeout=DEADLINE_SECONDS)
        with monitor(shared_cluster.monitor_address) as next_snapshot:
            snapshot = next_snapshot(lambda s: any(a.name == "listed" for a in s.actors), DEADLINE_SECONDS)
        (listed,) = [a for a in snapshot.actors if a.name == "listed"]
        assert listed.class_name == "Ledger" and listed.state == "running" and listed.calls_done == 1
        ledger.stop()


def _named(client: Client, name: str) -> ActorHandle[Any] | None:
    try:
        return client.get_actor(name)
    except ValueError:
        return None


def _kill_worker_of(processor_pid: int) -> None:
    os.kill(agent_of_processor(processor_pid), signal.SIGKILL)
    os.kill(processor_pid, signal.SIGKILL)


def test_an_actors_story_tells_when_it_was_ready(shared_cluster):
    """Checked to fail without the scheduler's note at ActorReady."""
    with Client(shared_cluster.get_address()) as client:
        ledger = client.actor(Ledger, 0)
        ledger.add(1).result(timeout=DEADLINE_SECONDS)
        assert ledger.started is not None
        story = ledger.started.story()
        ledger.stop()
    assert any("actor ready" in str(entry) for entry in story), story
