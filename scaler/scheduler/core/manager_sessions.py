"""Manager sessions: a registered worker manager's heartbeats and reclaimed units, and the targets it is sent.

A manager's target comes from the scaling hook, which sees the core's frozen view (`view.py`), never the core: the core
hands this registry `ManagerTargets`, the hook with the view of the moment bound to it.
Every heartbeat is answered with the current target (declarative and idempotent: a manager that missed one
converges on the next); between heartbeats a target goes out only when it changed. A change in a manager's worker
count is a scaling decision, logged and put on the monitor feed with the policy's reason. Pure: time is the core's
`now`.
"""

from __future__ import annotations

import logging
from typing import Protocol

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID, short, unit_of_worker
from scaler.protocol.message_extras import describe_waits
from scaler.scheduler.core.core_state import CoreState
from scaler.scheduler.core.follow_ups import Reclaimed, ScalingDecided
from scaler.scheduler.core.peers import ManagerRecord

logger = logging.getLogger(__name__)


class ManagerTargets(Protocol):
    """Each manager's target as the scaling policy sets it now, and why."""

    def targets(self, manager_id: str) -> m.ManagerTarget | None: ...

    def reason(self, manager_id: str) -> str: ...


class ManagerSessions:
    def __init__(self, state: CoreState, scaling: ManagerTargets | None) -> None:
        self._state = state
        self._scaling = scaling

    def on_heartbeat(self, peer: PeerID, heartbeat: m.Heartbeat) -> None:
        state = self._state
        manager = state.managers[peer]
        if heartbeat.manager is not None:
            manager.units = heartbeat.manager.units
            manager.pending_units = heartbeat.manager.pending_units
            manager.measured_boot_seconds = heartbeat.manager.boot_seconds
            self._note_waits(manager, heartbeat.manager.waits, heartbeat.manager.held)
        state.send(peer, m.HeartbeatEcho(state.settings.object_storage_address, len(state.workers)))
        self.send_target(manager)

    def _note_waits(self, manager: ManagerRecord, waits: tuple[m.UnitWaits, ...], held: str) -> None:
        """Keep why the manager's units wait (the view shows it); a change of the reasons, or of why launches are
        held, is logged and goes on the monitor feed with the scaling decisions (its counts alone are not news)."""
        before = ([wait.reason for wait in manager.waits], manager.held)
        manager.waits, manager.held = waits, held
        if ([wait.reason for wait in waits], held) == before:
            return
        target = sum(entry.workers for entry in manager.last_target.entries) if manager.last_target else 0
        reason = waits_reason(waits, held)
        logger.info("manager %s: %s", manager.manager_id, reason)
        decision = m.ScalingDecision(manager.manager_id, target, target, reason, self._state.wall_time)
        self._state.emit(ScalingDecided(decision))

    def on_units_reclaimed(self, peer: PeerID, reclaimed: m.UnitsReclaimed) -> None:
        """The manager's provider takes units back: their workers get no new task, give back what they have not
        started, and have until the notice ends for the rest (moved then); none of it costs a retry."""
        state = self._state
        manager, units = state.managers[peer], set(reclaimed.unit_ids)
        until = state.now + max(0.0, reclaimed.notice_seconds)
        for worker in state.workers.values():
            if worker.manager_id != manager.manager_id or worker.draining_until is not None:
                continue
            if unit_of_worker(worker.peer) in units:
                logger.warning("worker %s: its unit is reclaimed in %.0f s; draining it (%d task(s))",
                               short(worker.peer), reclaimed.notice_seconds, len(worker.assigned))  # fmt: skip
                state.emit(Reclaimed(worker, until))

    def forget_silent(self) -> None:
        state, timeout = self._state, self._state.settings.manager_timeout_seconds
        for peer, manager in list(state.managers.items()):
            if state.now - manager.last_seen > timeout:
                logger.warning(
                    "worker manager %r silent for %g s: forgotten", manager.manager_id, state.now - manager.last_seen
                )
                del state.managers[peer]

    def send_targets_changed(self) -> None:
        for manager in list(self._state.managers.values()):
            self.send_target(manager, only_if_changed=True)

    def send_target(self, manager: ManagerRecord, only_if_changed: bool = False) -> None:
        """Every heartbeat gets the current target (declarative, idempotent: a manager that missed one
        converges on the next); between heartbeats a target goes out only when it changed, so that work
        arriving on an idle cluster starts workers within a tick rather than a heartbeat."""
        if self._scaling is None:
            return
        target = self._scaling.targets(manager.manager_id)
        if target is None or (only_if_changed and target == manager.last_target):
            return
        self._note_decision(manager, target)
        manager.last_target = target
        self._state.send(manager.peer, target)

    def _note_decision(self, manager: ManagerRecord, target: m.ManagerTarget) -> None:
        before = sum(entry.workers for entry in manager.last_target.entries) if manager.last_target else 0
        after = sum(entry.workers for entry in target.entries)
        if before == after and manager.last_target is not None:
            return
        reason = self._scaling.reason(manager.manager_id) if self._scaling is not None else ""
        text = f"manager {manager.manager_id}: {before} -> {after} workers" + (f": {reason}" if reason else "")
        if after != before:
            logger.info("scaling: %s", text)
        decision = m.ScalingDecision(manager.manager_id, before, after, reason, self._state.wall_time)
        self._state.emit(ScalingDecided(decision))


def waits_reason(waits: tuple[m.UnitWaits, ...], held: str) -> str:
    """What a manager's units wait for and why it holds launches back, in one line (a scaling decision's reason)."""
    parts = [describe_waits(waits)] if waits else []
    if held:
        parts.append(f"launches held back: {held}")
    return "; ".join(parts) or "no unit waits in the provider's queue any more"
