"""A live task's record in the task table (`task_table.py`), small because a queue may hold millions of them.

Rules:
- A queued task is its body (the TaskBody's bytes its client sent) and values shared with other tasks: its traits
  (function, priority, capabilities, stream credit, actor, graph, large inputs, and its opening: when, in which state
  and why it reached the scheduler; one object for the tasks alike of a step). No decoded `Task` and no frame is kept:
  `task_of` makes the Task a worker is sent, which the shell writes as the frame its client wrote (task_frames.py),
  unless it is dispatched in the step it came (then its client's Task and frame are sent: `TaskTable.arrived`).
- Its dispatches (how many, on which link, since when) are slots of its own: every task that runs has them, and an
  object of their own would be one more for the collector to walk per task in flight (with 10,000 workers holding
  20,000 tasks, about 0.4 us a task). What few tasks ever have (a retry's history,
  a client gone, a memory floor, a cancel waiting for a give-back) lives in its `Extras`, made when one is first set,
  read and written as the record's own attributes: a queued task has eleven slots (120 bytes).
- A queued task's story has no entry of its own in the story book until it moves: its opening is the record's.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.protocol.frozen_values import constructor, quick_init
from scaler.protocol.ids import ClientID, GraphID, ObjectID, PeerID, TaskID
from scaler.protocol.messages import ActorSpec, Capabilities, Task, TaskInput
from scaler.scheduler.core.story_book import Words
from scaler.scheduler.core.task_state import TaskState

#: A dispatch queue entry: (-priority, turn, sequence, task id).
Entry = tuple[int, float, int, TaskID]
#: The turn of a task's entry until it is first queued (a turn is never negative)
NOT_QUEUED = -1.0


#: A task's opening: (monotonic time, wall time, state, cause) of its arrival at the scheduler. Its story's first entry
#: is made of it when the story grows (`TaskTable.opening_of`).
Opening = tuple[float, float, TaskState, Words]


@quick_init  # made for a few tasks each when many clients' submissions of one or two tasks interleave
@dataclass(frozen=True, slots=True)
class TaskTraits:
    """What a task is besides its id, client and body, and when and why it arrived: shared by the tasks added in one
    step alike (interned by the table: one object for the hundreds of tasks of a client's submissions in a burst, not
    seven slots each)."""

    function_name: str
    priority: int
    capabilities: Capabilities
    stream_credit: int
    actor: ActorSpec | None  #: an actor's start
    graph_id: GraphID  #: empty unless the task is a node of a graph
    #: the ids of its arguments its client stored as objects (Task.largeInputs): placed near them (object_hosts.py)
    large_inputs: tuple[ObjectID, ...]
    opening: Opening


class Extras:
    """What few tasks ever have."""

    __slots__ = ("cancel_when_returned", "client_gone", "lost_workers", "outgrew_bytes", "reads_data", "rerun")

    def __init__(self) -> None:
        self.lost_workers: tuple[str, ...] = ()
        self.client_gone = False
        self.outgrew_bytes = 0
        self.cancel_when_returned = False
        #: a task run again because its large result was lost before it was stored (unstored_results.py): the Task
        #: its worker is sent (its `result_id` the lost result's); its end is answered to nobody
        self.rerun: Task | None = None
        #: it was placed by its large inputs and counts among its worker's `readers` (object_hosts.py) until released
        self.reads_data = False


_NONE = Extras()  #: read as the extras of a task that has none (never written)


@dataclass(slots=True)
class TaskRecord:
    """A live task (the module's rules say what it keeps)."""

    body: bytes  #: its TaskBody's bytes, as its client sent them
    traits: TaskTraits
    state: TaskState
    #: its dispatch queue entry (DispatchQueue): its submission order (`sequence`), its turn (NOT_QUEUED until first
    #: queued), and whether an entry met in a heap is its current one
    entry: Entry
    #: its task's id and client, kept as plain slots: the core reads them about a dozen times per task, and a property
    #: would be a Python call each time
    task_id: TaskID
    client_id: ClientID
    worker: PeerID | None = None  #: set iff DISPATCHED or CANCELING
    #: the processor's link it was sent on (task_lifecycle.py); None while no worker holds it
    link: PeerID | None = None
    dispatched_at: float = 0.0  #: when it was last dispatched
    attempts: int = 0  #: times dispatched
    #: its rare facts, read and written through the properties below (`key` in dispatch_queue.py reads
    #: `outgrew_bytes` here, a few times per task)
    extras: Extras = _NONE

    @property
    def graph_id(self) -> GraphID:
        return self.traits.graph_id

    @property
    def opening(self) -> Opening:
        return self.traits.opening

    @property
    def submitted_at(self) -> float:
        return self.traits.opening[0]

    @property
    def sequence(self) -> int:
        """Submission order."""
        return self.entry[2]

    @property
    def lost_workers(self) -> tuple[str, ...]:
        """Why each of its workers went away."""
        return self.extras.lost_workers

    @lost_workers.setter
    def lost_workers(self, reasons: tuple[str, ...]) -> None:
        self._made().lost_workers = reasons

    @property
    def client_gone(self) -> bool:
        """Nobody waits for the outcome any more."""
        return self.extras.client_gone

    @client_gone.setter
    def client_gone(self, gone: bool) -> None:
        self._made().client_gone = gone

    @property
    def outgrew_bytes(self) -> int:
        """It ran out of memory on a worker with this many bytes: it runs again only on a bigger one (0: on any)."""
        return self.extras.outgrew_bytes

    @outgrew_bytes.setter
    def outgrew_bytes(self, size: int) -> None:
        self._made().outgrew_bytes = size

    @property
    def rerun(self) -> Task | None:
        """A task made again for its lost result: the Task to send (unstored_results.py)."""
        return self.extras.rerun

    @rerun.setter
    def rerun(self, task: Task | None) -> None:
        self._made().rerun = task

    @property
    def cancel_when_returned(self) -> bool:
        """A queued-only cancel asked it back from its processor: cancelled if given back unstarted."""
        return self.extras.cancel_when_returned

    @cancel_when_returned.setter
    def cancel_when_returned(self, asked: bool) -> None:
        self._made().cancel_when_returned = asked

    @property
    def reads_data(self) -> bool:
        """It was placed by its large inputs: its worker counts it among its `readers` until it lets it go."""
        return self.extras.reads_data

    @reads_data.setter
    def reads_data(self, reads: bool) -> None:
        self._made().reads_data = reads

    def placed(self, worker: PeerID, link: PeerID, now: float) -> int:
        """Dispatched now to `worker` on `link` (one call on the path of every task, not four properties): its
        dispatch count, this one included."""
        self.worker, self.link, self.dispatched_at = worker, link, now
        self.attempts += 1
        return self.attempts

    def released(self) -> None:
        """Its worker let it go (its link's record keeps it until its processor answers: link_sessions.py)."""
        self.worker = self.link = None

    def _made(self) -> Extras:
        extras = self.extras
        if extras is _NONE:
            extras = self.extras = Extras()
        return extras


def task_of(record: TaskRecord, dependencies: tuple[TaskID, ...] = (), inputs: tuple[TaskInput, ...] = ()) -> Task:
    """The Task a worker is sent for `record` (a graph node's `dependencies` and their results, `inputs`, come from its
    graph; a node's dependencies go each once): the one its client submitted, as no frame of it is kept (the shell
    writes it again)."""
    traits = record.traits
    return _new_task(
        record.task_id,
        record.client_id,
        record.body,
        traits.function_name,
        traits.priority,
        traits.capabilities,
        traits.graph_id,
        dependencies,
        inputs,
        traits.stream_credit,
        _NO_ACTOR_ID,
        traits.actor,
    )


_new_task = constructor(Task)
_NO_ACTOR_ID = TaskID(b"")
