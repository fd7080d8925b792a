"""Worker sessions: what a registered worker agent reports (heartbeats, its processors' ends) and its leaving, falling
silent or draining at the end of a reclaim notice. A worker's tasks never pass its agent: its processors' links carry
them and everything about them (`link_sessions.py`). A worker whose lifetime ends (a batch job's time limit) asks to
drain (WorkerLeaving with drainSeconds): no new task, those it has not started come back, those it runs may end
within the drain (then they are moved, at no retry cost), and it is let go (Shutdown) once it holds none.

Each worker beats at the period the cluster's size gives (scaler/protocol/heartbeat_period.py: longer with more
workers, so that all of them send at most a fixed number of heartbeats a second): its HelloReply gives it, each echo
gives it again, and its silence is judged by the period it was given last.

The tasks themselves change state only in `task_lifecycle.py`. A worker whose unit is being reclaimed leaves
gracefully: none of its tasks spends a retry. A worker's processors' links go with it. Pure: time is the core's `now`.
"""

from __future__ import annotations

import logging

from scaler.protocol import messages as m
from scaler.protocol.heartbeat_period import given_period, heartbeat_period, silence_timeout
from scaler.protocol.ids import PeerID, short
from scaler.scheduler.core.core_state import CoreState
from scaler.scheduler.core.follow_ups import Drain, HeartbeatAnswered, NoticeOver, RoomAt, WorkerLeft
from scaler.scheduler.core.peers import WorkerRecord
from scaler.scheduler.core.silence import SilenceDeadlines

logger = logging.getLogger(__name__)


class WorkerSessions:
    def __init__(self, state: CoreState) -> None:
        self._state = state
        #: when each worker's silence is next judged (silence.py): a tick looks at the due ones, not at every worker
        self.silence = SilenceDeadlines()
        self._echo: m.HeartbeatEcho | None = None  #: the echo of every worker's heartbeat, while the count holds
        #: the workers given a reclaim notice or asked to drain: `end_notices` looks at these, not at every worker
        self.draining: set[PeerID] = set()

    def period(self) -> float:
        """The heartbeat period a worker is given now: 0 (its own) up to the configured one's cluster size, longer
        with more workers."""
        return given_period(len(self._state.workers), self._state.settings.heartbeat_interval_seconds)

    def heartbeats_per_second(self) -> float:
        """How many heartbeats a second the workers send together, at the period they beat at now."""
        workers = len(self._state.workers)
        return workers / heartbeat_period(workers, self._state.settings.heartbeat_interval_seconds) if workers else 0.0

    def timeout(self, worker: WorkerRecord) -> float:
        """How long the worker may be silent: the configured timeout, or three of its periods when longer."""
        settings = self._state.settings
        return silence_timeout(
            worker.heartbeat_period, settings.worker_timeout_seconds, settings.heartbeat_interval_seconds
        )

    def on_heartbeat(self, peer: PeerID, heartbeat: m.Heartbeat) -> None:
        state = self._state
        worker = state.workers[peer]
        if heartbeat.worker is not None:
            worker.status = heartbeat.worker
        worker.cpu_percent = heartbeat.cpu_percent
        worker.rss_bytes = heartbeat.rss_bytes
        worker.round_trip_seconds = heartbeat.round_trip_seconds
        echo = self._echo
        if echo is None or echo.worker_count != len(state.workers):
            count = len(state.workers)
            echo = self._echo = m.HeartbeatEcho(state.settings.object_storage_address, count, (), self.period())
        worker.heartbeat_period = echo.heartbeat_interval_seconds  # its next heartbeat comes a period from now
        state.send(peer, echo)  # one value for every echo: the shell encodes it once (server.py)
        state.emit(HeartbeatAnswered(worker))

    def on_capacity(self, peer: PeerID, capacity: m.WorkerCapacity) -> None:
        """The worker changes how many tasks it accepts at once (beyond those staged, parked or hosting an actor)."""
        worker = self._state.workers[peer]
        worker.capacity = max(1, capacity.capacity)
        worker.restage()  # whether its credit counts a prefetch may have changed
        self._state.emit(RoomAt(peer))

    def on_leaving(self, peer: PeerID, leaving: m.WorkerLeaving) -> None:
        reason = leaving.reason or "no reason given"
        worker = self._state.workers[peer]
        if leaving.drain_seconds > 0 and worker.assigned:
            self._drain(worker, leaving.drain_seconds, reason)
            return
        self.drop(peer, f"left: {reason}", graceful=True)
        self._state.send(peer, m.Shutdown("leave acknowledged"))

    def _drain(self, worker: WorkerRecord, seconds: float, reason: str) -> None:
        """The worker leaves once its tasks end (its lifetime ends): no new task, those it has not started come back
        now, those it runs have `seconds` (then they are moved, at no retry cost: `end_notices`)."""
        state = self._state
        until = state.now + seconds
        worker.draining_until = until if worker.draining_until is None else min(worker.draining_until, until)
        worker.leaves_when_drained = True
        self.draining.add(worker.peer)
        logger.info("worker %s drains for at most %.0f s before it leaves (%s); %d task(s) there",
                    short(worker.peer), seconds, reason, len(worker.assigned))  # fmt: skip
        state.emit(Drain(worker))

    def end_notices(self) -> None:
        """A draining worker whose reclaim notice is over has its remaining tasks moved elsewhere; one that asked to
        drain and holds no task any more is let go."""
        state = self._state
        if not self.draining:
            return
        workers = state.workers
        found = [worker for peer in self.draining if (worker := workers.get(peer)) is not None
                 and (worker.draining_until is not None or worker.leaves_when_drained)]  # fmt: skip
        found.sort(key=lambda worker: worker.sequence)  # the order of `state.workers`: the order they registered
        self.draining = {worker.peer for worker in found}
        for worker in found:
            if worker.draining_until is not None and worker.draining_until <= state.now and worker.assigned:
                state.emit(NoticeOver(worker))
            if worker.leaves_when_drained and not worker.assigned:
                self.drop(worker.peer, "left: drained", graceful=True)
                state.send(worker.peer, m.Shutdown("drained: leave acknowledged"))

    def registered(self, worker: WorkerRecord) -> None:
        """A new worker record: it beats at the period the cluster's size gives, and its silence is judged from now on
        (silence.py)."""
        worker.heartbeat_period = self.period()
        self.silence.arm(worker.peer, worker.last_seen, self.timeout(worker))

    def reclaimed(self, worker: WorkerRecord, until: float) -> None:
        """Its unit is reclaimed by its provider: no new task, what it has not started comes back now, and what it
        runs has until the notice ends (then it is moved, at no retry cost: `end_notices`)."""
        worker.draining_until = until
        self.draining.add(worker.peer)
        self._state.emit(Drain(worker))

    def drop_silent(self) -> None:
        state = self._state
        workers = state.workers

        def seen_of(peer: PeerID) -> tuple[float, float] | None:
            worker = workers.get(peer)
            return None if worker is None else (worker.last_seen, self.timeout(worker))

        for peer in self.silence.silent(state.now, seen_of):
            self.drop(peer, f"was silent for more than {self.timeout(workers[peer]):g} s", False)

    def drop(self, peer: PeerID, reason: str, graceful: bool) -> None:
        state = self._state
        worker = state.workers.pop(peer, None)
        if worker is None:
            return
        for processor in worker.processors:  # they go with it: what they send next is refused (unknown peer)
            state.processors.pop(processor, None)
        graceful = graceful or worker.draining_until is not None  # a reclaimed unit: no retry is spent
        text = f"worker {short(peer)} (pid {worker.pid} on {worker.hostname}) {reason}"
        logger.info("%s; %d task(s) go back to the queue", text, len(worker.assigned))
        state.emit(WorkerLeft(worker, text, graceful))
