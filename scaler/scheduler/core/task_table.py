"""The one table of live tasks, and the dispatch queue of the QUEUED ones.

Invariants:
- `records` holds exactly the live tasks; `by_client[c]` is exactly the ids of live tasks owned by c.
- A record is in the dispatch queue iff its state is QUEUED (entries of tasks that left QUEUED are
  dropped lazily when they reach the top of a heap; `queued_count` is kept exact).
- Queue order: higher priority first, then submission order (a re-queued task keeps its place).
- Counts by state, per client and per function (and of QUEUED tasks per capability set and function) are
  kept exact on every change (`add`, `set_state`, `remove`, the queue's `push` / `left`), so the read model
  never walks the table; every change is also noted for the monitor feed's task transitions, up to
  `TRANSITIONS_PER_PUBLICATION` between two publications (the rest are counted), and written into the task's
  story with its cause (`stories`, bounded on its own).
- `records` and the `by_client` sets are rebuilt in place once the table holds far fewer tasks than at its peak
  (`shrink_rule`): a drained queue of 1,000,000 tasks does not keep their hash tables.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass

from scaler.policy.capability import needs_more_memory
from scaler.protocol.ids import ClientID, GraphID, PeerID, TaskID
from scaler.protocol.messages import Capabilities, Task, TaskTransition
from scaler.scheduler.core.quotas import ClientQuota, held_back, startable
from scaler.scheduler.core.run_times import RunTimeBook
from scaler.scheduler.core.shrink_rule import ShrinkRule, rebuild
from scaler.scheduler.core.story_book import StoryBook, Words
from scaler.scheduler.core.task_state import TaskState

#: Task transitions kept for the monitor feed between two publications; later ones are only counted.
TRANSITIONS_PER_PUBLICATION = 1000
#: Index in a counts list of each live state (CANCELING counts as running: it holds its worker's slot).
_LIVE_INDEX = {TaskState.WAITING: 0, TaskState.QUEUED: 1, TaskState.DISPATCHED: 2, TaskState.CANCELING: 2}
#: Index of each way a task ends: succeeded 3, failed 4 (any failure), canceled 5.
_END_INDEX = {"success": 3, "canceled": 5}
_FAILED_INDEX = 4
_HELD = 2

#: A dispatch queue entry: (-priority, turn, sequence, task id).
Entry = tuple[int, float, int, TaskID]


@dataclass(slots=True)
class TaskRecord:
    task: Task  #: the wire value sent to workers (graph nodes get their inputs attached when ready)
    state: TaskState
    sequence: int  #: submission order
    submitted_at: float
    worker: PeerID | None = None  #: set iff DISPATCHED or CANCELING
    attempts: int = 0  #: times dispatched
    lost_workers: tuple[str, ...] = ()  #: why each of its workers went away (a tuple: no list per task)
    client_gone: bool = False  #: nobody waits for the outcome any more
    dispatched_at: float = 0.0
    turn: float = -1.0  #: its place in its client's line (DispatchQueue); -1 until first queued
    #: it ran out of memory on a worker with this many bytes: it runs again only on a bigger one (0: on any)
    outgrew_bytes: int = 0

    @property
    def task_id(self) -> TaskID:
        return self.task.task_id

    @property
    def client_id(self) -> ClientID:
        return self.task.client_id

    @property
    def graph_id(self) -> GraphID:
        return self.task.graph_id


class DispatchQueue:
    """Priority heaps of QUEUED task ids, one per capability set.

    Within a priority, clients take turns in proportion to their shares (weighted start-time fair queuing): a
    client's tasks get turns 1/share apart, counted from the turn being dispatched when its line was empty, so two
    clients mapping 10,000 tasks each progress together (3 tasks of a client of share 3 for each of a client of
    share 1), whoever submitted first; one client's tasks keep their submission order. Shares count task starts,
    which is busy worker time when the clients' tasks take alike (docs/guide/sharing.md says what it is not).

    A client with a quota (`quotas`, the most of its tasks at workers at once) whose task reaches the top of a heap
    while it is at its quota has the task set aside (still QUEUED, still counted); each of its tasks that leaves a
    worker brings one back (`quota_freed`), so a client far over its quota costs O(log n) per task, not a rescan.
    """

    def __init__(self, ignore_capabilities: bool, client_counts: dict[ClientID, list[int]]) -> None:
        self._ignore_capabilities = ignore_capabilities
        self._heaps: dict[Capabilities, list[Entry]] = {}
        #: exact number of QUEUED tasks per capability set
        self.queued_count: dict[Capabilities, int] = {}
        #: exact number of QUEUED tasks per capability set and function name (sums to `queued_count`)
        self.queued_by_function: dict[Capabilities, dict[str, int]] = {}
        #: exact number of QUEUED tasks per capability set and priority (overtaking.py)
        self._by_priority: dict[Capabilities, dict[int, int]] = {}
        #: the highest priority pushed since overtaking.py last looked (None: nothing pushed)
        self.pushed_top: int | None = None
        self._next_turn: dict[ClientID, float] = {}  #: the turn a client's next task gets (at least `_turn_now`)
        self._turn_now = 0.0  #: the turn of the task dispatched last
        #: each client's share of the workers (1 when not set): its turns are 1/share apart
        self.shares: dict[ClientID, float] = {}
        #: each client's quota of tasks at workers (absent: none), checked against its counts in the task table
        self.quotas: dict[ClientID, int] = {}
        #: the settings those come from (core/quotas.py)
        self.client_quotas: dict[ClientID, ClientQuota] = {}
        #: exact number of QUEUED tasks per client and capability set (quotas and budgets per client read it)
        self.client_queued: dict[ClientID, dict[Capabilities, int]] = {}
        self._client_counts = client_counts
        #: QUEUED tasks of clients at their quota, set aside when they reached the top of a heap, best first
        self._over_quota: dict[ClientID, list[tuple[Entry, Capabilities]]] = {}

    def key(self, record: TaskRecord) -> Capabilities:
        return self.key_for(record, record.outgrew_bytes)

    def key_for(self, record: TaskRecord, outgrew_bytes: int) -> Capabilities:
        """The capability set `record` is queued under once it outgrew a worker of `outgrew_bytes` (0: none): its
        own (none when capabilities are ignored), plus more memory than that worker, whatever the allocation (a
        task that would die again is no load to even out)."""
        own = () if self._ignore_capabilities else record.task.capabilities
        return needs_more_memory(own, outgrew_bytes) if outgrew_bytes else own

    def push(self, record: TaskRecord) -> None:
        if record.turn < 0:  # a task queued again (its worker died) keeps its place
            record.turn = max(self._next_turn.get(record.client_id, 0.0), self._turn_now)
            self._next_turn[record.client_id] = record.turn + 1.0 / self.shares.get(record.client_id, 1.0)
        key, priority = self.key(record), record.task.priority
        by_key = self.client_queued.get(record.client_id)
        if by_key is None:
            by_key = self.client_queued[record.client_id] = {}
        by_key[key] = by_key.get(key, 0) + 1
        entry = (-priority, record.turn, record.sequence, record.task_id)
        heapq.heappush(self._heaps.setdefault(key, []), entry)
        self.queued_count[key] = self.queued_count.get(key, 0) + 1
        by_priority = self._by_priority.setdefault(key, {})
        by_priority[priority] = by_priority.get(priority, 0) + 1
        if self.pushed_top is None or priority > self.pushed_top:
            self.pushed_top = priority
        functions = self.queued_by_function.setdefault(key, {})
        name = record.task.function_name
        functions[name] = functions.get(name, 0) + 1

    def left(self, record: TaskRecord) -> None:
        """A QUEUED record left the queue some other way than `pop` (cancel, failure)."""
        key = self.key(record)
        by_key = self.client_queued[record.client_id]
        if by_key[key] > 1:
            by_key[key] -= 1
        elif len(by_key) > 1:
            del by_key[key]
        else:
            del self.client_queued[record.client_id]
        count = self.queued_count[key] - 1
        if count:
            self.queued_count[key] = count
        else:
            del self.queued_count[key]
        by_priority, priority = self._by_priority[key], record.task.priority
        if by_priority[priority] > 1:
            by_priority[priority] -= 1
        else:
            del by_priority[priority]
            if not by_priority:
                del self._by_priority[key]
        functions = self.queued_by_function[key]
        name = record.task.function_name
        if functions[name] > 1:
            functions[name] -= 1
        else:
            del functions[name]
            if not functions:
                del self.queued_by_function[key]

    def __len__(self) -> int:
        return sum(self.queued_count.values())

    def groups(self) -> Iterator[tuple[Capabilities, int]]:
        return iter(self.queued_count.items())

    def outranking(self, key: Capabilities, priority: int) -> int:
        """How many tasks of capability set `key` are queued above `priority`."""
        return sum(count for queued, count in self._by_priority.get(key, {}).items() if queued > priority)

    def peek(self, key: Capabilities, records: dict[TaskID, TaskRecord]) -> Entry | None:
        """The entry (-priority, turn, sequence, task id) of the task `pop` would take, or None."""
        heap = self._heaps.get(key)
        while heap:
            entry = heap[0]
            record = records.get(entry[3])
            if _is_current(record, entry):
                assert record is not None
                quota = self.quotas.get(record.client_id)
                if quota is None or self._client_counts[record.client_id][_HELD] < quota:
                    return entry
                heapq.heappush(self._over_quota.setdefault(record.client_id, []), (entry, key))
            heapq.heappop(heap)
        if heap is not None and key not in self.queued_count:
            del self._heaps[key]
        return None

    def pop(self, key: Capabilities, records: dict[TaskID, TaskRecord]) -> TaskRecord:
        entry = self.peek(key, records)
        assert entry is not None
        heapq.heappop(self._heaps[key])
        record = records[entry[3]]
        self.left(record)
        if entry[1] > self._turn_now:
            self._turn_now = entry[1]
            if len(self._next_turn) > 1024:  # forget clients whose line is empty: they start at `_turn_now`
                self._next_turn = {c: t for c, t in self._next_turn.items() if t > self._turn_now}
        return record

    def quota_freed(self, client: ClientID, records: dict[TaskID, TaskRecord]) -> None:
        """One of the client's tasks left a worker: its best task set aside over quota goes back to its heap."""
        waiting = self._over_quota.get(client)
        while waiting:
            entry, key = heapq.heappop(waiting)
            if _is_current(records.get(entry[3]), entry):
                heapq.heappush(self._heaps.setdefault(key, []), entry)
                break
        if not waiting:
            self._over_quota.pop(client, None)

    def set_quota(self, client: ClientID, quota: ClientQuota) -> None:
        self.quotas[client] = quota.held_limit
        self.client_quotas[client] = quota

    def held_back(self) -> dict[Capabilities, dict[str, int]]:
        """Queued tasks their client's quota keeps from starting even on free workers, per capability set and
        binding setting (core/quotas.py): what the status's reason counts and the scaling policies leave out."""
        counts = self._client_counts
        held = {client: counts[client][_HELD] for client in self.client_quotas if client in counts}
        return held_back(self.client_quotas, self.client_queued, held)

    def client_loads(self) -> Iterator[tuple[ClientID, int, dict[Capabilities, int]]]:
        """Each client with live tasks: its tasks at workers, and its queued ones that could start now per capability
        set (those its quota holds back left out), for the scaling policies' budget split."""
        for client, counts in self._client_counts.items():
            queued = self.client_queued.get(client, {})
            if queued or counts[_HELD]:
                yield client, counts[_HELD], startable(self.client_quotas.get(client), counts[_HELD], queued)

    def forget(self, client: ClientID) -> None:
        """The client left: its share and quota go (its tasks are cancelled by the lifecycle)."""
        self.shares.pop(client, None)
        self.quotas.pop(client, None)
        self.client_quotas.pop(client, None)
        self._over_quota.pop(client, None)


def _is_current(record: TaskRecord | None, entry: Entry) -> bool:
    """The entry is the one of a task that is QUEUED now (not of one that left the queue since, or was pushed again)."""
    return record is not None and record.state is TaskState.QUEUED and record.sequence == entry[2]


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

    def __len__(self) -> int:
        return len(self.records)

    def get(self, task_id: TaskID) -> TaskRecord | None:
        return self.records.get(task_id)

    def add(self, task: Task, state: TaskState, now: float, cause: Words = "") -> TaskRecord:
        record = TaskRecord(task=task, state=state, sequence=self._next_sequence, submitted_at=now)
        if self.stories.enabled:
            self.stories.opened(task.task_id, self.queue.key(record), now + self.wall_offset, state.value, cause)
        self._next_sequence += 1
        self.records[task.task_id] = record
        self.by_client.setdefault(task.client_id, set()).add(task.task_id)
        self._count(record, _LIVE_INDEX[state], 1)
        self.live_counts[state] += 1
        self._note(record, state.value, now)
        return record

    def set_state(self, record: TaskRecord, state: TaskState, now: float, cause: Words = "") -> None:
        """The one way a live task changes state (its record's `worker` is set first when it has one); `cause`:
        why, for its story."""
        if self.stories.enabled:
            where = record.worker if record.worker is not None else ""
            self.stories.note(record.task_id, now + self.wall_offset, state.value, where, cause)
        old = record.state
        self.live_counts[old] -= 1
        self.live_counts[state] += 1
        if _LIVE_INDEX[old] != _LIVE_INDEX[state]:
            self._count(record, _LIVE_INDEX[old], -1)
            self._count(record, _LIVE_INDEX[state], 1)
            if _LIVE_INDEX[old] == _HELD:
                self._held(record.task.priority, -1)
            elif _LIVE_INDEX[state] == _HELD:
                self._held(record.task.priority, 1)
        record.state = state
        self._note(record, state.value, now)

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
        owned = self.by_client.get(record.client_id)
        if owned is not None:
            owned.discard(record.task_id)
            if not owned:
                del self.by_client[record.client_id]
        self.live_counts[record.state] -= 1
        self._count(record, _LIVE_INDEX[record.state], -1)
        if _LIVE_INDEX[record.state] == _HELD:
            self._held(record.task.priority, -1)
        self._count(record, _END_INDEX.get(ending, _FAILED_INDEX), 1)
        self._note(record, ending, now, ran_on, run_seconds, peak_memory_bytes)

    def _rebuild(self) -> None:
        """The table holds far fewer tasks than at its peak: its containers get tables of their present size."""
        rebuild(self.records)
        for owned in self.by_client.values():
            rebuild(owned)

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
        if index == _HELD and delta < 0 and record.client_id in self.queue.quotas:
            self.queue.quota_freed(record.client_id, self.records)
        function = self.function_counts.get(record.task.function_name)
        if function is None:
            function = self.function_counts[record.task.function_name] = [0] * 6
        function[index] += delta

    def _note(
        self,
        record: TaskRecord,
        state: str,
        now: float,
        ran_on: bytes = b"",
        run_seconds: float = 0.0,
        peak_memory_bytes: int = 0,
    ) -> None:
        if len(self.transitions) >= TRANSITIONS_PER_PUBLICATION:
            self.transitions_dropped += 1
            return
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
