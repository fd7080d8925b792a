"""The task lifecycle as data: states, events, and the outcome of every (state, event) pair.

Rules:
1. One record per live task, in one table (`task_table.TaskTable`). A task that reaches an end
   (success, failure, cancel, death past its retry budget) leaves the table in the same step.
2. Every (state, event) pair below has an explicit outcome. `IGNORE` means "log and drop": the
   event is stale (a late result from a worker that lost the task, a second cancel, ...). There is
   no implicit fall-through; `test_task_state.py` checks that the table is total.
3. Only the task's current worker may end a DISPATCHED or CANCELING task; a result from any other
   worker is stale. This is what makes "each result arrives once" hold across re-dispatches.
4. A task whose processor ran out of memory is not retried on a worker of the same size: it goes back to the
   queue needing more memory than the worker it died on (RETRY_BIGGER), and only when a bigger worker is
   connected or a worker manager declares bigger ones. The retry budget is for lost workers; this retry does
   not spend it, and it ends since every retry needs a strictly bigger worker.
5. A QUEUED task nothing can run (no worker with its capabilities, no manager declaring them, for the grace
   period: core/unserved_work.py) ends with NoWorkerError naming them (UNRUNNABLE); in any other state the event
   is stale.
6. A task whose input could not be fetched (INPUT_UNREACHABLE: storage silent or unreachable) did not run: it goes
   back to the queue as if its worker had died, spending the same retry budget (REFETCH); past it, it ends with
   that result, which names the input and why.

States:
- WAITING: a graph node whose dependencies have not all succeeded yet. Not dispatchable.
- QUEUED: ready, in the dispatch queue, no worker.
- DISPATCHED: assigned to a worker (running or prefetched there); holds one unit of its credit.
- CANCELING: a cancel was sent to the worker; the slot stays taken until the worker answers.
"""

from __future__ import annotations

import enum


class TaskState(enum.Enum):
    __hash__ = object.__hash__  # members are singletons compared by identity; Enum's own hash is a Python call

    WAITING = "waiting"
    QUEUED = "queued"
    DISPATCHED = "dispatched"
    CANCELING = "canceling"


class TaskEvent(enum.Enum):
    __hash__ = object.__hash__

    READY = "ready"  #: all dependencies succeeded
    DISPATCH = "dispatch"  #: the dispatcher picked a worker
    RESULT = "result"  #: the current worker sent a result
    CANCEL = "cancel"  #: the client (or its departure, or its graph) cancels the task
    CANCEL_CONFIRMED = "cancel_confirmed"  #: the worker confirms (canceled or not found)
    WORKER_LOST = "worker_lost"  #: the task's worker died or left
    RETURNED = "returned"  #: the worker gave the task back unstarted (balancing)
    DEPENDENCY_FAILED = "dependency_failed"  #: a node this one needs failed
    OUT_OF_MEMORY = "out_of_memory"  #: the current worker's result: its processor ran out of memory
    #: nothing can run it: no worker has its capabilities, no manager declares them, past the grace period
    #: (core/unserved_work.py)
    UNRUNNABLE = "unrunnable"
    #: the current worker's result: an input could not be fetched from object storage (not the task's fault)
    INPUT_UNREACHABLE = "input_unreachable"


class Outcome(enum.Enum):
    """What a (state, event) pair does; `task_lifecycle` implements each."""

    __hash__ = object.__hash__

    IGNORE = "ignore"
    ENQUEUE = "enqueue"  #: -> QUEUED
    ASSIGN = "assign"  #: -> DISPATCHED, send the task to the worker
    FINISH = "finish"  #: end with the worker's result, forward it to the client
    CANCEL_NOW = "cancel_now"  #: end as canceled at once, confirm to the client
    CANCEL_AT_WORKER = "cancel_at_worker"  #: -> CANCELING, ask the worker to stop it
    END_CANCELED = "end_canceled"  #: end as canceled, release the worker slot, confirm
    REDISPATCH = "redispatch"  #: back to QUEUED (attempt counted) or WorkerDiedError past the budget
    REQUEUE = "requeue"  #: back to QUEUED, no attempt counted, release the worker slot
    FAIL_FROM_DEPENDENCY = "fail_from_dependency"  #: end with the failure of a dependency
    #: back to QUEUED for a worker with more memory than the one it died on, if one is or may be connected (a
    #: connected worker, or a manager whose `memory` capability is larger); else FINISH with the out-of-memory error
    RETRY_BIGGER = "retry_bigger"
    #: end with NoWorkerError naming what no worker offers (the event's reason)
    FAIL_UNRUNNABLE = "fail_unrunnable"
    #: back to QUEUED (attempt counted), as REDISPATCH, or past the budget end with the worker's INPUT_UNREACHABLE
    #: result, which names the input and why
    REFETCH = "refetch"


S, E, Do = TaskState, TaskEvent, Outcome

TRANSITIONS: dict[tuple[TaskState, TaskEvent], Outcome] = {
    (S.WAITING, E.READY): Do.ENQUEUE,
    (S.WAITING, E.DISPATCH): Do.IGNORE,
    (S.WAITING, E.RESULT): Do.IGNORE,
    (S.WAITING, E.CANCEL): Do.CANCEL_NOW,
    (S.WAITING, E.CANCEL_CONFIRMED): Do.IGNORE,
    (S.WAITING, E.WORKER_LOST): Do.IGNORE,
    (S.WAITING, E.RETURNED): Do.IGNORE,
    (S.WAITING, E.DEPENDENCY_FAILED): Do.FAIL_FROM_DEPENDENCY,
    (S.WAITING, E.OUT_OF_MEMORY): Do.IGNORE,
    (S.WAITING, E.UNRUNNABLE): Do.IGNORE,  # not queued: judged once it is
    (S.WAITING, E.INPUT_UNREACHABLE): Do.IGNORE,
    (S.QUEUED, E.READY): Do.IGNORE,
    (S.QUEUED, E.DISPATCH): Do.ASSIGN,
    (S.QUEUED, E.RESULT): Do.IGNORE,
    (S.QUEUED, E.CANCEL): Do.CANCEL_NOW,
    (S.QUEUED, E.CANCEL_CONFIRMED): Do.IGNORE,
    (S.QUEUED, E.WORKER_LOST): Do.IGNORE,
    (S.QUEUED, E.RETURNED): Do.IGNORE,
    (S.QUEUED, E.DEPENDENCY_FAILED): Do.FAIL_FROM_DEPENDENCY,
    (S.QUEUED, E.OUT_OF_MEMORY): Do.IGNORE,
    (S.QUEUED, E.UNRUNNABLE): Do.FAIL_UNRUNNABLE,
    (S.QUEUED, E.INPUT_UNREACHABLE): Do.IGNORE,
    (S.DISPATCHED, E.READY): Do.IGNORE,
    (S.DISPATCHED, E.DISPATCH): Do.IGNORE,
    (S.DISPATCHED, E.RESULT): Do.FINISH,
    (S.DISPATCHED, E.CANCEL): Do.CANCEL_AT_WORKER,
    (S.DISPATCHED, E.CANCEL_CONFIRMED): Do.END_CANCELED,  # the worker dropped it on its own
    (S.DISPATCHED, E.WORKER_LOST): Do.REDISPATCH,
    (S.DISPATCHED, E.RETURNED): Do.REQUEUE,
    (S.DISPATCHED, E.DEPENDENCY_FAILED): Do.IGNORE,  # its dependencies had all succeeded
    (S.DISPATCHED, E.OUT_OF_MEMORY): Do.RETRY_BIGGER,
    (S.DISPATCHED, E.UNRUNNABLE): Do.IGNORE,  # a worker runs it after all
    (S.DISPATCHED, E.INPUT_UNREACHABLE): Do.REFETCH,
    (S.CANCELING, E.READY): Do.IGNORE,
    (S.CANCELING, E.DISPATCH): Do.IGNORE,
    (S.CANCELING, E.RESULT): Do.FINISH,  # the result won the race: the client gets it, cancel() is False
    (S.CANCELING, E.CANCEL): Do.IGNORE,  # already on its way
    (S.CANCELING, E.CANCEL_CONFIRMED): Do.END_CANCELED,
    (S.CANCELING, E.WORKER_LOST): Do.END_CANCELED,
    (S.CANCELING, E.RETURNED): Do.END_CANCELED,  # given back unstarted: that is a cancel too
    (S.CANCELING, E.DEPENDENCY_FAILED): Do.IGNORE,
    (S.CANCELING, E.OUT_OF_MEMORY): Do.FINISH,  # the result won the race, as for RESULT
    (S.CANCELING, E.UNRUNNABLE): Do.IGNORE,
    (S.CANCELING, E.INPUT_UNREACHABLE): Do.END_CANCELED,  # it did not run: the cancel wins
}


def outcome(state: TaskState, event: TaskEvent) -> Outcome:
    return TRANSITIONS[(state, event)]
