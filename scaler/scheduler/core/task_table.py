"""The one table of live tasks, and the dispatch queue of the QUEUED ones.

Every change of a task's state goes through `add`, `move` or `remove`, which keep the counts
(`tally`) and, while the monitor feed reads them, the transition log (`log`).

Invariants:
- `records` holds exactly the live tasks; `by_client[c]` is exactly the ids of live tasks owned by c.
- `tally.total` counts, per live state, exactly the records in that state.
- A record is in the dispatch queue iff its state is QUEUED (entries of tasks that left QUEUED are
  dropped lazily when they reach the top of a heap; `queued_count` is kept exact).
- Queue order: higher priority first, then submission order (a re-queued task keeps its place).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field

from scaler.protocol.feed import TaskStatus
from scaler.protocol.ids import ClientID, GraphID, PeerID, TaskID
from scaler.protocol.messages import Capabilities, Task
from scaler.scheduler.core.monitor_feed import TransitionLog
from scaler.scheduler.core.task_state import STATUS_OF_STATE, TaskState
from scaler.scheduler.core.task_tally import TaskTally


@dataclass(slots=True)
class TaskRecord:
    task: Task  #: the wire value sent to workers (graph nodes get their inputs attached when ready)
    state: TaskState
    sequence: int  #: submission order
    submitted_at: float
    worker: PeerID | None = None  #: set iff DISPATCHED or CANCELING
    attempts: int = 0  #: times dispatched
    lost_workers: list[str] = field(default_factory=list)  #: why each of its workers went away
    client_gone: bool = False  #: nobody waits for the outcome any more
    dispatched_at: float = 0.0

    @property
    def task_id(self) -> TaskID:
        return self.task.task_id

    @property
    def client_id(self) -> ClientID:
        return self.task.client_id

    @property
    def graph_id(self) -> GraphID:
        return self.task.graph_id

    @property
    def queue_key(self) -> Capabilities:
        return self.task.capabilities


class DispatchQueue:
    """Priority heaps of QUEUED task ids, one per capability set."""

    def __init__(self, ignore_capabilities: bool) -> None:
        self._ignore_capabilities = ignore_capabilities
        self._heaps: dict[Capabilities, list[tuple[int, int, TaskID]]] = {}
        #: exact number of QUEUED tasks per capability set
        self.queued_count: dict[Capabilities, int] = {}

    def key(self, record: TaskRecord) -> Capabilities:
        return () if self._ignore_capabilities else record.queue_key

    def push(self, record: TaskRecord) -> None:
        key = self.key(record)
        heapq.heappush(self._heaps.setdefault(key, []), (-record.task.priority, record.sequence, record.task_id))
        self.queued_count[key] = self.queued_count.get(key, 0) + 1

    def left(self, record: TaskRecord) -> None:
        """A QUEUED record left the queue some other way than `pop` (cancel, failure)."""
        key = self.key(record)
        count = self.queued_count[key] - 1
        if count:
            self.queued_count[key] = count
        else:
            del self.queued_count[key]

    def __len__(self) -> int:
        return sum(self.queued_count.values())

    def groups(self) -> Iterator[tuple[Capabilities, int]]:
        return iter(self.queued_count.items())

    def peek(self, key: Capabilities, records: dict[TaskID, TaskRecord]) -> tuple[int, int, TaskID] | None:
        heap = self._heaps.get(key)
        while heap:
            entry = heap[0]
            record = records.get(entry[2])
            if record is not None and record.state is TaskState.QUEUED and record.sequence == entry[1]:
                return entry
            heapq.heappop(heap)
        if heap is not None and key not in self.queued_count:
            del self._heaps[key]
        return None

    def pop(self, key: Capabilities, records: dict[TaskID, TaskRecord]) -> TaskRecord:
        entry = self.peek(key, records)
        assert entry is not None
        heapq.heappop(self._heaps[key])
        record = records[entry[2]]
        self.left(record)
        return record


class TaskTable:
    def __init__(self, ignore_capabilities: bool) -> None:
        self.records: dict[TaskID, TaskRecord] = {}
        self.by_client: dict[ClientID, set[TaskID]] = {}
        self.queue = DispatchQueue(ignore_capabilities)
        self.tally = TaskTally()
        self.log: TransitionLog | None = None  #: set while the monitor feed reads transitions
        self._next_sequence = 0

    def __len__(self) -> int:
        return len(self.records)

    def get(self, task_id: TaskID) -> TaskRecord | None:
        return self.records.get(task_id)

    def add(self, task: Task, state: TaskState, now: float) -> TaskRecord:
        record = TaskRecord(task=task, state=state, sequence=self._next_sequence, submitted_at=now)
        self._next_sequence += 1
        self.records[task.task_id] = record
        self.by_client.setdefault(task.client_id, set()).add(task.task_id)
        self._moved(record, None, STATUS_OF_STATE[state], None, now)
        return record

    def move(self, record: TaskRecord, state: TaskState, now: float) -> None:
        before = record.state
        record.state = state
        self._moved(record, STATUS_OF_STATE[before], STATUS_OF_STATE[state], record.worker, now)

    def remove(self, record: TaskRecord, ending: TaskStatus, worker: PeerID | None, now: float) -> None:
        """The task ended (`ending`, one of feed.ENDINGS); `worker` is the one that held it, if any."""
        if record.state is TaskState.QUEUED:
            self.queue.left(record)
        del self.records[record.task_id]
        owned = self.by_client.get(record.client_id)
        if owned is not None:
            owned.discard(record.task_id)
            if not owned:
                del self.by_client[record.client_id]
        self._moved(record, STATUS_OF_STATE[record.state], ending, worker, now)

    def _moved(
        self, record: TaskRecord, before: TaskStatus | None, after: TaskStatus, worker: PeerID | None, now: float
    ) -> None:
        task = record.task
        self.tally.moved(None if record.client_gone else task.client_id, task.function_name, before, after)
        if self.log is not None:
            self.log.add(task.task_id, after, worker, now)

    def count_by_state(self) -> dict[TaskState, int]:
        return {state: self.tally.count(STATUS_OF_STATE[state]) for state in TaskState}
