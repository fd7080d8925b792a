"""The worker agent's pure core: which task runs in which processor, and what the scheduler is told.

Rules:
1. At most `slots` processors compute at once (RUNNING). A task that waits on nested futures is parked
   in its processor (processor_table) and does not count: its slot serves other tasks (children first,
   by priority), in the same processor ("thread" mode: a parked task is a waiting thread) or in another
   ("process" mode). When its futures are done it asks to resume and runs again as soon as a slot is
   free and its processor computes nothing else; resumes go before new tasks, so parents finish.
2. The scheduler may assign `capacity = slots + prefetch + blocked` tasks at once. Prefetch follows
   the measured task duration: enough queued work to hide a round trip for tiny tasks, a single task
   ahead for long ones. Every change of capacity is announced with WorkerCapacity.
3. Every task ends exactly once towards the scheduler: a result, a cancel confirmation, a return, or
   a failure made here (timeout, processor died). A parked task whose processor is stopped or dies because
   of another task is reported lost (HOST_LOST: the scheduler runs it again within its retry budget).
4. A task that is cancelled or times out in a processor holding parked tasks is stopped in that processor
   (TaskCancel: its nested tasks are cancelled and its thread unwinds), not by killing the processor and
   the parked tasks with it. A stopped computing task keeps its slot until the processor reports it gone
   (a CANCELED result); one still computing after ABANDON_GRACE_SECONDS has its processor killed. Any
   other stop kills the task's processor.
5. Tiny tasks are *staged*: while a processor computes, the agent sends it the next ones ahead (up to
   `max_staged_tasks`, fewer as tasks get longer: about STAGING_HORIZON_SECONDS of work), so that it goes from one
   to the next without waiting for the agent, and one write and one read carry several tasks. What is tiny is
   learned per function from the tasks that finished here: a function not seen finishing yet, or slower than the
   horizon, is not staged (staging stops at it, so that tasks keep their order), and nothing is staged behind a
   task of such a function: no task waits in a processor, where the scheduler cannot take it back for another
   worker, behind a long task or in front of one. A staged task computes when the one before it ends or parks;
   until then it is not counted as running. Only a processor that holds no parked task takes staged tasks, and
   only in "thread" mode (in "process" mode a parent's process must not run other tasks). A staged task that is
   stopped is withdrawn from its processor (TaskCancel: it never runs; the processor's CANCELED answer is
   ignored); the staged tasks of a processor that is killed or dies go back to the queue (they had not started).
"""

from __future__ import annotations

import collections
import heapq
import itertools
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.protocol.scheduler_link import (
    Forgotten,
    LinkEffect,
    LinkSettings,
    Lost,
    Refused,
    Registered,
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
    Effect,
    Event,
    Exit,
    FromProcessor,
    FromScheduler,
    KillProcessor,
    LeaveRequested,
    ProcessorExited,
    SayHello,
    SchedulerDisconnected,
    SendHeartbeat,
    SpawnProcessor,
    Tick,
    ToProcessor,
    ToScheduler,
)
from scaler.worker.agent.processor_table import HeldTask, ProcessorRecord, ProcessorState, ProcessorTable
from scaler.worker.processor_protocol import Outcome, TaskEvent, TaskState, outcome

__all__ = [  # the events and effects are part of the core's interface
    "EXIT_ERROR",
    "EXIT_NEVER_CONNECTED",
    "EXIT_OK",
    "EXIT_SCHEDULER_LOST",
    "AgentCore",
    "AgentSettings",
    "Effect",
    "Event",
    "Exit",
    "FromProcessor",
    "FromScheduler",
    "HeldTask",
    "KillProcessor",
    "LeaveRequested",
    "ProcessorExited",
    "ProcessorRecord",
    "ProcessorState",
    "SayHello",
    "SchedulerDisconnected",
    "SendHeartbeat",
    "SpawnProcessor",
    "Tick",
    "ToProcessor",
    "ToScheduler",
]

logger = logging.getLogger(__name__)

#: Queued work the prefetch aims to hold, in seconds of measured task time.
PREFETCH_HORIZON_SECONDS = 0.005
MAX_PREFETCH = 64
#: Work staged in a computing processor, in seconds of measured task time (rule 5): tasks longer than this are
#: not staged, and a task waits behind staged ones at most about this long.
STAGING_HORIZON_SECONDS = 0.002
#: Functions whose run time the agent keeps for staging, at most (all are forgotten when a new one would pass it).
MAX_KNOWN_FUNCTIONS = 1024
#: Results kept for sending again after a scheduler restart, at most (the oldest go first).
MAX_UNACKNOWLEDGED_RESULTS = 100_000
#: How long a task stopped among parked tasks may take to unwind before its processor is killed.
ABANDON_GRACE_SECONDS = 5.0
#: Processor start failures in a row after which the worker gives up.
MAX_START_FAILURES = 3


@dataclass(frozen=True, slots=True)
class AgentSettings:
    scheduler_address: str = ""  #: for messages about the link
    slots: int = 1
    max_held_tasks: int = 1000  #: --per-worker-task-queue-size
    heartbeat_interval_seconds: float = 2.0
    death_timeout_seconds: float = 300.0
    scheduler_lost_grace_seconds: float = 60.0  #: 0: only the death timeout ends a worker whose scheduler left
    task_timeout_seconds: float = 0.0  #: 0: no limit
    object_storage_address: str = ""  #: override; empty: what the scheduler says
    has_preload: bool = False
    nested_parents: str = "thread"  #: "thread": parked parents share their processor; "process": one each
    #: tasks a processor may hold beyond the one it computes (rule 5); 0: none. What the executor's processors
    #: can take (`Executor.max_staged_tasks`)
    max_staged_tasks: int = 0


@dataclass
class _Counters:
    ids: itertools.count[int] = field(default_factory=itertools.count)
    sequence: itertools.count[int] = field(default_factory=itertools.count)


class AgentCore:
    def __init__(self, settings: AgentSettings, started_at: float, processor_prefix: bytes = b"p") -> None:
        self.settings = settings
        self.effects: list[Effect] = []
        self.table = ProcessorTable(settings.nested_parents)
        self.tasks = self.table.tasks
        self.processors = self.table.processors
        self._queue: list[tuple[int, int, TaskID]] = []  #: (-priority, sequence, task) of unstarted tasks
        self._counters = _Counters()
        self._prefix = processor_prefix
        self._storage_address = settings.object_storage_address
        self.link = SchedulerLink(
            LinkSettings(
                address=settings.scheduler_address,
                heartbeat_interval_seconds=settings.heartbeat_interval_seconds,
                timeout_seconds=settings.death_timeout_seconds,
                # a closed connection starts the grace: past it with no scheduler answering, the worker exits
                lost_on_disconnect=settings.scheduler_lost_grace_seconds > 0,
                lost_grace_seconds=settings.scheduler_lost_grace_seconds or None,
            )
        )
        self._leaving = False
        self._average_duration: float | None = None  #: of every task: the prefetch
        self._run_times: dict[str, float] = {}  #: by function name: staging (rule 5)
        self._announced_capacity = 0
        self._start_failures = 0
        #: results sent since the last heartbeat the scheduler answered, by send order: sent again to a restarted
        #: scheduler (one that died may never have read them)
        self._unacknowledged: collections.deque[tuple[int, m.TaskResult]] = collections.deque()
        self._results_sent = 0
        self._heartbeat_marker: int | None = None  #: results sent before the heartbeat in flight
        self.now = started_at

    # ------------------------------------------------------------ the one mutator

    def handle(self, event: Event) -> list[Effect]:
        return self.handle_all((event,))

    def handle_all(self, events: Iterable[Event]) -> list[Effect]:
        """Apply events in order, then place work once (a batch from one socket read is one step)."""
        for event in events:
            self.now = event.now
            if isinstance(event, FromScheduler):
                self._on_scheduler(event.message)
            elif isinstance(event, FromProcessor):
                self._on_processor(event.processor_id, event.message)
            elif isinstance(event, ProcessorExited):
                self._on_exit(event.processor_id, event.description)
            elif isinstance(event, Tick):
                self._on_tick()
            elif isinstance(event, LeaveRequested):
                self._leave(event.reason)
            elif isinstance(event, SchedulerDisconnected):
                self._follow_link(self.link.on_disconnected(self.now))
        self._schedule()
        effects = self.effects[:]
        self.effects.clear()
        return effects

    def has_queued_work(self) -> bool:
        """More results will follow soon: tasks wait here or in processors."""
        return bool(self._queue) or self.table.staged > 0

    def start(self) -> list[Effect]:
        """Effects for start-up: the hello, and the first processor, so it warms up while the hello travels."""
        self._follow_link(self.link.start(self.now))
        self._spawn()
        return self.handle(Tick(self.now))

    # ------------------------------------------------------------ counts

    @property
    def running(self) -> int:
        return self.table.running

    @property
    def parked(self) -> int:
        return self.table.parked

    @property
    def capacity(self) -> int:
        return min(self.settings.slots + self._prefetch() + self.parked, self.settings.max_held_tasks + self.parked)

    def _prefetch(self) -> int:
        if self._average_duration is None:
            return 1
        wanted = math.ceil(PREFETCH_HORIZON_SECONDS / max(self._average_duration, 1e-6))
        return max(1, min(MAX_PREFETCH, wanted))

    def _staging_depth(self, task: m.Task) -> int:
        """How many staged tasks a processor may hold when `task` is the next to stage: none for a function not seen
        finishing here, or slower than the horizon."""
        seconds = self._run_times.get(task.function_name)
        if seconds is None:
            return 0
        return min(self.settings.max_staged_tasks, int(STAGING_HORIZON_SECONDS / max(seconds, 1e-6)))

    def status(self) -> m.WorkerStatus:
        queued = len(self._queue) + self.table.staged
        return m.WorkerStatus(queued=queued, running=self.running, blocked=self.parked)

    # ------------------------------------------------------------ scheduler messages

    def _on_scheduler(self, message: m.Message) -> None:
        if self._leaving and isinstance(message, m.ProtocolError):
            return  # a leaving worker is forgotten on purpose: no new registration
        self._follow_link(self.link.on_message(message, self.now))
        if isinstance(message, m.HeartbeatEcho):
            self._acknowledged()
        elif isinstance(message, m.Task):
            self._accept(message)
        elif isinstance(message, m.TaskCancel):
            for task_id in message.task_ids:
                self._cancel(task_id)
        elif isinstance(message, m.TaskReturn):
            self._give_back(message.task_ids)
        elif isinstance(message, m.Shutdown):
            self._exit(EXIT_OK, f"the scheduler asked this worker to stop: {message.reason}")
        elif isinstance(message, m.ProtocolError) and message.kind is not m.ProtocolErrorKind.UNKNOWN_PEER:
            logger.warning("the scheduler refused a message: %s", message.reason)

    def _follow_link(self, effects: list[LinkEffect]) -> None:
        for effect in effects:
            if isinstance(effect, SendHello):
                # what it holds, and what it finished without proof the scheduler read it (sent again below)
                live = (t for t, held in self.tasks.items() if held.state is not TaskState.STOPPING)
                held = (*live, *(r.task_id for _, r in self._unacknowledged)) if self.link.known_instance else ()
                self.effects.append(SayHello(held, self.link.known_instance))
            elif isinstance(effect, LinkHeartbeat):
                if self._heartbeat_marker is None:  # the oldest heartbeat in flight: its echo is proof enough
                    self._heartbeat_marker = self._results_sent
                self.effects.append(SendHeartbeat(self.status(), effect.round_trip_seconds))
            elif isinstance(effect, Registered):
                self._on_registered(effect.reply)
                if effect.again:
                    self._send_unacknowledged()
            elif isinstance(effect, Forgotten):
                self._rejoin()
            elif isinstance(effect, Refused):
                self._exit(EXIT_ERROR, effect.reason)
            elif isinstance(effect, Lost):
                self._exit(effect.exit_code, effect.reason)
            elif isinstance(effect, StillWaiting):
                logger.warning("%s", effect.text)

    def _on_registered(self, reply: m.HelloReply) -> None:
        if not self._storage_address:
            self._storage_address = reply.object_storage_address
        for processor in self.processors.values():
            if processor.state is not ProcessorState.STARTING:
                self._configure(processor)
        self._announce_capacity()

    def _rejoin(self) -> None:
        """The scheduler does not know this worker any more (it restarted, or gave up on it): the link registers
        again, naming the tasks this worker holds; they go on running. The new instance adopts those its clients
        submit again (no second run), and cancels those it gave to another worker meanwhile."""
        logger.warning("the scheduler forgot this worker (restarted?): saying hello again with its %d task(s)",
                       len(self.tasks))  # fmt: skip
        self._announced_capacity = 0

    def _send_unacknowledged(self) -> None:
        """Results sent since the last heartbeat the scheduler answered may have died with it: send them again
        (the scheduler drops a result it already has)."""
        if self._unacknowledged:
            logger.info("sending %d result(s) again to the scheduler", len(self._unacknowledged))
        for _, result in self._unacknowledged:
            self.effects.append(ToScheduler(result))

    def _acknowledged(self) -> None:
        """The scheduler answered a heartbeat: every result sent before that heartbeat reached it."""
        marker = self._heartbeat_marker
        if marker is None:
            return
        self._heartbeat_marker = None
        while self._unacknowledged and self._unacknowledged[0][0] < marker:
            self._unacknowledged.popleft()

    def _accept(self, task: m.Task) -> None:
        if task.task_id in self.tasks:
            return
        self.tasks[task.task_id] = HeldTask(task, next(self._counters.sequence))
        heapq.heappush(self._queue, (-task.priority, self.tasks[task.task_id].sequence, task.task_id))

    def _cancel(self, task_id: TaskID) -> None:
        held = self.tasks.get(task_id)
        if held is None or held.state is TaskState.STOPPING:
            self._to_scheduler(m.TaskCancelConfirm(task_id, m.CancelOutcome.NOT_FOUND))
            return
        self._stop(held, "its task was cancelled")
        self._to_scheduler(m.TaskCancelConfirm(task_id, m.CancelOutcome.CANCELED))

    def _stop(self, held: HeldTask, reason: str) -> None:
        """End a held task here, whatever its state (CANCEL); the caller tells the scheduler how it ended."""
        task_id = held.task.task_id
        done = outcome(held.state, TaskEvent.CANCEL)
        if done is Outcome.DROP:  # queued here
            self.table.drop(task_id, self.now)
            return
        assert held.processor is not None
        processor = self.processors[held.processor]
        if done is Outcome.STOP:
            if processor.parked:
                # computing among parked tasks: stopped in its processor; its slot stays taken until it is gone
                held.state, held.stopped_at = TaskState.STOPPING, self.now
                self._to_processor(processor, m.TaskCancel((task_id,)))
            else:
                self._kill(processor.processor_id, reason)  # the task with it; its staged tasks are queued again
        elif done in (Outcome.WITHDRAW, Outcome.STOP_PARKED):
            self.table.drop(task_id, self.now)
            if processor.state is ProcessorState.RUNNING or processor.parked:
                # staged, or parked among other tasks of its processor: stopped there, without taking them down
                self._to_processor(processor, m.TaskCancel((task_id,)))
            else:
                self._kill(processor.processor_id, reason)

    def _give_back(self, task_ids: tuple[TaskID, ...]) -> None:
        returned = []
        for task_id in task_ids:
            held = self.tasks.get(task_id)
            if held is not None and held.state is TaskState.QUEUED:
                self.table.drop(task_id, self.now)
                returned.append(task_id)
        self._to_scheduler(m.TaskReturn(tuple(returned)))

    # ------------------------------------------------------------ processor messages

    def _on_processor(self, processor_id: bytes, message: m.Message) -> None:
        processor = self.processors.get(processor_id)
        if processor is None or processor.state is ProcessorState.STOPPING:
            return
        if isinstance(message, m.ProcessorReady):
            processor.pid = message.pid
            self.table.set_state(processor, ProcessorState.IDLE)
            self._start_failures = 0
            if self.link.is_registered:
                self._configure(processor)
        elif isinstance(message, m.TaskResult):
            self._on_result(processor, message)
        elif isinstance(message, m.TaskLog):
            held = self.tasks.get(message.task_id)
            if held is not None and held.processor == processor_id:
                self._to_scheduler(message)
        elif isinstance(message, m.ProcessorBlocked):
            self.table.park(processor, message.task_id, self.now)
        elif isinstance(message, m.ProcessorResumeRequest):
            self.table.ask_resume(processor, message.task_id)

    def _on_result(self, processor: ProcessorRecord, result: m.TaskResult) -> None:
        held = self.table.finish(processor, result.task_id, self.now)
        if held is None:
            return  # stopped or cancelled meanwhile; the scheduler was told already
        self._learn_duration(held.task.function_name, self.now - held.started_at)
        self._to_scheduler(result)

    def _learn_duration(self, function_name: str, seconds: float) -> None:
        self._average_duration = _moving_average(self._average_duration, seconds)
        known = self._run_times.get(function_name)
        if known is None and len(self._run_times) >= MAX_KNOWN_FUNCTIONS:
            self._run_times.clear()
        self._run_times[function_name] = _moving_average(known, seconds)

    def _on_exit(self, processor_id: bytes, description: str) -> None:
        processor = self.processors.get(processor_id)
        if processor is None or processor.state is ProcessorState.STOPPING:
            self.table.remove(processor_id)
            return
        computing = self.tasks.get(processor.task_id) if processor.task_id is not None else None
        answered = computing is not None and computing.state is TaskState.STOPPING  #: stopped here, told already
        running, parked, staged = self.table.vacate(processor)
        self.table.remove(processor_id)
        self._queue_again(staged)
        if processor.state is ProcessorState.STARTING:
            self._start_failures += 1
            logger.error("processor failed while starting (%s)", description)
            if self.settings.has_preload:
                self._exit(EXIT_ERROR, f"a processor failed to start ({description}); check the --preload function")
            elif self._start_failures >= MAX_START_FAILURES:
                self._exit(EXIT_ERROR, f"processors failed to start {self._start_failures} times; last: {description}")
            return
        where = f" (pid {processor.pid})" if processor.pid else ""  # 0: not a local process (remote slot)
        if running is not None and not answered:
            text = f"the processor{where} running the task died: {description}"
            logger.warning("%s", text)
            self._to_scheduler(m.TaskResult(running, m.ResultStatus.PROCESSOR_DIED, error_message=text))
        if running is not None:  # the computing task is to blame: the parents waiting there run again
            self._report_lost(
                parked, f"the processor{where} it waited in died while running another task: {description}"
            )
            return
        for task_id in parked:  # nothing else computed there: as a task whose own processor died
            text = f"the processor{where} the task waited in for its nested tasks died: {description}"
            logger.warning("task %s: %s", task_id.hex(), text)
            self._to_scheduler(m.TaskResult(task_id, m.ResultStatus.PROCESSOR_DIED, error_message=text))

    def _report_lost(self, task_ids: list[TaskID], why: str) -> None:
        """Parked tasks taken down with their processor by another task: the scheduler runs them again."""
        for task_id in task_ids:
            text = f"this task was waiting for its nested tasks, and {why}"
            logger.warning("task %s: %s", task_id.hex(), text)
            self._to_scheduler(m.TaskResult(task_id, m.ResultStatus.HOST_LOST, error_message=text))

    # ------------------------------------------------------------ time

    def _on_tick(self) -> None:
        settings, now = self.settings, self.now
        self._follow_link(self.link.on_tick(now))
        if self._leaving:
            return
        for held in list(self.tasks.values()):
            if held.state is TaskState.STOPPING:
                if now - held.stopped_at > ABANDON_GRACE_SECONDS and held.processor is not None:
                    self._kill(held.processor, f"a task stopped in it did not end within {ABANDON_GRACE_SECONDS:g} s")
            elif held.state is TaskState.QUEUED or held.state is TaskState.STAGED:
                continue  # not started: its time has not begun
            elif 0 < settings.task_timeout_seconds < now - held.started_at:
                self._time_out(held)

    def _time_out(self, held: HeldTask) -> None:
        self._stop(held, "its task timed out")
        text = f"the task ran longer than the task timeout of {self.settings.task_timeout_seconds:g} s and was stopped"
        self._to_scheduler(m.TaskResult(held.task.task_id, m.ResultStatus.TIMED_OUT, error_message=text))

    # ------------------------------------------------------------ placing work on processors

    def _schedule(self) -> None:
        if self._leaving:
            return
        if self.link.is_registered:
            self._resume_parents()
            self._start_tasks()
        self._keep_processors()
        self._announce_capacity()

    def _resume_parents(self) -> None:
        if not self.table.resuming:
            return
        for processor, task_id in self.table.resumable():
            if self.running >= self.settings.slots:
                return
            self.table.resume(processor, task_id)
            self._to_processor(processor, m.ProcessorResume(task_id))

    def _start_tasks(self) -> None:
        while self._queue and self.running < self.settings.slots:
            idle = self.table.idle_processor()
            if idle is None:
                break
            held = self._next_queued()
            if held is None:
                return
            self.table.start(idle, held, self.now)
            self._to_processor(idle, held.task)
        if self._queue and self.settings.max_staged_tasks and self.table.parents_share_processors:
            self._stage_tasks()

    def _stage_tasks(self) -> None:
        """Queued tasks go to computing processors ahead of their turn, one each in turn, as deep as the next task's
        function allows (rule 5)."""
        takers = [p for p in self.processors.values() if p.state is ProcessorState.RUNNING and not p.parked]
        while takers:
            for processor in takers[:]:
                held = self._first_queued()
                if held is None:
                    return
                assert processor.task_id is not None
                computing = self.tasks[processor.task_id].task
                if len(processor.staged) >= min(self._staging_depth(held.task), self._staging_depth(computing)):
                    takers.remove(processor)
                    continue
                heapq.heappop(self._queue)
                self.table.stage(processor, held)
                self._to_processor(processor, held.task)

    def _next_queued(self) -> HeldTask | None:
        """The queued task to start first, taken out of the queue; None when none is left."""
        held = self._first_queued()
        if held is not None:
            heapq.heappop(self._queue)
        return held

    def _first_queued(self) -> HeldTask | None:
        """The queued task to start first, left in the queue; None when none is left."""
        while self._queue:
            held = self.tasks.get(self._queue[0][2])
            if held is not None and held.state is TaskState.QUEUED:
                return held
            heapq.heappop(self._queue)  # cancelled or returned while queued: its entry is dropped here
        return None

    def _queue_again(self, staged: list[HeldTask]) -> None:
        """Tasks staged in a processor that is gone: they had not started there, and wait here again."""
        for held in staged:
            heapq.heappush(self._queue, (-held.task.priority, held.sequence, held.task.task_id))

    def _keep_processors(self) -> None:
        """One processor ready (idle or starting) per slot that could start a task now, at least one
        while a slot is free; idle processors beyond that (with one of slack) are retired. Forking from
        the zygote takes milliseconds, so no spare is kept while every slot computes."""
        ready = self.table.count(ProcessorState.IDLE) + self.table.count(ProcessorState.STARTING)
        free_slots = max(0, self.settings.slots - self.running)
        keep = min(free_slots, max(1, len(self._queue)))
        for _ in range(max(0, keep - ready)):
            self._spawn()
        surplus = ready - (keep + 1)
        for processor in list(self.processors.values()):
            if surplus <= 0:
                break
            if processor.state is ProcessorState.IDLE and not processor.parked:
                self._kill(processor.processor_id, "not needed any more")
                surplus -= 1

    def _announce_capacity(self) -> None:
        if not self.link.is_registered:
            return
        capacity = self.capacity
        if capacity != self._announced_capacity:
            self._announced_capacity = capacity
            self._to_scheduler(m.WorkerCapacity(capacity))

    # ------------------------------------------------------------ helpers

    def _spawn(self) -> None:
        processor_id = self._prefix + b"-" + str(next(self._counters.ids)).encode()
        self.table.add(processor_id)
        self.effects.append(SpawnProcessor(processor_id))

    def _configure(self, processor: ProcessorRecord) -> None:
        self._to_processor(processor, m.HelloReply(True, object_storage_address=self._storage_address))

    def _kill(self, processor_id: bytes, reason: str, report_parked: bool = True) -> None:
        """Stop a processor. Its running task is dropped (the caller says how it ended); its parked tasks are
        reported lost, unless the whole worker stops (the scheduler re-dispatches what a leaving worker held)."""
        processor = self.processors.get(processor_id)
        if processor is None or processor.state is ProcessorState.STOPPING:
            return
        _, parked, staged = self.table.vacate(processor)
        self.table.set_state(processor, ProcessorState.STOPPING)
        self._queue_again(staged)
        self.effects.append(KillProcessor(processor_id, reason))
        if report_parked:
            where = f" (pid {processor.pid})" if processor.pid else ""
            self._report_lost(parked, f"the processor{where} it waited in was stopped because {reason}")

    def _leave(self, reason: str) -> None:
        if self._leaving:
            return
        self._leaving = True
        self._to_scheduler(m.WorkerLeaving(reason))

    def _exit(self, code: int, reason: str) -> None:
        self._leaving = True
        for processor_id in list(self.processors):
            self._kill(processor_id, "the worker is stopping", report_parked=False)
        self.effects.append(Exit(code, reason))

    def _to_scheduler(self, message: m.Message) -> None:
        self.effects.append(ToScheduler(message))
        if isinstance(message, m.TaskResult):
            self._unacknowledged.append((self._results_sent, message))
            self._results_sent += 1
            while len(self._unacknowledged) > MAX_UNACKNOWLEDGED_RESULTS:
                self._unacknowledged.popleft()

    def _to_processor(self, processor: ProcessorRecord, message: m.Message) -> None:
        self.effects.append(ToProcessor(processor.processor_id, message))


def _moving_average(average: float | None, seconds: float) -> float:
    return seconds if average is None else 0.8 * average + 0.2 * seconds
