"""The one table of live tasks (the dispatch queue of the QUEUED ones is `dispatch_queue.py`).

Invariants:
- `records` holds exactly the live tasks; `owned_by(c)` gives exactly the ids of the live tasks owned by c (its list
  in `_by_client` may also hold ids of its tasks that ended: a list costs a tenth of a set per task, and it is
  compacted whenever it is over twice, and a little more than, its client's live tasks).
- A record is in the dispatch queue iff its state is QUEUED (`dispatch_queue.py` says how the queue keeps it).
- Counts by state, per client and per function (and of QUEUED tasks per capability set and function) are
  kept exact on every change (`add`, `set_state`, `remove`, the queue's `push` / `left`), so the read model
  never walks the table; every change is also noted for the monitor feed's task transitions, up to
  `TRANSITIONS_PER_PUBLICATION` between two publications (the rest are counted), and written into the task's
  story with its cause (`stories`, bounded on its own).
- `records` and the `_by_client` lists are rebuilt in place once the table holds far fewer tasks than at its peak
  (`shrink_rule`): a drained queue of 1,000,000 tasks does not keep their hash tables.
- `arrived` holds, for the step under way only, the Tasks added in it that came with their client's frame (`wire`:
  the common shape, task_frames.py): one dispatched in the step it came is sent as that frame, not written again. The
  core empties it at each step's end, so a queued task keeps only its record.
"""

from __future__ import annotations

from scaler.protocol.frozen_values import constructor
from scaler.protocol.ids import ClientID, GraphID, ObjectID, TaskID
from scaler.protocol.messages import ActorSpec, Capabilities, Task, TaskTransition
from scaler.scheduler.core.dispatch_queue import HELD_INDEX, DispatchQueue
from scaler.scheduler.core.run_times import RunTimeBook
from scaler.scheduler.core.shrink_rule import ShrinkRule, rebuild
from scaler.scheduler.core.story_book import StoryBook, Words
from scaler.scheduler.core.task_record import NOT_QUEUED, Opening, TaskRecord, TaskTraits
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
#: `TaskState.QUEUED`, bound once: an enum class's attribute is read through the hook of `EnumType.__getattr__`
#: (Python 3.10 and 3.11), about ten times the cost of a global's
_QUEUED = TaskState.QUEUED


#: A transition made as `TaskTransition(...)` makes it, each slot set through its member descriptor (a few per task)
_new_transition = constructor(TaskTransition)
#: A client's list of task ids is looked at for ids of ended tasks every this many submissions, and on each end
#: once it is longer (a power of two)
COMPACTED_EVERY = 1024
_TraitsKey = tuple[str, int, Capabilities, int, ActorSpec | None, GraphID, tuple[ObjectID, ...]]
#: Distinct openings, and traits of an opening, kept for sharing; past it the table starts again (records keep theirs)
MAX_SHARED_TRAITS = 4096


class TaskTable:
    def __init__(self, ignore_capabilities: bool, stories: StoryBook | None = None) -> None:
        self.records: dict[TaskID, TaskRecord] = {}
        #: the Tasks added in this step with their client's frame, by id (the invariants above)
        self.arrived: dict[TaskID, Task] = {}
        #: each client's task ids, in submission order (and perhaps ended ones: `owned_by`)
        self._by_client: dict[ClientID, list[TaskID]] = {}
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
        #: when `records` and the `_by_client` lists are rebuilt (they never shrink on their own)
        self.shrink = ShrinkRule()
        #: each task's history with causes (the core's is bounded by the user's settings, a table's own by the
        #: defaults): a live task's opening entry is its record's (`opening_of`)
        self.stories = stories if stories is not None else StoryBook()
        self.stories.openings = self.opening_of
        #: the table was rebuilt since it was last empty: the finished stories are frozen once it empties
        self._drained_big = False
        #: the step tasks were added in last (its time and wall offset), and its openings by state and cause, each with
        #: its tasks' traits by (function name, priority, capabilities, stream credit, actor, graph): one object for
        #: the many tasks alike of a step, whichever clients' submissions it interleaves
        self._step_now, self._step_offset = -1.0, 0.0
        self._openings: dict[tuple[TaskState, Words], tuple[Opening, dict[_TraitsKey, TaskTraits]]] = {}

    def __len__(self) -> int:
        return len(self.records)

    @property
    def unplaced(self) -> int:
        """The live tasks no worker holds: queued, or waiting for the nodes they depend on."""
        counts = self.live_counts
        return counts[TaskState.WAITING] + counts[TaskState.QUEUED]

    def get(self, task_id: TaskID) -> TaskRecord | None:
        return self.records.get(task_id)

    def add(self, task: Task, state: TaskState, now: float, cause: Words = "") -> TaskRecord:
        offset, openings = self.wall_offset, self._openings
        if now != self._step_now or offset != self._step_offset:  # a new step: new openings (one per state and
            self._step_now, self._step_offset = now, offset  # cause) and their traits
            openings.clear()
            shared = None
        else:
            shared = openings.get((state, cause))
        if shared is None:
            if len(openings) >= MAX_SHARED_TRAITS:
                openings.clear()
            shared = openings[(state, cause)] = ((now, now + offset, state, cause), {})
        opening, alike = shared
        key = (
            task.function_name, task.priority, task.capabilities, task.stream_credit, task.actor, task.graph_id,
            task.large_inputs,
        )  # fmt: skip
        traits = alike.get(key) if alike else None  # a new opening's are made now
        if traits is None:
            if len(alike) >= MAX_SHARED_TRAITS:
                alike.clear()
            traits = alike[key] = TaskTraits(*key, opening)
        entry = (-task.priority, NOT_QUEUED, self._next_sequence, task.task_id)
        record = TaskRecord(task.body, traits, state, entry, task.task_id, task.client_id)
        self._next_sequence += 1
        self.records[task.task_id] = record
        if task.wire is not None:
            self.arrived[task.task_id] = task
        owned = self._by_client.get(task.client_id)
        if owned is None:  # not `setdefault(..., [])`: that makes a list for every task
            owned = self._by_client[task.client_id] = []
        owned.append(task.task_id)
        self._count(record, _LIVE_INDEX[state], 1)
        if not len(owned) & (COMPACTED_EVERY - 1):  # now and then: the ids of its tasks that ended go
            self._compact_owned(task.client_id, owned)
        self.live_counts[state] += 1
        self._note(record, state, now)
        return record

    def opening_of(self, task_id: TaskID) -> tuple[object, float, TaskState, Words] | None:
        """A live task's story as it opened, (queue key, wall time, state, cause), made from its record when its story
        grows (StoryBook): None when it is not live."""
        record = self.records.get(task_id)
        if record is None:
            return None
        _, wall_time, state, cause = record.traits.opening
        return self.queue.key(record), wall_time, state, cause

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
                self._held(record.traits.priority, -1)
            elif now_index == HELD_INDEX:
                self._held(record.traits.priority, 1)
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
        if record.state is _QUEUED:
            self.queue.left(record)
        if self.shrink.due(len(self.records)):
            self._rebuild()
        del self.records[record.task_id]
        if not self.records and self._drained_big:  # the last task of a big queue: the stories kept were made among
            self._drained_big = False  # its tasks' memory
            self.stories.freeze()
        if record.traits.actor is not None:
            self.actor_starts_ended += 1
        self.live_counts[record.state] -= 1
        was = _LIVE_INDEX[record.state]
        counts = self._move(record, was, _END_INDEX.get(ending, _FAILED_INDEX))
        owned = self._by_client.get(record.client_id)
        if owned is not None:
            live = counts[0] + counts[1] + counts[HELD_INDEX]  # `live_of`, its client's counts at hand
            if not live:
                del self._by_client[record.client_id]
            elif len(owned) > 2 * live + COMPACTED_EVERY:  # `_compact_owned`'s test, without its call per task
                owned[:] = self.owned_by(record.client_id)
        if was == HELD_INDEX:
            self._held(record.traits.priority, -1)
        self._note(record, ending, now, ran_on, run_seconds, peak_memory_bytes)

    def _rebuild(self) -> None:
        """The table holds far fewer tasks than at its peak: its containers get tables of their present size."""
        rebuild(self.records)
        for client, owned in list(self._by_client.items()):
            self._compact_owned(client, owned, at_once=True)
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
        if client not in self._by_client:
            self.client_counts.pop(client, None)

    def live_of(self, client: ClientID) -> int:
        """How many live tasks the client owns."""
        counts = self.client_counts.get(client)
        return counts[0] + counts[1] + counts[HELD_INDEX] if counts is not None else 0

    def owned_by(self, client: ClientID) -> list[TaskID]:
        """The ids of the client's live tasks, in submission order."""
        records = self.records
        live = (
            t for t in self._by_client.get(client, ()) if (r := records.get(t)) is not None and r.client_id == client
        )
        return list(dict.fromkeys(live))  # an id that ended and was submitted again is there twice

    def _compact_owned(self, client: ClientID, owned: list[TaskID], at_once: bool = False) -> None:
        """The client's list without the ids of its tasks that ended, once it holds over twice (and a little more than)
        as many as it has live tasks (`at_once`: whatever it holds); gone when none is live."""
        live = self.live_of(client)
        if not live:
            del self._by_client[client]
        elif at_once or len(owned) > 2 * live + COMPACTED_EVERY:
            owned[:] = self.owned_by(client)  # in place: a list given a far shorter content shrinks its own table

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
        function = self.function_counts.get(record.traits.function_name)
        if function is None:
            function = self.function_counts[record.traits.function_name] = [0] * 6
        function[index] += delta

    def _move(self, record: TaskRecord, was: int, index: int) -> list[int]:
        """`_count(record, was, -1)` then `_count(record, index, 1)`, each list found once: the client's counts."""
        client_id = record.client_id
        client = self.client_counts.get(client_id)
        if client is None:
            client = self.client_counts[client_id] = [0] * 6
        client[was] -= 1
        client[index] += 1
        if was == HELD_INDEX and client_id in self.queue.quotas:
            self.queue.quota_freed(client_id, self.records)
        name = record.traits.function_name
        function = self.function_counts.get(name)
        if function is None:
            function = self.function_counts[name] = [0] * 6
        function[was] -= 1
        function[index] += 1
        return client

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
            state = state._value_  # the member's plain slot: `value` is a Python-level property
        wall_time = now + self.wall_offset if self.wall_offset else 0.0
        if ran_on:
            noted = _new_transition(
                record.task_id,
                state,
                ran_on,
                record.traits.function_name,
                wall_time,
                run_seconds,
                peak_memory_bytes,
                record.client_id,
            )
        else:
            worker = record.worker if record.worker is not None else b""
            noted = _new_transition(
                record.task_id, state, worker, record.traits.function_name, wall_time, client_id=record.client_id
            )
        self.transitions.append(noted)
