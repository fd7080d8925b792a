"""A lent processor's results leave on its link together when they are ready together (`ProcessorOutlet.result`,
docs/architecture.md, "Lent processors"): the results of tasks staged behind one another are held while the next one
computes (at most `outlet.MAX_HELD`, `outlet.HOLD_SECONDS`, and only while the next result, if its task computes as
long as the last one did, would come before the hold's end) and go in one message, one send for the processor and one
read for the scheduler; a lone result (nothing staged behind it) leaves at once. Held only where the processor marks the
lent task it computes (`hold_lent`): a crash of the next task then names that task, and the scheduler runs the held
ones again (`worker_sessions._lent_link_gone`), blaming none of them.

A real ZeroMQ link (a ROUTER standing for the scheduler, over inproc) and a real socket pair for the channel. Checked by
hand with the mechanism off (`hold_lent=False`, as before this change): the first test fails (three messages of one
result each); with every result held whatever its task's run time, the long-task test fails (the flusher started);
with the hold's age not counted (each result held when its own task computed less than the hold, as before), the age
test fails.
The lone-result and late-flush tests pass either way: they guard what the batching must not change.
"""

from __future__ import annotations

import os
import socket
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
from scaler.worker.processor.channel import BlockingChannel
from scaler.worker.processor.outlet import HOLD_SECONDS, ProcessorOutlet

pytestmark = pytest.mark.timeout(60)

ADDRESS = "inproc://lent-results-batched"
WAIT_MS = 10_000  #: a bound on every wait for the link (no timing is asserted)


def _task(index: int) -> m.Task:
    return m.Task(TaskID(bytes([index]) * 16), ClientID(b"c" * 16), b"")


def _result(index: int, seconds: float = 0.0) -> m.TaskResult:
    """A result of a task that computed `seconds`."""
    ran = m.RunStamps(1000.0, 1000.0 + seconds, os.getpid())
    return m.TaskResult(TaskID(bytes([index]) * 16), m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"v", ran=ran)


class _Scheduler:
    """The scheduler's end of the lent link: accepts the processor's hello, sends it lent tasks, reads its messages."""

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        self.router = context.socket(zmq.ROUTER)
        self.router.bind(ADDRESS)
        self.peer = b""
        self.parts = 0  #: the ZeroMQ parts of the last message read

    def accept(self, outlet: ProcessorOutlet) -> None:
        assert self.router.poll(WAIT_MS), "no hello on the link"
        self.peer, frame = self.router.recv_multipart()
        assert isinstance(codec.decode(frame), m.Hello)
        self.router.send_multipart([self.peer, codec.encode(m.HelloReply(accepted=True))])
        while not outlet.route_open:
            outlet.take_work()  # what the processor's reading thread does when its select sees the link

    def lend(self, outlet: ProcessorOutlet, tasks: list[m.Task]) -> None:
        self.router.send_multipart([self.peer, *(codec.encode(task) for task in tasks)])
        while not all(outlet.is_lent(task.task_id) for task in tasks):
            outlet.take_work()

    def message(self) -> list[m.Message]:
        """The next message on the link, as the messages its frames hold (a batch may be joined in one frame)."""
        assert self.router.poll(WAIT_MS), "nothing came on the link"
        peer, *frames = self.router.recv_multipart()
        assert peer == self.peer
        self.parts = len(frames)
        return [codec.decode(part) for frame in frames for part in codec.split(frame)]


@contextmanager
def _lent_outlet(hold_lent: bool = True) -> Iterator[tuple[ProcessorOutlet, _Scheduler]]:
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    processor_end, agent_end = socket.socketpair()
    scheduler = _Scheduler(context)

    def open_link() -> zmq.Socket[bytes]:
        link = context.socket(zmq.DEALER)
        link.setsockopt(zmq.ROUTING_ID, b"worker/processor")
        link.connect(ADDRESS)
        return link

    info = m.ProcessorInfo(b"processor", b"worker", True)
    hello = m.Hello(m.PROTOCOL_VERSION, local_python_version(), os.getpid(), "host", info)
    outlet = ProcessorOutlet(
        BlockingChannel(processor_end), open_link, hello, direct_results=False, lend=True, hold_lent=hold_lent
    )
    try:
        outlet.configure()
        scheduler.accept(outlet)
        yield outlet, scheduler
    finally:
        outlet.close()
        processor_end.close()
        agent_end.close()
        scheduler.router.close(linger=0)
        context.term()


def test_the_results_of_staged_lent_tasks_leave_in_one_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outlet_module, "HOLD_SECONDS", 10.0)  # a stalled machine does not end the hold
    with _lent_outlet() as (outlet, scheduler):
        scheduler.lend(outlet, [_task(1), _task(2), _task(3)])
        outlet.result(_result(1), more=True)
        outlet.result(_result(2), more=True)
        outlet.result(_result(3), more=False)  # the last one staged: the three leave now
        assert scheduler.message() == [_result(1), _result(2), _result(3)]
        assert scheduler.parts == 1  # joined in one part: ZeroMQ's and CURVE's costs are per part


def test_a_lone_lent_result_leaves_at_once() -> None:
    """Nothing staged behind it: sent by `result` itself (no flusher thread has started to send it)."""
    with _lent_outlet() as (outlet, scheduler):
        scheduler.lend(outlet, [_task(1)])
        outlet.result(_result(1), more=False)
        assert outlet._flusher is None
        assert scheduler.message() == [_result(1)]


def test_a_held_lent_result_leaves_when_the_next_task_takes_long() -> None:
    """The task after it has not ended: the flusher thread sends it after HOLD_SECONDS, alone."""
    with _lent_outlet() as (outlet, scheduler):
        scheduler.lend(outlet, [_task(1), _task(2)])
        outlet.result(_result(1), more=True)
        assert scheduler.message() == [_result(1)]


def test_the_result_of_a_task_that_computed_longer_than_the_hold_is_not_held() -> None:
    """The next task would not end within HOLD_SECONDS either: holding it would only cost the flusher's wake-up."""
    with _lent_outlet() as (outlet, scheduler):
        scheduler.lend(outlet, [_task(1), _task(2)])
        outlet.result(_result(1, seconds=10 * HOLD_SECONDS), more=True)
        assert outlet._flusher is None
        assert scheduler.message() == [_result(1, seconds=10 * HOLD_SECONDS)]


def test_the_held_results_leave_when_the_next_one_would_come_after_the_holds_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A result waits for the next one only while that one, computing as long as this one did, would come before the
    hold's end: otherwise it would only wait for the flusher thread. (A hold of 10 s here, so that a stalled machine
    cannot make the flusher send the first result alone: the test lasts 2 s, and asserts no timing.)"""
    monkeypatch.setattr(outlet_module, "HOLD_SECONDS", 10.0)
    with _lent_outlet() as (outlet, scheduler):
        scheduler.lend(outlet, [_task(1), _task(2), _task(3)])
        outlet.result(_result(1, seconds=0.1), more=True)
        time.sleep(2.0)  # the first held for 2 s: the next, of 8.5 s, would end 10.5 s after it
        outlet.result(_result(2, seconds=8.5), more=True)
        assert not outlet._held, "held past the hold's end"
        assert scheduler.message() == [_result(1, seconds=0.1), _result(2, seconds=8.5)]


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
    """Results held batch after batch (each batch sent by the processor itself, its last task having nothing staged
    behind it) wake the flusher thread once: it goes on looking at the time while holds come, and parks only after
    FLUSHER_REST_SECONDS without one; the next hold then wakes it again. Checked to fail with every hold waking it
    (as before: two wake-ups of that thread per held batch)."""
    monkeypatch.setattr(outlet_module, "HOLD_SECONDS", 2.0)  # long enough that a stalled test ends no hold
    monkeypatch.setattr(outlet_module, "FLUSHER_REST_SECONDS", 3.0)
    with _lent_outlet() as (outlet, scheduler):
        woken = outlet._holding = _CountedEvent()
        scheduler.lend(outlet, [_task(index) for index in range(1, 7)])
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


def test_lent_results_are_not_held_without_a_computing_mark() -> None:
    """Without a mark a crash of the next task would be blamed on the oldest task sent, a held one: each goes alone."""
    with _lent_outlet(hold_lent=False) as (outlet, scheduler):
        scheduler.lend(outlet, [_task(1), _task(2)])
        outlet.result(_result(1), more=True)
        assert outlet._flusher is None
        outlet.result(_result(2), more=False)
        assert scheduler.message() == [_result(1)]
        assert scheduler.message() == [_result(2)]


def test_a_lent_processors_housekeeping_leaves_its_link_to_its_reading_thread() -> None:
    """`read_link` (called after every task and every read of the channel) does nothing on a lent processor: every
    operation on its link drains it, and its reading thread's select watches it (`take_work` reads it). Checked by hand
    with the mechanism off (read_link reading the link, as before): this test fails (the task read by read_link)."""
    with _lent_outlet() as (outlet, scheduler):
        scheduler.router.send_multipart([scheduler.peer, codec.encode(_task(1))])
        assert scheduler.router.poll(0, zmq.POLLOUT)
        outlet.read_link()
        assert not outlet.is_lent(_task(1).task_id)
        while not outlet.is_lent(_task(1).task_id):
            outlet.take_work()
