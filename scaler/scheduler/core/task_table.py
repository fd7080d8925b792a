"""The one table of live tasks (the dispatch queue of the QUEUED ones is `dispatch_queue.py`).

Invariants:
- `records` holds exactly the live tasks; `by_client[c]` is exactly the ids of live tasks owned by c.
- A record is in the dispatch queue iff its state is QUEUED (`dispatch_queue.py` says how the queue keeps it).
- Counts by state, per client and per function (and of QUEUED tasks per capability set and function) are
  kept exact on every change (`add`, `set_state`, `remove`, the queue's `push` / `left`), so the read model
  never walks the table; every change is also noted for the monitor feed's task transitions, up to
  `TRANSITIONS_PER_PUBLICATION` between two publications (the rest are counted), and written into the task's
  story with its cause (`stories`, bounded on its own).
- `records` and the `by_client` sets are rebuilt in place once the table holds far fewer tasks than at its peak
  (`shrink_rule`): a drained queue of 1,000,000 tasks does not keep their hash tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.protocol.ids import ClientID, GraphID, PeerID, TaskID
from scaler.protocol.messages import Task, TaskTransition
from scaler.scheduler.core.dispatch_queue import HELD_INDEX, DispatchQueue
from scaler.scheduler.core.run_times import RunTimeBook
from scaler.scheduler.core.shrink_rule import ShrinkRule, rebuild
from scaler.scheduler.core.story_book import StoryBook, Words
from scaler.scheduler.core.task_state import TaskState

#: Task transitions kept for the monitor feed between two publications; later ones are only counted.
TRANSITIONS_PER_PUBLICATION = 1000
#: Index in a counts list of each live state (CANCELING counts as running: it holds its worker's slot).
_LIVE_INDEX = {
    TaskState.WAITING: 0,
    TaskState.QUEUED: 1,
    TaskState.DISPATCHED: HELD_INDEX,
    TaskState.CANCELING: HELD_INDEX,
}
#: Index of each way a task ends: succeeded 3, failed 4 (any failure), canceled 5.
_END_INDEX = {"success": 3, "canceled": 5}
_FAILED_INDEX = 4


@dataclass(slots=True)
class TaskRecord:
    task: Task  #: the wire value sent to workers (graph nodes get their inputs attached when ready)
    state: TaskState
    sequence: int  #: submission order
    submitted_at: float
    #: its task's id, client and graph (never changed by a new `task`), kept as plain slots: the core reads them about
    #: a dozen times per task, and a property would be a Python call each time
    task_id: TaskID
    client_id: ClientID
    graph_id: GraphID
    worker: PeerID | None = None  #: set iff DISPATCHED or CANCELING
    attempts: int = 0  #: times dispatched
    lost_workers: tuple[str, ...] = ()  #: why each of its workers went away (a tuple: no list per task)
    client_gone: bool = False  #: nobody waits for the outcome any more
    dispatched_at: float = 0.0
    turn: float = -1.0  #: its place in its client's line (DispatchQueue); -1 until first queued
    #: it ran out of memory on a worker with this many bytes: it runs again only on a bigger one (0: on any)
    outgrew_bytes: int = 0
    #: the processor's link it was sent on (task_lifecycle.py); None while no worker holds it
    link: PeerID | None = None
    #: a queued-only cancel asked it back from its processor: cancelled if given back unstarted
    cancel_when_returned: bool = False


class TaskTable:
    def __init__(self, ignore_capabilities: bool) -> None:
        self.records: dict[TaskID, TaskRecord] = {}
        self.by_client: dict[ClientID, set[TaskID]] = {}
        self._next_sequence = 0
        self.succeeded = 0
        self.failed = 0
        self.canceled = 0
        self.worker_died = 0
        self.not_found = 0  #: cancels naming a task the scheduler did not know
        #: live tasks per state
        self.live_counts: dict[TaskState, int] = dict.fromkeys(TaskState, 0)
        #: actors' start tasks that ended, ever: the actors' sweep (core/actors.py) runs only when it moved
        self.actor_starts_ended = 0
        #: DISPATCHED and CANCELING tasks per priority (overtaking.py)
        self.held_by_priority: dict[int, int] = {}
        #: [waiting, queued, running, succeeded, failed, canceled] per client and per function
        self.client_counts: dict[ClientID, list[int]] = {}
        self.queue = DispatchQueue(ignore_capabilities, self.client_counts)
        self.function_counts: dict[str, list[int]] = {}
        #: transitions noted since the last publication; a state is a TaskState value or how the task ended
        self.transitions: list[TaskTransition] = []
        self.transitions_dropped = 0
        #: wall-clock minus monotonic time, set by the core from the shell's ticks; stamps the transitions
        self.wall_offset = 0.0
        #: run time per function and capability set, learned from the tasks that succeeded (TaskLifecycle)
        self.run_times = RunTimeBook()
        #: when `records` and the `by_client` sets are rebuilt (they never shrink on their own)
        self.shrink = ShrinkRule()
        #: each task's history with causes (the core replaces it with one bounded by the user's settings)
        self.stories = StoryBook()
        #: the table was rebuilt since it was last empty: the stories are compacted again once it empties
        self._drained_big = False
        #: (now, wall offset, their sum): the wall time the tasks added at `now` open their stories with
        self._wall = (-1.0, 0.0, 0.0)

    def __len__(self) -> int:
        return len(self.records)

    def get(self, task_id: TaskID) -> TaskRecord | None:
        return self.records.get(task_id)

    def add(self, task: Task, state: TaskState, now: float, cause: Words = "") -> TaskRecord:
        record = TaskRecord(task, state, self._next_sequence, now, task.task_id, task.client_id, task.graph_id)
        if self.stories.enabled:
            wall = self._wall
            if wall[0] != now or wall[1] != self.wall_offset:  # one float for the tasks of a step, not one each
                wall = self._wall = (now, self.wall_offset, now + self.wall_offset)
            self.stories.opened(task.task_id, self.queue.key(record), wall[2], state, cause)
        self._next_sequence += 1
        self.records[task.task_id] = record
        owned = self.by_client.get(task.client_id)
        if owned is None:  # not `setdefault(..., set())`: that makes a set for every task
            owned = self.by_client[task.client_id] = set()
        owned.add(task.task_id)
        self._count(record, _LIVE_INDEX[state], 1)
        self.live_counts[state] += 1
        self._note(record, state, now)
        return record

    def set_state(self, record: TaskRecord, state: TaskState, now: float, cause: Words = "") -> None:
        """The one way a live task changes state (its record's `worker` is set first when it has one); `cause`:
        why, for its story."""
        if self.stories.enabled:
            where = record.worker if record.worker is not None else ""
            self.stories.note(record.task_id, now + self.wall_offset, state, where, cause)
        old = record.state
        self.live_counts[old] -= 1
        self.live_counts[state] += 1
        was, now_index = _LIVE_INDEX[old], _LIVE_INDEX[state]
        if was != now_index:
            self._move(record, was, now_index)
            if was == HELD_INDEX:
                self._held(record.task.priority, -1)
            elif now_index == HELD_INDEX:
                self._held(record.task.priority, 1)
        record.state = state
        self._note(record, state, now)

    def remove(
        self,
        record: TaskRecord,
        ending: str,
        now: float,
        ran_on: bytes = b"",
        run_seconds: float = 0.0,
        peak_memory_bytes: int = 0,
        cause: Words = "",
    ) -> None:
        """A task ended: `ending` is a ResultStatus value or "canceled"; when a worker's result ended it, `ran_on`
        is that worker, `run_seconds` how long the task held it and `peak_memory_bytes` its profiled peak (plain
        values, not a record: nothing is allocated for a transition the feed's bound leaves out); `cause`: why,
        for its story."""
        if self.stories.enabled:
            self.stories.ended(record.task_id, now, now + self.wall_offset, ending, ran_on, cause)
        if record.state is TaskState.QUEUED:
            self.queue.left(record)
        if self.shrink.due(len(self.records)):
            self._rebuild()
        del self.records[record.task_id]
        if not self.records and self._drained_big:  # the last task of a big queue: the stories kept since the last
            self._drained_big = False  # rebuild were made among its tasks' memory too
            self.stories.compact()
        if record.task.actor is not None:
            self.actor_starts_ended += 1
        owned = self.by_client.get(record.client_id)
        if owned is not None:
            owned.discard(record.task_id)
            if not owned:
                del self.by_client[record.client_id]
        self.live_counts[record.state] -= 1
        was = _LIVE_INDEX[record.state]
        self._move(record, was, _END_INDEX.get(ending, _FAILED_INDEX))
        if was == HELD_INDEX:
            self._held(record.task.priority, -1)
        self._note(record, ending, now, ran_on, run_seconds, peak_memory_bytes)

    def _rebuild(self) -> None:
        """The table holds far fewer tasks than at its peak: its containers get tables of their present size."""
        rebuild(self.records)
        for owned in self.by_client.values():
            rebuild(owned)
        self.stories.compact()  # its kept stories would pin the memory the drained tasks filled
        self._drained_big = True

    def _held(self, priority: int, delta: int) -> None:
        count = self.held_by_priority.get(priority, 0) + delta
        if count:
            self.held_by_priority[priority] = count
        else:
            del self.held_by_priority[priority]

    def lowest_held_priority(self) -> int | None:
        """The lowest priority of a task held at a worker (None: no task is)."""
        return min(self.held_by_priority) if self.held_by_priority else None

    def forget_client(self, client: ClientID) -> None:
        """The client left: its counts go once its last task ended."""
        if client not in self.by_client:
            self.client_counts.pop(client, None)

    def take_transitions(self) -> tuple[list[TaskTransition], int]:
        """The transitions noted since the last call, and how many were left out."""
        taken, dropped = self.transitions, self.transitions_dropped
        self.transitions, self.transitions_dropped = [], 0
        return taken, dropped

    def _count(self, record: TaskRecord, index: int, delta: int) -> None:
        client = self.client_counts.get(record.client_id)
        if client is None:
            client = self.client_counts[record.client_id] = [0] * 6
        client[index] += delta
        if index == HELD_INDEX and delta < 0 and record.client_id in self.queue.quotas:
            self.queue.quota_freed(record.client_id, self.records)
        function = self.function_counts.get(record.task.function_name)
        if function is None:
            function = self.function_counts[record.task.function_name] = [0] * 6
        function[index] += delta

    def _move(self, record: TaskRecord, was: int, index: int) -> None:
        """`_count(record, was, -1)` then `_count(record, index, 1)`, each list found once."""
        client_id = record.task.client_id
        client = self.client_counts.get(client_id)
        if client is None:
            client = self.client_counts[client_id] = [0] * 6
        client[was] -= 1
        client[index] += 1
        if was == HELD_INDEX and client_id in self.queue.quotas:
            self.queue.quota_freed(client_id, self.records)
        name = record.task.function_name
        function = self.function_counts.get(name)
        if function is None:
            function = self.function_counts[name] = [0] * 6
        function[was] -= 1
        function[index] += 1

    def _note(
        self,
        record: TaskRecord,
        state: TaskState | str,
        now: float,
        ran_on: bytes = b"",
        run_seconds: float = 0.0,
        peak_memory_bytes: int = 0,
    ) -> None:
        """`state`: a live state, or how the task ended (worded only for a transition kept: most are only counted
        while tasks stream through)."""
        if len(self.transitions) >= TRANSITIONS_PER_PUBLICATION:
            self.transitions_dropped += 1
            return
        if isinstance(state, TaskState):
            state = state.value
        wall_time = now + self.wall_offset if self.wall_offset else 0.0
        if ran_on:
            noted = TaskTransition(
                record.task_id,
                state,
                ran_on,
                record.task.function_name,
                wall_time,
                run_seconds,
                peak_memory_bytes,
                record.client_id,
            )
        else:
            worker = record.worker if record.worker is not None else b""
            noted = TaskTransition(
                record.task_id, state, worker, record.task.function_name, wall_time, client_id=record.client_id
            )
        self.transitions.append(noted)
