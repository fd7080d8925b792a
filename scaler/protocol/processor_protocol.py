"""The processor protocol: a task's states within one processor, the events that move them, and the outcome of every
(state, event) pair. This is the one statement of what a processor does with the tasks that reach it on its own link
to the scheduler (docs/protocol.md section 3.7), and of the scheduler's picture of it: the processor's task line
(`worker/processor/task_line.py`) and the scheduler's record of each processor's link
(`scheduler/core/processor_links.py`) are both built on the table below, and the `Executor` contract
(`worker/executors/contract.py`) refers to it.

Rules:
1. A processor computes one task at a time: the one that holds its *computing turn* (COMPUTING). It may be sent
   tasks while one computes (the scheduler *stages* tiny tasks ahead): they wait for the turn in priority order, then
   in the order received (STAGED). When the computing task ends (its answer is sent) or parks, the turn passes at
   once to the next task waiting for it (TURN): the processor has it already.
2. Before the turn passes to a task that waited, the processor reads what its link brought meanwhile (one read that
   does not block), so that a TaskCancel sent while the task before it computed is heard first.
3. A task that waits on nested futures *parks* (PARK, reported with ProcessorBlocked): it gives up the turn, its
   thread waits, and the processor serves other tasks meanwhile. When its futures are done it asks to go on
   (ASK_RESUME, reported with ProcessorResumeRequest) and the processor gives it the turn back itself (RESUME): it
   goes on once the turn is free (RESUMED, then GO_ON).
4. A TaskCancel takes effect when the processor reads it, ahead of what waits for the turn. A task that has not
   started is *withdrawn*: it never runs, and is answered CANCELED at once. A computing task is stopped (STOPPING:
   TaskAbandoned is raised in its thread) and keeps the turn until it has unwound; a parked one (STOPPING_PARKED)
   is woken to unwind without the turn; the nested tasks of both are cancelled, and each is answered CANCELED when
   its thread is done. A task that ended already is held no more: the cancel is ignored. (Code stuck in a C call
   never sees the exception: the scheduler has a processor killed instead for a task computing alone in it.)
5. Every task sent to a processor is answered exactly once, on its link: with a TaskResult, a TaskCancelConfirm
   (CANCELED, for one a TaskCancel withdrew or stopped), or a TaskReturn (rule 9). Answers keep their order: a task's
   ProcessorBlocked comes before the answer of any task that computes after it, and answers come in the order the
   tasks computed. An answer from the processor that holds a task ends it, whatever state the scheduler's picture
   has it in: the processor knows best.
6. The scheduler acts on a picture of each processor that lags by the messages in flight. It sends a task to a
   processor that computes nothing as SEND and TURN in one step: in its picture the task computes at once, while the
   processor may read it together with a TaskCancel for it and withdraw it, or with a task of a higher priority that
   goes first. A task it has waiting that parks took the turn first (TURN, then PARK).
7. A processor that is killed or dies ends every task it held (GONE): a staged one goes back to the scheduler's queue
   (it never started); the others end there (scheduler/core/processor_links.py says how).
8. Everything about a task leaves on the processor's link, in the order it happened: its TaskLogs and StreamItems,
   its parking and going on, an actor's ActorReady and its calls' results, then its answer.
9. A TaskReturn asks tasks back (RETURN): those still staged are handed back unstarted (HAND_BACK, answered with a
   TaskReturn naming them) and never run there; one that started stays, and its answer comes as usual.

Every (state, event) pair has an explicit outcome. IGNORE changes nothing: the event is stale (a cancel that
crossed the task's end) or cannot happen under the rules above (a task that has not computed does not park).
`tests/unit/test_processor_protocol.py` checks that the table is total and that every outcome leads where it says.
States and events are ints, and the table is compiled into tuples indexed by them: a step costs what assigning a
constant does, on the path of every task.
"""

from __future__ import annotations

import enum


class ProcessorTaskState(enum.IntEnum):
    """Where a task is, as far as one processor is concerned."""

    QUEUED = 0  #: the scheduler's own: sent to no processor yet (a processor never holds a task in it)
    STAGED = 1  #: in the processor, waiting for the computing turn; has not started
    COMPUTING = 2  #: holds the processor's computing turn (at most one task per processor)
    PARKED = 3  #: waits on nested futures; gave up the turn
    RESUMING = 4  #: parked, its futures done: asked to go on (the processor gives the turn back at once)
    RESUMED = 5  #: given the turn back; takes it when it is free
    STOPPING = 6  #: stopped while it computed: unwinds holding the turn; answered CANCELED once its thread is done
    STOPPING_PARKED = 7  #: stopped while parked: unwinds without the turn; answered CANCELED once its thread is done


class ProcessorTaskEvent(enum.IntEnum):
    """What happens to a task in a processor: a message on its link, the turn, the processor's end."""

    SEND = 0  #: the scheduler sends the Task to the processor
    TURN = 1  #: the computing turn passes to it (the processor computes nothing else)
    PARK = 2  #: its outermost wait on nested futures begins (ProcessorBlocked)
    ASK_RESUME = 3  #: its futures are done (ProcessorResumeRequest)
    RESUME = 4  #: the turn is given back to it (by the processor itself, rule 3)
    END = 5  #: its thread is done and its answer sent (its TaskResult, or CANCELED)
    CANCEL = 6  #: the scheduler stops it: cancelled or timed out (TaskCancel)
    GONE = 7  #: its processor is killed or dies
    RETURN = 8  #: the scheduler asks it back (TaskReturn): for another processor, worker or a higher priority


class ProcessorOutcome(enum.IntEnum):
    """What a (state, event) pair does; `TARGETS` says the state it leads to (None: the task is held no more)."""

    IGNORE = 0  #: nothing changes: stale, or cannot happen
    STAGE = 1  #: into the processor, to wait for the turn
    START = 2  #: it starts computing (a new thread, or the one whose task ended)
    PARK = 3  #: gives up the turn (to the next waiting task); its thread waits
    ASK = 4  #: ProcessorResumeRequest is sent (it takes a slot again)
    GIVE_BACK = 5  #: the turn is given back to it; it waits for the turn to be free
    GO_ON = 6  #: its waiting thread is woken and computes
    FINISH = 7  #: its result goes to the scheduler on the link; the turn passes on
    DROP = 8  #: the scheduler cancels it in its queue: it was in no processor
    WITHDRAW = 9  #: never runs: the processor answers CANCELED at once
    STOP = 10  #: TaskAbandoned is raised in its thread; its slot stays taken until the CANCELED answer
    STOP_PARKED = 11  #: its waiting thread is woken to raise TaskAbandoned
    UNWIND = 12  #: it was stopped: it does not park but unwinds (raises TaskAbandoned)
    UNWOUND = 13  #: its CANCELED answer: the slot of a STOPPING task is free
    REQUEUE = 14  #: back to the scheduler's queue: it never started in the processor that is gone
    FAIL = 15  #: ended with its processor: it fails with the processor's death (unless it was killed on purpose)
    LOSE = 16  #: a parked task ended with its processor: it runs again, a retry spent
    FORGET = 17  #: ended with its processor, answered for already: nothing more is reported
    HAND_BACK = 18  #: given back unstarted (TaskReturn): it never runs there


S, E, Do = ProcessorTaskState, ProcessorTaskEvent, ProcessorOutcome

#: The outcome of every (state, event) pair (rules in the module docstring).
TRANSITIONS: dict[tuple[ProcessorTaskState, ProcessorTaskEvent], ProcessorOutcome] = {
    (S.QUEUED, E.SEND): Do.STAGE,
    (S.QUEUED, E.TURN): Do.IGNORE,  # it is in no processor
    (S.QUEUED, E.PARK): Do.IGNORE,
    (S.QUEUED, E.ASK_RESUME): Do.IGNORE,
    (S.QUEUED, E.RESUME): Do.IGNORE,
    (S.QUEUED, E.END): Do.IGNORE,  # a report of a processor it is not in
    (S.QUEUED, E.CANCEL): Do.DROP,
    (S.QUEUED, E.GONE): Do.IGNORE,
    (S.QUEUED, E.RETURN): Do.IGNORE,  # it is in no processor
    (S.STAGED, E.SEND): Do.IGNORE,  # a task is sent once
    (S.STAGED, E.TURN): Do.START,
    (S.STAGED, E.PARK): Do.IGNORE,  # it has not computed
    (S.STAGED, E.ASK_RESUME): Do.IGNORE,
    (S.STAGED, E.RESUME): Do.IGNORE,
    (S.STAGED, E.END): Do.FINISH,  # rule 5: not before the end of the one before it; taken if it came
    (S.STAGED, E.CANCEL): Do.WITHDRAW,
    (S.STAGED, E.GONE): Do.REQUEUE,
    (S.STAGED, E.RETURN): Do.HAND_BACK,
    (S.COMPUTING, E.SEND): Do.IGNORE,
    (S.COMPUTING, E.TURN): Do.IGNORE,  # it holds the turn
    (S.COMPUTING, E.PARK): Do.PARK,
    (S.COMPUTING, E.ASK_RESUME): Do.IGNORE,  # it is not parked
    (S.COMPUTING, E.RESUME): Do.IGNORE,
    (S.COMPUTING, E.END): Do.FINISH,
    (S.COMPUTING, E.CANCEL): Do.STOP,
    (S.COMPUTING, E.GONE): Do.FAIL,
    (S.COMPUTING, E.RETURN): Do.IGNORE,  # it started: its answer comes as usual
    (S.PARKED, E.SEND): Do.IGNORE,
    (S.PARKED, E.TURN): Do.IGNORE,  # it takes the turn only once given it back
    (S.PARKED, E.PARK): Do.IGNORE,  # its inner waits do not park again
    (S.PARKED, E.ASK_RESUME): Do.ASK,
    (S.PARKED, E.RESUME): Do.IGNORE,  # the turn is given back only to a task that asked
    (S.PARKED, E.END): Do.FINISH,  # it ends once it computes again; taken if it came sooner
    (S.PARKED, E.CANCEL): Do.STOP_PARKED,
    (S.PARKED, E.GONE): Do.LOSE,
    (S.PARKED, E.RETURN): Do.IGNORE,
    (S.RESUMING, E.SEND): Do.IGNORE,
    (S.RESUMING, E.TURN): Do.IGNORE,
    (S.RESUMING, E.PARK): Do.IGNORE,
    (S.RESUMING, E.ASK_RESUME): Do.IGNORE,  # asked already
    (S.RESUMING, E.RESUME): Do.GIVE_BACK,
    (S.RESUMING, E.END): Do.FINISH,
    (S.RESUMING, E.CANCEL): Do.STOP_PARKED,
    (S.RESUMING, E.GONE): Do.LOSE,
    (S.RESUMING, E.RETURN): Do.IGNORE,
    (S.RESUMED, E.SEND): Do.IGNORE,
    (S.RESUMED, E.TURN): Do.GO_ON,
    (S.RESUMED, E.PARK): Do.IGNORE,
    (S.RESUMED, E.ASK_RESUME): Do.IGNORE,
    (S.RESUMED, E.RESUME): Do.IGNORE,  # given back already
    (S.RESUMED, E.END): Do.FINISH,
    (S.RESUMED, E.CANCEL): Do.STOP_PARKED,  # it has not computed again yet: it leaves the tasks waiting for the turn
    (S.RESUMED, E.GONE): Do.LOSE,
    (S.RESUMED, E.RETURN): Do.IGNORE,
    (S.STOPPING, E.SEND): Do.IGNORE,
    (S.STOPPING, E.TURN): Do.IGNORE,  # it holds the turn until it has unwound
    (S.STOPPING, E.PARK): Do.UNWIND,  # stopped while it could not be interrupted: the park raises instead
    (S.STOPPING, E.ASK_RESUME): Do.IGNORE,
    (S.STOPPING, E.RESUME): Do.IGNORE,
    (S.STOPPING, E.END): Do.UNWOUND,
    (S.STOPPING, E.CANCEL): Do.IGNORE,  # stopped already
    (S.STOPPING, E.GONE): Do.FORGET,
    (S.STOPPING, E.RETURN): Do.IGNORE,
    (S.STOPPING_PARKED, E.SEND): Do.IGNORE,
    (S.STOPPING_PARKED, E.TURN): Do.IGNORE,  # it unwinds without the turn
    (S.STOPPING_PARKED, E.PARK): Do.IGNORE,
    (S.STOPPING_PARKED, E.ASK_RESUME): Do.IGNORE,  # it does not ask: it unwinds
    (S.STOPPING_PARKED, E.RESUME): Do.IGNORE,
    (S.STOPPING_PARKED, E.END): Do.UNWOUND,
    (S.STOPPING_PARKED, E.CANCEL): Do.IGNORE,
    (S.STOPPING_PARKED, E.GONE): Do.FORGET,
    (S.STOPPING_PARKED, E.RETURN): Do.IGNORE,
}

#: Where each outcome that moves a task leads (None: it is held no more); the others leave its state as it is.
TARGETS: dict[ProcessorOutcome, ProcessorTaskState | None] = {
    Do.STAGE: S.STAGED,
    Do.START: S.COMPUTING,
    Do.PARK: S.PARKED,
    Do.ASK: S.RESUMING,
    Do.GIVE_BACK: S.RESUMED,
    Do.GO_ON: S.COMPUTING,
    Do.FINISH: None,
    Do.DROP: None,
    Do.WITHDRAW: None,
    Do.STOP: S.STOPPING,
    Do.STOP_PARKED: S.STOPPING_PARKED,
    Do.UNWOUND: None,
    Do.REQUEUE: S.QUEUED,
    Do.FAIL: None,
    Do.LOSE: None,
    Do.FORGET: None,
    Do.HAND_BACK: None,
}
UNCHANGED = frozenset({Do.IGNORE, Do.UNWIND})

#: The states of a task that parked and has not computed again since (it does not hold the turn).
PARKED_STATES = frozenset({S.PARKED, S.RESUMING, S.RESUMED, S.STOPPING_PARKED})
#: The states of a task a TaskCancel stopped: it unwinds, and is answered CANCELED once its thread is done.
STOPPED_STATES = frozenset({S.STOPPING, S.STOPPING_PARKED})


def _compile() -> tuple[tuple[ProcessorOutcome, ...], ...]:
    return tuple(tuple(TRANSITIONS[(state, event)] for state in ProcessorTaskState) for event in ProcessorTaskEvent)


#: TRANSITIONS as tuples: `OUTCOMES[event][state]` (ints index tuples without hashing).
OUTCOMES = _compile()


def outcome(state: ProcessorTaskState, event: ProcessorTaskEvent) -> ProcessorOutcome:
    return OUTCOMES[event][state]


def after(state: ProcessorTaskState, event: ProcessorTaskEvent) -> ProcessorTaskState | None:
    """The state a task in `state` is in after `event`; None when it is held no more."""
    done = OUTCOMES[event][state]
    return state if done in UNCHANGED else TARGETS[done]
