"""A processor's pure core (scaler/worker/processor/task_line.py), driven without threads: which task computes, what
a TaskCancel does to a waiting, computing or parked task, parking and going on, and which thread runs what.

Threads are plain ints here (1 is the main thread); each test feeds the events a processor's threads would and
checks the state and the instructions the shell is to carry out. tests/unit/worker/test_processor_threads.py runs
the same rules with real threads. Checked by switching mechanisms off in task_line.py: without the CANCELED answer
of a withdrawn task 3 tests fail, with the holder running every task itself while one is parked 2, with a stopped
parked task taking the turn it does not hold 31.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, TaskID
from scaler.protocol.processor_protocol import PARKED_STATES, ProcessorOutcome, ProcessorTaskState
from scaler.worker.processor.task_line import (
    Answer,
    CancelNested,
    Configure,
    Credited,
    GiveBack,
    Instruction,
    Interrupt,
    LineTask,
    Refuse,
    Run,
    TaskLine,
    Wake,
)

MAIN = 1


def task(name: str) -> m.Task:
    return m.Task(TaskID(name.encode()), ClientID(b"test"), b"", "f")


def cancel(*names: str) -> m.TaskCancel:
    return m.TaskCancel(tuple(TaskID(name.encode()) for name in names))


def resume(name: str) -> m.ProcessorResume:
    return m.ProcessorResume(TaskID(name.encode()))


def served() -> TaskLine[LineTask]:
    """A processor whose main thread holds the baton, as at its start."""
    line: TaskLine[LineTask] = TaskLine(MAIN, LineTask)
    assert line.settles(MAIN)
    return line


def taken(line: TaskLine[LineTask]) -> list[Instruction[LineTask]]:
    instructions = line.instructions[:]
    line.instructions.clear()
    return instructions


def name(record: LineTask | None) -> str | None:
    return None if record is None else record.task.task_id.decode()


def end(line: TaskLine[LineTask], record: LineTask, read: list[m.Message] | None = None) -> LineTask | None:
    """The task's thread is done (its result sent); the next task that gets the turn, after a read that brought
    `read`."""
    outcome = line.ends(record)
    assert outcome is ProcessorOutcome.FINISH
    return line.take_turn(read or []) if line.passes_turn(record) else None


def park(line: TaskLine[LineTask], record: LineTask, me: int = MAIN) -> LineTask | None:
    """The task parks on thread `me`; the next task that gets the turn."""
    assert line.parks(record, me) is ProcessorOutcome.PARK
    return line.take_turn([]) if line.passes_turn(record) else None


# ---------------------------------------------------------------- the computing turn


def test_a_task_read_while_nothing_computes_starts_on_the_reading_thread() -> None:
    line = served()
    a = line.take_turn([task("a")])
    assert name(a) == "a" and a is not None and a.state is ProcessorTaskState.COMPUTING and line.computing is a
    assert line.place(MAIN, a) is a
    assert not taken(line)


def test_tasks_read_together_compute_one_at_a_time_in_the_order_received() -> None:
    line = served()
    a = line.take_turn([task("a"), task("b"), task("c")])
    assert [r.state for r in line.awaiting_turn] == [ProcessorTaskState.STAGED, ProcessorTaskState.STAGED]
    assert line.take_turn([]) is None, "the turn is taken"
    assert a is not None
    b = end(line, a)
    assert b is not None
    c = end(line, b)
    assert [name(a), name(b), name(c)] == ["a", "b", "c"]
    assert c is not None and end(line, c) is None and line.computing is None and not line.tasks


def test_a_task_cancelled_in_the_read_that_brought_it_never_runs_and_is_answered_at_once() -> None:
    line = served()
    assert line.take_turn([task("b"), cancel("b")]) is None
    assert taken(line) == [Answer(TaskID(b"b"))]
    assert not line.tasks and not line.awaiting_turn


def test_a_waiting_task_cancelled_behind_others_in_one_read_is_withdrawn() -> None:
    line = served()
    a = line.take_turn([task("a"), task("b"), task("c"), cancel("b")])
    assert taken(line) == [Answer(TaskID(b"b"))]
    assert a is not None and name(end(line, a)) == "c"


def test_a_cancel_read_as_the_turn_passes_is_heard_before_the_next_task_starts() -> None:
    line = served()
    a = line.take_turn([task("a"), task("b"), task("c")])
    assert a is not None
    assert name(end(line, a, read=[cancel("b")])) == "c", "the read before the turn passes brought the cancel"
    assert taken(line) == [Answer(TaskID(b"b"))]


def test_a_cancel_of_the_computing_task_interrupts_it_and_it_is_answered_canceled_when_done() -> None:
    line = served()
    a = line.take_turn([task("a"), task("b")])
    assert a is not None
    line.take_turn([cancel("a")])
    assert taken(line) == [Interrupt(a), CancelNested(a)]
    assert a.state is ProcessorTaskState.STOPPING and line.computing is a, "it keeps the turn until it has unwound"
    assert line.ends(a) is ProcessorOutcome.UNWOUND
    assert line.passes_turn(a) and name(line.take_turn([])) == "b"


def test_a_second_cancel_and_a_cancel_of_a_task_done_are_ignored() -> None:
    line = served()
    a = line.take_turn([task("a")])
    assert a is not None
    line.take_turn([cancel("a"), cancel("a")])
    assert len(taken(line)) == 2, "one interrupt and one cancel of its nested tasks"
    line.ends(a)
    line.take_turn([cancel("a")])
    assert not taken(line)


def test_the_agent_saying_where_storage_is_configures_the_processor() -> None:
    line = served()
    line.take_turn([m.HelloReply(True, object_storage_address="tcp://s:2")])
    assert taken(line) == [Configure("tcp://s:2")]


# ---------------------------------------------------------------- parking and going on


def test_a_task_that_parks_passes_the_turn_on_and_reports_nothing_else() -> None:
    line = served()
    line.settles(2)  # an idle thread
    a = line.take_turn([task("a"), task("b")])
    assert a is not None
    b = park(line, a)
    assert a.state is ProcessorTaskState.PARKED and line.parked == 1 and name(b) == "b"
    assert taken(line) == [Run(2, None)], "the main thread waits in the parent: the idle thread gets the baton"
    assert line.holder == 2


def test_a_parked_task_goes_on_once_the_agent_gives_the_turn_back() -> None:
    line = served()
    a = line.take_turn([task("a")])
    assert a is not None
    assert park(line, a) is None
    taken(line)
    assert line.asks_resume(a) and a.state is ProcessorTaskState.RESUMING
    assert line.take_turn([resume("a")]) is None
    assert taken(line) == [Wake(a)], "its own thread goes on"
    assert a.state is ProcessorTaskState.COMPUTING and line.computing is a and line.parked == 0


def test_the_turn_given_back_while_a_stopped_task_unwinds_waits_for_it() -> None:
    line = served()
    a = line.take_turn([task("a"), task("b")])
    assert a is not None
    b = park(line, a)
    assert b is not None
    line.take_turn([cancel("b")])  # b unwinds, holding the turn
    taken(line)
    line.asks_resume(a)
    line.take_turn([resume("a")])
    assert a.state is ProcessorTaskState.RESUMED and list(line.awaiting_turn) == [a] and not taken(line)
    assert line.ends(b) is ProcessorOutcome.UNWOUND and line.passes_turn(b)
    assert line.take_turn([]) is None and taken(line) == [Wake(a)] and line.computing is a


def test_a_resume_for_a_task_that_did_not_ask_is_ignored() -> None:
    line = served()
    a = line.take_turn([task("a")])
    assert a is not None
    park(line, a)
    line.take_turn([resume("a")])
    assert a.state is ProcessorTaskState.PARKED and not line.awaiting_turn


def test_a_cancel_of_a_parked_task_wakes_it_to_unwind_without_the_turn() -> None:
    line = served()
    a = line.take_turn([task("a"), task("b")])
    assert a is not None
    b = park(line, a)
    taken(line)
    line.take_turn([cancel("a")])
    assert taken(line) == [Wake(a), CancelNested(a)]
    assert a.state is ProcessorTaskState.STOPPING_PARKED and not line.asks_resume(a), "it does not ask: it unwinds"
    assert line.ends(a) is ProcessorOutcome.UNWOUND and not line.passes_turn(a), "b holds the turn"
    assert line.computing is b and line.parked == 0


def test_a_cancel_of_a_resumed_task_takes_it_out_of_the_tasks_waiting_for_the_turn() -> None:
    line = served()
    a = line.take_turn([task("a"), task("b")])
    assert a is not None
    park(line, a)
    line.asks_resume(a)
    line.take_turn([resume("a"), cancel("a")])
    assert a.state is ProcessorTaskState.STOPPING_PARKED and not line.awaiting_turn


def test_a_stopped_task_that_tries_to_park_unwinds_instead() -> None:
    line = served()
    a = line.take_turn([task("a")])
    assert a is not None
    line.take_turn([cancel("a")])
    taken(line)
    assert line.parks(a, MAIN) is ProcessorOutcome.UNWIND
    assert a.state is ProcessorTaskState.STOPPING and line.parked == 0 and not taken(line)


# ---------------------------------------------------------------- threads and the baton


def test_while_a_task_is_parked_the_holder_hands_the_tasks_it_reads_to_other_threads() -> None:
    line = served()
    a = line.take_turn([task("a")])
    assert a is not None
    park(line, a)  # the main thread waits in it; a new thread gets the baton
    assert taken(line) == [Run(None, None)] and line.holder is None
    assert line.settles(2), "the new thread takes the baton"
    c = line.take_turn([task("c")])
    assert c is not None and line.place(2, c) is None
    assert taken(line) == [Run(None, c)] and line.holder == 2, "it keeps reading: a cancel of c is heard at once"


def test_the_holder_runs_the_next_task_itself_while_none_is_parked() -> None:
    line = served()
    a = line.take_turn([task("a"), task("b")])
    assert a is not None
    b = end(line, a)
    assert b is not None and line.runs_here(MAIN) and line.place(MAIN, b) is b and not taken(line)


def test_while_a_task_is_parked_a_thread_whose_task_ended_runs_the_next_itself_unless_it_holds_the_baton() -> None:
    line = served()
    a = line.take_turn([task("a")])
    assert a is not None
    park(line, a)
    line.settles(2)  # the thread started for the baton
    c = line.take_turn([task("c"), task("d")])
    assert c is not None and line.place(2, c) is None  # a new thread, 3, runs c
    taken(line)
    d = end(line, c)
    assert d is not None and line.runs_here(3) and line.place(3, d) is d
    assert not line.runs_here(2), "the holder would hand it on"


def test_a_task_read_by_another_thread_goes_to_the_idle_main_thread_with_the_baton() -> None:
    line: TaskLine[LineTask] = TaskLine(MAIN, LineTask)
    assert line.settles(2) and not line.settles(MAIN), "thread 2 holds the baton, the main thread is idle"
    assert line.returns_baton(2)
    a = line.take_turn([task("a")])
    assert a is not None and line.place(2, a) is None
    assert taken(line) == [Run(MAIN, a)] and line.holder == MAIN and 2 in line.idle


def test_the_holder_gives_the_baton_back_to_the_main_thread_once_it_is_idle() -> None:
    line: TaskLine[LineTask] = TaskLine(MAIN, LineTask)
    line.settles(2)
    line.settles(MAIN)
    assert line.returns_baton(2) and not line.returns_baton(MAIN)
    line.hand_on(None, baton=True)
    assert taken(line) == [Run(MAIN, None)] and line.holder == MAIN


def test_work_goes_to_the_main_thread_first_then_to_the_thread_idle_the_shortest_time() -> None:
    line: TaskLine[LineTask] = TaskLine(MAIN, LineTask)
    line.settles(9)
    for thread in (2, 3, MAIN):
        assert not line.settles(thread)
    line.hand_on(None)
    line.hand_on(None)
    line.hand_on(None)
    line.hand_on(None)
    assert [run.thread for run in taken(line) if isinstance(run, Run)] == [MAIN, 3, 2, None]


def test_a_thread_with_nothing_to_run_takes_the_baton_nobody_holds() -> None:
    line: TaskLine[LineTask] = TaskLine(MAIN, LineTask)
    assert line.settles(2) and line.holder == 2
    assert not line.settles(3) and 3 in line.idle


def test_an_idle_thread_retires_unless_it_is_the_main_thread_or_the_only_one_idle() -> None:
    line: TaskLine[LineTask] = TaskLine(MAIN, LineTask)
    line.settles(9)
    for thread in (MAIN, 2, 3):
        line.settles(thread)
    assert not line.retires(MAIN)
    assert line.retires(2) and 2 not in line.idle
    line.hand_on(None)  # the main thread is woken
    assert not line.retires(3), "the only one idle stays"


# ---------------------------------------------------------------- random histories


def check(line: TaskLine[LineTask], answered: dict[str, int]) -> None:
    """The task line's invariants, and each task answered at most once."""
    states = [record.state for record in line.tasks.values()]
    assert line.parked == sum(1 for state in states if state in PARKED_STATES)
    turn_holders = [
        r for r in line.tasks.values() if r.state in (ProcessorTaskState.COMPUTING, ProcessorTaskState.STOPPING)
    ]
    assert len(turn_holders) <= 1 and (turn_holders[0] if turn_holders else None) is line.computing
    assert all(r.state in (ProcessorTaskState.STAGED, ProcessorTaskState.RESUMED) for r in line.awaiting_turn)
    assert not line.awaiting_turn or line.computing is not None, "tasks wait only while one holds the turn"
    assert all(count == 1 for count in answered.values())


class History:
    """A processor's life at random: reads bring tasks, cancels and resumes; the computing task ends or parks,
    parked ones ask to go on, stopped ones unwind. Counts every answer (a result, CANCELED) per task."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.line = served()
        self.answered: dict[str, int] = {}
        self.asked: list[str] = []  #: parked tasks that asked to go on, in order
        self.unwinding: list[LineTask] = []  #: stopped while parked: their threads end at a random moment
        self.received = 0

    def answer(self, task_id: str) -> None:
        self.answered[task_id] = self.answered.get(task_id, 0) + 1

    def read(self) -> None:
        rng, line, messages = self.rng, self.line, list[m.Message]()
        for _ in range(rng.randrange(3)):
            self.received += 1
            messages.append(task(f"t{self.received}"))
        if line.tasks and rng.random() < 0.3:
            messages.append(cancel(rng.choice([name(r) or "" for r in line.tasks.values()])))
        if self.asked and rng.random() < 0.5 and line.computing is None:  # as the agent: only to an idle processor
            messages.append(resume(self.asked.pop(0)))
        line.take_turn(messages)
        for instruction in taken(line):
            if isinstance(instruction, Answer):
                self.answer(instruction.task_id.decode())
            elif isinstance(instruction, Wake) and instruction.record.state is ProcessorTaskState.STOPPING_PARKED:
                self.unwinding.append(instruction.record)

    def compute(self) -> None:
        rng, line, computing = self.rng, self.line, self.line.computing
        if computing is None or rng.random() < 0.4:
            return
        if computing.state is ProcessorTaskState.COMPUTING and rng.random() < 0.3:
            assert line.parks(computing, MAIN) is ProcessorOutcome.PARK
            if rng.random() < 0.7:
                assert line.asks_resume(computing)
                self.asked.append(name(computing) or "")
        else:
            assert line.ends(computing) in (ProcessorOutcome.FINISH, ProcessorOutcome.UNWOUND)
            self.answer(name(computing) or "")
        if line.passes_turn(computing):
            line.take_turn([])

    def unwind(self) -> None:
        if self.unwinding and self.rng.random() < 0.5:
            record = self.unwinding.pop(self.rng.randrange(len(self.unwinding)))
            assert self.line.ends(record) is ProcessorOutcome.UNWOUND and not self.line.passes_turn(record)
            self.answer(name(record) or "")
            self.asked = [a for a in self.asked if a != name(record)]


@pytest.mark.parametrize("seed", range(30))
def test_every_task_is_answered_once_and_the_invariants_hold_through_random_histories(seed: int) -> None:
    history = History(seed)
    for _ in range(300):
        history.read()
        history.compute()
        history.unwind()
        check(history.line, history.answered)
    assert history.answered, "tasks were answered in this history"


def test_an_actors_calls_and_stop_go_to_its_start_task_in_order_and_never_wait_for_the_turn() -> None:
    """Checked to fail with calls queued for the turn like tasks (the actor's start task holds it: they waited)."""
    line: TaskLine[LineTask] = TaskLine(MAIN, LineTask)
    start = m.Task(TaskID(b"actor"), ClientID(b"test"), b"", "Pricer", actor=m.ActorSpec())
    record = line.take_turn([start])
    assert record is not None and record.calls is not None and not record.calls
    calls = [m.Task(TaskID(f"call{i}".encode()), ClientID(b"test"), b"", "Pricer.price", actor_id=start.task_id)
             for i in range(3)]  # fmt: skip
    assert line.take_turn([*calls, m.ActorStop(start.task_id)]) is None
    assert list(record.calls) == [*calls, None] and not line.awaiting_turn
    assert line.instructions == [Credited(record)] * 4
    line.instructions.clear()
    stray = m.Task(TaskID(b"stray"), ClientID(b"test"), b"", "Other.price", actor_id=TaskID(b"gone"))
    line.receive([stray])
    assert line.instructions == [Refuse(stray.task_id)]


# ---------------------------------------------------------------- priority order, and tasks the scheduler asks back


def test_staged_tasks_take_the_turn_by_priority_then_in_the_order_received() -> None:
    """Checked to fail with `TaskLine._await_turn` appending."""
    line = served()
    high, higher = replace(task("h"), priority=5), replace(task("H"), priority=9)
    a = line.take_turn([task("a")])
    assert a is not None
    line.receive([task("b"), high, task("c"), higher, replace(task("d"), priority=5)])
    order = [name(a)]
    record: LineTask | None = a
    while record is not None:
        record = end(line, record)
        order.append(name(record))
    assert order == ["a", "H", "h", "d", "b", "c", None]


def test_tasks_asked_back_that_have_not_started_are_given_back_and_a_started_one_stays() -> None:
    """Checked to fail with `TaskLine._give_back` doing nothing."""
    line = served()
    a = line.take_turn([task("a"), task("b"), task("c")])
    assert a is not None
    line.receive([m.TaskReturn((TaskID(b"a"), TaskID(b"c"), TaskID(b"gone")))])
    assert taken(line) == [GiveBack((TaskID(b"c"),))]
    assert name(end(line, a)) == "b" and TaskID(b"c") not in line.tasks
