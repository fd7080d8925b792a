"""An actor on its processor's own link (core/actors.py, processor/outlet.py): its start, calls, their results and its
stop travel scheduler <-> processor without the worker agent; a processor killed under it still fails the call at it
with ActorRestartedError and builds it again; a stopped actor's last results come before its end. The scheduler's part
alone is in tests/unit/scheduler/test_actors.py.
"""

from __future__ import annotations

import os
import signal

import pytest

from scaler import ActorRestartedError, Client
from tests.integration.conftest import DEADLINE_SECONDS, agent_of_processor, wait_for_workers

pytestmark = pytest.mark.integration


class Tally:
    """Counts its calls; `wait_for` holds a call until a file exists."""

    def __init__(self) -> None:
        self.calls = 0

    def add(self, value: int) -> tuple[int, int]:
        self.calls += 1
        return self.calls, value

    def pid(self) -> int:
        return os.getpid()

    def shout(self, text: str) -> str:
        print(text, flush=True)
        return text

    def wait_for(self, path: str) -> str:
        import time

        while not os.path.exists(path):
            time.sleep(0.01)
        return "went on"


def test_calls_are_answered_while_the_actors_worker_agent_is_stopped(make_cluster):
    """With its worker agent frozen (SIGSTOP), the actor still takes calls and answers them, in order: they never pass
    the agent. (Checked to fail, the calls timing out, when the calls went through the agent: the route removed by
    issue 56.)"""
    cluster = make_cluster(1)
    wait_for_workers(cluster.monitor_address, 1)
    with Client(cluster.get_address()) as client:
        tally = client.actor(Tally)
        assert tally.add(0).result(timeout=DEADLINE_SECONDS) == (1, 0)
        agent = agent_of_processor(tally.pid().result(timeout=DEADLINE_SECONDS))
        os.kill(agent, signal.SIGSTOP)
        try:
            futures = [tally.add(value) for value in range(1, 21)]
            assert [f.result(timeout=DEADLINE_SECONDS) for f in futures] == [(n + 1, n) for n in range(1, 21)]
        finally:
            os.kill(agent, signal.SIGCONT)
        tally.stop()
        assert tally.started is not None
        assert tally.started.result(timeout=DEADLINE_SECONDS) is None  # its end came, after its calls' results


def test_a_calls_output_reaches_its_caller_on_the_link(make_cluster, capfd):
    """A call's print reaches its caller, marked by the call (its TaskLog on the link, before its result). Checked to
    fail with the scheduler's `LinkSessions.on_log` not asking the actors (`call_log`): the log is dropped."""
    cluster = make_cluster(1)
    wait_for_workers(cluster.monitor_address, 1)
    with Client(cluster.get_address(), stream_output=True) as client:
        tally = client.actor(Tally)
        assert tally.shout("said on the link").result(timeout=DEADLINE_SECONDS) == "said on the link"
        tally.stop()
    lines = capfd.readouterr().out.splitlines()
    assert any(line.startswith("[task ") and line.endswith("] said on the link") for line in lines), lines


def test_a_processor_killed_under_a_linked_actor_fails_the_call_at_it_and_builds_it_again(make_cluster, tmp_path):
    """SIGKILL of the actor's processor alone (its agent lives): the call at it fails ActorRestartedError, the next
    call reaches a new instance in a new processor (its state is the constructor's). Checked to fail with
    PROCESSOR_DIED taken out of core/actors.py's losses (the actor ended instead of starting again)."""
    cluster = make_cluster(1)
    wait_for_workers(cluster.monitor_address, 1)
    with Client(cluster.get_address()) as client:
        tally = client.actor_verbose(Tally, (), {}, max_restarts=1)
        assert tally.add(5).result(timeout=DEADLINE_SECONDS) == (1, 5)
        first = tally.pid().result(timeout=DEADLINE_SECONDS)
        at_it = tally.wait_for(str(tmp_path / "never"))
        os.kill(first, signal.SIGKILL)
        with pytest.raises(ActorRestartedError, match="restart 1"):
            at_it.result(timeout=DEADLINE_SECONDS)
        assert tally.add(6).result(timeout=DEADLINE_SECONDS) == (1, 6)
        assert tally.pid().result(timeout=DEADLINE_SECONDS) != first
        tally.stop()
