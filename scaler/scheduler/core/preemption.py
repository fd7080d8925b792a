"""Preemption slots: a nested task queued behind parents that wait without saying so gets a processor of its own.

A parent waiting on its nested tasks through scaler's futures parks (ProcessorBlocked) and yields its slot. A parent
that waits some other way (a library's own futures and semaphores, as parfun's) keeps computing in the scheduler's
picture: with every slot held by such parents, their children would wait in the queue forever. So when the queue's
best task of a capability set is nested deeper than every task computing at a full worker, all of the same user
priority, that worker gets one slot more for it (a preemption slot): it is asked for one processor more
(ProcessorsWanted, `link_sessions.keep_processors`), and the child computes there, beside the parent, which sleeps
in its wait (it is not suspended: it may still have children to submit).

Rules:
1. Planned only while nested tasks are queued (`DispatchQueue.has_nested`): a queue of plain tasks never costs a
   scan of the workers. A nested task gets a slot once it has waited GRANT_WAIT_SECONDS since its submission: a parent
   that waits on scaler's futures parks within milliseconds of its submit, and its slot serves the child then (a
   slot granted meanwhile would start a processor for nothing). The workers are looked at once per
   PLAN_PERIOD_SECONDS at most.
2. At most one slot per nesting depth per worker, and one worker per queued nested task and capability set.
3. While a worker has preemption slots its tasks go to idle links only (`WorkerRecord.link_for`): nothing is staged
   behind a parent that waits.
4. The first task sent to the worker after a grant fills the slot (`filled`); the slot goes when that task leaves
   the worker (`released`), and the processor it ran in is retired as not needed (link_sessions.py rule 2).

A slot's states, one table (`GRANTS`): none -> GRANTED (planned) -> FILLED (a task holds it) -> none (it left).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

from scaler.protocol.ids import PeerID, TaskID
from scaler.protocol.messages import PRIORITY_DEPTH_BITS
from scaler.protocol.staging import STAGED_WAIT_SECONDS
from scaler.scheduler.core.peers import WorkerRecord
from scaler.scheduler.core.task_table import TaskTable

_DEPTH_MASK = (1 << PRIORITY_DEPTH_BITS) - 1

#: How long a nested task waits in the queue, from its submission, before a worker gets a slot for it (rule 1): the
#: wait after which a task computing is judged long (`staging.STAGED_WAIT_SECONDS`).
GRANT_WAIT_SECONDS = STAGED_WAIT_SECONDS
#: How often, at most, the workers are looked at for a slot while nested tasks are queued (rule 1): a cluster busy
#: with nested work keeps its children waiting for slots of the usual kind, and a scan per step would cost it.
PLAN_PERIOD_SECONDS = 0.25
#: What `Preemption.step` returns on a step that changes no worker's slots
_NONE_CHANGED: tuple[WorkerRecord, ...] = ()


class SlotState(enum.Enum):
    NONE = "none"  #: no slot of that depth (absent from `WorkerRecord.preemption_slots`)
    GRANTED = "granted"  #: planned for a nested task, waiting for its processor and the task (held by None)
    FILLED = "filled"  #: a task holds it (held by that task's id)


class SlotEvent(enum.Enum):
    GRANT = "grant"  #: a nested task waits behind the worker's parents
    FILL = "fill"  #: a task was sent to the worker
    LEAVE = "leave"  #: the task holding it left the worker (ended, given back, lost), and no nested task is queued
    HAND_ON = "hand on"  #: the task holding it left the worker while nested tasks are queued: its processor waits
    WITHDRAW = "withdraw"  #: no nested task is queued any more: a slot nothing filled goes


#: The one table of a preemption slot's states; a pair not in it changes nothing.
GRANTS: dict[tuple[SlotState, SlotEvent], SlotState] = {
    (SlotState.NONE, SlotEvent.GRANT): SlotState.GRANTED,
    (SlotState.GRANTED, SlotEvent.FILL): SlotState.FILLED,
    (SlotState.GRANTED, SlotEvent.WITHDRAW): SlotState.NONE,
    (SlotState.FILLED, SlotEvent.LEAVE): SlotState.NONE,
    (SlotState.FILLED, SlotEvent.HAND_ON): SlotState.GRANTED,
}


def depth_of(priority: int) -> int:
    """The nesting depth of a wire priority (client/sharing.py)."""
    return priority & _DEPTH_MASK


def plan(tasks: TaskTable, workers: Iterable[WorkerRecord], now: float) -> dict[PeerID, int]:
    """The workers to give a preemption slot now, each with the depth it is for (usually none: rule 1)."""
    queue, records = tasks.queue, tasks.records
    if not queue.has_nested():
        return {}
    full: list[WorkerRecord] | None = None  #: looked for once a nested task has waited long enough
    grants: dict[PeerID, int] = {}
    for key, _count in list(queue.groups()):
        head = queue.peek(key, records)
        if head is None:
            continue
        priority = -head[0]
        depth = depth_of(priority)
        if depth == 0 or now - records[head[3]].submitted_at < GRANT_WAIT_SECONDS:
            continue
        if full is None:
            full = [w for w in workers if w.links and w.free_slots <= 0 and w.draining_until is None]
        for worker in full:
            if worker.peer not in grants and worker.can_run(key) and _waits_behind(worker, priority):
                grants[worker.peer] = depth
                break  # rule 2: one worker per queued nested task
    return grants


def _waits_behind(worker: WorkerRecord, priority: int) -> bool:
    """Whether a task of `priority` waits behind the worker's computing tasks: each of its links computes one of the
    same user priority and a shallower depth, and it has no slot of this depth yet."""
    depth, user = depth_of(priority), priority >> PRIORITY_DEPTH_BITS
    if depth in worker.preemption_slots:
        return False
    for link in worker.links:
        if link.killing:
            continue
        computing = link.computing
        if computing is None or link.parked:
            return False
        held = link.tasks[computing].priority
        if held >> PRIORITY_DEPTH_BITS != user or depth_of(held) >= depth:
            return False
    return True


class Preemption:
    """Plans and grants preemption slots, fills them, and takes them back (rules 2 and 4)."""

    def __init__(self) -> None:
        #: the workers that may have a slot granted and not filled (the only ones a withdrawal looks at)
        self._granted: set[PeerID] = set()
        self._plan_after = 0.0  #: the next plan comes no earlier (rule 1)

    def filled(self, worker: WorkerRecord, task_id: TaskID) -> None:
        """Rule 4: a task was sent to the worker: it holds the shallowest slot granted and not filled, if any."""
        for depth in sorted(worker.preemption_slots):
            if _move(worker, depth, SlotEvent.FILL, task_id):
                return

    def released(self, worker: WorkerRecord, task_id: TaskID, nested_queued: bool) -> bool:
        """Rule 4: a task left the worker: the slot it held goes (True), or waits for the next nested task in the
        processor it ran in while one is queued (a processor started per child costs its start and imports)."""
        for depth, holder in list(worker.preemption_slots.items()):
            if holder == task_id:
                if nested_queued:
                    self._granted.add(worker.peer)
                    _move(worker, depth, SlotEvent.HAND_ON, task_id)
                    return False
                return _move(worker, depth, SlotEvent.LEAVE, task_id)
        return False

    def step(self, tasks: TaskTable, workers: dict[PeerID, WorkerRecord], now: float) -> Sequence[WorkerRecord]:
        """The workers whose preemption slots changed now (usually none)."""
        nested = tasks.queue.nested_queued  # `has_nested`'s count, read without a call: this runs on every step
        if not nested and not self._granted:
            return _NONE_CHANGED  # the common step: no nested task queued, no slot granted
        changed: list[WorkerRecord] = []
        if self._granted and not nested:
            for peer in self._granted:
                worker = workers.get(peer)
                if worker is not None and any(
                    [_move(worker, depth, SlotEvent.WITHDRAW, None) for depth in list(worker.preemption_slots)]
                ):
                    changed.append(worker)
            self._granted.clear()
        if not nested or now < self._plan_after:
            return changed
        self._plan_after = now + PLAN_PERIOD_SECONDS
        for peer, depth in plan(tasks, workers.values(), now).items():
            worker = workers[peer]
            if _move(worker, depth, SlotEvent.GRANT, None):
                self._granted.add(peer)
                changed.append(worker)
        return changed


def _move(worker: WorkerRecord, depth: int, event: SlotEvent, task_id: TaskID | None) -> bool:
    """The slot of `depth` moves by the table (False: the pair is not in it, nothing changed)."""
    slots = worker.preemption_slots
    state = SlotState.NONE if depth not in slots else SlotState.GRANTED if slots[depth] is None else SlotState.FILLED
    after = GRANTS.get((state, event))
    if after is None:
        return False
    if after is SlotState.NONE:
        del slots[depth]
    else:
        slots[depth] = task_id if after is SlotState.FILLED else None
    return True
