"""The scheduler's record of a processor's link (pure): the tasks it sent there, each in its state in the processor
protocol (`scaler.protocol.processor_protocol`, the table the processor's own task line runs), and what the processor
is doing (hosting an actor, writing results readers follow, being killed). One record per link, and the link is the
only way a task reaches a processor: every move of a task held there is one of the table's, so staging, parking,
giving back, withdrawing behind a long task, stopping and a processor's loss each have one home.

The record is the scheduler's picture of the processor, which lags by the messages in flight (protocol rule 6): a
task sent to a link that computes nothing computes at once in it (SEND and TURN), one sent to a busy link is STAGED
and takes the turn when the task before it ends or parks, in priority order, then in the order sent. A processor
gives a parked task the turn back itself once its futures are done (ASK_RESUME and RESUME in one step: RESUMED, then
COMPUTING when the turn is free). The processor's answers decide (rule 5): its result or CANCELED answer ends a task
in whatever state the picture has it.

Rules of the record, beyond the table:
1. A task is held from its send until its answer (END), its handing back (RETURN), or the link's loss (GONE). A
   cancelled task stays held until its answer, whatever the cancel did in the picture (WITHDRAW keeps it, out of the
   turn's order: `withdrawn`), so that the link's loss still ends it.
2. The link's loss (its processor died or was killed) ends every task held there by the table (GONE), refined by the
   processor's mark when its agent read one (`worker/computing_mark.py`): the task the mark names computed and is to
   blame; the tasks sent before it that the picture has staged or computing ran, and their results died with the
   processor; those after it never started. Without a mark the picture's computing task is blamed.
   A processor the scheduler had killed (`killing`) is blamed for nothing: the task it was killed for was answered
   (cancelled, or timed out), and the others it held were not to blame.
3. A task that has computed `STAGED_WAIT_SECONDS` is long: what is staged behind it is asked back, once per long task
   (`behind_long`), and the link is long until that task leaves the turn (it ends, however it ends, parks, or is
   handed back): what the link stages, and its worker's prefetch, are offered again then.
4. A task computing alone in its processor is stopped by killing the processor (`stops_by_kill`: code stuck in a C
   call would never see the exception a stop raises in its thread); one computing among parked tasks, a streaming
   task (it hears the cancel between two values) and one beside results being written are stopped in the processor
   with a TaskCancel, and the processor is killed if it has not unwound after STOP_GRACE_SECONDS (`stuck`).
5. A task that has computed (parked included) longer than its worker's task timeout times out (`overdue`); an actor's
   start task never does: it lives until stopped.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from scaler.protocol.ids import PeerID, TaskID
from scaler.protocol.messages import ProcessorExited
from scaler.protocol.processor_protocol import OUTCOMES, ProcessorOutcome, ProcessorTaskEvent, ProcessorTaskState
from scaler.protocol.staging import STAGED_WAIT_SECONDS

#: How long a task stopped in its processor may take to unwind before the processor is killed (rule 4).
STOP_GRACE_SECONDS = 5.0

_STAGED, _COMPUTING, _PARKED, _RESUMED, _STOPPING, _STOPPING_PARKED = (
    ProcessorTaskState.STAGED,
    ProcessorTaskState.COMPUTING,
    ProcessorTaskState.PARKED,
    ProcessorTaskState.RESUMED,
    ProcessorTaskState.STOPPING,
    ProcessorTaskState.STOPPING_PARKED,
)
_END, _PARK, _ASK, _RESUME, _CANCEL, _GONE, _RETURN = (
    ProcessorTaskEvent.END,
    ProcessorTaskEvent.PARK,
    ProcessorTaskEvent.ASK_RESUME,
    ProcessorTaskEvent.RESUME,
    ProcessorTaskEvent.CANCEL,
    ProcessorTaskEvent.GONE,
    ProcessorTaskEvent.RETURN,
)
#: The states in which a task holds the link's computing turn.
_TURN_HOLDERS = frozenset({_COMPUTING, _STOPPING})
#: The states of a task waiting for the turn.
_WAITING_STATES = frozenset({_STAGED, _RESUMED})
#: The states of a parked task: it yields its slot.
_PARKED_STATES = frozenset({_PARKED, ProcessorTaskState.RESUMING, _STOPPING_PARKED})


class Fate(enum.Enum):
    """How a task held on a link that is lost ends (rule 2)."""

    BLAMED = "blamed"  #: it computed when the processor died: it fails with the processor's death (FAIL)
    RAN = "ran"  #: it ran before the death, and its result died with the processor: it runs again, a retry spent
    LOST = "lost"  #: it was parked: taken down by another task, it runs again, a retry spent (LOSE)
    REQUEUED = "requeued"  #: it never started there: queued again, no retry spent (REQUEUE)
    ANSWERED = "answered"  #: it was stopped or withdrawn: its cancel is answered (FORGET)


@dataclass(slots=True)
class LinkTask:
    state: ProcessorTaskState
    priority: int
    asked: bool = False  #: asked back (TaskReturn) and not ended
    withdrawn: bool = False  #: cancelled before it started: it never computes; its CANCELED answer is owed
    kind: str = ""  #: "actor": an actor's start task (it holds the turn while the actor lives); "stream"; "": plain
    started_at: float | None = None  #: when it first took the turn (its timeout counts from then, rule 5)
    stopped_at: float | None = None  #: when it was stopped in its processor (rule 4)


@dataclass(slots=True)
class ProcessorLink:
    """A processor's own link (docs/protocol.md section 3.7), and the tasks sent on it."""

    peer: PeerID
    worker: PeerID
    processor_id: bytes  #: its name within its worker
    max_staged: int = 0  #: how many tasks it may hold beyond the one it computes (its hello)
    #: the tasks sent on the link and not ended, in the order they were sent
    tasks: dict[TaskID, LinkTask] = field(default_factory=dict)
    computing: TaskID | None = None  #: the task that holds its computing turn in the picture
    #: the tasks waiting for the turn (STAGED, RESUMED), in the order they get it
    waiting: list[TaskID] = field(default_factory=list)
    parked: int = 0  #: tasks parked on nested futures: each yields its slot
    busy_since: float = 0.0  #: since when the task it computes computes
    #: the task it computes has computed STAGED_WAIT_SECONDS: what was staged behind it was asked back (rule 3); false
    #: again once that task leaves the turn
    long: bool = False
    hosting: TaskID | None = None  #: the actor it hosts (its start task, built): it takes no other task
    #: an actor's start task held here (building the actor, or hosting it): nothing is sent behind it
    actor_start: TaskID | None = None
    writing: bool = False  #: it still writes results readers follow (ProcessorWriting): it is not killed
    #: tasks stopped here (`stopped`), at most: `stuck` looks at the tasks only while it is not 0, and sets it back
    #: to 0 once none held here is stopped (the tick asks every busy link, most of which never stopped a task)
    stops: int = 0
    killing: str = ""  #: why the scheduler had it killed ("" while not): its loss blames no task (rule 2)
    #: it ended while it held tasks: since when the scheduler waits for both its link's closing and its agent's word
    closed_at: float | None = None
    link_closed: bool = False  #: its link closed (after all it sent)
    exited: ProcessorExited | None = None  #: its agent's word that it ended, and why
    #: the results read on its link since its worker's last heartbeat, which an echo on the link names (the processor
    #: keeps each until then, for a restart)
    results_read: list[TaskID] = field(default_factory=list)
    #: tasks its hello named that this instance did not know (from before a restart), not adopted yet
    held: set[TaskID] = field(default_factory=set)
    #: those of them it says are parked on nested futures: each yields its slot once adopted
    held_parked: set[TaskID] = field(default_factory=set)
    #: the links sent a task since the tick last found them holding none (`LinkSessions.holding`, shared by every link
    #: of the scheduler): a send or an adoption enters it, so that the tick looks at these links, not at every one
    holding: dict[PeerID, None] | None = field(default=None, repr=False, compare=False)

    # ------------------------------------------------------------ events

    def send(self, task_id: TaskID, priority: int, now: float, kind: str = "") -> ProcessorTaskState:
        """SEND: computing at once when the link computes nothing (and TURN), else staged in priority order."""
        self.tasks[task_id] = held = LinkTask(_STAGED, priority, kind=kind)
        if self.holding is not None:
            self.holding[self.peer] = None
        if kind == "actor":
            self.actor_start = task_id
        if self.computing is None and not self.waiting:
            self._start(task_id, held, now)
        else:
            self._await_turn(task_id, held)
        return held.state

    def adopt(self, task_id: TaskID, priority: int, parked: bool, now: float) -> None:
        """A task its hello named after a restart, adopted here: parked, or computing first in its order."""
        held = self.tasks[task_id] = LinkTask(_PARKED if parked else _STAGED, priority, started_at=now)
        self.tasks = {task_id: self.tasks.pop(task_id), **self.tasks}  # the oldest sent there
        if self.holding is not None:
            self.holding[self.peer] = None
        if parked:
            self.parked += 1
        elif self.computing is None:
            self._start(task_id, held, now)
        else:
            self.waiting.insert(0, task_id)

    def end(self, task_id: TaskID, now: float) -> ProcessorOutcome:
        """END: the processor answered (a result, or CANCELED): FINISH or UNWOUND; IGNORE for a task not held here.
        The turn passes on if it held it."""
        held = self.tasks.pop(task_id, None)
        if held is None:
            return ProcessorOutcome.IGNORE
        done = OUTCOMES[_END][held.state]
        if self.computing == task_id:  # the common case, on the path of every task: `_pass_turn` inline
            waiting = self.waiting
            if waiting:
                following = waiting.pop(0)
                self._start(following, self.tasks[following], now)
            else:
                self.computing, self.long = None, False
        else:
            self._leave(task_id, held, now)
        if self.actor_start == task_id:
            self.hosting = self.actor_start = None  # the actor ended: the processor takes tasks again
        return done

    def park(self, task_id: TaskID, now: float) -> bool:
        """PARK (ProcessorBlocked): it yields its slot; the turn passes on. False when it does not park here. A task
        the picture has waiting for the turn (staged, or resumed) took it first in its processor (it came there, or
        went on, when the turn was free, or ahead of a lower priority): TURN for it first (rule 6 of the protocol: the
        processor knows best)."""
        held = self.tasks.get(task_id)
        if held is not None and held.state in _WAITING_STATES and not held.withdrawn:
            self._take_turn_first(task_id, held, now)
        if held is None or OUTCOMES[_PARK][held.state] is not ProcessorOutcome.PARK:
            return False
        self._pass_turn(task_id, now)
        held.state = _PARKED
        self.parked += 1
        return True

    def resume(self, task_id: TaskID, now: float) -> bool:
        """ASK_RESUME (ProcessorResumeRequest), and RESUME at once: its processor gives it the turn back itself. It
        takes its slot again. False when it was not parked here."""
        held = self.tasks.get(task_id)
        if held is None or OUTCOMES[_ASK][held.state] is not ProcessorOutcome.ASK:
            return False
        self.parked -= 1
        held.state = _RESUMED
        self.waiting.append(task_id)
        if self.computing is None:
            self._next_turn(now)
        return True

    def cancel(self, task_id: TaskID) -> ProcessorOutcome:
        """CANCEL (a TaskCancel sent on the link): WITHDRAW, STOP, STOP_PARKED, or IGNORE (stopped already, or not
        held here)."""
        held = self.tasks.get(task_id)
        if held is None or held.withdrawn:
            return ProcessorOutcome.IGNORE
        done = OUTCOMES[_CANCEL][held.state]
        if done is ProcessorOutcome.WITHDRAW:
            self.waiting.remove(task_id)
            held.withdrawn = True
        elif done is ProcessorOutcome.STOP:
            held.state = _STOPPING
        elif done is ProcessorOutcome.STOP_PARKED:
            if held.state is _RESUMED:
                self.waiting.remove(task_id)
                self.parked += 1
            held.state = _STOPPING_PARKED
        return done

    def ask_back(self, task_ids: tuple[TaskID, ...]) -> tuple[TaskID, ...]:
        """RETURN asked (a TaskReturn sent on the link): those of them held here, marked asked."""
        asked = []
        for task_id in task_ids:
            held = self.tasks.get(task_id)
            if held is not None:
                held.asked = True
                asked.append(task_id)
        return tuple(asked)

    def handed_back(self, task_id: TaskID, now: float) -> bool:
        """The processor gave the task back unstarted (its TaskReturn): True when it was held here; the caller queues
        it again. The processor knows best: one the picture had computing did not start."""
        held = self.tasks.pop(task_id, None)
        if held is None:
            return False
        self._leave(task_id, held, now)
        if self.actor_start == task_id:
            self.actor_start = None
        return True

    def gone(self, exited: ProcessorExited | None) -> list[tuple[TaskID, Fate]]:
        """GONE: the processor is gone; how each task held here ends (rule 2), in the order they were sent. The record
        holds nothing afterwards."""
        order = [task_id for task_id, held in self.tasks.items() if held.state not in _PARKED_STATES]
        blamed, ran = self._blame(order, exited)
        fates: list[tuple[TaskID, Fate]] = []
        for task_id, held in self.tasks.items():
            done = OUTCOMES[_GONE][held.state]
            if held.withdrawn or done is ProcessorOutcome.FORGET:
                fates.append((task_id, Fate.ANSWERED))
            elif task_id == blamed:
                fates.append((task_id, Fate.BLAMED))
            elif done is ProcessorOutcome.LOSE or task_id in ran:
                fates.append((task_id, Fate.LOST if done is ProcessorOutcome.LOSE else Fate.RAN))
            else:  # REQUEUE, or a computing task of the picture that the mark says did not start
                fates.append((task_id, Fate.REQUEUED))
        self.tasks.clear()
        self.waiting.clear()
        self.computing, self.parked, self.hosting, self.actor_start, self.long = None, 0, None, None, False
        return fates

    def behind_long(self, now: float) -> tuple[TaskID, ...] | None:
        """Rule 3: the staged tasks to ask back now that the task computing here has computed STAGED_WAIT_SECONDS with
        tasks waiting behind it (once per long task: the link is long from now on); None when it is not so now."""
        if self.long or not self.waiting or self.computing is None or now - self.busy_since < STAGED_WAIT_SECONDS:
            return None
        self.long = True
        return tuple(t for t in self.waiting if self.tasks[t].state is _STAGED and not self.tasks[t].asked)

    def host(self, actor_id: TaskID) -> bool:
        """The actor whose start task computes here is built (ActorReady): the processor hosts it while it lives, and
        takes no other task. False when that task is not held here."""
        if actor_id not in self.tasks:
            return False
        self.hosting = self.actor_start = actor_id
        return True

    def stops_by_kill(self, task_id: TaskID) -> bool:
        """Rule 4: whether a cancel or a timeout of this task kills its processor (rather than stopping it there)."""
        held = self.tasks.get(task_id)
        return (
            held is not None
            and held.state is _COMPUTING
            and self.parked == 0
            and held.kind != "stream"
            and not self.writing
        )

    def stopped(self, task_id: TaskID, now: float) -> None:
        """The task is stopped in its processor (a TaskCancel sent for a timeout, rule 4): STOPPING, or STOPPING_PARKED
        for a parked one, until its answer."""
        self.cancel(task_id)
        held = self.tasks.get(task_id)
        if held is not None:
            held.stopped_at = now
            self.stops += 1

    def stuck(self, now: float) -> bool:
        """Rule 4: a task stopped in its processor has not unwound after STOP_GRACE_SECONDS (and it writes nothing)."""
        if not self.stops:
            return False
        stopped = [held.stopped_at for held in self.tasks.values() if held.stopped_at is not None]
        if not stopped:
            self.stops = 0
        return not self.writing and any(now - at > STOP_GRACE_SECONDS for at in stopped)

    def overdue(self, now: float, timeout_seconds: float) -> list[TaskID]:
        """Rule 5: the tasks that have computed longer than `timeout_seconds`, not stopped already."""
        return [
            task_id
            for task_id, held in self.tasks.items()
            if held.started_at is not None
            and now - held.started_at > timeout_seconds
            and held.kind != "actor"
            and held.state not in (_STOPPING, _STOPPING_PARKED)
            and not held.withdrawn
        ]

    # ------------------------------------------------------------ counts

    @property
    def unparked(self) -> int:
        """Tasks held here that are not parked: the one computing and those staged behind it."""
        return len(self.tasks) - self.parked

    @property
    def holds_actor(self) -> bool:
        """Whether an actor's start task is held here (building the actor, or hosting it): it holds the turn while the
        actor lives, so nothing is sent behind it."""
        return self.actor_start is not None

    def is_idle(self) -> bool:
        """It holds nothing and does nothing: it may be retired."""
        return not self.tasks and not self.held and not self.writing and not self.killing

    def is_staged(self, task_id: TaskID) -> bool:
        held = self.tasks.get(task_id)
        return held is not None and held.state is _STAGED and not held.withdrawn

    # ------------------------------------------------------------ helpers

    def _start(self, task_id: TaskID, held: LinkTask, now: float) -> None:
        held.state = _COMPUTING
        self.computing, self.busy_since, self.long = task_id, now, False
        if held.started_at is None:
            held.started_at = now

    def _await_turn(self, task_id: TaskID, held: LinkTask) -> None:
        """In priority order, ahead of the staged tasks of a lower priority (as the processor's task line does)."""
        waiting = self.waiting
        at = len(waiting)
        while (
            at and self.tasks[waiting[at - 1]].state is _STAGED and self.tasks[waiting[at - 1]].priority < held.priority
        ):
            at -= 1
        waiting.insert(at, task_id)

    def _take_turn_first(self, task_id: TaskID, held: LinkTask, now: float) -> None:
        """The processor gave this waiting task the turn: the task the picture has computing, if it has not started
        there either, waits for the turn again, first."""
        computing = self.tasks.get(self.computing) if self.computing is not None else None
        if computing is not None and computing.state is _COMPUTING and self.computing is not None:
            computing.state, computing.started_at = _STAGED, None
            self.waiting.insert(0, self.computing)
            self.computing = None
        if self.computing is None:
            self.waiting.remove(task_id)
            self._start(task_id, held, now)

    def _leave(self, task_id: TaskID, held: LinkTask, now: float) -> None:
        """A task is held here no more: out of the turn's order, or the turn passes on."""
        if held.state in _PARKED_STATES:
            self.parked -= 1
        if self.computing == task_id:
            self._pass_turn(task_id, now)
        elif task_id in self.waiting:
            self.waiting.remove(task_id)

    def _pass_turn(self, task_id: TaskID, now: float) -> None:
        if self.computing == task_id:
            self.computing, self.long = None, False
            self._next_turn(now)

    def _next_turn(self, now: float) -> None:
        """TURN: the first task waiting for the turn takes it (START, or GO_ON for a resumed one)."""
        if self.waiting:
            task_id = self.waiting.pop(0)
            self._start(task_id, self.tasks[task_id], now)

    def _blame(self, order: list[TaskID], exited: ProcessorExited | None) -> tuple[TaskID | None, set[TaskID]]:
        """Rule 2: the task to blame, and those that ran before it (their results died with the processor)."""
        if exited is not None and exited.computing_task_known:  # its mark names the task it computed (if any)
            named = TaskID(exited.computing_task)
            blamed = named if named in self.tasks else None
            ran = set(order[: order.index(blamed)] if blamed in order else order[:1])
        else:
            blamed, ran = self.computing if self.computing is not None else (order[0] if order else None), set()
        return (None if self.killing else blamed), ran
