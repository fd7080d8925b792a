"""SchedulerCore: the scheduler's one mutator. `handle(event) -> list[Effect]`; nothing else writes.

Routing is a table from message type to handler (`test_scheduler_core.py` checks that every message
a peer may send has one). Peers register with a Hello; anything else from an unknown peer is answered
with a ProtocolError. Liveness is judged on `Tick(now)` against the last message of each peer, never on a late beat
(`events.Beats`).

This module owns the dispatch (which handler for which event and message) and the step (apply a batch, then
dispatch tasks once); the handlers live with their concept: `registration.py` (Hello), `client_sessions.py`
(a client's heartbeats, disconnect, loss), `submissions.py` (tasks, graphs, cancels), `job_requests.py` (opening,
attaching, expiring jobs), `worker_sessions.py` (what a worker agent reports, its loss), `link_sessions.py` (what a
processor says on its own link: everything about its tasks) and `manager_sessions.py` (manager heartbeats, reclaimed
units, scaling targets). They hold the core and act on its state and effects; they are as pure as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from scaler.policy.content import Allocation
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC
from scaler.protocol.ids import PeerID, short
from scaler.scheduler.core.actors import Actors
from scaler.scheduler.core.balancing import Balancer
from scaler.scheduler.core.client_sessions import PAUSE_SECONDS, ClientSessions
from scaler.scheduler.core.effects import DeleteOwnerObjects, Effect, Send
from scaler.scheduler.core.events import (
    AnswersLoaded,
    AnswersStored,
    Event,
    PeerLost,
    Received,
    ShellStats,
    Tick,
    Undecodable,
    Watchers,
)
from scaler.scheduler.core.graphs import GraphRegistry
from scaler.scheduler.core.job_requests import JobRequests
from scaler.scheduler.core.jobs import JobTable
from scaler.scheduler.core.link_sessions import LinkSessions
from scaler.scheduler.core.manager_sessions import ManagerSessions
from scaler.scheduler.core.monitor_feed import MonitorFeed
from scaler.scheduler.core.object_retention import ObjectRetention
from scaler.scheduler.core.overtaking import Overtaking
from scaler.scheduler.core.pace import Pace, pace
from scaler.scheduler.core.peers import ClientRecord, ManagerRecord, WorkerRecord
from scaler.scheduler.core.processor_links import ProcessorLink
from scaler.scheduler.core.reattachment import Reattachment
from scaler.scheduler.core.registration import Registration
from scaler.scheduler.core.story_book import DEFAULT_RETENTION_SECONDS, DEFAULT_RETENTION_TASKS, StoryBook
from scaler.scheduler.core.submissions import Submissions
from scaler.scheduler.core.task_lifecycle import TaskLifecycle
from scaler.scheduler.core.task_table import TaskTable
from scaler.scheduler.core.unserved_work import UNRUNNABLE_GRACE_SECONDS, WARN_SECONDS, UnservedWork
from scaler.scheduler.core.view import ViewBuilder
from scaler.scheduler.core.worker_sessions import WorkerSessions

logger = logging.getLogger(__name__)

#: message type -> the handler of a peer's message of that type
_Handlers = dict[type, Callable[[PeerID, Any], None]]


@dataclass(frozen=True, slots=True)
class CoreSettings:
    scheduler_address: str
    object_storage_address: str  #: what clients and workers are told
    python_version: str  #: the scheduler's own; peers must share major.minor
    #: the scheduler's second way in (a tls://, ws:// or wss:// front), told to peers with the storage address: one
    #: that came through it reaches the object storage through it too
    tunnel_address: str | None = None
    protected: bool = False
    client_timeout_seconds: float = 60
    #: how long a client's work waits for it once it is away (silent past its timeout, or its connection lost);
    #: 0: it is dropped at once (client_sessions.py)
    client_resume_seconds: float = 0.0
    #: answers held for an away client beyond this many bytes go to object storage (client_answers.py, rule 4)
    held_answers_memory_bytes: int = 1 << 20
    max_clients: int = 0  #: the most clients registered at once; 0: no limit (registration.py)
    worker_timeout_seconds: float = 60
    manager_timeout_seconds: float = 10
    max_task_retries: int = 3
    max_tasks_waiting: int = -1
    status_interval_seconds: float = 1
    heartbeat_interval_seconds: float = 2
    allocate: Allocation = Allocation.CAPABILITY  #: how the dispatcher places tasks (EVEN_LOAD: capabilities ignored)
    load_balance_seconds: float = 1.0  #: <= 0 disables balancing
    load_balance_trigger_times: int = 2
    object_retention_seconds: float = 0.0  #: a departed client's objects are deleted this long after it left
    result_retention_seconds: float = 3600.0  #: a job's results are kept this long after it ended (core/jobs.py)
    job_result_quota_bytes: int = 0  #: the most bytes of results one owner's jobs keep (0: none; core/jobs.py)
    instance_id: bytes = b""  #: this scheduler process (drawn at start); peers tell a restart by it
    story_retention_tasks: int = DEFAULT_RETENTION_TASKS  #: finished tasks whose story is kept (0: no stories)
    story_retention_seconds: float = DEFAULT_RETENTION_SECONDS  #: and for how long (<= 0: no time bound)
    #: queued work nothing can run (its clients are told after unserved_work.WARN_SECONDS) fails after this long
    #: when the cluster has workers or managers, none for it (<= 0: never; core/unserved_work.py)
    unrunnable_grace_seconds: float = UNRUNNABLE_GRACE_SECONDS


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
        stories = StoryBook(
            settings.story_retention_tasks, settings.story_retention_seconds, settings.instance_id.hex()[:8]
        )
        self.tasks = TaskTable(ignore_capabilities=ignore_capabilities, stories=stories)
        self.graphs = GraphRegistry()
        self.jobs = JobTable(settings.result_retention_seconds, settings.job_result_quota_bytes)
        self.clients: dict[PeerID, ClientRecord] = {}
        self.workers: dict[PeerID, WorkerRecord] = {}
        self.managers: dict[PeerID, ManagerRecord] = {}
        #: the links of workers' processors, where their tasks go and everything about them comes (link_sessions.py)
        self.processors: dict[PeerID, ProcessorLink] = {}
        self._beats = 0  #: beats of the core's clock so far (`ready_worker_count` counts at most once per beat)
        #: `ready_worker_count`'s last count, and what it was counted at: (beats, workers, links)
        self._ready_count = 0
        self._ready_at: tuple[int, int, int] = (-1, 0, 0)
        self.lifecycle = TaskLifecycle(
            self.tasks,
            self.workers,
            self.graphs,
            self.effects,
            settings.max_task_retries,
            settings.max_tasks_waiting,
            jobs=self.jobs,
            managers=self.managers,
            answer=lambda peer, message: self.client_sessions.answer(peer, message),
            processors=self.processors,
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
        self._last_balance_at = 0.0
        self._balancer = Balancer(settings.load_balance_trigger_times)
        self._overtaking = Overtaking()
        # each concept's handlers have their own module; `_routes` says which handles which message
        self.registration = Registration(self)
        self.client_sessions = ClientSessions(self)
        self.submissions = Submissions(self)
        self.actors = Actors(self)
        self.job_requests = JobRequests(self)
        self.worker_sessions = WorkerSessions(self)
        self.link_sessions = LinkSessions(self)
        self.manager_sessions = ManagerSessions(self, scaling)
        self.unserved = UnservedWork(self, WARN_SECONDS, settings.unrunnable_grace_seconds)
        self._client_handlers, self._worker_handlers, self._manager_handlers, self._processor_handlers = self._routes()

    # ------------------------------------------------------------ routing

    def _routes(self) -> tuple[_Handlers, _Handlers, _Handlers, _Handlers]:
        """Which handler takes which message, from a client, a worker, a manager and a worker's processor."""
        clients, submissions, jobs = self.client_sessions, self.submissions, self.job_requests
        workers, links, managers = self.worker_sessions, self.link_sessions, self.manager_sessions
        client_handlers: _Handlers = {
            m.Heartbeat: clients.on_heartbeat,
            m.Task: submissions.on_task,
            m.GraphTask: submissions.on_graph,
            m.TaskCancel: submissions.on_cancel,
            m.ClientDisconnect: clients.on_disconnect,
            m.TaskStoryRequest: clients.on_story_request,
            m.JobOpen: jobs.on_open,
            m.JobAttach: jobs.on_attach,
            m.StreamCredit: submissions.on_stream_credit,
            m.ActorStop: lambda peer, stop: self.actors.stop(stop.actor_id),
            m.ActorLookup: self.actors.lookup,
            m.ClientResume: clients.on_resume,
        }
        worker_handlers: _Handlers = {
            m.Heartbeat: workers.on_heartbeat,
            m.WorkerLeaving: workers.on_leaving,
            m.WorkerCapacity: workers.on_capacity,
            m.ProcessorExited: links.on_exited,
        }
        manager_handlers: _Handlers = {
            m.Heartbeat: managers.on_heartbeat,
            m.UnitsReclaimed: managers.on_units_reclaimed,
        }
        processor_handlers: _Handlers = {
            m.TaskResult: links.on_result,
            m.TaskLog: links.on_log,
            m.StreamItem: links.on_log,
            m.ProcessorBlocked: links.on_parked,
            m.ProcessorResumeRequest: links.on_resumed,
            m.TaskReturn: links.on_returned,
            m.TaskCancelConfirm: links.on_cancel_confirm,
            m.ProcessorWriting: links.on_writing,
            m.ActorReady: links.on_actor_ready,
        }
        return client_handlers, worker_handlers, manager_handlers, processor_handlers

    # ------------------------------------------------------------ the one mutator

    def handle(self, event: Event) -> list[Effect]:
        return self.handle_all((event,))

    def handle_all(self, events: Iterable[Event]) -> list[Effect]:
        """Apply events in order, then dispatch once (what one burst of the shell's socket reads brought is one
        step). An event whose handling fails is logged and dropped; the others are still applied."""
        self.steps += 1
        for event in events:
            try:
                if type(event) is not Received:
                    self._apply(event)
                    continue
                message = event.message  # the common event: `_apply`'s first branch, inline
                if type(message) is m.TaskCancel and message.queued_only:
                    # a cancel of the queued tasks only (an Executor's shutdown(cancel_futures=True)) first lets the
                    # tasks that came before it in the burst reach free workers, as they would have had each message
                    # been a step of its own: a task submitted while a worker was free is running, not queued, when
                    # the cancel comes (CPython's executor tests count on some of them finishing)
                    self.lifecycle.dispatch()
                self._advance(event.now)
                self._on_received(event.peer, message)
            except Exception:
                if self.strict:
                    raise
                logger.exception("failed to handle %s; it is dropped", _describe(event))
        try:
            self.actors.sweep()  # actors whose start task ended in this step: their calls are answered
            self.lifecycle.dispatch()
            for worker, task_ids in self._overtaking.step(self.tasks, self.workers.values()).items():
                self.lifecycle.take_back(worker, task_ids)
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
            self._on_tick(event.on_time, event.reads_behind)
        elif isinstance(event, PeerLost):
            self._advance(event.now)
            self._drop_peer(event.peer, event.reason, event.final)
        elif isinstance(event, Undecodable):
            self._advance(event.now)
            logger.warning("undecodable frame from %s: %s", short(event.peer), event.reason)
            reason = f"frame refused: {event.reason}"
            self.send(event.peer, m.ProtocolError(reason, m.ProtocolErrorKind.MALFORMED))
        elif isinstance(event, ShellStats):
            self.views.shell_stats = event
        elif isinstance(event, Watchers):
            self.feed.watch(event.topics)
        elif isinstance(event, AnswersStored):
            self._advance(event.now)
            self.client_sessions.on_stored(event)
        elif isinstance(event, AnswersLoaded):
            self._advance(event.now)
            self.client_sessions.on_loaded(event)

    def _advance(self, now: float) -> None:
        if self.now and now - self.now > PAUSE_SECONDS:  # the shell beats at least once a second (pace.py)
            self.client_sessions.paused(self.now, now)
        self.now = now
        self.lifecycle.now = now
        self.reattachment.saw(now)

    def _on_received(self, peer: PeerID, message: m.Message) -> None:
        if isinstance(message, m.Hello):
            self.registration.on_hello(peer, message)
            return
        if isinstance(message, (m.ProtocolError, m.Ping)):
            if isinstance(message, m.ProtocolError):
                logger.warning("%s refused a message of ours: %s", short(peer), message.reason)
            return  # never answered, so that two peers cannot bounce errors forever
        handlers: _Handlers
        client = self.clients.get(peer)  # each table asked only when the one before does not know the peer
        worker = self.workers.get(peer) if client is None else None
        manager = self.managers.get(peer) if client is None and worker is None else None
        if client is not None:
            if client.is_away:
                self.client_sessions.back(peer, resuming=isinstance(message, m.ClientResume))
            client.last_seen = self.now
            handlers = self._client_handlers
        elif worker is not None:
            worker.last_seen = self.now
            handlers = self._worker_handlers
        elif manager is not None:
            manager.last_seen = self.now
            handlers = self._manager_handlers
        elif peer in self.processors:
            handlers = self._processor_handlers  # no liveness of its own: its worker's heartbeats say it lives
        else:
            if not isinstance(message, (m.WorkerLeaving, m.ClientDisconnect)):
                expired = self.client_sessions.expired_reason(peer)
                reason = expired or "unknown peer: send a Hello first (the scheduler may have restarted)"
                self.send(peer, m.ProtocolError(reason, m.ProtocolErrorKind.UNKNOWN_PEER))
            return
        handler = handlers.get(type(message))
        if handler is None:
            logger.warning("%s sent an unexpected %s; ignored", short(peer), type(message).__name__)
            self.send(peer, m.ProtocolError(f"{type(message).__name__} is not a message this peer may send"))
            return
        handler(peer, message)

    # ------------------------------------------------------------ time

    def _on_tick(self, on_time: bool, reads_behind: bool = False) -> None:
        settings, now = self.settings, self.now
        self._beats += 1
        self.effects.extend(DeleteOwnerObjects(owner) for owner in self.retention.due(now))
        self.job_requests.expire()
        self.submissions.release_parked()
        self.worker_sessions.end_notices()
        self.link_sessions.on_tick(ask_back=not reads_behind)  # behind on the reads: answers may be unread (Tick)
        if on_time:  # a late beat judges no silence: what the peers sent meanwhile may not be read yet (events.Tick)
            self.client_sessions.on_tick()
            self.worker_sessions.drop_silent()
            self.manager_sessions.forget_silent()
        self.unserved.on_tick(now)
        if self.feed.is_due(now):
            transitions, dropped = self.tasks.take_transitions()
            view = self.view() if self.feed.is_watched(STATUS_TOPIC) else None  # nobody reads it: not built
            self.effects.extend(self.feed.publications(view, tuple(transitions), dropped, self.wall_time))
            self._note_waits(view)
        self.manager_sessions.send_targets_changed()
        if settings.load_balance_seconds > 0 and now - self._last_balance_at >= settings.load_balance_seconds:
            self._last_balance_at = now
            self._balance()

    def _balance(self) -> None:
        for donor, task_ids in self._balancer.step(self.tasks, self.workers.values()).items():
            self.lifecycle.take_back(donor, task_ids)
            for task_id in task_ids:
                self.tasks.stories.note(
                    task_id,
                    self.wall_time,
                    "balancing",
                    donor,
                    "load balancing asks its worker to give it back",
                )

    def _note_waits(self, view: m.StatusSnapshot | None) -> None:
        """The queue's waiting reasons at this status sample go into the stories of the tasks queued meanwhile (the
        view's, or, when none was built, the same reasons for the queued keys alone)."""
        stories = self.tasks.stories
        if stories.enabled:
            stories.expire(self.now)
            if view is not None:
                reasons = [(group.capabilities, group.reason) for group in view.pending if group.count]
            else:
                reasons = self.views.waiting_reasons() if len(self.tasks.queue) else []
            for capabilities, reason in reasons:
                if reason:
                    stories.waiting(capabilities, self.wall_time, reason)

    def _drop_peer(self, peer: PeerID, reason: str, final: bool) -> None:
        if peer in self.clients:
            self.client_sessions.lost(peer, reason, final)
        elif peer in self.workers:
            self.worker_sessions.drop(peer, f"connection lost ({reason})", graceful=False)
        elif peer in self.managers:
            manager = self.managers.pop(peer)
            logger.info("worker manager %r connection closed (%s)", manager.manager_id, reason)
        elif peer in self.processors:
            self.link_sessions.drop(peer)

    def send(self, peer: PeerID, message: m.Message, may_wait: bool = False) -> None:
        self.effects.append(Send(peer, message, may_wait))

    # ------------------------------------------------------------ the read model and the monitor feed

    @property
    def wall_time(self) -> float:
        """Seconds since the epoch now, as far as the shell's ticks tell (0 before the first)."""
        return self.now + self._wall_offset if self._wall_offset else 0.0

    def pace(self) -> Pace:
        """How often the shell beats this core's clock and how soon it reads (`pace.py`)."""
        return pace(len(self.tasks.records), self.worker_sessions.heartbeats_per_second())

    def view(self) -> m.StatusSnapshot:
        """The frozen read model of this instant (built at most once per step)."""
        return self.views.view()

    # ------------------------------------------------------------ queries (tests, status, scaling)

    def worker_of(self, peer: PeerID) -> WorkerRecord | None:
        return self.workers.get(peer)

    def ready_worker_count(self) -> int:
        """The workers a task can go to now, as clients are told (`workerCount`): a local cluster's start waits for
        all of them (`ray.init()`), and a map sizes its chunks by them. Counted once per beat of the clock, and again
        as soon as a worker or a processor's link comes or goes; a worker's room that changes between beats shows at
        the next. Every client's heartbeat echo carries it: counted for each, 100 clients' heartbeats would walk every
        worker 50 times a second (6 ms a walk with 10,000 workers: 30% of a core)."""
        at = (self._beats, len(self.workers), len(self.processors))
        if at != self._ready_at:
            self._ready_at = at
            self._ready_count = sum(1 for worker in self.workers.values() if worker.takes_tasks)
        return self._ready_count


def _describe(event: Event) -> str:
    if isinstance(event, Received):
        return f"{type(event.message).__name__} from {short(event.peer)}"
    return type(event).__name__
