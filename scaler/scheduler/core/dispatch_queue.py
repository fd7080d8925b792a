"""The dispatch queue: priority heaps of the QUEUED tasks, one per capability set, with shares and quotas.

Invariants:
- A task is in the queue iff its state is QUEUED: entries of tasks that left QUEUED (or were pushed again) are
  dropped lazily when they reach the top of a heap; `queued_count` and the other counts are kept exact on every
  `push`, `pop` and `left`.
- Queue order: higher priority first, then the client's turn (shares), then submission order (a re-queued task
  keeps its place).
- The tasks' records live in the task table (`task_table.py`), which owns this queue and hands it its records.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator

from scaler.policy.capability import needs_more_memory
from scaler.protocol.ids import ClientID, TaskID
from scaler.protocol.messages import PRIORITY_DEPTH_BITS, Capabilities
from scaler.scheduler.core.quotas import ClientQuota, held_back, startable
from scaler.scheduler.core.task_record import Entry, TaskRecord
from scaler.scheduler.core.task_state import TaskState

#: Index, in the task table's counts of a client, of its tasks held at workers (DISPATCHED or CANCELING).
HELD_INDEX = 2

#: The bits of a wire priority that hold the nesting depth.
_DEPTH_MASK = (1 << PRIORITY_DEPTH_BITS) - 1

#: Of each client's tasks set aside over its quota, how many of the best `oldest_submitted` looks at.
HEAD_ENTRIES = 64
#: `TaskState.QUEUED`, bound once: an enum class's attribute is read through the hook of `EnumType.__getattr__`
#: (Python 3.10 and 3.11), about ten times the cost of a global's
_QUEUED = TaskState.QUEUED


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
        #: exact number of QUEUED nested tasks (a nesting depth above 0): read on every step (core/preemption.py)
        self.nested_queued = 0
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
        outgrew = record.extras.outgrew_bytes  # not its property: read a few times per task
        if outgrew:
            return self.key_for(record, outgrew)
        return () if self._ignore_capabilities else record.traits.capabilities  # `key_for`'s, inline: a few per task

    def key_for(self, record: TaskRecord, outgrew_bytes: int) -> Capabilities:
        """The capability set `record` is queued under once it outgrew a worker of `outgrew_bytes` (0: none): its
        own (none when capabilities are ignored), plus more memory than that worker, whatever the allocation (a
        task that would die again is no load to even out)."""
        own = () if self._ignore_capabilities else record.traits.capabilities
        return needs_more_memory(own, outgrew_bytes) if outgrew_bytes else own

    def push(self, record: TaskRecord) -> None:
        client, traits, entry = record.client_id, record.traits, record.entry
        key, priority = self.key(record), traits.priority
        turn = entry[1]
        if turn < 0:  # first queued (a task queued again, its worker died, keeps its place)
            turn = max(self._next_turn.get(client, 0.0), self._turn_now)
            self._next_turn[client] = turn + 1.0 / self.shares.get(client, 1.0)
        entry = record.entry = (-priority, turn, entry[2], record.task_id)  # a new one: any met in a heap is stale
        by_key = self.client_queued.get(client)
        if by_key is None:
            by_key = self.client_queued[client] = {}
        by_key[key] = by_key.get(key, 0) + 1
        heap = self._heaps.get(key)  # each table looked up once, no container made when there is one already
        if heap is None:
            heap = self._heaps[key] = []
        heapq.heappush(heap, entry)
        self.queued_count[key] = self.queued_count.get(key, 0) + 1
        by_priority = self._by_priority.get(key)
        if by_priority is None:
            by_priority = self._by_priority[key] = {}
        by_priority[priority] = by_priority.get(priority, 0) + 1
        if priority & _DEPTH_MASK:
            self.nested_queued += 1
        if self.pushed_top is None or priority > self.pushed_top:
            self.pushed_top = priority
        functions = self.queued_by_function.get(key)
        if functions is None:
            functions = self.queued_by_function[key] = {}
        name = traits.function_name
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
        by_priority, priority = self._by_priority[key], record.traits.priority
        if priority & _DEPTH_MASK:
            self.nested_queued -= 1
        if by_priority[priority] > 1:
            by_priority[priority] -= 1
        else:
            del by_priority[priority]
            if not by_priority:
                del self._by_priority[key]
        functions = self.queued_by_function[key]
        name = record.traits.function_name
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

    def has_nested(self) -> bool:
        """Whether a nested task (a nesting depth above 0, client/sharing.py) is queued (core/preemption.py)."""
        return self.nested_queued > 0

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
                if quota is None or self._client_counts[record.client_id][HELD_INDEX] < quota:
                    return entry
                heapq.heappush(self._over_quota.setdefault(record.client_id, []), (entry, key))
            heapq.heappop(heap)
        if heap is not None and key not in self.queued_count:
            del self._heaps[key]
        return None

    def pop(self, key: Capabilities, records: dict[TaskID, TaskRecord], top: Entry | None = None) -> TaskRecord:
        """Take the task `peek` names; `top`: what `peek` just returned for `key` (not asked again)."""
        entry = top if top is not None else self.peek(key, records)
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

    def task_ids(self, key: Capabilities, records: dict[TaskID, TaskRecord]) -> Iterator[TaskID]:
        """The QUEUED tasks of capability set `key` (those set aside over their client's quota included), each once,
        roughly best first (a heap's order), lazily: for the rare decisions about a whole key
        (core/unserved_work.py), which may stop early."""
        seen: set[TaskID] = set()
        entries = itertools.chain(
            self._heaps.get(key, ()),
            (entry for waiting in self._over_quota.values() for entry, at in waiting if at == key),
        )
        for entry in entries:
            if entry[3] not in seen and _is_current(records.get(entry[3]), entry):
                seen.add(entry[3])
                yield entry[3]

    def oldest_submitted(self, key: Capabilities, records: dict[TaskID, TaskRecord]) -> float | None:
        """When the longest-waiting QUEUED task of capability set `key` was submitted, as far as the heads tell (for
        the status: once a second, not per task): the task `pop` would take, and the oldest of the first
        HEAD_ENTRIES of each client's tasks set aside over its quota (a heap's first entries are its best, and a
        client's tasks of one priority keep their submission order); None when none is queued."""
        heads = []
        top = self.peek(key, records)
        if top is not None:
            heads.append(records[top[3]].submitted_at)
        for waiting in self._over_quota.values():
            for entry, at in itertools.islice(waiting, HEAD_ENTRIES):
                record = records.get(entry[3])
                if at == key and record is not None and _is_current(record, entry):
                    heads.append(record.submitted_at)
        return min(heads) if heads else None

    def set_quota(self, client: ClientID, quota: ClientQuota) -> None:
        self.quotas[client] = quota.held_limit
        self.client_quotas[client] = quota

    def held_back(self) -> dict[Capabilities, dict[str, int]]:
        """Queued tasks their client's quota keeps from starting even on free workers, per capability set and
        binding setting (core/quotas.py): what the status's reason counts and the scaling policies leave out."""
        counts = self._client_counts
        held = {client: counts[client][HELD_INDEX] for client in self.client_quotas if client in counts}
        return held_back(self.client_quotas, self.client_queued, held)

    def client_loads(self) -> Iterator[tuple[ClientID, int, dict[Capabilities, int]]]:
        """Each client with live tasks: its tasks at workers, and its queued ones that could start now per capability
        set (those its quota holds back left out), for the scaling policies' budget split."""
        for client, counts in self._client_counts.items():
            queued = self.client_queued.get(client, {})
            if queued or counts[HELD_INDEX]:
                yield client, counts[HELD_INDEX], startable(self.client_quotas.get(client), counts[HELD_INDEX], queued)

    def forget(self, client: ClientID) -> None:
        """The client left: its share and quota go (its tasks are cancelled by the lifecycle)."""
        self.shares.pop(client, None)
        self.quotas.pop(client, None)
        self.client_quotas.pop(client, None)
        self._over_quota.pop(client, None)


def _is_current(record: TaskRecord | None, entry: Entry) -> bool:
    """The entry is the one of a task that is QUEUED now (not of one that left the queue since, or was pushed again)."""
    return record is not None and record.entry is entry and record.state is _QUEUED
