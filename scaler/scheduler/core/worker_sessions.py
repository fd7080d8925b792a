"""Worker sessions: what a registered worker agent reports (heartbeats, its processors' ends) and its leaving, falling
silent or draining at the end of a reclaim notice. A worker's tasks never pass its agent: its processors' links carry
them and everything about them (`link_sessions.py`).

The tasks themselves change state only in `task_lifecycle.py`. A worker whose unit is being reclaimed leaves
gracefully: none of its tasks spends a retry. A worker's processors' links go with it. Pure: time is the core's `now`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID, short

if TYPE_CHECKING:
    from scaler.scheduler.core.scheduler_core import SchedulerCore

logger = logging.getLogger(__name__)


class WorkerSessions:
    def __init__(self, core: SchedulerCore) -> None:
        self._core = core

    def on_heartbeat(self, peer: PeerID, heartbeat: m.Heartbeat) -> None:
        core = self._core
        worker = core.workers[peer]
        if heartbeat.worker is not None:
            worker.status = heartbeat.worker
        worker.cpu_percent = heartbeat.cpu_percent
        worker.rss_bytes = heartbeat.rss_bytes
        worker.round_trip_seconds = heartbeat.round_trip_seconds
        core.send(peer, m.HeartbeatEcho(core.settings.object_storage_address, len(core.workers)))
        core.link_sessions.echo(worker)

    def on_capacity(self, peer: PeerID, capacity: m.WorkerCapacity) -> None:
        """The worker changes how many tasks it accepts at once (beyond those staged, parked or hosting an actor)."""
        self._core.workers[peer].capacity = max(1, capacity.capacity)
        self._core.lifecycle.worker_has_room(peer)

    def on_leaving(self, peer: PeerID, leaving: m.WorkerLeaving) -> None:
        self.drop(peer, f"left: {leaving.reason or 'no reason given'}", graceful=True)
        self._core.send(peer, m.Shutdown("leave acknowledged"))

    def end_notices(self) -> None:
        """A draining worker whose reclaim notice is over has its remaining tasks moved elsewhere."""
        core = self._core
        for worker in core.workers.values():
            if worker.draining_until is not None and worker.draining_until <= core.now and worker.assigned:
                core.lifecycle.notice_over(worker)

    def drop_silent(self) -> None:
        core, timeout = self._core, self._core.settings.worker_timeout_seconds
        for peer, worker in list(core.workers.items()):
            if core.now - worker.last_seen > timeout:
                self.drop(peer, f"was silent for more than {timeout:g} s", False)

    def drop(self, peer: PeerID, reason: str, graceful: bool) -> None:
        core = self._core
        worker = core.workers.pop(peer, None)
        if worker is None:
            return
        for link in [link for link in core.processors.values() if link.worker == peer]:
            del core.processors[link.peer]  # they go with it: what they send next is refused (unknown peer)
        graceful = graceful or worker.draining_until is not None  # a reclaimed unit: no retry is spent
        text = f"worker {short(peer)} (pid {worker.pid} on {worker.hostname}) {reason}"
        logger.info("%s; %d task(s) go back to the queue", text, len(worker.assigned))
        core.reattachment.worker_gone(peer)
        core.actors.worker_gone(worker, text)
        core.lifecycle.worker_gone(worker, text, graceful)
