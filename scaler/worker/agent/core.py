"""The worker agent's pure core: the supervisor of the worker's processors. It decides no task's route: every task
reaches its processor on the processor's own link to the scheduler, and everything about it leaves there
(docs/protocol.md section 3.7); the scheduler keeps the record of what each processor holds
(`scheduler/core/processor_links.py`).

`AgentCore.handle_all(events) -> effects` is its one entry. Rules:

1. The worker registers with the scheduler, heartbeats, registers again with a scheduler that forgot it, and exits
   when the scheduler is lost, as its link to the scheduler says (`scaler.protocol.scheduler_link`).
2. It keeps `slots` processors started, plus as many as the scheduler wants beyond them (ProcessorsWanted: processors
   that host an actor, or keep a waiting parent with nested_parents "process", serve no slot); a processor that
   ends is replaced. A processor is configured (HelloReply: where object storage is) once it is ready and the worker is
   registered, and again each time the worker registers again: it then says hello on its own link.
7. Where its processors reach object storage is found once (`route_storage`: the shell asks `RouteStorage` with the
   storage's address, and answers `StorageRouted`: the storage server itself on its host, elsewhere the host's cache
   of it, docs/architecture.md "One copy per host"); processors are configured only once it is known.
3. It kills a processor when the scheduler asks (ProcessorKill: its task was cancelled or timed out, a stopped task
   did not unwind, or it is not needed), and all of them when the worker stops.
4. Every processor that ends is reported (ProcessorExited): how it ended, whether it died for memory (the worker's
   memory watch, worker/memory.py), and the task it computed, read from its mark (worker/computing_mark.py); the
   scheduler ends the tasks held on its link. One killed on the scheduler's request is reported as stopped.
5. A processor that fails while it starts counts as a start failure: the worker gives up after MAX_START_FAILURES in
   a row, or at once with a preload function (pool.py).
6. A worker with a lifetime (a batch job's time limit: `lifetime_seconds` from its process's start) drains
   `lifetime_drain_seconds` before it ends: it tells the scheduler once it is registered (WorkerLeaving with
   drainSeconds), which sends it no new task, takes back those it has not started and lets it go (Shutdown) once it
   holds none; a scheduler that registers it again is told again. When the lifetime ends it leaves (the scheduler
   moves what it still runs, at no retry cost), and it exits LIFETIME_EXIT_GRACE_SECONDS later if no
   acknowledgement came.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from scaler.protocol import messages as m
from scaler.protocol.scheduler_link import (
    Forgotten,
    LinkEffect,
    LinkSettings,
    Lost,
    Registered,
    RegistrationRefused,
    SchedulerLink,
    SendHello,
    StillWaiting,
)
from scaler.protocol.scheduler_link import SendHeartbeat as LinkHeartbeat
from scaler.worker.agent.events import (
    EXIT_ERROR,
    EXIT_NEVER_CONNECTED,
    EXIT_OK,
    EXIT_SCHEDULER_LOST,
    AgentTick,
    Effect,
    Event,
    Exit,
    FromProcessor,
    FromScheduler,
    KillProcessor,
    LeaveRequested,
    ProcessorDied,
    RouteStorage,
    SayHello,
    SchedulerDisconnected,
    SendWorkerHeartbeat,
    SpawnProcessor,
    StorageRouted,
    ToProcessor,
    ToScheduler,
)
from scaler.worker.agent.pool import MAX_START_FAILURES, ProcessorPool, ProcessorRecord, ProcessorState
from scaler.worker.agent.settings import AgentSettings

__all__ = [  # the events and effects are part of the core's interface
    "EXIT_ERROR",
    "EXIT_NEVER_CONNECTED",
    "EXIT_OK",
    "EXIT_SCHEDULER_LOST",
    "AgentCore",
    "AgentSettings",
    "AgentTick",
    "Effect",
    "Event",
    "Exit",
    "FromProcessor",
    "FromScheduler",
    "KillProcessor",
    "LeaveRequested",
    "ProcessorDied",
    "ProcessorRecord",
    "ProcessorState",
    "RouteStorage",
    "SayHello",
    "SchedulerDisconnected",
    "SendWorkerHeartbeat",
    "SpawnProcessor",
    "StorageRouted",
    "ToProcessor",
    "ToScheduler",
]

logger = logging.getLogger(__name__)

#: A worker whose lifetime ended exits this long after asking to leave, acknowledged or not (rule 6).
LIFETIME_EXIT_GRACE_SECONDS = 3.0

_STARTING, _READY, _STOPPING = ProcessorState.STARTING, ProcessorState.READY, ProcessorState.STOPPING


class AgentCore:
    def __init__(self, settings: AgentSettings, started_at: float, processor_prefix: bytes = b"p") -> None:
        self.settings = settings
        self.effects: list[Effect] = []
        self.pool = ProcessorPool(settings.slots, processor_prefix)
        self.processors = self.pool.processors
        self._storage_address = settings.object_storage_address  #: what the scheduler says, or the override
        #: where processors reach storage, and the CURVE key of the server there when not the servers' (rule 7);
        #: None: not known yet
        self._route: tuple[str, str] | None = None
        self._routing = False  #: RouteStorage asked, StorageRouted not yet heard
        self.link = SchedulerLink(
            LinkSettings(
                address=settings.scheduler_address,
                heartbeat_interval_seconds=settings.heartbeat_interval_seconds,
                timeout_seconds=settings.death_timeout_seconds,
                # a closed connection starts the grace: past it with no scheduler answering, the worker exits; a death
                # timeout shorter than the grace ends the wait first, so the grace it announces is at most that
                lost_on_disconnect=settings.scheduler_lost_grace_seconds > 0,
                lost_grace_seconds=min(settings.scheduler_lost_grace_seconds, settings.death_timeout_seconds) or None,
                pause_after_seconds=settings.pause_after_seconds,
                follow_given_period=True,  # the scheduler lengthens it as the cluster grows (heartbeat_period.py)
            )
        )
        self._leaving = False
        #: when its lifetime ends (rule 6), monotonic seconds; None: no lifetime
        lifetime_started_at = started_at if settings.lifetime_started_at is None else settings.lifetime_started_at
        self._ends_at = lifetime_started_at + settings.lifetime_seconds if settings.lifetime_seconds > 0 else None
        self._draining = False  #: it told the scheduler it drains (rule 6)
        self.now = started_at

    # ------------------------------------------------------------ the one mutator

    def handle(self, event: Event) -> list[Effect]:
        return self.handle_all((event,))

    def handle_all(self, events: Iterable[Event]) -> list[Effect]:
        """Apply events in order, then keep the processors the worker needs (rule 2)."""
        for event in events:
            self.now = event.now
            if isinstance(event, FromScheduler):
                self._on_scheduler(event.message)
            elif isinstance(event, FromProcessor):
                self._on_processor(event.processor_id, event.message)
            elif isinstance(event, ProcessorDied):
                self._on_exit(event)
            elif isinstance(event, AgentTick):
                self._follow_link(self.link.on_tick(self.now))
                if self._ends_at is not None:
                    self._follow_lifetime(self._ends_at)
            elif isinstance(event, LeaveRequested):
                self._leave(event.reason)
            elif isinstance(event, SchedulerDisconnected):
                self._follow_link(self.link.on_disconnected(self.now))
            elif isinstance(event, StorageRouted):
                self._on_routed(event)
        if not self._leaving:
            for _ in range(self.pool.to_start()):
                self.effects.append(SpawnProcessor(self.pool.add()))
        effects = self.effects[:]
        self.effects.clear()
        return effects

    def start(self) -> list[Effect]:
        """Effects for start-up: the hello, and the processors, so that they warm up while the hello travels."""
        self._follow_link(self.link.start(self.now))
        return self.handle(AgentTick(self.now))

    @property
    def capacity(self) -> int:
        """The tasks the scheduler may assign at once beyond those staged, parked or hosting an actor in its processors
        (its hello's WorkerInfo.capacity): one per slot, and one prefetched where processors stage tasks."""
        settings = self.settings
        prefetch = 1 if settings.max_staged_tasks and not settings.processor_per_parent else 0
        return max(1, min(settings.slots + prefetch, settings.max_held_tasks))

    def status(self) -> m.WorkerStatus:
        """The worker's counts as its agent knows them: none (the scheduler counts the tasks on its processors' links,
        scheduler/core/view.py)."""
        return m.WorkerStatus()

    # ------------------------------------------------------------ scheduler messages

    def _on_scheduler(self, message: m.Message) -> None:
        if self._leaving and isinstance(message, m.ProtocolError):
            return  # a leaving worker is forgotten on purpose: no new registration
        self._follow_link(self.link.on_message(message, self.now))
        if isinstance(message, m.ProcessorKill):
            self._kill(message.processor_id, message.reason or "the scheduler asked")
        elif isinstance(message, m.ProcessorsWanted):
            self.pool.beyond_slots = message.beyond_slots
        elif isinstance(message, m.Shutdown):
            self._exit(EXIT_OK, f"the scheduler asked this worker to stop: {message.reason}")
        elif isinstance(message, m.ProtocolError) and message.kind is not m.ProtocolErrorKind.UNKNOWN_PEER:
            logger.warning("the scheduler refused a message: %s", message.reason)

    def _follow_link(self, effects: list[LinkEffect]) -> None:
        for effect in effects:
            if isinstance(effect, SendHello):
                self.effects.append(SayHello(known_instance=self.link.known_instance))
            elif isinstance(effect, LinkHeartbeat):
                self.effects.append(SendWorkerHeartbeat(self.status(), effect.round_trip_seconds))
            elif isinstance(effect, Registered):
                self._on_registered(effect)
            elif isinstance(effect, Forgotten):
                logger.warning("the scheduler forgot this worker (restarted?): saying hello again; its processors "
                               "say it again on their links, naming the tasks they hold")  # fmt: skip
            elif isinstance(effect, RegistrationRefused):
                self._exit(EXIT_ERROR, effect.reason)
            elif isinstance(effect, Lost):
                self._exit(effect.exit_code, effect.reason)
            elif isinstance(effect, StillWaiting):
                logger.warning("%s", effect.text)

    def _on_registered(self, registered: Registered) -> None:
        """Its processors are configured (again): each says hello on its link (rule 2)."""
        if registered.again:
            self._draining = False  # a scheduler that forgot it (restarted) is told again (rule 6)
        if not self._storage_address:
            self._storage_address = registered.reply.object_storage_address
        if not self.settings.route_storage:
            self._route = (self._storage_address, "")
        elif self._route is None:
            if not self._routing and self._storage_address:
                self._routing = True
                self.effects.append(RouteStorage(self._storage_address))
            return  # configured once routed (rule 7)
        for processor in self.processors.values():
            if processor.state is _READY:
                self._configure(processor)

    def _on_routed(self, routed: StorageRouted) -> None:
        """Rule 7: processors reach storage there from now on."""
        self._routing = False
        self._route = (routed.address, routed.server_key)
        if self.link.is_registered:
            for processor in self.processors.values():
                if processor.state is _READY:
                    self._configure(processor)

    # ------------------------------------------------------------ processors

    def _on_processor(self, processor_id: bytes, message: m.Message) -> None:
        processor = self.processors.get(processor_id)
        if processor is None or processor.state is not _STARTING or not isinstance(message, m.ProcessorReady):
            return  # a processor tells its agent nothing else: the rest goes on its own link
        processor.pid = message.pid
        processor.state = _READY
        self.pool.started()
        if self.link.is_registered and self._route is not None:
            self._configure(processor)

    def _on_exit(self, died: ProcessorDied) -> None:
        processor = self.pool.remove(died.processor_id)
        if processor is None:
            return
        requested = processor.state is _STOPPING
        description = f"stopped: {processor.reason}" if requested else died.description
        out_of_memory = "" if requested else died.out_of_memory
        if out_of_memory and died.computing_task:  # this worker's log says why, as the scheduler's does
            logger.warning("task %s: %s%s", died.computing_task.hex(), out_of_memory, where(processor.pid))
        if self.link.is_registered and not self._leaving:
            known = died.computing_task is not None
            exited = m.ProcessorExited(died.processor_id, description, out_of_memory, died.computing_task or b"", known)
            self.effects.append(ToScheduler(exited))
        if processor.state is _STARTING and not self._leaving:
            self._start_failed(died.description)

    def _start_failed(self, description: str) -> None:
        failures = self.pool.failed_to_start()
        logger.error("processor failed while starting (%s)", description)
        if self.settings.has_preload:
            self._exit(EXIT_ERROR, f"a processor failed to start ({description}); check the --preload function")
        elif failures >= MAX_START_FAILURES:
            self._exit(EXIT_ERROR, f"processors failed to start {failures} times; last: {description}")

    def _configure(self, processor: ProcessorRecord) -> None:
        assert self._route is not None
        address, server_key = self._route
        reply = m.HelloReply(True, object_storage_address=address, object_storage_server_key=server_key)
        self.effects.append(ToProcessor(processor.processor_id, reply))

    def _kill(self, processor_id: bytes, reason: str) -> None:
        processor = self.processors.get(processor_id)
        if processor is None or processor.state is _STOPPING:
            return
        processor.state, processor.reason = _STOPPING, reason
        self.effects.append(KillProcessor(processor_id, reason))

    # ------------------------------------------------------------ leaving

    def _leave(self, reason: str) -> None:
        if not self._leaving:
            self._leaving = True
            self.effects.append(ToScheduler(m.WorkerLeaving(reason)))

    def _follow_lifetime(self, ends_at: float) -> None:
        """Rule 6: drain before the lifetime ends, leave when it does, exit if that is not acknowledged."""
        now, lifetime = self.now, self.settings.lifetime_seconds
        if self._leaving:
            if now >= ends_at + LIFETIME_EXIT_GRACE_SECONDS:
                self._exit(EXIT_OK, f"its lifetime of {lifetime:g} s is over (its leaving was not acknowledged)")
            return
        if now >= ends_at:
            logger.info("the worker's lifetime of %g s is over: leaving", lifetime)
            self._leave(f"its lifetime of {lifetime:g} s is over")
            return
        left = ends_at - now
        if not self._draining and left <= self.settings.lifetime_drain_seconds and self.link.is_registered:
            self._draining = True
            logger.info("the worker's lifetime ends in %.0f s: draining (no new task; those it runs may finish)", left)
            self.effects.append(
                ToScheduler(m.WorkerLeaving(f"its lifetime of {lifetime:g} s ends in {left:.0f} s", left))
            )

    def _exit(self, code: int, reason: str) -> None:
        self._leaving = True
        for processor_id in list(self.processors):
            self._kill(processor_id, "the worker is stopping")
        self.effects.append(Exit(code, reason))


def where(pid: int) -> str:
    """How a processor is named in a log line: by its pid, or not at all for a slot that is not a local process."""
    return f" (pid {pid})" if pid else ""
