"""The manager runner against a scripted scheduler (a ROUTER of the in-memory network) and an in-memory backend, on
simulated time (`scaler_rehearsal.testing`): registration and refusal, targets, heartbeats, backend failures,
re-registration, shutdown, silence."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import zmq

from scaler.config.sections import WorkerConfig
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.worker_manager.backend import LaunchSpec, UnitInfo, UnitState
from scaler.worker_manager.runner import (
    EXIT_ERROR,
    EXIT_NEVER_CONNECTED,
    EXIT_OK,
    EXIT_SCHEDULER_LOST,
    ManagerRunner,
    RunnerSettings,
)
from scaler_rehearsal.testing.fake_clock import FakeClock
from scaler_rehearsal.testing.memory_network import MemoryNetwork

DEADLINE_SECONDS = 20.0  #: simulated
SCHEDULER_ADDRESS = "tcp://scheduler.sim:1"


@dataclass
class FakeBackend:
    """Units in memory. `fail_launches` / `fail_lists` make the next calls raise."""

    workers_per_unit: int = 1
    units: dict[str, UnitInfo] = field(default_factory=dict)
    fail_launches: int = 0
    fail_lists: int = 0
    launches: list[int] = field(default_factory=list)
    terminated: list[str] = field(default_factory=list)
    closed: bool = False
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    async def launch(self, count: int, spec: LaunchSpec) -> list[str]:
        self.launches.append(count)
        if self.fail_launches:
            self.fail_launches -= 1
            raise RuntimeError("no capacity")
        ids = [f"u{next(self._ids)}" for _ in range(count)]
        for unit_id in ids:
            self.units[unit_id] = UnitInfo(unit_id, UnitState.RUNNING, 0.0)
        return ids

    async def list_units(self) -> list[UnitInfo]:
        if self.fail_lists:
            self.fail_lists -= 1
            raise ConnectionError("provider API unavailable")
        return list(self.units.values())

    async def terminate(self, unit_ids: list[str], reason: str) -> None:
        for unit_id in unit_ids:
            if self.units.pop(unit_id, None) is not None:
                self.terminated.append(unit_id)

    async def close(self) -> None:
        self.closed = True

    def running(self) -> int:
        return sum(1 for unit in self.units.values() if unit.state is UnitState.RUNNING)


class FakeScheduler:
    """A ROUTER the test scripts: it records what the manager sends and answers as told."""

    def __init__(self, network: MemoryNetwork) -> None:
        self.sockets = network.sockets()
        self.socket = self.sockets.router(SCHEDULER_ADDRESS)
        self.peer = b""
        self.received: list[m.Message] = []

    def close(self) -> None:
        self.sockets.close()

    def pump(self) -> None:
        while True:
            try:
                peer, *frames = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            self.peer = peer
            self.received.extend(codec.decode(part) for frame in frames for part in codec.split(frame))

    def send(self, message: m.Message) -> None:
        self.socket.send_multipart([self.peer, codec.encode(message)])

    def of_type(self, kind: type) -> list[Any]:
        self.pump()
        return [message for message in self.received if isinstance(message, kind)]


def settings(address: str, **overrides: Any) -> RunnerSettings:
    values: dict[str, Any] = dict(
        scheduler_address=address, manager_id="m1", manager_type="fake", max_workers=4,
        heartbeat_interval_seconds=0.2, reconcile_interval_seconds=0.1, scheduler_timeout_seconds=10.0,
        stop_timeout_seconds=2.0,
    )  # fmt: skip
    values.update(overrides)
    return RunnerSettings(**values)


SPEC = LaunchSpec("m1", WorkerConfig(scheduler_address="tcp://127.0.0.1:1", worker_manager_id="m1"))


async def until(check: Callable[[], bool], what: str) -> None:
    """Look every 20 ms of the loop's time (the fake clock's) until `check()`."""
    deadline = asyncio.get_running_loop().time() + DEADLINE_SECONDS
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def scenario(
    script: Callable[[FakeScheduler, FakeBackend, ManagerRunner], Awaitable[None]],
    backend: FakeBackend | None = None,
    **overrides: Any,
) -> tuple[int, FakeBackend, FakeScheduler]:
    clock, network = FakeClock(), MemoryNetwork()
    scheduler = FakeScheduler(network)
    backend = backend or FakeBackend()
    runner = ManagerRunner(settings(SCHEDULER_ADDRESS, **overrides), backend, SPEC, clock=clock,
                           sockets=network.sockets())  # fmt: skip

    async def main() -> int:
        run = asyncio.ensure_future(runner.run())
        try:
            await script(scheduler, backend, runner)
            return await asyncio.wait_for(run, DEADLINE_SECONDS)
        finally:
            run.cancel()

    try:
        return clock.run(main()), backend, scheduler
    finally:
        scheduler.close()


async def accept(scheduler: FakeScheduler) -> m.Hello:
    await until(lambda: bool(scheduler.of_type(m.Hello)), "the manager's hello")
    scheduler.send(m.HelloReply(True))
    hello: m.Hello = scheduler.of_type(m.Hello)[-1]
    return hello


# ---------------------------------------------------------------- tests


def test_registers_follows_targets_heartbeats_and_stops_its_units_on_shutdown() -> None:
    async def script(scheduler: FakeScheduler, backend: FakeBackend, runner: ManagerRunner) -> None:
        hello = await accept(scheduler)
        assert hello.info == m.ManagerInfo("m1", (), 4, "fake")
        scheduler.send(m.ManagerTarget((m.TargetEntry((), 2), m.TargetEntry((("gpu", 1),), 1))))
        await until(lambda: backend.running() == 3, "3 units")
        await until(
            lambda: any(h.manager == m.ManagerStatus(3, 0) for h in scheduler.of_type(m.Heartbeat)),
            "a heartbeat reporting 3 units",
        )
        scheduler.send(m.ManagerTarget((m.TargetEntry((), 9),)))  # more than -mtc 4
        await until(lambda: backend.running() == 4, "4 units")
        scheduler.send(m.ManagerTarget(()))
        await until(lambda: backend.running() == 0, "no unit")
        scheduler.send(m.ManagerTarget((m.TargetEntry((), 1),)))
        await until(lambda: backend.running() == 1, "1 unit")
        scheduler.send(m.Shutdown("the cluster is shutting down"))

    code, backend, _ = scenario(script)
    assert code == EXIT_OK and backend.units == {} and backend.closed
    assert sum(backend.launches) == 5  # 3, then 1 more, then 1 after the shrink to 0


def test_a_refused_manager_exits_1_and_touches_no_unit() -> None:
    existing = FakeBackend(units={"theirs": UnitInfo("theirs", UnitState.RUNNING, 0.0)})

    async def script(scheduler: FakeScheduler, backend: FakeBackend, runner: ManagerRunner) -> None:
        await until(lambda: bool(scheduler.of_type(m.Hello)), "the hello")
        scheduler.send(m.HelloReply(False, "worker manager id 'm1' is already connected"))

    code, backend, _ = scenario(script, existing)
    assert code == EXIT_ERROR
    assert "theirs" in backend.units and backend.terminated == [] and backend.closed


def test_no_target_means_no_change() -> None:
    adopted = FakeBackend(units={"old": UnitInfo("old", UnitState.RUNNING, 0.0)})

    async def script(scheduler: FakeScheduler, backend: FakeBackend, runner: ManagerRunner) -> None:
        await accept(scheduler)
        await until(lambda: len(scheduler.of_type(m.Heartbeat)) >= 3, "a few heartbeats")
        assert backend.launches == [] and backend.terminated == []
        assert scheduler.of_type(m.Heartbeat)[-1].manager == m.ManagerStatus(1, 0)  # adopted units are reported
        runner.stop("test over")

    code, backend, _ = scenario(script, adopted)
    assert code == EXIT_OK and backend.terminated == ["old"]


def test_launch_and_list_failures_are_retried() -> None:
    flaky = FakeBackend(fail_launches=2, fail_lists=1)

    async def script(scheduler: FakeScheduler, backend: FakeBackend, runner: ManagerRunner) -> None:
        await accept(scheduler)
        scheduler.send(m.ManagerTarget((m.TargetEntry((), 2),)))
        await until(lambda: backend.running() == 2, "2 units despite the failures")
        runner.stop("test over")

    code, backend, _ = scenario(script, flaky)
    assert code == EXIT_OK
    assert backend.launches[:3] == [2, 2, 2]  # two failures, then the launch that worked


def test_a_forgotten_manager_registers_again() -> None:
    async def script(scheduler: FakeScheduler, backend: FakeBackend, runner: ManagerRunner) -> None:
        await accept(scheduler)
        scheduler.send(m.ProtocolError("unknown peer: send a Hello first", m.ProtocolErrorKind.UNKNOWN_PEER))
        await until(lambda: len(scheduler.of_type(m.Hello)) == 2, "a second hello")
        scheduler.send(m.HelloReply(True))
        runner.stop("test over")

    assert scenario(script)[0] == EXIT_OK


def test_a_silent_scheduler_ends_the_manager_and_its_units() -> None:
    async def script(scheduler: FakeScheduler, backend: FakeBackend, runner: ManagerRunner) -> None:
        await accept(scheduler)
        scheduler.send(m.ManagerTarget((m.TargetEntry((), 1),)))
        await until(lambda: backend.running() == 1, "1 unit")
        # from now on the scheduler says nothing

    code, backend, _ = scenario(script, scheduler_timeout_seconds=1.0)
    assert code == EXIT_SCHEDULER_LOST and backend.units == {}


def test_a_scheduler_that_never_answers_ends_the_manager_with_code_2() -> None:
    async def script(scheduler: FakeScheduler, backend: FakeBackend, runner: ManagerRunner) -> None:
        await until(lambda: bool(scheduler.of_type(m.Hello)), "the hello")  # and never an answer

    assert scenario(script, scheduler_timeout_seconds=0.5)[0] == EXIT_NEVER_CONNECTED


@dataclass
class CtrlCTwiceBackend(FakeBackend):
    """A backend whose user presses Ctrl-C again while the manager terminates its units (a real SIGINT to this
    process, as a terminal sends it)."""

    async def terminate(self, unit_ids: list[str], reason: str) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.sleep(0.05)  # the loop sees the signal here
        await super().terminate(unit_ids, reason)


def test_a_second_ctrl_c_while_stopping_does_not_cut_the_termination_of_the_units_short() -> None:
    async def script(scheduler: FakeScheduler, backend: FakeBackend, runner: ManagerRunner) -> None:
        await accept(scheduler)
        scheduler.send(m.ManagerTarget((m.TargetEntry((), 2),)))
        await until(lambda: backend.running() == 2, "2 units")
        runner.stop("received SIGINT")  # the first Ctrl-C, as the manager's signal handler calls it

    try:
        code, backend, _ = scenario(script, CtrlCTwiceBackend())
    except KeyboardInterrupt:
        pytest.fail("a second Ctrl-C while the manager stopped its units raised KeyboardInterrupt: units left running")
    assert code == EXIT_OK and backend.units == {} and backend.closed
