"""SchedulerCore: the scheduler's one mutator. `handle(event) -> list[Effect]`; nothing else writes.

The core composes; registries do not call each other. It holds the records every registry works on (`CoreState`:
the peers, the processors' links, the task, graph and job tables, the time, the effects) and the registries, each a
concept's rules over its own records: `registration.py` (Hello), `client_sessions.py` (a client's heartbeats,
disconnect, going away and back, loss, and its answers), `submissions.py` (tasks, graphs, cancels checked),
`job_requests.py` (opening, attaching, expiring jobs), `actors.py` (actors' calls), `worker_sessions.py` (what a
worker agent reports, its leaving and silence), `link_sessions.py` (what a processor says on its own link: everything
about its tasks), `manager_sessions.py` (manager heartbeats, reclaimed units, scaling targets), `task_lifecycle.py`
(every task transition, and dispatch), `reattachment.py`, `object_retention.py`, `monitor_feed.py`,
`unserved_work.py`, `balancing.py` and `overtaking.py`. A registry that needs another to act emits a follow-up
(`follow_ups.py`); `routing.py` holds the tables (a peer's messages by role, the follow-ups) and the compositions of
several registries. This module owns the step (apply a batch of events, then dispatch tasks once), time, and the tick's
order.

Peers register with a Hello; anything else from an unknown peer is answered with a ProtocolError
(`test_scheduler_core.py` checks that every message a peer may send has a handler). Liveness is judged on `Tick(now)`
against the last message of each peer, never on a late beat (`events.Beats`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from scaler.policy.content import Allocation
from scaler.protocol import messages as m
from scaler.protocol.feed import STATUS_TOPIC
from scaler.protocol.ids import PeerID, short
from scaler.scheduler.core.actors import Actors
from scaler.scheduler.core.balancing import Balancer
from scaler.scheduler.core.client_sessions import PAUSE_SECONDS, ClientSessions
from scaler.scheduler.core.core_state import CoreState
from scaler.scheduler.core.effects import DeleteOwnerObjects, Effect
from scaler.scheduler.core.events import (
    AnswersLoaded,
    AnswersStored,
    Event,
    FatesTold,
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
from scaler.scheduler.core.peers import WorkerRecord
from scaler.scheduler.core.reattachment import Reattachment
from scaler.scheduler.core.registration import Registration
from scaler.scheduler.core.routing import Handlers, Registries, Routing
from scaler.scheduler.core.settings import CoreSettings
from scaler.scheduler.core.story_book import StoryBook
from scaler.scheduler.core.submissions import Submissions
from scaler.scheduler.core.task_lifecycle import TaskLifecycle
from scaler.scheduler.core.task_table import TaskTable
from scaler.scheduler.core.unserved_work import WARN_SECONDS, UnservedWork
from scaler.scheduler.core.view import ViewBuilder
from scaler.scheduler.core.worker_sessions import WorkerSessions

__all__ = ["CoreSettings", "ScalingHook", "SchedulerCore"]

logger = logging.getLogger(__name__)


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
        ignore_capabilities = settings.allocate is Allocation.EVEN_LOAD
        stories = StoryBook(
            settings.story_retention_tasks, settings.story_retention_seconds, settings.instance_id.hex()[:8]
        )
        tasks = TaskTable(ignore_capabilities=ignore_capabilities, stories=stories)
        jobs = JobTable(settings.result_retention_seconds, settings.job_result_quota_bytes)
        #: the records and the clock every registry sees (core_state.py)
        self.state = state = CoreState(settings, tasks, GraphRegistry(), jobs)
        self.effects, self.tasks, self.graphs, self.jobs = state.effects, state.tasks, state.graphs, state.jobs
        self.clients, self.workers, self.managers = state.clients, state.workers, state.managers
        #: the links of workers' processors, where their tasks go and everything about them comes (link_sessions.py)
        self.processors = state.processors
        # the registries: each works on its own records and says what should follow; `routing` routes it
        self.lifecycle = TaskLifecycle(state, settings.max_task_retries, settings.max_tasks_waiting)
        #: what survives a scheduler restart: tasks workers still hold, their results, tasks of returning clients
        #: held back (reattachment.py); the lifecycle never sees it: tasks reach it adopted or submitted
        self.reattachment = Reattachment()
        self.feed = MonitorFeed(settings.status_interval_seconds)
        self.retention = ObjectRetention(settings.object_retention_seconds)
        self.registration = Registration(state)
        self.client_sessions = ClientSessions(state)
        self.submissions = Submissions(state)
        self.actors = Actors(state)
        self.job_requests = JobRequests(state)
        self.worker_sessions = WorkerSessions(state)
        self.link_sessions = LinkSessions(state)
        self.views = ViewBuilder(state, self.actors)
        targets = _ViewedTargets(scaling, self.view) if scaling is not None else None
        self.manager_sessions = ManagerSessions(state, targets)
        self.unserved = UnservedWork(state, WARN_SECONDS, settings.unrunnable_grace_seconds)
        self._last_balance_at = 0.0
        self._balancer = Balancer(settings.load_balance_trigger_times)
        self._overtaking = Overtaking()
        registries = Registries(
            self.registration, self.client_sessions, self.submissions, self.job_requests, self.actors,
            self.worker_sessions, self.link_sessions, self.manager_sessions, self.lifecycle, self.reattachment,
            self.retention, self.feed,
        )  # fmt: skip
        #: which registry handles what: the peers' messages by role and the registries' follow-ups (routing.py)
        self.routing = Routing(state, registries)

    @property
    def now(self) -> float:
        return self.state.now

    @property
    def steps(self) -> int:
        """Batches of events handled so far."""
        return self.state.steps

    # ------------------------------------------------------------ the one mutator

    def handle(self, event: Event) -> list[Effect]:
        return self.handle_all((event,))

    def handle_all(self, events: Iterable[Event]) -> list[Effect]:
        """Apply events in order, then dispatch once (what one burst of the shell's socket reads brought is one
        step). An event whose handling fails is logged and dropped; the others are still applied."""
        self.state.steps += 1
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
            for granted in self.lifecycle.preemption.step(self.tasks, self.workers, self.state.now):
                self.link_sessions.keep_processors(granted)  # its processors for its slots (preemption.py)
                self.lifecycle.worker_has_room(granted.peer)
        except Exception:
            if self.strict:
                raise
            logger.exception("dispatch failed")
        if self.tasks.arrived:  # the step's end: a task still queued keeps only its record (task_table.py)
            self.tasks.arrived.clear()
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
                self.state.wall_offset = self.tasks.wall_offset = event.wall_time - event.now
            self._on_tick(event.on_time, event.reads_behind)
        elif isinstance(event, PeerLost):
            self._advance(event.now)
            self.routing.peer_lost(event.peer, event.reason, event.final)
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
        elif isinstance(event, FatesTold):
            self._advance(event.now)
            self.lifecycle.fates_told(event.object_ids, event.losses)

    def _advance(self, now: float) -> None:
        state = self.state
        if state.now and now - state.now > PAUSE_SECONDS:  # the shell beats at least once a second (pace.py)
            self.client_sessions.paused(state.now, now)
        state.now = now
        self.lifecycle.now = now
        if self.reattachment.started_at is None:  # `saw`'s own test, without the call: it runs for every event
            self.reattachment.saw(now)

    def _on_received(self, peer: PeerID, message: m.Message) -> None:
        if isinstance(message, m.Hello):
            self.routing.on_hello(peer, message)
            return
        if isinstance(message, (m.ProtocolError, m.Ping)):
            if isinstance(message, m.ProtocolError):
                logger.warning("%s refused a message of ours: %s", short(peer), message.reason)
            return  # never answered, so that two peers cannot bounce errors forever
        handlers: Handlers
        now, routing = self.state.now, self.routing
        # each table asked only when the one before does not know the peer; a client's tasks and a processor's results
        # (one each per task) first
        client = self.clients.get(peer)
        worker = manager = None
        if client is None and peer not in self.processors:
            worker = self.workers.get(peer)
            manager = self.managers.get(peer) if worker is None else None
        if client is not None:
            if client.away_reason:  # `is_away`, without the property's call: once per client message
                self.client_sessions.back(peer, resuming=isinstance(message, m.ClientResume))
            client.last_seen = now
            handlers = routing.client_handlers
        elif worker is not None:
            worker.last_seen = now
            handlers = routing.worker_handlers
        elif manager is not None:
            manager.last_seen = now
            handlers = routing.manager_handlers
        elif peer in self.processors:
            handlers = routing.processor_handlers  # no liveness of its own: its worker's heartbeats say it lives
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
        self.state.beats += 1
        self.effects.extend(DeleteOwnerObjects(owner) for owner in self.retention.due(now))
        self.job_requests.expire()
        self.routing.release_parked()
        self.worker_sessions.end_notices()
        self.link_sessions.on_tick(ask_back=not reads_behind)  # behind on the reads: answers may be unread (Tick)
        if on_time:  # a late beat judges no silence: what the peers sent meanwhile may not be read yet (events.Tick)
            self.client_sessions.on_tick()
            self.worker_sessions.drop_silent()
            self.manager_sessions.forget_silent()
        self.unserved.on_tick(now)
        self.lifecycle.on_beat()
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

    def send(self, peer: PeerID, message: m.Message, may_wait: bool = False) -> None:
        self.state.send(peer, message, may_wait)

    # ------------------------------------------------------------ the read model and the monitor feed

    @property
    def wall_time(self) -> float:
        """Seconds since the epoch now, as far as the shell's ticks tell (0 before the first)."""
        return self.state.wall_time

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
        """The workers a task can go to now, as clients are told (`CoreState.ready_worker_count`)."""
        return self.state.ready_worker_count()


class _ViewedTargets:
    """The scaling hook with the core's view of the moment bound to it: what `ManagerSessions` asks (its targets
    see the frozen view, never the core)."""

    def __init__(self, hook: ScalingHook, view: Callable[[], m.StatusSnapshot]) -> None:
        self._hook = hook
        self._view = view

    def targets(self, manager_id: str) -> m.ManagerTarget | None:
        return self._hook.targets(self._view(), manager_id)

    def reason(self, manager_id: str) -> str:
        return self._hook.reason(manager_id)


def _describe(event: Event) -> str:
    if isinstance(event, Received):
        return f"{type(event.message).__name__} from {short(event.peer)}"
    return type(event).__name__
