"""A processor's task threads (scaler/worker/processor/threads.py) against the contract the scheduler relies on: tasks
sent ahead run one at a time in order, each answered once; a TaskCancel for a task not started removes it
(answered CANCELED), even one sent while an earlier task computed; parked tasks let the next one compute, and go on
once their futures are done and the turn is free.

Each test plays the scheduler on a real socket pair with a scripted processor in a child process
(tests/unit/worker/scripted_processor.py: the socket stands for its link), whose tasks report where they ran and
whether they overlapped.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, TaskID
from scaler.worker.processor.channel import FrameReader, encode_frames
from tests.unit.worker.scripted_processor import Trace

ROOT = Path(__file__).resolve().parents[3]
READ_TIMEOUT_SECONDS = 20.0


def task(name: str, behaviour: str) -> m.Task:
    """A scripted task: `behaviour` is one of scripted_processor's function names."""
    return m.Task(TaskID(name.encode()), ClientID(b"test"), name.encode(), behaviour)


def cancel(*names: str) -> m.TaskCancel:
    return m.TaskCancel(tuple(TaskID(name.encode()) for name in names))


def trace(result: m.TaskResult) -> Trace:
    return Trace(**json.loads(result.payload))


class AgentEnd:
    """The agent's end of a scripted processor's channel: sends batches, reads and keeps what it hears."""

    def __init__(self, folder: Path, *options: str) -> None:
        self.folder = folder
        self.socket, processor_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.socket.settimeout(READ_TIMEOUT_SECONDS)
        self._on_link = 0
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.unit.worker.scripted_processor",
                str(processor_end.fileno()),
                str(folder),
                *options,
            ],
            pass_fds=[processor_end.fileno()],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        processor_end.close()
        self.heard: list[m.Message] = []
        self._unread: list[m.Message] = []
        self._reader = FrameReader()

    def send(self, *messages: m.Message) -> None:
        """One write, as the agent sends what it has for a processor."""
        self.socket.sendall(encode_frames([codec.encode(message) for message in messages]))

    def on_quiet_link(self, message: m.Message) -> None:
        """A message on a `--quiet-link` processor's link (scripted_processor.py): a file, written whole."""
        self._on_link += 1
        staged = self.folder / f"staged-{self._on_link}"
        staged.write_bytes(codec.encode(message))
        staged.rename(self.folder / f"link-{self._on_link}")

    def release(self, name: str) -> None:
        (self.folder / f"release-{name}").touch()

    def until(self, wanted: Callable[[m.Message], bool]) -> m.Message:
        """The first message not taken yet that is `wanted`, reading as needed (all are kept in `heard`)."""
        while True:
            for index, message in enumerate(self._unread):
                if wanted(message):
                    return self._unread.pop(index)
            data = self.socket.recv(1 << 20)
            assert data, f"the processor closed the channel (exit {self.process.wait(READ_TIMEOUT_SECONDS)})"
            messages = [codec.decode(frame) for frame in self._reader.feed(data)]
            self.heard += messages
            self._unread += messages

    def result(self, name: str) -> m.TaskResult:
        message = self.until(lambda message: isinstance(message, m.TaskResult) and message.task_id == name.encode())
        assert isinstance(message, m.TaskResult)
        return message

    def cancelled(self, name: str) -> m.TaskCancelConfirm:
        """Its CANCELED answer."""
        message = self.until(lambda heard: isinstance(heard, m.TaskCancelConfirm) and heard.task_id == name.encode())
        assert isinstance(message, m.TaskCancelConfirm) and message.outcome is m.CancelOutcome.CANCELED
        return message

    def results(self, *names: str) -> list[m.TaskResult]:
        return [self.result(name) for name in names]

    def started(self, name: str) -> None:
        self.until(lambda message: isinstance(message, m.TaskLog) and message.text == f"started {name}")

    def heard_of(self, message: m.Message) -> None:
        self.until(lambda heard: heard == message)

    def close(self) -> int:
        """Close the agent's side (the processor sees the end of the channel); hear out the processor; its exit
        code."""
        self.socket.shutdown(socket.SHUT_WR)
        while data := self.socket.recv(1 << 20):
            self.heard += [codec.decode(frame) for frame in self._reader.feed(data)]
        self.socket.close()
        return self.process.wait(READ_TIMEOUT_SECONDS)

    def started_names(self) -> list[str]:
        return [
            message.text.removeprefix("started ")
            for message in self.heard
            if isinstance(message, m.TaskLog) and message.text.startswith("started ")
        ]

    def result_names(self) -> list[str]:
        return [message.task_id.decode() for message in self.heard if isinstance(message, m.TaskResult)]

    def index(self, message: m.Message) -> int:
        return self.heard.index(message)


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[AgentEnd]:
    yield from _agent_end(AgentEnd(tmp_path))


@pytest.fixture
def quiet_agent(tmp_path: Path) -> Iterator[AgentEnd]:
    """A processor whose link only its watch reads (scripted_processor's --quiet-link)."""
    yield from _agent_end(AgentEnd(tmp_path, "--quiet-link"))


def _agent_end(end: AgentEnd) -> Iterator[AgentEnd]:
    yield end
    if end.process.poll() is None:
        end.process.kill()
        end.process.wait()
    end.socket.close()


@pytest.mark.timeout(60)
def test_tasks_sent_together_run_in_order_one_at_a_time_on_the_main_thread(agent: AgentEnd) -> None:
    behaviours = {"a": "sleep", "b": "quick", "c": "sleep", "d": "signal", "e": "quick"}
    agent.send(*(task(name, behaviour) for name, behaviour in behaviours.items()))
    results = agent.results(*behaviours)
    assert agent.close() == 0  # the agent closing the channel ends run()
    assert agent.result_names() == list(behaviours)  # in order, once each
    assert agent.started_names() == list(behaviours)
    assert all(result.status is m.ResultStatus.SUCCESS for result in results)
    assert [trace(result).overlapped for result in results] == [False] * len(results)
    assert [trace(result).on_main_thread for result in results] == [True] * len(results)


@pytest.mark.timeout(60)
def test_a_task_that_parks_lets_the_waiting_tasks_compute_one_at_a_time(agent: AgentEnd) -> None:
    agent.send(task("parent", "park"), task("s2", "sleep"), task("s3", "sleep"))
    agent.release("parent")  # its "nested tasks" are done at once: it asks to resume while s2 and s3 compute
    s2, s3 = agent.results("s2", "s3")
    agent.heard_of(m.ProcessorResumeRequest(TaskID(b"parent")))  # it goes on once the turn is free
    parent = agent.result("parent")
    agent.send(task("after", "signal"))  # nothing parked again: back on the main thread
    after = agent.result("after")
    assert agent.close() == 0

    assert agent.started_names() == ["parent", "s2", "s3", "after"]
    assert agent.result_names() == ["s2", "s3", "parent", "after"]
    assert agent.index(m.ProcessorBlocked(TaskID(b"parent"))) < agent.index(s2)
    assert [trace(result).overlapped for result in (s2, s3, parent, after)] == [False] * 4
    assert trace(parent).on_main_thread and trace(after).on_main_thread
    assert not trace(s2).on_main_thread and not trace(s3).on_main_thread  # the main thread waits in the parent


@pytest.mark.timeout(60)
def test_a_cancel_behind_the_tasks_in_one_write_removes_the_waiting_task(agent: AgentEnd) -> None:
    agent.send(task("a", "sleep"), task("b", "sleep"), task("c", "sleep"), cancel("b"))
    a, _ = agent.results("a", "c")
    b = agent.cancelled("b")
    assert agent.close() == 0
    assert agent.started_names() == ["a", "c"]
    assert agent.result_names() == ["a", "c"]
    assert agent.index(b) < agent.index(a), "b is answered as soon as the cancel is read"


@pytest.mark.timeout(60)
def test_a_task_cancelled_in_the_write_that_brought_it_is_answered_at_once(agent: AgentEnd) -> None:
    """The scheduler sent a task to an idle processor and counts it as computing; a cancel follows before the processor
    read either. The task never runs, and its CANCELED answer frees the slot (without it the scheduler has the
    processor killed after a grace period, and the parents waiting in it with it)."""
    agent.send(task("b", "sleep"), cancel("b"))
    agent.cancelled("b")
    agent.send(task("c", "quick"))
    agent.result("c")
    assert agent.close() == 0
    assert agent.started_names() == ["c"]


@pytest.mark.timeout(60)
def test_a_cancel_sent_while_an_earlier_task_computes_is_heard_before_the_next_starts(agent: AgentEnd) -> None:
    agent.send(task("a", "hold"), task("b", "quick"), task("c", "quick"))
    agent.started("a")
    agent.send(cancel("b"))
    agent.release("a")
    agent.results("a", "c")
    agent.cancelled("b")
    assert agent.close() == 0
    assert agent.started_names() == ["a", "c"]


@pytest.mark.timeout(60)
def test_a_cancel_stops_the_task_computing_among_parked_ones_and_the_next_one_runs(agent: AgentEnd) -> None:
    agent.send(task("parent", "park"))
    agent.heard_of(m.ProcessorBlocked(TaskID(b"parent")))
    agent.send(task("r", "hold"), task("q", "sleep"))
    agent.started("r")
    agent.send(cancel("r"))
    agent.cancelled("r")
    q = agent.result("q")
    agent.release("parent")
    agent.heard_of(m.ProcessorResumeRequest(TaskID(b"parent")))
    assert agent.result("parent").status is m.ResultStatus.SUCCESS
    assert agent.close() == 0
    assert agent.started_names() == ["parent", "r", "q"]
    assert agent.result_names() == ["q", "parent"]
    assert q.status is m.ResultStatus.SUCCESS and not trace(q).overlapped


@pytest.mark.timeout(60)
def test_a_cancel_stops_a_parked_task_and_the_main_thread_serves_again(agent: AgentEnd) -> None:
    agent.send(task("parent", "park"))
    agent.heard_of(m.ProcessorBlocked(TaskID(b"parent")))
    agent.send(cancel("parent"))  # its nested task is cancelled, which ends its wait
    agent.cancelled("parent")
    agent.send(task("after", "signal"))
    after = agent.result("after")
    assert agent.close() == 0
    assert trace(after).on_main_thread
    assert m.ProcessorResumeRequest(TaskID(b"parent")) not in agent.heard


@pytest.mark.timeout(60)
def test_the_agent_closing_the_channel_ends_the_processor_while_tasks_wait(agent: AgentEnd) -> None:
    agent.send(task("a", "hold"), task("b", "quick"))
    agent.started("a")
    agent.socket.shutdown(socket.SHUT_WR)
    agent.release("a")
    assert agent.process.wait(READ_TIMEOUT_SECONDS) == 0


@pytest.mark.timeout(60)
def test_the_agent_closing_the_channel_ends_the_processor_while_a_task_is_parked(agent: AgentEnd) -> None:
    agent.send(task("parent", "park"))
    agent.heard_of(m.ProcessorBlocked(TaskID(b"parent")))
    assert agent.close() == 0


# ---------------------------------------------------------------- under churn


def check_answers(agent: AgentEnd, answered: list[str], cancelled: set[str]) -> None:
    """Each task not cancelled answered once with SUCCESS, in the order given; a cancelled one at most once, with its
    result or CANCELED (a cancel that crossed its start stops it, or comes too late); no task computed while another
    did."""
    answers = [message for message in agent.heard if isinstance(message, (m.TaskResult, m.TaskCancelConfirm))]
    results = [message for message in answers if isinstance(message, m.TaskResult)]
    names = [answer.task_id.decode() for answer in answers]
    assert [name for name in names if name not in cancelled] == answered
    assert all(names.count(name) <= 1 for name in cancelled)
    assert all(result.status is m.ResultStatus.SUCCESS for result in results)
    overlapped = [result.task_id for result in results if result.payload and trace(result).overlapped]
    assert overlapped == []
    started = agent.started_names()
    assert len(started) == len(set(started))


@pytest.mark.timeout(120)
def test_a_window_of_staged_tasks_with_cancels_at_random_moments(agent: AgentEnd) -> None:
    """Plain tasks, the agent keeping 16 in flight and cancelling one of those not answered now and then."""
    rng = random.Random(11)
    names = [f"t{i}" for i in range(600)]
    unanswered: list[str] = []
    cancelled: set[str] = set()
    next_index = 0
    while next_index < len(names) or unanswered:
        count = min(16 - len(unanswered), len(names) - next_index)
        batch = names[next_index : next_index + count]
        next_index += count
        unanswered += batch
        messages: list[m.Message] = [task(name, rng.choice(("quick", "nap"))) for name in batch]
        if len(unanswered) > 1 and rng.random() < 0.3:
            victim = rng.choice(unanswered[1:])
            cancelled.add(victim)
            unanswered.remove(victim)
            messages.append(cancel(victim))
        agent.send(*messages)
        if unanswered:
            agent.result(unanswered.pop(0))
    assert agent.close() == 0
    check_answers(agent, [name for name in names if name not in cancelled], cancelled)
    results = [message for message in agent.heard if isinstance(message, m.TaskResult) and message.payload]
    assert all(trace(result).on_main_thread for result in results)


@pytest.mark.timeout(120)
def test_rounds_of_tasks_staged_behind_a_parking_parent_with_cancels(agent: AgentEnd) -> None:
    """Each round stages 15 naps behind a parent that parks at once and asks to resume at once (its nested work
    is done), and cancels 3 of the naps at random moments; the parent goes on when its turn comes (behind the naps
    read before it asked, a cancelled one still unwinding included)."""
    rng = random.Random(5)
    answered: list[str] = []
    cancelled: set[str] = set()
    for round_index in range(20):
        parent, naps = f"p{round_index}", [f"n{round_index}-{i}" for i in range(15)]
        agent.release(parent)
        agent.send(task(parent, "park"), *(task(name, "nap") for name in naps))
        victims = set(rng.sample(naps, 3))
        cancel_at = {victim: rng.randrange(12) for victim in victims}  #: before waiting for the nth nap's result
        cancelled |= victims
        for index, name in enumerate(naps):
            due = [victim for victim, at in cancel_at.items() if at == index]
            if due:
                agent.send(cancel(*due))
            if name not in victims:
                agent.result(name)
        agent.heard_of(m.ProcessorResumeRequest(TaskID(parent.encode())))
        result = agent.result(parent)
        assert trace(result).on_main_thread
        assert agent.index(m.ProcessorBlocked(TaskID(parent.encode()))) < min(
            agent.index(message)
            for message in agent.heard
            if isinstance(message, m.TaskResult)
            and message.task_id.decode() in naps
            and message.status is m.ResultStatus.SUCCESS  # a nap cancelled before it ran is answered at once
        )
    assert agent.close() == 0
    answered = [message.task_id.decode() for message in agent.heard if isinstance(message, m.TaskResult)]
    answered = [name for name in answered if name not in cancelled]
    assert len(answered) == 20 * 13, "each parent and each nap not cancelled answered once"
    check_answers(agent, answered, cancelled)


@pytest.mark.timeout(60)
def test_what_the_watch_reads_for_an_actor_waiting_in_its_own_read_wakes_it(quiet_agent: AgentEnd) -> None:
    """An actor's thread waiting for a call holds the baton: it reads the channel and the link itself, in a select.
    The processor's watch reads them too; a call or stop it read used to reach the actor's calls with nothing to wake
    that select (the watch's read had consumed the link descriptor's edge), so the call waited until the holder's
    housekeeping wait ended: 30 s in a worker. Checked to fail (the call's result never comes) with
    `_wake_holder_locked` doing nothing."""
    agent = quiet_agent
    agent.send(m.Task(TaskID(b"actor"), ClientID(b"test"), b"", "Echo", actor=m.ActorSpec()))
    agent.until(lambda message: isinstance(message, m.ActorReady))
    for index in range(3):
        call = m.Task(TaskID(f"call-{index}".encode()), ClientID(b"test"), f"body {index}".encode(), "echo",
                      actor_id=TaskID(b"actor"))  # fmt: skip
        agent.on_quiet_link(call)
        assert agent.result(f"call-{index}").payload == f"body {index}".encode()
    agent.on_quiet_link(m.ActorStop(TaskID(b"actor")))
    assert agent.result("actor").status is m.ResultStatus.SUCCESS
    assert agent.close() == 0
