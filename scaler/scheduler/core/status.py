"""Builds the status snapshot the scheduler publishes for `scaler_top`, the GUI and tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID
from scaler.scheduler.core.effects import Publish
from scaler.scheduler.core.events import ShellStats
from scaler.scheduler.core.peers import ManagerRecord
from scaler.scheduler.core.task_state import TaskState

if TYPE_CHECKING:
    from scaler.scheduler.core.scheduler_core import SchedulerCore


class StatusBuilder:
    def __init__(self, core: SchedulerCore) -> None:
        self._core = core
        self.shell_stats = ShellStats(0.0, 0, 0, 0, 0, 0)

    def publish(self) -> Publish:
        return Publish(self.snapshot())

    def snapshot(self) -> m.StatusSnapshot:
        core, shell = self._core, self.shell_stats
        counts = core.tasks.count_by_state()
        stats = m.SchedulerStats(
            address=core.settings.scheduler_address,
            cpu_percent=shell.cpu_percent,
            rss_bytes=shell.rss_bytes,
            queued=counts[TaskState.QUEUED] + counts[TaskState.WAITING],
            running=counts[TaskState.DISPATCHED] + counts[TaskState.CANCELING],
            succeeded=core.tasks.succeeded,
            failed=core.tasks.failed,
            canceled=core.tasks.canceled,
            worker_died=core.tasks.worker_died,
            object_count=shell.object_count,
            object_bytes=shell.object_bytes,
            messages_received=shell.messages_received,
            messages_sent=shell.messages_sent,
            graphs=len(core.graphs),
        )
        workers = tuple(
            m.WorkerSummary(
                worker_id=w.peer,
                manager_id=w.manager_id,
                capabilities=w.capabilities,
                capacity=w.capacity,
                assigned=len(w.assigned),
                status=w.status,
                cpu_percent=w.cpu_percent,
                rss_bytes=w.rss_bytes,
                last_seen_seconds_ago=max(0.0, core.now - w.last_seen),
                hostname=w.hostname,
                pid=w.pid,
            )
            for w in core.workers.values()
        )
        clients = tuple(
            m.ClientSummary(peer, len(core.tasks.by_client.get(ClientID(peer), ()))) for peer in core.clients
        )
        managers = tuple(self._manager_summary(manager) for manager in core.managers.values())
        return m.StatusSnapshot(core.now, stats, workers, clients, managers, self.pending_groups())

    def pending_groups(self) -> tuple[m.PendingGroup, ...]:
        """Queued tasks by capability set, with the reason they wait."""
        core = self._core
        groups = []
        for capabilities, count in core.tasks.queue.groups():
            names = frozenset(name for name, _ in capabilities)
            able = [w for w in core.workers.values() if w.can_run(names)]
            if not core.workers:
                reason = "no worker is connected"
            elif not able:
                wanted = ", ".join(sorted(names))
                reason = f"no connected worker has the capabilities {wanted}"
            else:
                reason = "waiting for a free worker"
            groups.append(m.PendingGroup(capabilities, count, reason))
        return tuple(groups)

    def _manager_summary(self, manager: ManagerRecord) -> m.ManagerSummary:
        connected = sum(1 for w in self._core.workers.values() if w.manager_id == manager.manager_id)
        target = sum(entry.workers for entry in manager.last_target.entries) if manager.last_target else 0
        return m.ManagerSummary(
            manager.manager_id, manager.manager_type, manager.capabilities, manager.max_workers,
            connected, target, manager.units, manager.pending_units,
        )  # fmt: skip
