"""The worker agent's pure core: which task runs in which processor, and what the scheduler is told.

`AgentCore.handle_all(events) -> effects` is its one entry. It composes parts that each own one thing and do not
call each other: the processor table (`processor_table`: processors and held tasks, in the processor protocol's
states, `scaler.protocol.processor_protocol`), placement (`placement`: the queue, starting, staging, resuming), the
pool (`pool`: processors to start and retire), the run-time estimates (`estimates`: prefetch, staging depth), the
result journal (`result_journal`: results to send again after a scheduler restart) and the scheduler link
(`scaler.protocol.scheduler_link`). This module routes events to them and owns the rules that tie them together:

1. At most `slots` processors compute at once. A task that waits on nested futures is parked in its processor and
   does not count: its slot serves other tasks (children first, by priority), in the same processor ("thread"
   mode: a parked task is a waiting thread) or in another ("process" mode). When its futures are done it asks to
   go on, and computes again as soon as a slot is free and its processor computes nothing else (placement).
2. The scheduler may assign `capacity = slots + prefetch + parked` tasks at once. Prefetch follows the measured
   task duration: enough queued work to hide a round trip for tiny tasks, a single task ahead for long ones. Every
   change of capacity is announced with WorkerCapacity.
3. Every task ends exactly once towards the scheduler: a result, a cancel confirmation, a return, or a failure
   made here (timeout, processor died). A parked task whose processor is stopped or dies because of another task
   is reported lost (HOST_LOST: the scheduler runs it again within its retry budget); one whose processor died
   while nothing computed there fails as its own processor's death.
4. A task that is cancelled or times out (CANCEL) while it computes in a processor holding parked tasks is stopped
   in that processor (TaskCancel: STOPPING), not by killing the processor and the parked tasks with it; it keeps
   its slot until the processor reports it gone (a CANCELED result), and one still unwinding after
   STOP_GRACE_SECONDS has its processor killed. So is a streaming task, which hears the cancel between two of its
   values (its generator is closed there). Any other that computes alone is stopped by killing its processor. A
   staged or parked task is withdrawn or stopped in its processor, and forgotten at once (its processor is killed
   instead when it computes nothing else and holds no other parked task).
5. An actor's start task (`Task.actor`) holds a slot while it builds the actor; once the actor is built (ActorReady)
   its processor is HOSTING: it takes no slot (as a parked task, it adds one to the capacity: the worker holds
   actors and runs tasks beside them), and no task. It never times out, its run time teaches nothing, and nothing is
   staged behind it. The actor's calls (`Task.actor_id`) and its stop (ActorStop) go
   straight to the processor that holds the actor, outside the table (they take no slot: the start task's thread
   serves them); a call's result goes on to the scheduler as it comes. A call for an actor not held here is
   answered ACTOR_DIED at once; the scheduler answers those that were in a processor that died. When the processor's
   ActorReady names its own link, the scheduler sends the calls there and they never pass here; the start task's end
   then comes as a ResultSent (processor/outlet.py). The calls' results went before it on the link, and only the link
   has them (the journal keeps the end alone), so that processor is not retired until the scheduler names the end
   read (it read the link up to there), or the journal sends the end again itself (result_journal.py rule 3b): a
   retired processor is killed, and what ZeroMQ had not written on its link yet dies with it (the scheduler then
   heard the end, sent again, before the calls' results, which never came).
6. A result reaches the scheduler from its processor, on the processor's own link, when that processor's route is
   open (it then tells the agent with ResultSent: processor/result_route.py), else through the agent (TaskResult).
   Either way the task ends here when the agent hears of it (END), and the result journal keeps the result until
   the scheduler has read it, sending it again itself when that is in doubt (result_journal.py): so a result is
   never lost to a scheduler restart or to a processor that dies, and the agent is never on a result's way when
   the route is open. When the agent stopped the task meanwhile (rule 4), the scheduler takes whichever answer
   reaches it first.
7. Tasks staged behind a computing task that has computed `placement.STAGED_WAIT_SECONDS` (its function was tiny
   here until this call) are withdrawn from its processor (TaskCancel) and queued here again: another processor
   takes them, or the scheduler takes them back for an idle worker (TaskReturn), instead of their waiting for the
   long task to end. The processor's answer for such a task (CANCELED; or its result, when the turn passed to it
   before the TaskCancel came) belongs to the withdrawn copy and is dropped; the copy queued here answers for it.
8. A processor that still writes results it announced (a large result's readers follow its write:
   object_storage/followed_put.py) says so (ProcessorWriting true) before the task's end, whose result goes on at
   once; once its task ends it is WRITING: it takes no slot, no task and no resume, and is never retired, until it
   says the writes are done (ProcessorWriting false). A task that computes or is parked in it meanwhile is stopped
   in it on a cancel or a timeout (rule 4), not by killing it. Only a real death (a crash, the worker
   stopping) ends a write, and the object storage then tells its readers the object was not stored.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.protocol.processor_protocol import ProcessorOutcome, ProcessorTaskEvent, ProcessorTaskState, outcome
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
from scaler.worker.agent import reports
from scaler.worker.agent.estimates import RunTimeEstimates
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
    ResendResult,
    SayHello,
    SchedulerDisconnected,
    SendWorkerHeartbeat,
    SpawnProcessor,
    ToProcessor,
    ToScheduler,
)
from scaler.worker.agent.placement import STAGED_WAIT_SECONDS, Placement
from scaler.worker.agent.pool import MAX_START_FAILURES, ProcessorPool
from scaler.worker.agent.processor_table import HeldTask, ProcessorRecord, ProcessorState, ProcessorTable
from scaler.worker.agent.result_journal import ResultJournal
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
    "HeldTask",
    "KillProcessor",
    "LeaveRequested",
    "ProcessorDied",
    "ProcessorRecord",
    "ProcessorState",
    "ResendResult",
    "SayHello",
    "SchedulerDisconnected",
    "SendWorkerHeartbeat",
    "SpawnProcessor",
    "ToProcessor",
    "ToScheduler",
]

logger = logging.getLogger(__name__)

#: How long a task stopped among parked tasks may take to unwind before its processor is killed.
STOP_GRACE_SECONDS = 5.0

#: Members read on every event, as module constants (cheaper than from their enum class).
_STOPPING_PROCESSOR, _STARTING, _IDLE, _RUNNING = (
    ProcessorState.STOPPING,
    ProcessorState.STARTING,
    ProcessorState.IDLE,
    ProcessorState.RUNNING,
)
_QUEUED, _STAGED, _STOPPING = ProcessorTaskState.QUEUED, ProcessorTaskState.STAGED, ProcessorTaskState.STOPPING


class AgentCore:
    def __init__(self, settings: AgentSettings, started_at: float, processor_prefix: bytes = b"p") -> None:
        self.settings = settings
        self.effects: list[Effect] = []
        self.table = ProcessorTable(settings.nested_parents)
        self.tasks = self.table.tasks
        self.processors = self.table.processors
        self.placement = Placement(self.table, settings.slots, settings.max_staged_tasks, self.effects)
        self.pool = ProcessorPool(settings.slots, processor_prefix, keep_all=settings.lend_processors)
        self.estimates = RunTimeEstimates()
        self.journal = ResultJournal()
        self._storage_address = settings.object_storage_address
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
            )
        )
        self._leaving = False
        self._announced_capacity = 0
        #: the actors' calls sent to processors and not answered yet: the processor each is in (rule 5)
        self._actor_calls: dict[TaskID, bytes] = {}
        #: actors' start tasks whose end their processor sent on its own link, not named read by the scheduler yet:
        #: the processor each ended in, which is not retired meanwhile (rule 5)
        self._actor_ends: dict[TaskID, bytes] = {}
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
            elif isinstance(event, ProcessorDied):
                self._on_exit(event.processor_id, event.description, event.out_of_memory, event.lent_task)
            elif isinstance(event, AgentTick):
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
        return bool(len(self.placement)) or self.table.staged > 0

    def start(self) -> list[Effect]:
        """Effects for start-up: the hello, and the first processor, so it warms up while the hello travels."""
        self._follow_link(self.link.start(self.now))
        self._spawn()
        return self.handle(AgentTick(self.now))

    # ------------------------------------------------------------ counts

    @property
    def running(self) -> int:
        return self.table.running

    @property
    def parked(self) -> int:
        return self.table.parked

    @property
    def capacity(self) -> int:
        prefetch = self.estimates.prefetch()
        beside = self.parked + self.table.count(ProcessorState.HOSTING)  #: tasks that hold no slot (rules 1 and 5)
        return min(self.settings.slots + prefetch + beside, self.settings.max_held_tasks + beside)

    def status(self) -> m.WorkerStatus:
        queued = len(self.placement) + self.table.staged
        return m.WorkerStatus(queued=queued, running=self.running, blocked=self.parked)  # the wire says "blocked"

    # ------------------------------------------------------------ scheduler messages

    def _on_scheduler(self, message: m.Message) -> None:
        if self._leaving and isinstance(message, m.ProtocolError):
            return  # a leaving worker is forgotten on purpose: no new registration
        self._follow_link(self.link.on_message(message, self.now))
        if isinstance(message, m.HeartbeatEcho):
            self._on_echo(message)
        elif isinstance(message, m.Task):
            self._accept(message)
        elif isinstance(message, m.ActorStop):
            self._to_actor(message.actor_id, message)
        elif isinstance(message, m.TaskCancel):
            for task_id in message.task_ids:
                self._cancel(task_id)
        elif isinstance(message, m.TaskReturn):
            self._give_back(message.task_ids)
        elif isinstance(message, m.StreamCredit):
            held = self.tasks.get(message.task_id)
            if held is not None and held.processor is not None:  # none is granted before the stream's first value
                self._to_processor(self.processors[held.processor], message)
        elif isinstance(message, m.Shutdown):
            self._exit(EXIT_OK, f"the scheduler asked this worker to stop: {message.reason}")
        elif isinstance(message, m.ProtocolError) and message.kind is not m.ProtocolErrorKind.UNKNOWN_PEER:
            logger.warning("the scheduler refused a message: %s", message.reason)

    def _on_echo(self, echo: m.HeartbeatEcho) -> None:
        again = self.journal.acknowledged(echo.results_read)
        if self._actor_ends:  # read, or sent again by the agent: their processors may retire (rule 5)
            for task_id in (*echo.results_read, *(sent.task_id for sent in again)):
                self._actor_ends.pop(task_id, None)
        self._send_again(again)

    def _accept(self, task: m.Task) -> None:
        if task.actor_id:
            self._to_actor(task.actor_id, task)
        elif task.task_id not in self.tasks:
            self.placement.accept(task)

    def _to_actor(self, actor_id: TaskID, message: m.Task | m.ActorStop) -> None:
        """An actor's call or stop, to the processor whose computing task is the actor's start (rule 5)."""
        held = self.tasks.get(actor_id)
        if held is None or held.processor is None or held.state is _STOPPING:
            if isinstance(message, m.Task):
                reason = "its actor is not at the worker the call reached any more (it ended, or its processor died)"
                self._to_scheduler(m.TaskResult(message.task_id, m.ResultStatus.ACTOR_DIED, error_message=reason))
            return
        if isinstance(message, m.Task):
            self._actor_calls[message.task_id] = held.processor
        self._to_processor(self.processors[held.processor], message)

    def _follow_link(self, effects: list[LinkEffect]) -> None:
        for effect in effects:
            if isinstance(effect, SendHello):
                # what it holds, and what it finished without proof the scheduler read it (sent again below)
                live = (t for t, held in self.tasks.items() if held.state is not _STOPPING)
                held = (*live, *self.journal.task_ids()) if self.link.known_instance else ()
                self.effects.append(SayHello(held, self.link.known_instance))
            elif isinstance(effect, LinkHeartbeat):
                self.journal.heartbeat_sent()
                self.effects.append(SendWorkerHeartbeat(self.status(), effect.round_trip_seconds))
            elif isinstance(effect, Registered):
                self._on_registered(effect.reply)
                if effect.again:
                    self._send_unacknowledged()
            elif isinstance(effect, Forgotten):
                self._rejoin()
            elif isinstance(effect, RegistrationRefused):
                self._exit(EXIT_ERROR, effect.reason)
            elif isinstance(effect, Lost):
                self._exit(effect.exit_code, effect.reason)
            elif isinstance(effect, StillWaiting):
                logger.warning("%s", effect.text)

    def _on_registered(self, reply: m.HelloReply) -> None:
        if not self._storage_address:
            self._storage_address = reply.object_storage_address
        for processor in self.processors.values():
            if processor.state is not _STARTING:
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
        """Results the scheduler may not have read (sent since the last heartbeat it answered, or sent by processors
        and not named read) may have died with it: send them again (the scheduler drops a result it already has)."""
        if len(self.journal):
            logger.info("sending %d result(s) again to the scheduler", len(self.journal))
        for result in self.journal.send_all_again():
            self.effects.append(ToScheduler(result) if isinstance(result, m.TaskResult) else ResendResult(result))
        self._actor_ends.clear()  # sent again by the agent: their processors may retire (rule 5)

    def _send_again(self, results: list[m.ResultSent]) -> None:
        """Results processors sent on their own links, sent again by the agent (result_journal.py rule 3)."""
        for sent in results:
            self.effects.append(ResendResult(sent))

    def _cancel(self, task_id: TaskID) -> None:
        held = self.tasks.get(task_id)
        if (
            held is None or outcome(held.state, ProcessorTaskEvent.CANCEL) is ProcessorOutcome.IGNORE
        ):  # gone, or stopped already
            self._to_scheduler(m.TaskCancelConfirm(task_id, m.CancelOutcome.NOT_FOUND))
            return
        self._stop(held, "its task was cancelled")
        self._to_scheduler(m.TaskCancelConfirm(task_id, m.CancelOutcome.CANCELED))

    def _stop(self, held: HeldTask, reason: str) -> None:
        """End a held task here, whatever its state (CANCEL); the caller tells the scheduler how it ended."""
        task_id = held.task.task_id
        done = outcome(held.state, ProcessorTaskEvent.CANCEL)
        if done is ProcessorOutcome.DROP:  # queued here
            self.table.drop(task_id, self.now)
            return
        assert held.processor is not None
        processor = self.processors[held.processor]
        if done is ProcessorOutcome.STOP:
            if processor.parked or held.task.stream_credit or processor.writing:
                # computing among parked tasks, or a stream (its generator is closed where it waits), or beside writes
                # (rule 8): stopped in its processor; its slot stays taken until it is gone
                held.state, held.stopped_at = _STOPPING, self.now
                self._to_processor(processor, m.TaskCancel((task_id,)))
            else:
                self._kill(processor.processor_id, reason)  # the task with it; its staged tasks are queued again
        elif done in (ProcessorOutcome.WITHDRAW, ProcessorOutcome.STOP_PARKED):
            self.table.drop(task_id, self.now)
            if processor.state is _RUNNING or processor.parked or processor.writing:
                # staged, or parked among other tasks of its processor or beside its writes (rule 8): stopped there,
                # without taking them down
                self._to_processor(processor, m.TaskCancel((task_id,)))
            else:
                self._kill(processor.processor_id, reason)

    def _give_back(self, task_ids: tuple[TaskID, ...]) -> None:
        returned = []
        for task_id in task_ids:
            held = self.tasks.get(task_id)
            if held is not None and held.state is _QUEUED:
                self.table.drop(task_id, self.now)
                returned.append(task_id)
        self._to_scheduler(m.TaskReturn(tuple(returned)))

    # ------------------------------------------------------------ processor messages

    def _on_processor(self, processor_id: bytes, message: m.Message) -> None:
        processor = self.processors.get(processor_id)
        if processor is None or processor.state is _STOPPING_PROCESSOR:
            return
        if isinstance(message, m.ProcessorReady):
            processor.pid = message.pid
            self.table.set_state(processor, _IDLE)
            self.pool.started()
            if self.link.is_registered:
                self._configure(processor)
        elif isinstance(message, m.ResultSent):
            self._on_result_sent(processor, message)
        elif isinstance(message, m.TaskResult):
            if self._actor_calls.pop(message.task_id, None) is not None:
                self._to_scheduler(message)  # an actor's call: it took no slot (rule 5)
            else:
                self._on_result(processor, message)
        elif isinstance(message, (m.TaskLog, m.StreamItem)):
            held = self.tasks.get(message.task_id)
            if (held is not None and held.processor == processor_id) or message.task_id in self._actor_calls:
                self._to_scheduler(message)
        elif isinstance(message, m.ActorReady):
            self.table.host(processor, message.actor_id)
            self._to_scheduler(message)
        else:
            self._on_processor_state(processor, message)

    def _on_processor_state(self, processor: ProcessorRecord, message: m.Message) -> None:
        """What the processor says of itself: a task parks, asks to go on, or writes go on (rule 8)."""
        if isinstance(message, m.ProcessorBlocked):
            self.table.park(processor, message.task_id, self.now)
        elif isinstance(message, m.ProcessorResumeRequest):
            self.table.ask_resume(processor, message.task_id)
        elif isinstance(message, m.ProcessorWriting):
            self.table.set_writing(processor, message.writing)

    def _on_result(self, processor: ProcessorRecord, result: m.TaskResult) -> None:
        if processor.withdrawn and _answers_withdrawn(processor, result.task_id):
            return
        held = self.table.finish(processor, result.task_id, self.now)
        if held is None:
            return  # stopped or cancelled meanwhile; the scheduler was told already
        if held.task.actor is not None:
            self._forget_calls(processor.processor_id)  # the actor ended: calls still there are answered already
            self._to_scheduler(result)
            return
        self.estimates.learn(held.task.function_name, self.now - held.started_at)
        self._to_scheduler(result)

    def _on_result_sent(self, processor: ProcessorRecord, sent: m.ResultSent) -> None:
        """The processor sent the result to the scheduler itself (rule 5): the task ends here as for a TaskResult,
        and the journal keeps the result until the scheduler names it."""
        if processor.withdrawn and _answers_withdrawn(processor, sent.task_id):
            return
        held = self.table.finish(processor, sent.task_id, self.now)
        if held is None:
            return  # stopped or cancelled meanwhile: the scheduler was told, and takes whichever comes first
        if held.task.actor is not None:  # an actor whose calls came on the processor's link: its end went there too
            self._forget_calls(processor.processor_id)
            self._actor_ends[sent.task_id] = processor.processor_id  # kept until the scheduler read it (rule 5)
        else:  # the processor's own measure: its message may have waited for others, to leave with them (outlet.py)
            self.estimates.learn(held.task.function_name, sent.seconds or self.now - held.started_at)
        self.journal.sent_by_processor(processor.processor_id, sent)

    def _on_exit(self, processor_id: bytes, description: str, out_of_memory: str, lent_task: bytes | None) -> None:
        self._send_again(self.journal.processor_gone(processor_id))  # its messages may have died with it
        self._forget_ends(processor_id)
        if self.settings.lend_processors and self.link.is_registered:  # the scheduler fails its lent task with this
            known = lent_task is not None  # the lent task it computed, from its mark (worker/computing_mark.py)
            self._to_scheduler(m.ProcessorExited(processor_id, description, out_of_memory, lent_task or b"", known))
        processor = self.processors.get(processor_id)
        if lent_task and out_of_memory:  # the scheduler fails the lent task: this worker's log says why, as for its own
            pid = processor.pid if processor is not None else 0
            logger.warning("task %s: %s%s", lent_task.hex(), out_of_memory, reports.where(pid))
        if processor is None or processor.state is _STOPPING_PROCESSOR:
            self.table.remove(processor_id)
            return
        computing = self.tasks.get(processor.task_id) if processor.task_id is not None else None
        answered = computing is not None and computing.state is _STOPPING  #: stopped here, told already
        running, parked, staged = self.table.vacate(processor)
        self.table.remove(processor_id)
        self._forget_calls(processor_id)
        self.placement.queue_again(staged)
        if processor.state is _STARTING:
            self._start_failed(description)
            return
        died = reports.processor_died(processor.pid, running, parked, description, answered, out_of_memory)
        for report in died:
            self._to_scheduler(report)

    def _start_failed(self, description: str) -> None:
        failures = self.pool.failed_to_start()
        logger.error("processor failed while starting (%s)", description)
        if self.settings.has_preload:
            self._exit(EXIT_ERROR, f"a processor failed to start ({description}); check the --preload function")
        elif failures >= MAX_START_FAILURES:
            self._exit(EXIT_ERROR, f"processors failed to start {failures} times; last: {description}")

    # ------------------------------------------------------------ time

    def _on_tick(self) -> None:
        settings, now = self.settings, self.now
        self._follow_link(self.link.on_tick(now))
        if self._leaving:
            return
        for held in list(self.tasks.values()):
            if held.state is _STOPPING:
                if now - held.stopped_at > STOP_GRACE_SECONDS and held.processor is not None:
                    self._kill(held.processor, f"a task stopped in it did not end within {STOP_GRACE_SECONDS:g} s")
            elif held.state is _QUEUED or held.state is _STAGED or held.task.actor is not None:
                continue  # not started: its time has not begun; or an actor, which lives until stopped
            elif 0 < settings.task_timeout_seconds < now - held.started_at:
                self._time_out(held)
        if self.table.staged:
            self._withdraw_staged_behind_long_tasks()

    def _withdraw_staged_behind_long_tasks(self) -> None:
        """Rule 7: what waits in a processor behind a task computing for STAGED_WAIT_SECONDS is queued here again."""
        for processor in self.processors.values():
            if not processor.staged or processor.task_id is None:
                continue
            if self.now - self.tasks[processor.task_id].started_at < STAGED_WAIT_SECONDS:
                continue
            withdrawn = self.table.unstage(processor)
            self.placement.queue_again(withdrawn)
            self._to_processor(processor, m.TaskCancel(tuple(held.task.task_id for held in withdrawn)))

    def _time_out(self, held: HeldTask) -> None:
        self._stop(held, "its task timed out")
        self._to_scheduler(reports.timed_out(held.task.task_id, self.settings.task_timeout_seconds))

    # ------------------------------------------------------------ placing work on processors

    def _schedule(self) -> None:
        if self._leaving:
            return
        if self.link.is_registered:
            self.placement.place(self.now, self.estimates.staging_depth)
        self._keep_processors()
        self._announce_capacity()

    def _keep_processors(self) -> None:
        queued = len(self.placement)
        for _ in range(self.pool.to_start(self.table, queued)):
            self._spawn()
        kept = self._actor_ends.values() if self._actor_ends else ()
        for processor_id in self.pool.to_retire(self.table, queued, kept):
            self._kill(processor_id, "not needed any more")

    def _announce_capacity(self) -> None:
        if not self.link.is_registered:
            return
        capacity = self.capacity
        if capacity != self._announced_capacity:
            self._announced_capacity = capacity
            self._to_scheduler(m.WorkerCapacity(capacity))

    # ------------------------------------------------------------ helpers

    def _spawn(self) -> None:
        processor_id = self.pool.new_id()
        self.table.add(processor_id)
        self.effects.append(SpawnProcessor(processor_id))

    def _configure(self, processor: ProcessorRecord) -> None:
        self._to_processor(processor, m.HelloReply(True, object_storage_address=self._storage_address))

    def _kill(self, processor_id: bytes, reason: str, report_parked: bool = True) -> None:
        """Stop a processor. Its running task is dropped (the caller says how it ended); its parked tasks are
        reported lost, unless the whole worker stops (the scheduler re-dispatches what a leaving worker held)."""
        processor = self.processors.get(processor_id)
        if processor is None or processor.state is _STOPPING_PROCESSOR:
            return
        _, parked, staged = self.table.vacate(processor)
        self._forget_calls(processor_id)
        self.table.set_state(processor, _STOPPING_PROCESSOR)
        self.placement.queue_again(staged)
        self.effects.append(KillProcessor(processor_id, reason))
        if report_parked:
            why = f"the processor{reports.where(processor.pid)} it waited in was stopped because {reason}"
            for report in reports.lost(parked, why):
                self._to_scheduler(report)

    def _forget_calls(self, processor_id: bytes) -> None:
        """The processor's actor ended or it is gone: its calls are answered by the scheduler (rule 5)."""
        if self._actor_calls:
            self._actor_calls = {call: p for call, p in self._actor_calls.items() if p != processor_id}

    def _forget_ends(self, processor_id: bytes) -> None:
        """The processor is gone: the journal sends its results again (rule 5, result_journal.py rule 3a)."""
        if self._actor_ends:
            self._actor_ends = {task: p for task, p in self._actor_ends.items() if p != processor_id}

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
            self.journal.sent(message)

    def _to_processor(self, processor: ProcessorRecord, message: m.Message) -> None:
        self.effects.append(ToProcessor(processor.processor_id, message))


def _answers_withdrawn(processor: ProcessorRecord, task_id: TaskID) -> bool:
    """Is this answer of the processor's the one it owes for a task withdrawn from it (rule 7)? It is then dropped:
    the task is queued, or computes, elsewhere (or there again, sent anew: its next answer is the one)."""
    if task_id not in processor.withdrawn:
        return False
    processor.withdrawn.discard(task_id)
    return True
