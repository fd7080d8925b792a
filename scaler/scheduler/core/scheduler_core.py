"""SchedulerCore: the scheduler's one mutator. `handle(event) -> list[Effect]`; nothing else writes.

Routing is a table from message type to handler (`test_scheduler_core.py` checks that every message
a peer may send has one). Peers register with a Hello; anything else from an unknown peer is answered
with a ProtocolError. Liveness is judged on `Tick(now)` against the last message of each peer.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from scaler.policy.content import Allocation
from scaler.protocol import messages as m
from scaler.protocol.handshake import incompatibility
from scaler.protocol.ids import ClientID, PeerID, TaskID, short, unit_of_worker
from scaler.scheduler.core.balancing import Balancer
from scaler.scheduler.core.effects import DeleteOwnerObjects, Effect, Send, StopScheduler
from scaler.scheduler.core.events import Event, PeerLost, Received, ShellStats, Tick, Undecodable
from scaler.scheduler.core.graphs import GraphRegistry
from scaler.scheduler.core.jobs import JobRecord, JobTable
from scaler.scheduler.core.monitor_feed import MonitorFeed
from scaler.scheduler.core.object_retention import ObjectRetention
from scaler.scheduler.core.overtaking import Overtaking
from scaler.scheduler.core.peers import ClientRecord, ManagerRecord, WorkerRecord
from scaler.scheduler.core.quotas import quota_of
from scaler.scheduler.core.reattachment import Reattachment
from scaler.scheduler.core.story_book import DEFAULT_RETENTION_SECONDS, DEFAULT_RETENTION_TASKS, StoryBook
from scaler.scheduler.core.task_lifecycle import TaskLifecycle
from scaler.scheduler.core.task_table import TaskTable
from scaler.scheduler.core.view import ViewBuilder

logger = logging.getLogger(__name__)


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
    allocate: Allocation = Allocation.EVEN_LOAD  #: how the dispatcher places tasks
    load_balance_seconds: float = 1.0  #: <= 0 disables balancing
    load_balance_trigger_times: int = 2
    object_retention_seconds: float = 0.0  #: a departed client's objects are deleted this long after it left
    result_retention_seconds: float = 3600.0  #: a job's results are kept this long after it ended (core/jobs.py)
    job_result_quota_bytes: int = 0  #: the most bytes of results one owner's jobs keep (0: none; core/jobs.py)
    instance_id: bytes = b""  #: this scheduler process (drawn at start); peers tell a restart by it
    story_retention_tasks: int = DEFAULT_RETENTION_TASKS  #: finished tasks whose story is kept (0: no stories)
    story_retention_seconds: float = DEFAULT_RETENTION_SECONDS  #: and for how long (<= 0: no time bound)


class ScalingHook(Protocol):
    """What the core needs from the scaling policy: a manager's target, given the core's read model.

    The hook sees the frozen view (`SchedulerCore.view()`), never the live core: what a policy decides on
    is exactly what the monitor feed shows."""

    def targets(self, view: m.StatusSnapshot, manager_id: str) -> m.ManagerTarget | None: ...

    def reason(self, manager_id: str) -> str:
        """Why the manager's latest target is what it is (for the log and the monitor feed)."""
        ...


class SchedulerCore:
    def __init__(self, settings: CoreSettings, scaling: ScalingHook | None = None, strict: bool = False) -> None:
        self.settings = settings
        #: re-raise a failing handler (simulations and tests) instead of logging and dropping its event (servers)
        self.strict = strict
        self._scaling = scaling
        self.effects: list[Effect] = []
        ignore_capabilities = settings.allocate is Allocation.EVEN_LOAD
        self.tasks = TaskTable(ignore_capabilities=ignore_capabilities)
        self.tasks.stories = StoryBook(
            settings.story_retention_tasks, settings.story_retention_seconds, settings.instance_id.hex()[:8]
        )
        self.graphs = GraphRegistry()
        self.jobs = JobTable(settings.result_retention_seconds, settings.job_result_quota_bytes)
        #: departed clients whose objects wait for their jobs to expire (a job's tasks and results need them)
        self._kept_for_jobs: set[ClientID] = set()
        self.clients: dict[PeerID, ClientRecord] = {}
        self.workers: dict[PeerID, WorkerRecord] = {}
        self.managers: dict[PeerID, ManagerRecord] = {}
        self.lifecycle = TaskLifecycle(
            self.tasks,
            self.workers,
            self.graphs,
            self.effects,
            settings.max_task_retries,
            settings.max_tasks_waiting,
            jobs=self.jobs,
            managers=self.managers,
        )
        #: what survives a scheduler restart: tasks workers still hold, their results, tasks of returning clients
        #: held back (reattachment.py); the lifecycle never sees it: tasks reach it adopted or submitted
        self.reattachment = Reattachment()
        self.views = ViewBuilder(self)
        #: latest wall-clock time minus monotonic `now`, from the ticks; stamps what the monitor feed shows
        self._wall_offset = 0.0
        self.feed = MonitorFeed(settings.status_interval_seconds)
        self.retention = ObjectRetention(settings.object_retention_seconds)
        self.now = 0.0
        #: batches of events handled so far: a decision cached for one step is stale in the next, even at the same `now`
        self.steps = 0
        self._worker_sequence = 0
        self._last_balance_at = 0.0
        self._balancer = Balancer(settings.load_balance_trigger_times)
        self._overtaking = Overtaking()
        self._client_handlers: dict[type, Callable[[PeerID, Any], None]] = {
            m.Heartbeat: self._on_client_heartbeat,
            m.Task: self._on_task,
            m.GraphTask: self._on_graph,
            m.TaskCancel: self._on_client_cancel,
            m.ClientDisconnect: self._on_client_disconnect,
            m.TaskStoryRequest: self._on_story_request,
            m.JobOpen: self._on_job_open,
            m.JobAttach: self._on_job_attach,
        }
        self._worker_handlers: dict[type, Callable[[PeerID, Any], None]] = {
            m.Heartbeat: self._on_worker_heartbeat,
            m.TaskResult: self._on_result,
            m.TaskCancelConfirm: self._on_cancel_confirm,
            m.TaskLog: self._on_task_log,
            m.WorkerCapacity: self._on_worker_capacity,
            m.WorkerLeaving: self._on_worker_leaving,
            m.TaskReturn: self._on_task_return,
        }
        self._manager_handlers: dict[type, Callable[[PeerID, Any], None]] = {
            m.Heartbeat: self._on_manager_heartbeat,
            m.UnitsReclaimed: self._on_units_reclaimed,
        }

    # ------------------------------------------------------------ the one mutator

    def handle(self, event: Event) -> list[Effect]:
        return self.handle_all((event,))

    def handle_all(self, events: Iterable[Event]) -> list[Effect]:
        """Apply events in order, then dispatch once (a batch from one socket read is one step). An
        event whose handling fails is logged and dropped; the others are still applied."""
        self.steps += 1
        for event in events:
            try:
                self._apply(event)
            except Exception:
                if self.strict:
                    raise
                logger.exception("failed to handle %s; it is dropped", _describe(event))
        try:
            self.lifecycle.dispatch()
            for worker, task_ids in self._overtaking.step(self.tasks, self.workers.values()).items():
                self._send(worker, m.TaskReturn(task_ids))
        except Exception:
            if self.strict:
                raise
            logger.exception("dispatch failed")
        effects = self.effects[:]
        self.effects.clear()
        return effects

    def _apply(self, event: Event) -> None:
        if isinstance(event, Received):
            self._advance(event.now)
            self._on_received(event.peer, event.message)
        elif isinstance(event, Tick):
            self._advance(event.now)
            if event.wall_time:
                self._wall_offset = self.tasks.wall_offset = event.wall_time - event.now
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
            self.views.shell_stats = event

    def _advance(self, now: float) -> None:
        self.now = now
        self.lifecycle.now = now
        self.reattachment.saw(now)

    def _on_received(self, peer: PeerID, message: m.Message) -> None:
        if isinstance(message, m.Hello):
            self._on_hello(peer, message)
            return
        if isinstance(message, (m.ProtocolError, m.Ping)):
            if isinstance(message, m.ProtocolError):
                logger.warning("%s refused a message of ours: %s", short(peer), message.reason)
            return  # never answered, so that two peers cannot bounce errors forever
        handlers: dict[type, Callable[[PeerID, Any], None]]
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
            reason = self._register(peer, hello)
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
                instance_id=self.settings.instance_id,
            ),
        )
        if isinstance(hello.info, m.ManagerInfo):
            self._send_target(self.managers[peer])

    def _register(self, peer: PeerID, hello: m.Hello) -> str | None:
        info, now = hello.info, self.now
        known_roles = [kind for kind, table in (("client", self.clients), ("worker", self.workers),
                                                ("manager", self.managers)) if peer in table]  # fmt: skip
        if known_roles and known_roles != [hello.role.value]:
            return f"this connection is already registered as a {known_roles[0]}"
        if isinstance(info, m.ClientInfo):
            if not (math.isfinite(info.share) and info.share > 0):
                return f"a client's share must be a positive number, not {info.share!r}"
            self.tasks.queue.shares[ClientID(peer)] = info.share
            quota = quota_of(info)
            if quota is not None:
                self.tasks.queue.set_quota(ClientID(peer), quota)
            if peer not in self.clients:
                returning = bool(hello.known_instance) and hello.known_instance != self.settings.instance_id
                self.clients[peer] = ClientRecord(
                    peer, info.name, hello.hostname, hello.pid, now, now, returning, owner=info.owner_key,
                    max_cost_per_hour=info.max_cost_per_hour, max_job_result_bytes=info.max_job_result_bytes,
                )  # fmt: skip
                logger.debug("client %s connected (pid %d on %s)", short(peer), hello.pid, hello.hostname)
            if self.retention.client_back(ClientID(peer)):  # it had not left for good: its objects stay
                logger.info("client %s is back within its retention time; its objects are kept", short(peer))
            return None
        if isinstance(info, m.WorkerInfo):
            if peer not in self.workers:
                self._worker_sequence += 1
                self.workers[peer] = WorkerRecord(
                    peer, info.capabilities, frozenset(name for name, _ in info.capabilities), max(1, info.capacity),
                    info.manager_id, info.worker_type, hello.hostname, hello.pid, now, now,
                    sequence=self._worker_sequence,
                )  # fmt: skip
                self.lifecycle.worker_has_room(peer)
                logger.debug("worker %s connected (pid %d on %s)", short(peer), hello.pid, hello.hostname)
            self._reattach_worker(peer, info.held_tasks)
            return None
        assert isinstance(info, m.ManagerInfo)
        for other in self.managers.values():
            if other.manager_id == info.manager_id and other.peer != peer:
                return (
                    f"worker manager id {info.manager_id!r} is already connected (pid {other.pid} on "
                    f"{other.hostname}); each manager needs its own --worker-manager-id"
                )
        if peer not in self.managers:
            self.managers[peer] = ManagerRecord(
                peer, info.manager_id, info.manager_type, info.capabilities, info.max_workers,
                hello.hostname, hello.pid, now, now, worker_cost_per_hour=info.worker_cost_per_hour,
                declared_boot_seconds=info.expected_boot_seconds, min_workers=info.min_workers,
                buffer_workers=info.buffer_workers,
            )  # fmt: skip
            logger.info("worker manager %r (%s) connected", info.manager_id, info.manager_type)
        return None

    def _reattach_worker(self, peer: PeerID, held: tuple[TaskID, ...]) -> None:
        """A worker registers again still holding tasks (docs/architecture.md, "surviving a restart")."""
        unknown = tuple(task_id for task_id in held if task_id not in self.tasks.records)
        for task_id in held:
            if task_id in self.tasks.records:  # this instance gave up on the worker, not the other way round
                self.lifecycle.held_again(peer, task_id)
        if unknown:
            self.reattachment.worker_holds(peer, unknown, self.now)
            logger.info("worker %s re-attached with %d task(s) from before a restart", short(peer), len(unknown))

    # ------------------------------------------------------------ clients

    def _on_client_heartbeat(self, peer: PeerID, heartbeat: m.Heartbeat) -> None:
        self._send(peer, m.HeartbeatEcho(self.settings.object_storage_address, len(self.workers)))

    def _on_task(self, peer: PeerID, task: m.Task) -> None:
        if bytes(task.client_id) != bytes(peer):
            reason = "refused: a task's client id must be the id of the connection that sends it"
            self._send(peer, m.TaskResult(task.task_id, m.ResultStatus.ERROR, error_message=reason))
            return
        client = self.clients[peer]
        if self.reattachment.should_park(client.returning, self.now):
            self.reattachment.park(ClientID(peer), task)  # until the workers have re-registered
            return
        self._submit(ClientID(peer), task)

    def _submit(self, client: ClientID, task: m.Task) -> None:
        """A task a worker still holds from before a restart is adopted by it (or answered with the result it sent
        meanwhile); any other task goes to the lifecycle (which also refuses a duplicate)."""
        if task.task_id not in self.tasks.records:
            adoption = self.reattachment.take(task.task_id)
            if adoption is not None and self.lifecycle.adopt(task, adoption.worker, adoption.result):
                return
        returning = self.clients.get(PeerID(client))
        cause = "submitted again by its client after a scheduler restart" if returning and returning.returning else ""
        self.lifecycle.submit(client, task, cause)

    def _on_graph(self, peer: PeerID, graph: m.GraphTask) -> None:
        if bytes(graph.client_id) != bytes(peer) or any(bytes(node.client_id) != bytes(peer) for node in graph.nodes):
            reason = "refused: a graph's client id must be the id of the connection that sends it"
            for target in graph.targets:
                self._send(peer, m.TaskResult(target, m.ResultStatus.ERROR, error_message=reason))
            return
        self.lifecycle.submit_graph(ClientID(peer), graph)

    def _on_client_cancel(self, peer: PeerID, cancel: m.TaskCancel) -> None:
        of_jobs = self.jobs.followed_by(peer, cancel.task_ids)
        for submitter, task_ids in of_jobs.items():  # a follower cancels a job's tasks as its submitter would
            self.lifecycle.cancel_by_client(submitter, tuple(task_ids))
        taken = {task_id for task_ids in of_jobs.values() for task_id in task_ids}
        rest = tuple(task_id for task_id in cancel.task_ids if task_id not in taken)
        if rest:
            self.lifecycle.cancel_by_client(ClientID(peer), rest)

    # ------------------------------------------------------------ jobs (core/jobs.py)

    def _on_job_open(self, peer: PeerID, request: m.JobOpen) -> None:
        client = self.clients[peer]
        reason = self.jobs.open(
            request.name, client.owner, ClientID(peer), request.task_ids, self.now, client.name,
            client.max_job_result_bytes,
        )  # fmt: skip
        if reason is None:
            logger.info("job %r opened by client %s: %d task(s)", request.name, short(peer), len(request.task_ids))
        self._send(peer, m.JobReply(request.name, reason is None, reason or "", request.task_ids, "running"))

    def _on_job_attach(self, peer: PeerID, request: m.JobAttach) -> None:
        found = self.jobs.find(request.name, self.clients[peer].owner)
        if not isinstance(found, JobRecord):
            self._send(peer, m.JobReply(request.name, False, found))
            return
        self._send(peer, m.JobReply(found.name, True, "", found.task_ids, found.state, bytes(found.submitter)))
        if request.follow:
            for answer in self.jobs.follow(found, peer):
                self._send(peer, answer)

    def _expire_jobs(self) -> None:
        for job in self.jobs.due(self.now):
            logger.info("job %r expired: its results are freed", job.name)
            submitter = job.submitter
            if submitter in self._kept_for_jobs and not self.jobs.has_live_jobs(submitter):
                self._kept_for_jobs.discard(submitter)
                self.effects.append(DeleteOwnerObjects(submitter))

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
        self.effects.extend(DeleteOwnerObjects(owner) for owner in self.retention.all_kept())  # nobody comes back
        self.effects.extend(DeleteOwnerObjects(owner) for owner in sorted(self._kept_for_jobs))
        self.effects.append(StopScheduler("a client asked the cluster to shut down"))

    def _drop_client(self, peer: PeerID, reason: str) -> None:
        if self.clients.pop(peer, None) is None:
            return
        owned = self.tasks.by_client.get(ClientID(peer), ())
        in_jobs = sum(1 for task_id in owned if self.jobs.holds(task_id))
        unfinished = len(owned) - in_jobs
        # an ordinary exit is not news; a client that leaves work behind is
        (logger.warning if unfinished else logger.debug)(
            "client %s %s; its tasks are cancelled (%d unfinished) and its objects deleted",
            short(peer),
            reason,
            unfinished,
        )
        if in_jobs:
            logger.info("client %s left %d task(s) of its jobs running; their results are kept", short(peer), in_jobs)
        self.lifecycle.client_gone(ClientID(peer))
        self.reattachment.forget_client(ClientID(peer))
        self.tasks.forget_client(ClientID(peer))
        self.jobs.peer_gone(peer)
        lost = self.jobs.never_sent(ClientID(peer), lambda task_id: task_id in self.tasks.records, self.now)
        if lost:
            logger.warning(
                "client %s left before sending %d task(s) of its jobs: they count as cancelled", short(peer), len(lost)
            )
        if self.jobs.has_live_jobs(ClientID(peer)):  # its jobs run on: its share, quota and objects stay for them
            self._kept_for_jobs.add(ClientID(peer))
            return
        self.tasks.queue.forget(ClientID(peer))
        if self.retention.client_left(ClientID(peer), self.now):
            self.effects.append(DeleteOwnerObjects(ClientID(peer)))

    # ------------------------------------------------------------ workers

    def _on_worker_heartbeat(self, peer: PeerID, heartbeat: m.Heartbeat) -> None:
        worker = self.workers[peer]
        if heartbeat.worker is not None:
            worker.status = heartbeat.worker
        worker.cpu_percent = heartbeat.cpu_percent
        worker.rss_bytes = heartbeat.rss_bytes
        worker.round_trip_seconds = heartbeat.round_trip_seconds
        self._send(peer, m.HeartbeatEcho(self.settings.object_storage_address, len(self.workers)))

    def _on_result(self, peer: PeerID, result: m.TaskResult) -> None:
        if result.task_id not in self.tasks.records and self.reattachment.result_for_held(peer, result, self.now):
            return  # a task from before a restart: its client gets the result when it submits the task again
        self.lifecycle.result_from(peer, result)

    def _on_cancel_confirm(self, peer: PeerID, confirm: m.TaskCancelConfirm) -> None:
        self.lifecycle.cancel_confirmed_by(peer, confirm)

    def _on_task_log(self, peer: PeerID, log: m.TaskLog) -> None:
        record = self.tasks.get(log.task_id)
        if record is not None and record.worker == peer and not record.client_gone:
            self._send(PeerID(record.client_id), log)

    def _on_worker_capacity(self, peer: PeerID, capacity: m.WorkerCapacity) -> None:
        self.workers[peer].capacity = max(1, capacity.capacity)
        self.lifecycle.worker_has_room(peer)

    def _on_worker_leaving(self, peer: PeerID, leaving: m.WorkerLeaving) -> None:
        self._drop_worker(peer, f"left: {leaving.reason or 'no reason given'}", graceful=True)
        self._send(peer, m.Shutdown("leave acknowledged"))

    def _on_story_request(self, peer: PeerID, request: m.TaskStoryRequest) -> None:
        """A client asks for a task's story (`ScalerFuture.story()`); any client may ask about any task id."""
        self._send(peer, self.tasks.stories.story(request.task_id))

    def _on_task_return(self, peer: PeerID, returned: m.TaskReturn) -> None:
        self.lifecycle.returned_by(peer, returned.task_ids)

    def _drop_worker(self, peer: PeerID, reason: str, graceful: bool) -> None:
        worker = self.workers.pop(peer, None)
        if worker is None:
            return
        graceful = graceful or worker.draining_until is not None  # a reclaimed unit: no retry is spent
        text = f"worker {short(peer)} (pid {worker.pid} on {worker.hostname}) {reason}"
        logger.info("%s; %d task(s) go back to the queue", text, len(worker.assigned))
        self.reattachment.worker_gone(peer)
        self.lifecycle.worker_gone(worker, text, graceful)

    # ------------------------------------------------------------ managers

    def _on_manager_heartbeat(self, peer: PeerID, heartbeat: m.Heartbeat) -> None:
        manager = self.managers[peer]
        if heartbeat.manager is not None:
            manager.units = heartbeat.manager.units
            manager.pending_units = heartbeat.manager.pending_units
            manager.measured_boot_seconds = heartbeat.manager.boot_seconds
        self._send(peer, m.HeartbeatEcho(self.settings.object_storage_address, len(self.workers)))
        self._send_target(manager)

    def _on_units_reclaimed(self, peer: PeerID, reclaimed: m.UnitsReclaimed) -> None:
        """The manager's provider takes units back: their workers get no new task, give back what they have not
        started, and have until the notice ends for the rest (moved then); none of it costs a retry."""
        manager, units = self.managers[peer], set(reclaimed.unit_ids)
        until = self.now + max(0.0, reclaimed.notice_seconds)
        for worker in self.workers.values():
            if worker.manager_id != manager.manager_id or worker.draining_until is not None:
                continue
            if unit_of_worker(worker.peer) in units:
                logger.warning("worker %s: its unit is reclaimed in %.0f s; draining it (%d task(s))",
                               short(worker.peer), reclaimed.notice_seconds, len(worker.assigned))  # fmt: skip
                worker.draining_until = until
                self.lifecycle.drain(worker)

    def _send_target(self, manager: ManagerRecord, only_if_changed: bool = False) -> None:
        """Every heartbeat gets the current target (declarative, idempotent: a manager that missed one
        converges on the next); between heartbeats a target goes out only when it changed, so that work
        arriving on an idle cluster starts workers within a tick rather than a heartbeat."""
        if self._scaling is None:
            return
        target = self._scaling.targets(self.view(), manager.manager_id)
        if target is None or (only_if_changed and target == manager.last_target):
            return
        self._note_decision(manager, target)
        manager.last_target = target
        self._send(manager.peer, target)

    # ------------------------------------------------------------ time

    def _end_notices(self) -> None:
        for worker in self.workers.values():
            if worker.draining_until is not None and worker.draining_until <= self.now and worker.assigned:
                self.lifecycle.notice_over(worker)

    def _release_parked(self) -> None:
        for client_id, task in self.reattachment.release(self.now):
            if PeerID(client_id) in self.clients:
                self._submit(client_id, task)

    def _on_tick(self) -> None:
        settings, now = self.settings, self.now
        self.effects.extend(DeleteOwnerObjects(owner) for owner in self.retention.due(now))
        self._expire_jobs()
        self._release_parked()
        self._end_notices()
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
        if self.feed.is_due(now):
            transitions, dropped = self.tasks.take_transitions()
            view = self.view()
            self.effects.extend(self.feed.publications(view, tuple(transitions), dropped, self.wall_time))
            self._note_waits(view)
        for manager in list(self.managers.values()):
            self._send_target(manager, only_if_changed=True)
        if settings.load_balance_seconds > 0 and now - self._last_balance_at >= settings.load_balance_seconds:
            self._last_balance_at = now
            for donor, task_ids in self._balancer.step(self.tasks, self.workers.values()).items():
                self._send(donor, m.TaskReturn(task_ids))
                for task_id in task_ids:
                    self.tasks.stories.note(
                        task_id,
                        self.wall_time,
                        "balancing",
                        donor,
                        "load balancing asks its worker to give it back",
                    )

    def _note_waits(self, view: m.StatusSnapshot) -> None:
        """The queue's waiting reasons at this status sample go into the stories of the tasks queued meanwhile."""
        stories = self.tasks.stories
        if stories.enabled:
            stories.expire(self.now)
            for group in view.pending:
                if group.count and group.reason:
                    stories.waiting(group.capabilities, self.wall_time, group.reason)

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

    # ------------------------------------------------------------ the read model and the monitor feed

    @property
    def wall_time(self) -> float:
        """Seconds since the epoch now, as far as the shell's ticks tell (0 before the first)."""
        return self.now + self._wall_offset if self._wall_offset else 0.0

    def view(self) -> m.StatusSnapshot:
        """The frozen read model of this instant (built at most once per step)."""
        return self.views.view()

    def _note_decision(self, manager: ManagerRecord, target: m.ManagerTarget) -> None:
        before = sum(entry.workers for entry in manager.last_target.entries) if manager.last_target else 0
        after = sum(entry.workers for entry in target.entries)
        if before == after and manager.last_target is not None:
            return
        reason = self._scaling.reason(manager.manager_id) if self._scaling is not None else ""
        text = f"manager {manager.manager_id}: {before} -> {after} workers" + (f": {reason}" if reason else "")
        if after != before:
            logger.info("scaling: %s", text)
        self.feed.decided(m.ScalingDecision(manager.manager_id, before, after, reason, self.wall_time))

    # ------------------------------------------------------------ queries (tests, status, scaling)

    def worker_of(self, peer: PeerID) -> WorkerRecord | None:
        return self.workers.get(peer)


def _describe(event: Event) -> str:
    if isinstance(event, Received):
        return f"{type(event.message).__name__} from {short(event.peer)}"
    return type(event).__name__
