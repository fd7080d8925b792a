"""Results straight from processors to the scheduler (docs/architecture.md, "Results straight from processors";
docs/protocol.md section 3.7), with real processes and sockets: each processor has its own CURVE link to the
scheduler with its worker's keys, and nothing is lost when a processor dies around its result, when a worker agent is
SIGKILLed, or when the scheduler is killed and started again with results sent into the outage. The rules
themselves, on simulated time: tests/simulation/test_direct_results_stack.py.

To die at an exact point of a result's way, a task changes its own processor (a fault put in from inside, found with
`gc`): `die_once_its_result_left` makes the processor's channel to its agent block, so the result leaves on the link
and the agent never hears of it; `die_before_its_result_leaves` makes the link drop what it is given and the
processor SIGKILL itself once it told the agent (ResultSent). The processes, sockets, agent and scheduler are real.

Checked with each mechanism off, by hand: with `direct_results=False` the route test finds no link and the first
processor-death test times out (its result goes through the blocked channel); with `ResultJournal.sent_by_processor`
doing nothing, the second processor-death test times out (the agent forgets a result that never left) and the
scheduler-restart test runs the tasks whose results went into the outage twice; with the `processor` role removed
from a worker key's roles (`scaler.security.roles`), the scheduler refuses the links and the route test fails for
both kinds of keys."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from scaler import Client, SchedulerClusterCombo
from tests.integration.conftest import (
    DEADLINE_SECONDS,
    Launcher,
    processor_pids,
    wait_for,
    wait_for_workers,
    worker_agent_pids,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


# ---------------------------------------------------------------- task functions (run in processors)


def the_outlet() -> object:
    import gc

    from scaler.worker.processor.outlet import ProcessorOutlet

    (outlet,) = [found for found in gc.get_objects() if isinstance(found, ProcessorOutlet)]
    return outlet


def route_and_links(scheduler_port: int) -> tuple[bool, int]:
    """Whether this processor's route to the scheduler is open, and its TCP connections to the scheduler's port."""
    import psutil

    links = [c for c in psutil.Process().net_connections("tcp") if c.raddr and c.raddr.port == scheduler_port]
    return the_outlet().route_open, len(links)  # type: ignore[attr-defined]


def die_once_its_result_left(pid_path: str, value: int) -> int:
    """Its result leaves on the processor's link; the processor then blocks before telling its agent (the test
    SIGKILLs it there)."""
    import os
    import threading

    Path(pid_path).write_text(str(os.getpid()))
    the_outlet()._channel.send_all = lambda messages: threading.Event().wait()  # type: ignore[attr-defined]
    return value


class _Dropped:
    """A link that loses what it is given, as one whose process died before its I/O thread wrote it."""

    def send_multipart(self, frames: object, flags: int = 0, copy: bool = True) -> None:
        return None

    def close(self, linger: int = 0) -> None:
        return None

    def getsockopt(self, option: int) -> int:
        return 0


def die_before_its_result_leaves(value: int) -> int:
    """The processor tells its agent the result was sent (ResultSent), but the message never leaves: it dies."""
    import os
    import signal

    outlet = the_outlet()
    tell_agent = outlet._channel.send_all  # type: ignore[attr-defined]

    def then_die(messages: object) -> None:
        tell_agent(messages)
        os.kill(os.getpid(), signal.SIGKILL)

    outlet._link = _Dropped()  # type: ignore[attr-defined]
    outlet._channel.send_all = then_die  # type: ignore[attr-defined]
    return value


def marked_square(path: str, x: int, seconds: float) -> int:
    import time

    with open(path, "a") as runs:
        runs.write(f"start {x}\n")
    time.sleep(seconds)
    with open(path, "a") as runs:
        runs.write(f"end {x}\n")
    return x * x


# ---------------------------------------------------------------- helpers


def open_route(client: Client, port: int) -> tuple[bool, int]:
    """What a processor says once it ran a task or two (its first hello is answered while it waits for work)."""
    found: list[tuple[bool, int]] = []

    def opened() -> bool:
        found.append(client.submit(route_and_links, port).result(timeout=DEADLINE_SECONDS))
        return found[-1][0]

    try:
        wait_for(opened, "a processor's route to open", timeout_seconds=10, interval=0.2)
    except AssertionError:
        pass
    return found[-1]


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def only_processor(cluster: SchedulerClusterCombo) -> int:
    (agent,) = worker_agent_pids(cluster)
    return wait_for(lambda: (pids := processor_pids(agent)) and pids[0], "its processor")


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize(
    "settings, opened",
    [
        ({"direct_results": True, "lend_processors": False}, True),
        ({"secure": True, "direct_results": True, "lend_processors": False}, True),
        ({"lend_processors": False}, False),
    ],
    ids=["user-keys", "cluster-keys", "through-the-agent"],
)
def test_each_processor_has_its_own_curve_link_to_the_scheduler(
    make_cluster: Callable[..., SchedulerClusterCombo], settings: dict[str, object], opened: bool
) -> None:
    """With CURVE (the user's keys, or keys made for the cluster) a processor links to the scheduler with its
    worker's keys and the scheduler accepts it: its route is open and it holds a TCP connection to the scheduler's
    port. Without `direct_results` (the default) and without lending its processors, neither (the control)."""
    cluster = make_cluster(1, **settings)
    keys = cluster.client_keys if settings.get("secure") else {}
    with Client(address=cluster.get_address(), **keys) as client:
        route_open, links = open_route(client, port_of(cluster.get_address()))
        assert (route_open, links) == ((True, 1) if opened else (False, 0))
        assert client.map(abs, range(-50, 0)) == list(range(50, 0, -1))


def test_a_processor_killed_after_its_result_left_but_before_its_agent_heard(
    make_cluster: Callable[..., SchedulerClusterCombo], tmp_path: Path
) -> None:
    """The result reaches the client from the processor's link; the processor is SIGKILLed before its agent heard
    of it (the agent then reports the processor's death for the task, which the scheduler ignores: the task is
    done), and the worker runs the next tasks on a new processor. (Not lent: a lent task's result never goes to the
    agent.)"""
    cluster = make_cluster(1, direct_results=True, lend_processors=False)
    with Client(address=cluster.get_address()) as client:
        open_route(client, port_of(cluster.get_address()))
        pid_path = tmp_path / "pid"
        future = client.submit(die_once_its_result_left, str(pid_path), 42)
        assert future.result(timeout=DEADLINE_SECONDS) == 42
        processor = int(pid_path.read_text())
        os.kill(processor, signal.SIGKILL)
        wait_for(lambda: processor not in processor_pids(worker_agent_pids(cluster)[0]), "its death to be seen")
        assert client.map(abs, [-1, -2, -3]) == [1, 2, 3]
        assert only_processor(cluster) != processor


def test_a_processor_killed_before_its_result_left_after_it_told_its_agent(
    make_cluster: Callable[..., SchedulerClusterCombo],
) -> None:
    """The processor tells its agent it sent the result, and dies before the message left: the agent, which keeps
    every result until the scheduler names it read, sends it itself; the client gets the value, not an error. (Not
    lent: the agent's journal never has a lent task's result.)"""
    cluster = make_cluster(1, direct_results=True, lend_processors=False)
    with Client(address=cluster.get_address()) as client:
        assert open_route(client, port_of(cluster.get_address()))[0]
        assert client.submit(die_before_its_result_leaves, 7).result(timeout=DEADLINE_SECONDS) == 7
        assert client.map(abs, [-4, -5]) == [4, 5]


def test_a_worker_agent_sigkilled_while_its_processors_send_results(
    make_cluster: Callable[..., SchedulerClusterCombo],
) -> None:
    """Two workers run short tasks, their processors sending the results; one agent is SIGKILLed in the middle:
    every future gets its value (what the dead worker held runs on the other; what its processors sent after it
    died is refused by the scheduler, their link gone with their worker)."""
    cluster = make_cluster(2, direct_results=True)
    with Client(address=cluster.get_address()) as client:
        futures = [client.submit(time.sleep, 0.05) for _ in range(200)]
        wait_for(lambda: sum(future.done() for future in futures) >= 20, "some results")
        victim = worker_agent_pids(cluster)[0]
        os.kill(victim, signal.SIGKILL)
        assert [future.result(timeout=120) for future in futures] == [None] * 200
        assert client.map(abs, [-1, -2]) == [1, 2]


@pytest.mark.parametrize("route", ["direct-results", "lend-processors"])
def test_results_sent_into_a_scheduler_outage_reach_the_next_instance_and_no_task_runs_twice(
    launcher: Launcher, tmp_path: Path, route: str
) -> None:
    """Two workers run 1 s tasks; the scheduler is SIGKILLed while two run, and started again at the same address
    only once both finished (their processors sent the results into the outage, on links the new instance does not
    know): every future gets its value, and every task ran once (the agents' journals sent the results again when
    they registered with the new instance, which adopted those tasks). With lent processors (`lend-processors`: the
    agents never saw the tasks), the processors kept the results, named the tasks in their links' hellos to the new
    instance and sent the results again once it accepted them: checked by hand with `ProcessorOutlet._keep` keeping
    nothing, the two tasks ran again."""
    lend = "true" if route == "lend-processors" else "false"
    addresses, scheduler, _storage = launcher.stack(
        workers=2, worker_args=("--direct-results", "true", "--lend-processors", lend)
    )
    runs = tmp_path / "runs"
    runs.touch()

    def lines(word: str) -> list[str]:
        return [line for line in runs.read_text().splitlines() if line.startswith(word)]

    with Client(address=addresses.scheduler, scheduler_lost_grace_seconds=90) as client:
        futures = [client.submit(marked_square, str(runs), x, 1.0) for x in range(8)]
        wait_for(lambda: len(lines("start")) >= 2, "two tasks running")
        scheduler.popen.send_signal(signal.SIGKILL)
        scheduler.wait_exit()
        wait_for(lambda: len(lines("end")) >= 2, "two results sent into the outage")
        launcher.scheduler(addresses)
        assert [future.result(timeout=120) for future in futures] == [x * x for x in range(8)]
        wait_for_workers(addresses.monitor, 2)
    starts = sorted(int(line.split()[1]) for line in lines("start"))
    assert starts == list(range(8)), f"each task ran once: {starts}"
