"""A processor's link to the scheduler (`processor/outlet.py`, `processor/link_state.py`), on a real ZeroMQ link (a
ROUTER standing for the scheduler, over inproc):

- the results of tasks staged behind one another are held while the next one computes (at most `outlet.MAX_HELD`,
  `outlet.HOLD_SECONDS`, and only while the next result, if its task computes as long as the last one did, would come
  before the hold's end) and go in one message, one send for the processor and one read for the scheduler; a lone
  result leaves at once; nothing is held without a computing mark (`hold`: a crash of the next task then names it);
- a scheduler restart loses no result: each is kept until an echo names it read; a hello names the tasks held and
  kept; once a hello is accepted the kept results go again, with a ProcessorBlocked for each parked task; a scheduler
  that forgot the link is said hello again;
- a processor still writing results readers follow says so before the result that ends its task, and again once done.

Checked by hand with each mechanism off: `hold=False` as before the batching: the first test fails (three messages);
every result held whatever its task's run time: the long-task test fails; the hold's age not counted: the age test
fails; `ProcessorLinkState.again` returning nothing: the restart test fails; `_told_writing` never set: the writing
test fails.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import zmq

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import ClientID, TaskID
from scaler.worker.processor import outlet as outlet_module
from scaler.worker.processor.outlet import HOLD_SECONDS, ProcessorOutlet

pytestmark = pytest.mark.timeout(60)

ADDRESS = "inproc://processor-link"
WAIT_MS = 10_000  #: a bound on every wait for the link (no timing is asserted)


def _task(index: int) -> m.Task:
    return m.Task(TaskID(bytes([index]) * 16), ClientID(b"c" * 16), b"")


def _result(index: int, seconds: float = 0.0) -> m.TaskResult:
    """A result of a task that computed `seconds`."""
    ran = m.RunStamps(1000.0, 1000.0 + seconds, os.getpid())
    return m.TaskResult(TaskID(bytes([index]) * 16), m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"v", ran=ran)


class _Scheduler:
    """The scheduler's end of the link: accepts the processor's hello, sends it tasks, reads its messages."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        self.router = context.socket(zmq.ROUTER)
        self.router.bind(ADDRESS)
        self.peer = b""
        self.parts = 0  #: the ZeroMQ parts of the last message read

    def accept(self) -> m.Hello:
        (hello,) = self.message()
        assert isinstance(hello, m.Hello)
        self.send(m.HelloReply(accepted=True))
        return hello

    def send(self, *messages: m.Message) -> None:
        self.router.send_multipart([self.peer, *(codec.encode(message) for message in messages)])

    def give(self, outlet: ProcessorOutlet, tasks: list[m.Task]) -> None:
        """Tasks on the link, read by the processor (as its reading thread does when its select sees the link)."""
        self.send(*tasks)
        taken: list[m.Message] = []
        while len(taken) < len(tasks):
            taken += outlet.take_work()

    def message(self) -> list[m.Message]:
        """The next message on the link, as the messages its frames hold (a batch may be joined in one frame)."""
        assert self.router.poll(WAIT_MS), "nothing came on the link"
        self.peer, *frames = self.router.recv_multipart()
        self.parts = len(frames)
        return [codec.decode(part) for frame in frames for part in codec.split(frame)]


@contextmanager
def _link(hold: bool = True, writing: list[bool] | None = None) -> Iterator[tuple[ProcessorOutlet, _Scheduler]]:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    scheduler = _Scheduler(context)

    def open_link() -> zmq.Socket[bytes]:
        link = context.socket(zmq.DEALER)
        link.setsockopt(zmq.ROUTING_ID, b"worker/processor")
        link.connect(ADDRESS)
        return link

    info = m.ProcessorInfo(b"processor", b"worker")
    hello = m.Hello(m.PROTOCOL_VERSION, local_python_version(), os.getpid(), "host", info)
    flag = writing if writing is not None else [False]
    outlet = ProcessorOutlet(open_link, hello, hold, lambda: flag[0])
    try:
        outlet.configure()
        scheduler.accept()
        yield outlet, scheduler
    finally:
        outlet.close()
        scheduler.router.close(linger=0)
        context.term()


def test_the_results_of_staged_tasks_leave_in_one_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outlet_module, "HOLD_SECONDS", 10.0)  # a stalled machine does not end the hold
    with _link() as (outlet, scheduler):
        scheduler.give(outlet, [_task(1), _task(2), _task(3)])
        outlet.result(_result(1), more=True)
        outlet.result(_result(2), more=True)
        outlet.result(_result(3), more=False)  # the last one staged: the three leave now
        assert scheduler.message() == [_result(1), _result(2), _result(3)]
        assert scheduler.parts == 1  # joined in one part: ZeroMQ's and CURVE's costs are per part


def test_a_lone_result_leaves_at_once() -> None:
    """Nothing staged behind it: sent by `result` itself (no flusher thread has started to send it)."""
    with _link() as (outlet, scheduler):
        scheduler.give(outlet, [_task(1)])
        outlet.result(_result(1), more=False)
        assert outlet._flusher is None
        assert scheduler.message() == [_result(1)]


def test_a_held_result_leaves_when_the_next_task_takes_long() -> None:
    """The task after it has not ended: the flusher thread sends it after HOLD_SECONDS, alone."""
    with _link() as (outlet, scheduler):
        scheduler.give(outlet, [_task(1), _task(2)])
        outlet.result(_result(1), more=True)
        assert scheduler.message() == [_result(1)]


def test_the_result_of_a_task_that_computed_longer_than_the_hold_is_not_held() -> None:
    """The next task would not end within HOLD_SECONDS either: holding it would only cost the flusher's wake-up."""
    with _link() as (outlet, scheduler):
        scheduler.give(outlet, [_task(1), _task(2)])
        outlet.result(_result(1, seconds=10 * HOLD_SECONDS), more=True)
        assert outlet._flusher is None
        assert scheduler.message() == [_result(1, seconds=10 * HOLD_SECONDS)]


def test_the_held_results_leave_when_the_next_one_would_come_after_the_holds_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A result waits for the next one only while that one, computing as long as this one did, would come before the
    hold's end. (A hold of 10 s here, so that a stalled machine cannot make the flusher send the first result alone:
    the test lasts 0.2 s, and asserts no timing.)"""
    monkeypatch.setattr(outlet_module, "HOLD_SECONDS", 10.0)
    with _link() as (outlet, scheduler):
        scheduler.give(outlet, [_task(1), _task(2), _task(3)])
        outlet.result(_result(1, seconds=0.1), more=True)
        time.sleep(0.2)  # the first held for 0.2 s or more: the next, of 9.9 s, would end 10.1 s or more after it
        outlet.result(_result(2, seconds=9.9), more=True)
        assert not outlet._held, "held past the hold's end"
        assert scheduler.message() == [_result(1, seconds=0.1), _result(2, seconds=9.9)]


class _CountedEvent(threading.Event):
    """An Event that counts its `set` calls: how often a hold woke the flusher."""

    def __init__(self) -> None:
        super().__init__()
        self.sets = 0

    def set(self) -> None:
        self.sets += 1
        super().set()


def test_holds_that_follow_each_other_wake_the_flusher_once_and_it_parks_when_they_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Results held batch after batch wake the flusher thread once: it goes on looking at the time while holds come,
    and parks only after FLUSHER_REST_SECONDS without one; the next hold then wakes it again. Checked to fail with
    every hold waking it (two wake-ups of that thread per held batch)."""
    # a hold long enough that a stalled test ends none; the flusher parks at its first look after one (about 1 s)
    monkeypatch.setattr(outlet_module, "HOLD_SECONDS", 1.0)
    monkeypatch.setattr(outlet_module, "FLUSHER_REST_SECONDS", 0.5)
    with _link() as (outlet, scheduler):
        woken = outlet._holding = _CountedEvent()
        scheduler.give(outlet, [_task(index) for index in range(1, 7)])
        for first in (1, 3):  # two batches of two, one right after the other
            outlet.result(_result(first), more=True)
            outlet.result(_result(first + 1), more=False)
            assert scheduler.message() == [_result(first), _result(first + 1)]
        assert woken.sets == 1, "a hold woke the flusher while it was looking at the time already"
        deadline = time.monotonic() + 30.0
        while not outlet._flusher_parked:  # no hold for FLUSHER_REST_SECONDS: it parks
            assert time.monotonic() < deadline, "the flusher never parked"
            time.sleep(0.01)
        outlet.result(_result(5), more=True)
        assert woken.sets == 2, "the hold after a rest did not wake the parked flusher"
        outlet.result(_result(6), more=False)
        assert scheduler.message() == [_result(5), _result(6)]


def test_results_are_not_held_without_a_computing_mark() -> None:
    """Without a mark a crash of the next task would be blamed on the oldest task sent, a held one: each goes alone."""
    with _link(hold=False) as (outlet, scheduler):
        scheduler.give(outlet, [_task(1), _task(2)])
        outlet.result(_result(1), more=True)
        assert outlet._flusher is None
        outlet.result(_result(2), more=False)
        assert scheduler.message() == [_result(1)]
        assert scheduler.message() == [_result(2)]


def test_a_restarted_scheduler_gets_the_results_it_may_not_have_read_and_the_tasks_held() -> None:
    """What a scheduler restart needs from the link: the hello to a new instance names the tasks held (unfinished, or
    with a result not named read), and once accepted the kept results go again, then a ProcessorBlocked per parked
    task; a result named read in an echo is forgotten."""
    with _link() as (outlet, scheduler):
        scheduler.give(outlet, [_task(1), _task(2), _task(3)])
        outlet.result(_result(1))
        outlet.result(_result(2))
        outlet.send(m.ProcessorBlocked(_task(3).task_id))
        assert [scheduler.message() for _ in range(3)] == [
            [_result(1)],
            [_result(2)],
            [m.ProcessorBlocked(_task(3).task_id)],
        ]
        scheduler.send(m.HeartbeatEcho(results_read=(_task(1).task_id,)))
        scheduler.send(m.ProtocolError("unknown peer", m.ProtocolErrorKind.UNKNOWN_PEER))  # a new instance
        outlet.take_work()
        hello = scheduler.accept()
        assert isinstance(hello.info, m.ProcessorInfo)
        assert set(hello.info.held_tasks) == {_task(2).task_id, _task(3).task_id}, "result 1 was named read"
        outlet.take_work()
        assert scheduler.message() == [_result(2), m.ProcessorBlocked(_task(3).task_id)]


def test_a_processor_still_writing_says_so_before_the_result_and_once_it_is_done() -> None:
    """Issue 42: a large result's readers follow its write; the scheduler neither kills nor retires the processor
    meanwhile, so it hears of the writes before the result, and once they are done."""
    writing = [True]
    with _link(writing=writing) as (outlet, scheduler):
        scheduler.give(outlet, [_task(1), _task(2)])
        outlet.send(m.TaskLog(_task(1).task_id, m.LogStream.STDOUT, "hi\n"))
        assert scheduler.message() == [m.TaskLog(_task(1).task_id, m.LogStream.STDOUT, "hi\n")], "a log brings none"
        outlet.result(_result(1))
        assert scheduler.message() == [m.ProcessorWriting(True), _result(1)]
        outlet.result(_result(2))
        assert scheduler.message() == [_result(2)], "told once while the writes go on"
        outlet.settled()  # a write ended, another is still under way
        writing[0] = False
        outlet.settled()
        assert scheduler.message() == [m.ProcessorWriting(False)]
        outlet.settled()
        assert not scheduler.router.poll(100), "told once that they are done"
