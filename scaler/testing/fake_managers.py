"""Fake worker managers for the SimulatedCluster: they register and heartbeat like the real runner, take
the scheduler's targets, plan with the real `Reconciler`, and boot workers after a delay on the fake clock.

A manager is described by a `ManagerModel`, a plain value meant to grow (issue 17 adds costs and
billing to it). A unit holds one worker. Terminating a unit stops its worker gracefully: the worker
leaves and its tasks go back to the queue, as with a real backend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID
from scaler.testing.simulation import Durations, FakeWorker, SimulatedCluster, hello
from scaler.worker_manager.backend import UnitInfo, UnitState
from scaler.worker_manager.reconciler import Reconciler, ReconcilerSettings, Target


@dataclass(frozen=True, slots=True)
class ManagerModel:
    manager_id: str
    capabilities: m.Capabilities = ()  #: what each of its workers advertises
    max_workers: m.WorkerLimit = None
    boot_seconds: float = 5.0  #: from launch to the worker's hello
    initial_workers: int = 0  #: running at the start (a fixed pool, adopted: not counted as launches)
    heartbeat_seconds: float = 2.0
    worker_capacity: int = 1  #: credit of each worker
    worker_slots: int = 1  #: tasks each worker runs at once


@dataclass(eq=False)
class FakeUnit:
    unit_id: str
    launched_at: float
    worker_peer: PeerID
    state: UnitState = UnitState.PENDING
    worker: FakeWorker | None = None
    stopped_at: float | None = None


class FakeManager:
    def __init__(self, sim: SimulatedCluster, model: ManagerModel, durations: Durations = None) -> None:
        self.sim = sim
        self.model = model
        self.durations = durations
        self.peer = PeerID(f"Manager|SIM|{model.manager_id}".encode())
        self.reconciler = Reconciler(ReconcilerSettings(max_units=model.max_workers))
        self.units: dict[str, FakeUnit] = {}  #: alive units (pending or running), by id
        self.every_unit: list[FakeUnit] = []  #: every unit it ever had, launch order
        self.target: m.ManagerTarget | None = None
        self.launches = 0
        self.terminations = 0
        self.after_heartbeat: Callable[[FakeManager], None] | None = None  #: for timelines
        sim.receivers[self.peer] = self._receive
        for _ in range(model.initial_workers):
            self._boot(self._new_unit())
        info = m.ManagerInfo(model.manager_id, model.capabilities, model.max_workers, "simulated")
        sim.send(self.peer, hello(info))

    def start_heartbeats(self, first_at: float) -> None:
        self.sim.clock.call_at(first_at, self.heartbeat)

    def heartbeat(self) -> None:
        status = m.ManagerStatus(self.reconciler.units, self.reconciler.pending_units)
        self.sim.send(self.peer, m.Heartbeat(manager=status))
        if self.after_heartbeat is not None:
            self.after_heartbeat(self)
        self.sim.clock.call_later(self.model.heartbeat_seconds, self.heartbeat)

    def reconcile(self) -> None:
        now = self.sim.now
        target = Target.of(self.target) if self.target is not None else None
        plan = self.reconciler.plan(target, self._listed(), now)
        if plan.terminate:
            self.reconciler.terminating(plan.terminate)
            for unit_id in plan.terminate:
                self._terminate(unit_id)
        if plan.launch:
            launched = [self._launch() for _ in range(plan.launch)]
            self.reconciler.launched(launched, plan.launch, now)

    # ------------------------------------------------------------ units

    def _receive(self, message: m.Message) -> None:
        if isinstance(message, m.ManagerTarget):
            self.target = message
            self.reconcile()

    def _listed(self) -> list[UnitInfo]:
        return [
            UnitInfo(unit.unit_id, unit.state, unit.launched_at, (unit.worker_peer.decode(),))
            for unit in self.units.values()
        ]

    def _new_unit(self) -> FakeUnit:
        unit_id = f"u{next(self.sim.serial_numbers)}"  # unique across managers: it names the worker
        unit = FakeUnit(unit_id, self.sim.now, PeerID(f"Worker|SIM-{unit_id}|{self.model.manager_id}".encode()))
        self.units[unit_id] = unit
        self.every_unit.append(unit)
        return unit

    def _launch(self) -> str:
        unit = self._new_unit()
        self.launches += 1
        self.sim.clock.call_later(self.model.boot_seconds, lambda: self._boot(unit))
        return unit.unit_id

    def _boot(self, unit: FakeUnit) -> None:
        if unit.stopped_at is not None:
            return
        unit.state = UnitState.RUNNING
        model = self.model
        unit.worker = self.sim.add_worker(
            capacity=model.worker_capacity, capabilities=model.capabilities, slots=model.worker_slots,
            durations=self.durations, manager_id=model.manager_id, peer=unit.worker_peer,
        )  # fmt: skip

    def lose_unit(self, unit_id: str) -> None:
        """The unit ends on its own (a crash, a reclaimed spot instance): its worker dies with it."""
        unit = self.units.pop(unit_id, None)
        if unit is None:
            return
        unit.stopped_at = self.sim.now
        if unit.worker is not None and unit.worker.alive:
            self.sim.kill(unit.worker)

    def _terminate(self, unit_id: str) -> None:
        unit = self.units.pop(unit_id, None)
        if unit is None:
            return
        unit.stopped_at = self.sim.now
        self.terminations += 1
        if unit.worker is not None and unit.worker.alive:
            self.sim.leave(unit.worker, "its unit was terminated")
