"""The scheduler's record of a processor's link (scheduler/core/processor_links.py) against the processor protocol's
table: every move of a task held on a link is the table's, and random histories keep the record consistent (one task
holds the turn at most, the parked count is the parked tasks', nothing waits while nothing computes)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID, TaskID
from scaler.protocol.processor_protocol import ProcessorOutcome, ProcessorTaskEvent, ProcessorTaskState, after
from scaler.protocol.staging import STAGED_WAIT_SECONDS
from scaler.scheduler.core.processor_links import Fate, ProcessorLink

S, E = ProcessorTaskState, ProcessorTaskEvent
A, B, C = TaskID(b"a"), TaskID(b"b"), TaskID(b"c")


def link() -> ProcessorLink:
    return ProcessorLink(PeerID(b"w/p"), PeerID(b"w"), b"p")


def staged(held: ProcessorLink) -> None:
    held.send(B, 0, 0.0)
    held.send(A, 0, 0.0)


def computing(held: ProcessorLink) -> None:
    held.send(A, 0, 0.0)


def parked(held: ProcessorLink) -> None:
    held.send(A, 0, 0.0)
    held.park(A, 0.0)


def resumed(held: ProcessorLink) -> None:
    parked(held)
    held.send(B, 0, 0.0)
    held.resume(A, 0.0)


def stopping(held: ProcessorLink) -> None:
    held.send(A, 0, 0.0)
    held.cancel(A)


def stopping_parked(held: ProcessorLink) -> None:
    parked(held)
    held.cancel(A)


#: How a link comes to hold task A in each state the scheduler's picture has (RESUMING is a step of `resume`: the
#: processor gives a parked task the turn back itself).
REACH: dict[ProcessorTaskState, Callable[[ProcessorLink], None]] = {
    S.STAGED: staged,
    S.COMPUTING: computing,
    S.PARKED: parked,
    S.RESUMED: resumed,
    S.STOPPING: stopping,
    S.STOPPING_PARKED: stopping_parked,
}


def state_of(held: ProcessorLink, task_id: TaskID) -> ProcessorTaskState | None:
    task = held.tasks.get(task_id)
    return None if task is None or task.withdrawn else task.state


def apply(held: ProcessorLink, event: ProcessorTaskEvent) -> None:
    if event is E.END:
        held.end(A, 1.0)
    elif event is E.PARK:
        held.park(A, 1.0)
    elif event is E.ASK_RESUME:
        held.resume(A, 1.0)
    elif event is E.CANCEL:
        held.cancel(A)
    elif event is E.RETURN:
        if held.ask_back((A,)) and held.is_staged(A):
            held.handed_back(A, 1.0)  # the processor hands back what the table says it does
    elif event is E.GONE:
        held.gone(None)


@pytest.mark.parametrize("state", list(REACH), ids=lambda s: s.name)
@pytest.mark.parametrize("event", [E.END, E.PARK, E.ASK_RESUME, E.CANCEL, E.RETURN, E.GONE], ids=lambda e: e.name)
def test_each_move_of_a_held_task_is_the_tables(state: ProcessorTaskState, event: ProcessorTaskEvent) -> None:
    held = link()
    REACH[state](held)
    assert state_of(held, A) is state
    apply(held, event)
    expected = after(state, event)
    if event is E.PARK and state in (S.STAGED, S.RESUMED):  # it took the turn first in its processor (rule 6)
        turned = after(state, E.TURN)
        assert turned is not None
        expected = after(turned, E.PARK)
    if event is E.ASK_RESUME and expected is S.RESUMING:
        expected = S.RESUMED if held.computing != A else S.COMPUTING  # RESUME follows at once, and TURN when free
    if event is E.GONE or expected is S.QUEUED:
        expected = None  # the record holds nothing once its processor is gone: the caller queues the staged again
    if event is E.CANCEL and expected is None:
        assert held.tasks[A].withdrawn, "withdrawn: it never computes, and stays held until its answer (rule 1)"
    elif expected is S.RESUMED and held.computing is None:
        expected = S.COMPUTING
    assert state_of(held, A) is expected, (state, event)


def check(held: ProcessorLink) -> None:
    turn = [t for t, task in held.tasks.items() if task.state in (S.COMPUTING, S.STOPPING)]
    assert turn == ([held.computing] if held.computing is not None else []), "one task holds the turn at most"
    assert held.parked == sum(1 for task in held.tasks.values() if task.state in (S.PARKED, S.STOPPING_PARKED))
    assert all(held.tasks[t].state in (S.STAGED, S.RESUMED) for t in held.waiting), "only staged or resumed wait"
    assert held.computing is not None or not held.waiting, "nothing waits while nothing computes"
    assert all(not task.withdrawn or t not in held.waiting for t, task in held.tasks.items())


def test_random_histories_keep_the_record_consistent() -> None:
    for seed in range(200):
        rng = random.Random(seed)
        held = link()
        names = [TaskID(bytes([n])) for n in range(6)]
        for step in range(60):
            task_id = rng.choice(names)
            action = rng.choice(["send", "end", "park", "resume", "cancel", "return"])
            if action == "send" and task_id not in held.tasks:
                held.send(task_id, rng.randint(0, 2), float(step))
            elif action == "end":
                held.end(task_id, float(step))
            elif action == "park":
                held.park(task_id, float(step))
            elif action == "resume":
                held.resume(task_id, float(step))
            elif action == "cancel":
                held.cancel(task_id)
            elif action == "return" and held.ask_back((task_id,)) and held.is_staged(task_id):
                held.handed_back(task_id, float(step))
            check(held)


def test_staged_tasks_take_the_turn_in_priority_order_then_in_the_order_sent() -> None:
    held = link()
    held.send(A, 0, 0.0)
    held.send(B, 0, 0.0)
    held.send(C, 5, 0.0)
    held.end(A, 1.0)
    assert held.computing == C and held.busy_since == 1.0
    held.end(C, 2.0)
    assert held.computing == B


def test_a_lost_link_ends_each_task_by_the_table_and_the_mark() -> None:
    held = link()
    for task_id in (A, B, C):
        held.send(task_id, 0, 0.0)
    held.park(A, 0.0)  # B computes, C is staged
    fates = dict(held.gone(m.ProcessorExited(b"p", "killed by SIGSEGV", computing_task=C, computing_task_known=True)))
    assert fates == {A: Fate.LOST, B: Fate.RAN, C: Fate.BLAMED}, "the mark names C: B ran before it"
    held = link()
    for task_id in (A, B):
        held.send(task_id, 0, 0.0)
    fates = dict(held.gone(None))
    assert fates == {A: Fate.BLAMED, B: Fate.REQUEUED}, "no mark: the picture's computing task is blamed"
    held = link()
    held.send(A, 0, 0.0)
    held.cancel(A)
    assert dict(held.gone(None)) == {A: Fate.ANSWERED}, "a stopped task's cancel is answered"


def test_what_is_staged_behind_a_long_task_is_asked_back_once() -> None:
    held = link()
    for task_id in (A, B, C):
        held.send(task_id, 0, 0.0)
    assert held.behind_long(STAGED_WAIT_SECONDS / 2) is None
    assert held.behind_long(STAGED_WAIT_SECONDS) == (B, C) and held.long
    assert held.behind_long(2 * STAGED_WAIT_SECONDS) is None, "once per long task"
    assert held.end(A, 3.0) is ProcessorOutcome.FINISH and held.computing == B


def test_a_task_the_picture_has_waiting_that_parks_took_the_turn_first_in_its_processor() -> None:
    """The picture lags (protocol rule 6): a task sent while another computed may reach the processor when the turn is
    free, or ahead of it by priority, and park; the processor knows best. Found with fibonacci(5) on one worker: the
    parked child's slot was never counted free and the recursion stalled. Checked to fail with `park` ignoring a
    staged task (as the table's (STAGED, PARK) alone says)."""
    held = link()
    held.send(A, 0, 0.0)
    held.send(B, 1, 0.0)  # staged behind A in the picture; the processor started it first
    assert held.park(B, 1.0) and held.parked == 1
    assert held.computing == A and held.tasks[A].state is S.COMPUTING
    held.resume(B, 2.0)
    held.send(C, 0, 2.0)
    assert held.park(B, 3.0), "a resumed task that went on before the picture's computing one parks again"
    check(held)
