"""SchedulerCore: the scheduler's one mutator. `handle(event) -> list[Effect]`; nothing else writes.

Routing is a table from message type to handler (`test_scheduler_core.py` checks that every message
a peer may send has one). Peers register with a Hello; anything else from an unknown peer is answered
with a ProtocolError. Liveness is judged on `Tick(now)` against the last message of each peer.

Everything the outside reads (the scaling policy, the monitor feed) reads one `SchedulerView`, built by
`view()` at most once per event. A handler that raises is logged and its event dropped (a scheduler
must survive one bad message); a `strict` core re-raises instead, which is how every test runs it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from scaler.protocol import messages as m
from scaler.protocol.feed import SchedulerView
from scaler.protocol.handshake import incompatibility
from scaler.protocol.ids import ClientID, PeerID, short
from scaler.scheduler.core.balancing import Balancer
from scaler.scheduler.core.effects import DeleteOwnerObjects, Effect, Send, StopScheduler
from scaler.scheduler.core.events import (
    Event,
    FeedSubscriptions,
    PeerLost,
    Received,
    ShellStats,
    Tick,
    Undecodable,
)
from scaler.scheduler.core.graphs import GraphRegistry
from scaler.scheduler.core.monitor_feed import MonitorFeed
from scaler.scheduler.core.object_retention import ObjectRetention
from scaler.scheduler.core.peers import ManagerRecord, Peers, WorkerRecord
from scaler.scheduler.core.scaling_targets import ScalingHook, decision_record, is_a_decision
from scaler.scheduler.core.task_lifecycle import TaskLifecycle
from scaler.scheduler.core.task_table import TaskTable
from scaler.scheduler.core.view import build_view

logger = logging.getLogger(__name__)

Handlers = dict[type, Callable[[PeerID, Any], None]]


@dataclass(frozen=True, slots=True)
class CoreSettings:
    scheduler_address: str
    object_storage_address: str  #: what clients and workers are told
    python_version: str  #: the scheduler's own; peers must share major.minor
    protected: bool = False
    client_timeout_seconds: float = 60
    worker_timeout_seconds: float = 60
    manager_timeout_seconds: float = 10
    max_task_retries: int = 3
    max_tasks_waiting: int = -1
    status_interval_seconds: float = 1
    heartbeat_interval_seconds: float = 2
    allocate: str = "even_load"  #: "even_load" (capabilities ignored) or "capability"
    load_balance_seconds: float = 1.0  #: <= 0 disables balancing
    load_balance_trigger_times: int = 2
    object_retention_seconds: float = 60  #: a departed client's objects are deleted this long after it left
    feed_transitions_per_batch: int = 1000  #: monitor feed: transitions per tick; the rest are only counted


class SchedulerCore:
    def __init__(self, settings: CoreSettings, scaling: ScalingHook | None = None, strict: bool = False) -> None:
        self.settings = settings
        self._scaling = scaling
        self.strict = strict  #: re-raise a handler's error instead of logging it and dropping the event
        self.effects: list[Effect] = []
        self.tasks = TaskTable(ignore_capabilities=settings.allocate == "even_load")
        self.graphs = GraphRegistry()
        self.peers = Peers()
        self.clients, self.workers, self.managers = self.peers.clients, self.peers.workers, self.peers.managers
        self.lifecycle = TaskLifecycle(
            self.tasks,
            self.workers,
            self.graphs,
            self.effects,
            settings.max_task_retries,
            settings.max_tasks_waiting,
            ignore_capabilities=settings.allocate == "even_load",
        )
        self.feed = MonitorFeed(settings.status_interval_seconds, settings.feed_transitions_per_batch)
        self.tasks.log = self.feed.transitions
        self.shell_stats = ShellStats(0.0, 0, 0, 0)
        self.now = 0.0
        self.wall_offset = 0.0  #: Unix time minus `now`, as of the last Tick that carried wall time
        self._view: SchedulerView | None = None  #: built at most once per event
        self._retention = ObjectRetention(settings.object_retention_seconds)
        self._last_balance_at = 0.0
        self._balancer = Balancer(settings.load_balance_trigger_times, settings.allocate == "even_load")
        self._client_handlers, self._worker_handlers, self._manager_handlers = self._routes()

    # ------------------------------------------------------------ the one mutator

    def handle(self, event: Event) -> list[Effect]:
        return self.handle_all((event,))

    def handle_all(self, events: Iterable[Event]) -> list[Effect]:
        """Apply events in order, then dispatch once (a batch from one socket read is one step). An
        event whose handling fails is logged and dropped (re-raised when `strict`); the others are
        still applied."""
        for event in events:
            try:
                self._view = None
                self._apply(event)
            except Exception:
                if self.strict:
                    raise
                logger.exception("failed to handle %s; it is dropped", _describe(event))
        try:
            self.lifecycle.dispatch()
        except Exception:
            if self.strict:
                raise
            logger.exception("dispatch failed")
        self._view = None  # dispatch and late changes of the last event: a caller from outside sees them
        effects = self.effects[:]
        self.effects.clear()
        return effects

    def view(self) -> SchedulerView:
        """The frozen view of the core now. Built at most once per event: everything asked during one
        event (the status, every manager's target on a tick) reads the same view."""
        if self._view is None:
            self._view = build_view(self)
        return self._view

    @property
    def wall_time(self) -> float:
        return self.now + self.wall_offset

    def _apply(self, event: Event) -> None:
        if isinstance(event, Received):
            self._advance(event.now)
            self._on_received(event.peer, event.message)
        elif isinstance(event, Tick):
            self._advance(event.now)
            if event.wall_time is not None:
                self.wall_offset = event.wall_time - event.now
            self._on_tick()
        elif isinstance(event, PeerLost):
            self._advance(event.now)
            self._drop_peer(event.peer, event.reason)
        elif isinstance(event, Undecodable):
            self._advance(event.now)
            logger.warning("undecodable frame from %s: %s", short(event.peer), event.reason)
            reason = f"frame refused: {event.reason}"
            self._send(event.peer, m.ProtocolError(reason, m.ProtocolErrorKind.MALFORMED))
        elif isinstance(event, ShellStats):
            self.shell_stats = event
        elif isinstance(event, FeedSubscriptions):
            self.tasks.log = self.feed.subscribed(event.topics)

    def _advance(self, now: float) -> None:
        self.now = now
        self.lifecycle.now = now

    def _routes(self) -> tuple[Handlers, Handlers, Handlers]:
        """Message type -> handler, for clients, workers and managers."""
        client: Handlers = {
            m.Heartbeat: self._on_client_heartbeat,
            m.Task: self._on_task,
            m.GraphTask: self._on_graph,
            m.TaskCancel: self._on_client_cancel,
            m.ClientDisconnect: self._on_client_disconnect,
        }
        worker: Handlers = {
            m.Heartbeat: self._on_worker_heartbeat,
            m.TaskResult: self._on_result,
            m.TaskCancelConfirm: self._on_cancel_confirm,
            m.TaskLog: self._on_task_log,
            m.WorkerCapacity: self._on_worker_capacity,
            m.WorkerLeaving: self._on_worker_leaving,
            m.TaskReturn: self._on_task_return,
        }
        return client, worker, {m.Heartbeat: self._on_manager_heartbeat}

    def _on_received(self, peer: PeerID, message: m.Message) -> None:
        if isinstance(message, m.Hello):
            self._on_hello(peer, message)
            return
        if isinstance(message, (m.ProtocolError, m.Ping)):
            if isinstance(message, m.ProtocolError):
                logger.warning("%s refused a message of ours: %s", short(peer), message.reason)
            return  # never answered, so that two peers cannot bounce errors forever
        handlers: Handlers
        client, worker, manager = self.clients.get(peer), self.workers.get(peer), self.managers.get(peer)
        if client is not None:
            client.last_seen = self.now
            handlers = self._client_handlers
        elif worker is not None:
            worker.last_seen = self.now
            handlers = self._worker_handlers
        elif manager is not None:
            manager.last_seen = self.now
            handlers = self._manager_handlers
        else:
            if not isinstance(message, (m.WorkerLeaving, m.ClientDisconnect)):
                reason = "unknown peer: send a Hello first (the scheduler may have restarted)"
                self._send(peer, m.ProtocolError(reason, m.ProtocolErrorKind.UNKNOWN_PEER))
            return
        handler = handlers.get(type(message))
        if handler is None:
            logger.warning("%s sent an unexpected %s; ignored", short(peer), type(message).__name__)
            self._send(peer, m.ProtocolError(f"{type(message).__name__} is not a message this peer may send"))
            return
        handler(peer, message)

    # ------------------------------------------------------------ hello

    def _on_hello(self, peer: PeerID, hello: m.Hello) -> None:
        role = hello.role.value
        reason = incompatibility(hello.protocol_version, hello.python_version, self.settings.python_version, role)
        if reason is None and hello.role is m.Role.PROCESSOR:
            reason = "processors talk to their worker agent, not to the scheduler"
        if reason is None:
            reason = self.peers.register(peer, hello, self.now)
        if reason is not None:
            logger.warning("refused %s %s (pid %d on %s): %s", role, short(peer), hello.pid, hello.hostname, reason)
            self._send(peer, m.HelloReply(False, reason, python_version=self.settings.python_version))
            return
        self._send(
            peer,
            m.HelloReply(
                True,
                python_version=self.settings.python_version,
                object_storage_address=self.settings.object_storage_address,
                heartbeat_interval_seconds=self.settings.heartbeat_interval_seconds,
                worker_count=len(self.workers),
            ),
        )
        if isinstance(hello.info, m.ClientInfo):
            self._retention.client_back(ClientID(peer))  # back within its retention time: objects kept
        if isinstance(hello.info, m.ManagerInfo):
            self._send_target(self.managers[peer])

    # ------------------------------------------------------------ clients

    def _on_client_heartbeat(self, peer: PeerID, heartbeat: m.Heartbeat) -> None:
        self._send(peer, m.HeartbeatEcho(self.settings.object_storage_address, len(self.workers)))

    def _on_task(self, peer: PeerID, task: m.Task) -> None:
        if bytes(task.client_id) != bytes(peer):
            reason = "refused: a task's client id must be the id of the connection that sends it"
            self._send(peer, m.TaskResult(task.task_id, m.ResultStatus.ERROR, error_message=reason))
            return
        self.lifecycle.submit(ClientID(peer), task)

    def _on_graph(self, peer: PeerID, graph: m.GraphTask) -> None:
        if bytes(graph.client_id) != bytes(peer) or any(bytes(node.client_id) != bytes(peer) for node in graph.nodes):
            reason = "refused: a graph's client id must be the id of the connection that sends it"
            for target in graph.targets:
                self._send(peer, m.TaskResult(target, m.ResultStatus.ERROR, error_message=reason))
            return
        self.lifecycle.submit_graph(ClientID(peer), graph)

    def _on_client_cancel(self, peer: PeerID, cancel: m.TaskCancel) -> None:
        self.lifecycle.cancel_by_client(ClientID(peer), cancel.task_ids)

    def _on_client_disconnect(self, peer: PeerID, request: m.ClientDisconnect) -> None:
        if not request.shutdown_cluster:
            self._drop_client(peer, "disconnected")
            return
        if self.settings.protected:
            reason = "the scheduler is protected (started with --protected): clients cannot shut it down"
            self._send(peer, m.ShutdownReply(False, reason))
            return
        logger.info("client %s asked the cluster to shut down", short(peer))
        self._send(peer, m.ShutdownReply(True))
        self._drop_client(peer, "shut the cluster down")
        for other in list(self.workers) + list(self.managers):
            self._send(other, m.Shutdown("the cluster is shutting down at a client's request"))
        self.effects.extend(DeleteOwnerObjects(client) for client in self._retention.due(None))  # none comes back
        self.effects.append(StopScheduler("a client asked the cluster to shut down"))

    def _drop_client(self, peer: PeerID, reason: str) -> None:
        if self.clients.pop(peer, None) is None:
            return
        client, retention = ClientID(peer), self.settings.object_retention_seconds
        logger.info("client %s %s; tasks cancelled, objects deleted in %g s", short(peer), reason, retention)
        self.lifecycle.client_gone(client)
        self.tasks.tally.forget_client(client)
        self._retention.client_left(client, self.now)
        self.effects.extend(DeleteOwnerObjects(due) for due in self._retention.due(self.now))

    # ------------------------------------------------------------ workers

    def _on_worker_heartbeat(self, peer: PeerID, heartbeat: m.Heartbeat) -> None:
        worker = self.workers[peer]
        if heartbeat.worker is not None:
            worker.status = heartbeat.worker
        worker.cpu_percent = heartbeat.cpu_percent
        worker.rss_bytes = heartbeat.rss_bytes
        self._send(peer, m.HeartbeatEcho(self.settings.object_storage_address, len(self.workers)))

    def _on_result(self, peer: PeerID, result: m.TaskResult) -> None:
        self.lifecycle.result_from(peer, result)

    def _on_cancel_confirm(self, peer: PeerID, confirm: m.TaskCancelConfirm) -> None:
        self.lifecycle.cancel_confirmed_by(peer, confirm)

    def _on_task_log(self, peer: PeerID, log: m.TaskLog) -> None:
        record = self.tasks.get(log.task_id)
        if record is not None and record.worker == peer and not record.client_gone:
            self._send(PeerID(record.client_id), log)

    def _on_worker_capacity(self, peer: PeerID, capacity: m.WorkerCapacity) -> None:
        self.workers[peer].capacity = max(1, capacity.capacity)

    def _on_worker_leaving(self, peer: PeerID, leaving: m.WorkerLeaving) -> None:
        self._drop_worker(peer, f"left: {leaving.reason or 'no reason given'}", graceful=True)
        self._send(peer, m.Shutdown("leave acknowledged"))

    def _on_task_return(self, peer: PeerID, returned: m.TaskReturn) -> None:
        self.lifecycle.returned_by(peer, returned.task_ids)

    def _drop_worker(self, peer: PeerID, reason: str, graceful: bool) -> None:
        worker = self.workers.pop(peer, None)
        if worker is None:
            return
        text = f"worker {short(peer)} (pid {worker.pid} on {worker.hostname}) {reason}"
        logger.info("%s; %d task(s) go back to the queue", text, len(worker.assigned))
        self.lifecycle.worker_gone(worker, text, graceful)

    # ------------------------------------------------------------ managers

    def _on_manager_heartbeat(self, peer: PeerID, heartbeat: m.Heartbeat) -> None:
        manager = self.managers[peer]
        if heartbeat.manager is not None:
            manager.units = heartbeat.manager.units
            manager.pending_units = heartbeat.manager.pending_units
        self._send(peer, m.HeartbeatEcho(self.settings.object_storage_address, len(self.workers)))
        self._send_target(manager)

    def _send_target(self, manager: ManagerRecord, only_if_changed: bool = False) -> None:
        """Every heartbeat gets the current target (declarative, idempotent: a manager that missed one
        converges on the next); between heartbeats a target goes out only when it changed, so that work
        arriving on an idle cluster starts workers within a tick rather than a heartbeat. A change of
        the wanted workers is a scaling decision: logged, kept and published with the policy's reason."""
        if self._scaling is None:
            return
        decision = self._scaling.targets(self.view(), manager.manager_id)
        if decision is None or (only_if_changed and decision.target == manager.last_target):
            return
        before, manager.last_target = manager.last_target, decision.target
        self._send(manager.peer, decision.target)
        if is_a_decision(before, decision.target):
            connected = sum(1 for worker in self.workers.values() if worker.manager_id == manager.manager_id)
            record = decision_record(manager.manager_id, before, decision, connected, self.wall_time)
            logger.info("scaling: %s", record.text)
            published = self.feed.decided(record)
            if published is not None:
                self.effects.append(published)

    # ------------------------------------------------------------ time

    def _on_tick(self) -> None:
        settings, now = self.settings, self.now
        for peer, client in list(self.clients.items()):
            if now - client.last_seen > settings.client_timeout_seconds:
                self._drop_client(peer, f"was silent for more than {settings.client_timeout_seconds:g} s")
        for peer, worker in list(self.workers.items()):
            if now - worker.last_seen > settings.worker_timeout_seconds:
                self._drop_worker(peer, f"was silent for more than {settings.worker_timeout_seconds:g} s", False)
        for peer, manager in list(self.managers.items()):
            if now - manager.last_seen > settings.manager_timeout_seconds:
                logger.warning(
                    "worker manager %r silent for %g s: forgotten", manager.manager_id, now - manager.last_seen
                )
                del self.managers[peer]
        self.effects.extend(DeleteOwnerObjects(client) for client in self._retention.due(now))
        self.effects.extend(self.feed.on_tick(now, self.wall_offset, self.view))
        for manager in list(self.managers.values()):
            self._send_target(manager, only_if_changed=True)
        if settings.load_balance_seconds > 0 and now - self._last_balance_at >= settings.load_balance_seconds:
            self._last_balance_at = now
            for donor, task_ids in self._balancer.step(self.tasks, self.workers.values()).items():
                self._send(donor, m.TaskReturn(task_ids))

    def _drop_peer(self, peer: PeerID, reason: str) -> None:
        if peer in self.clients:
            self._drop_client(peer, f"connection lost ({reason})")
        elif peer in self.workers:
            self._drop_worker(peer, f"connection lost ({reason})", graceful=False)
        elif peer in self.managers:
            manager = self.managers.pop(peer)
            logger.info("worker manager %r connection closed (%s)", manager.manager_id, reason)

    def _send(self, peer: PeerID, message: m.Message) -> None:
        self.effects.append(Send(peer, message))

    # ------------------------------------------------------------ queries (tests, status, scaling)

    def worker_of(self, peer: PeerID) -> WorkerRecord | None:
        return self.workers.get(peer)


def _describe(event: Event) -> str:
    if isinstance(event, Received):
        return f"{type(event.message).__name__} from {short(event.peer)}"
    return type(event).__name__
