"""A thread that waits for an answer reads the socket itself (`scaler.io.waiting_reader`), on real ZeroMQ sockets and a
real asyncio loop on its own thread, as the client's I/O thread runs it: the answer is handled on the waiting thread
(the loop's thread does not wake for it), messages are handled in the order they came whoever reads them, and a
waiter whose answer comes another way (the loop read it, another thread completed it, the socket closed) wakes at
once instead of sleeping on (the safety net's sleep is made an hour here, so that a missing wake-up hangs the test
into its timeout instead of passing late)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import zmq

from scaler.io import waiting_reader
from scaler.io.waiting_reader import WaitingReader, standby_loop
from scaler.io.zmq_async import AsyncSocket

pytestmark = pytest.mark.skipif(not hasattr(__import__("select"), "epoll"), reason="the standby needs epoll (Linux)")


class _Connection:
    """A DEALER read by an AsyncSocket on a loop of its own thread, and the ROUTER that answers it."""

    def __init__(self, name: str) -> None:
        self.context = zmq.Context()
        self.router = self.context.socket(zmq.ROUTER)
        self.router.bind(f"inproc://{name}")
        self.dealer = self.context.socket(zmq.DEALER)
        self.dealer.setsockopt(zmq.IDENTITY, b"dealer")
        self.dealer.connect(f"inproc://{name}")
        self.handled: list[tuple[bytes, int]] = []  #: each message, and the thread that handled it
        self.loop, standby = standby_loop()
        assert standby is not None
        self.standby = standby
        self.lock, self.reading = threading.Lock(), threading.RLock()
        self.answering = threading.Lock()
        self.on_message: Any = None  #: called after each message is noted (a test's own reaction)
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.socket = AsyncSocket(self.loop, self.dealer, self._handle, lock=self.lock, reading=self.reading)
            self.reader = WaitingReader(self.socket, self.standby)
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(10)
        running = threading.Event()  # the loop ran its first callbacks (the socket's own first drain among them)
        self.loop.call_soon_threadsafe(running.set)
        running.wait(10)

    def _handle(self, frames: list[bytes]) -> None:
        self.handled.append((frames[0], threading.get_ident()))
        if self.on_message is not None:
            self.on_message(frames[0])

    def answer(self, *payloads: bytes) -> None:
        with self.answering:  # the ROUTER may be used by several threads of a test, never at once
            for payload in payloads:
                self.router.send_multipart([b"dealer", payload])

    def answer_soon(self, *payloads: bytes) -> None:
        """Answer from another thread once a waiter reads the socket (the calling thread, about to wait): an answer
        sent before then is the loop's to read (on a loaded machine a fixed delay was not always enough)."""

        def answer_once_read() -> None:
            deadline = time.monotonic() + 10
            while not self.reader.reading and time.monotonic() < deadline:
                time.sleep(0.001)
            self.answer(*payloads)

        threading.Thread(target=answer_once_read, daemon=True).start()

    def close(self) -> None:
        def stop() -> None:
            self.reader.close()
            self.socket.close()
            self.loop.stop()

        self.loop.call_soon_threadsafe(stop)
        self.thread.join(10)
        self.loop.close()
        self.standby.close()
        self.router.close(linger=0)
        self.context.term()


@pytest.fixture
def connection(request: pytest.FixtureRequest) -> Iterator[_Connection]:
    made = _Connection(request.node.name)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def no_safety_net(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiting_reader, "LONGEST_SLEEP_SECONDS", 3600.0)


def _settled(connection: _Connection, count: int) -> None:
    """Wait (at most 10 s) until the loop's thread handled `count` messages in all."""
    done = threading.Event()
    connection.loop.call_soon_threadsafe(lambda: done.set() if len(connection.handled) >= count else None)
    for _ in range(1000):
        if len(connection.handled) >= count:
            return
        done.wait(0.01)
    raise AssertionError(f"{len(connection.handled)} of {count} messages handled")


@pytest.mark.timeout(30)
def test_the_waiting_thread_handles_its_answer_itself_and_the_loop_stays_asleep(
    connection: _Connection, no_safety_net: None
) -> None:
    me = threading.get_ident()
    connection.answer_soon(b"answer")
    connection.reader.wait(lambda: bool(connection.handled), None)
    assert connection.handled == [(b"answer", me)], "the answer was handled on the loop's thread, not the waiter's"
    # the loop watches the socket again once nobody waits
    connection.answer(b"later")
    _settled(connection, 2)
    assert connection.handled[1] == (b"later", connection.thread.ident)


@pytest.mark.timeout(30)
def test_a_waiter_whose_answer_the_loop_read_wakes_at_once(connection: _Connection, no_safety_net: None) -> None:
    """The loop's thread may read while a waiter sleeps: another thread's operation on the socket (a send of the
    loop's own, and its check for waiting messages) consumed the descriptor's readiness edge, so the waiter's poll
    does not fire, and the loop drains the answer. The loop then wakes the waiter, who would otherwise sleep on."""

    class EdgeTakenFirst:
        """The waiter's poll, whose first call lets the answer arrive, has its edge consumed under the socket's lock
        (as `AsyncSocket.send` does), and a drain scheduled on the loop, before the waiter sleeps."""

        def __init__(self, poll: Any) -> None:
            self.poll_object, self.first = poll, True

        def poll(self, milliseconds: float) -> Any:
            if self.first:
                self.first = False
                connection.answer(b"answer")
                with connection.lock:
                    while not connection.dealer.getsockopt(zmq.EVENTS) & zmq.POLLIN:
                        pass
                connection.loop.call_soon_threadsafe(connection.socket.drain)
            return self.poll_object.poll(milliseconds)

    connection.reader._poll = EdgeTakenFirst(connection.reader._poll)  # type: ignore[assignment]
    connection.reader.wait(lambda: bool(connection.handled), None)
    assert connection.handled == [(b"answer", connection.thread.ident)]


@pytest.mark.timeout(30)
def test_a_waiter_wakes_when_its_condition_is_met_on_another_thread(
    connection: _Connection, no_safety_net: None
) -> None:
    completed = threading.Event()

    def complete() -> None:
        completed.set()
        connection.reader.wake()  # what a future's done callback does (ClientAgent.wake_reader)

    threading.Timer(0.05, complete).start()
    connection.reader.wait(completed.is_set, None)
    assert completed.is_set()


@pytest.mark.timeout(30)
def test_closing_the_socket_wakes_its_waiter(connection: _Connection, no_safety_net: None) -> None:
    threading.Timer(0.05, lambda: connection.loop.call_soon_threadsafe(connection.reader.close)).start()
    connection.reader.wait(lambda: False, None)
    assert not connection.reader.reading


@pytest.mark.timeout(30)
def test_a_waiter_gives_up_at_its_timeout(connection: _Connection) -> None:
    connection.reader.wait(lambda: False, 0.05)
    assert not connection.reader.reading
    connection.answer(b"after")  # and the loop reads again
    _settled(connection, 1)


@pytest.mark.timeout(30)
def test_messages_are_handled_in_the_order_they_came_whoever_reads_them(connection: _Connection) -> None:
    """Each waiter reads a few, the loop the rest: every message once, in order."""
    count = 300
    sent = [b"%04d" % index for index in range(count)]
    sender = threading.Thread(target=connection.answer, args=sent)
    sender.start()
    for index in range(0, count, 7):
        connection.reader.wait(lambda index=index: len(connection.handled) > index, 5.0)
    sender.join(10)
    _settled(connection, count)
    assert [payload for payload, _thread in connection.handled] == sent


@pytest.mark.timeout(30)
def test_a_handler_of_the_waiting_thread_may_wait_again_on_that_thread(
    connection: _Connection, no_safety_net: None
) -> None:
    """A future's callback that waits on another future runs on the reading thread: it goes on reading there (the
    loop's thread is on standby and nobody else would read)."""
    nested_done = threading.Event()
    seen_by_the_nested_wait: list[int] = []

    def on_message(payload: bytes) -> None:
        if payload == b"first":
            connection.reader.wait(lambda: len(connection.handled) >= 2, None)
            seen_by_the_nested_wait.append(len(connection.handled))
            nested_done.set()

    connection.on_message = on_message
    connection.answer_soon(b"first", b"second")
    connection.reader.wait(nested_done.is_set, None)
    assert seen_by_the_nested_wait == [2], "the nested wait returned before its message was read"
    assert [payload for payload, _thread in connection.handled] == [b"first", b"second"]
    assert {thread for _payload, thread in connection.handled} == {threading.get_ident()}


@pytest.mark.timeout(30)
def test_only_one_thread_reads_at_a_time(connection: _Connection, no_safety_net: None) -> None:
    """A second waiter does not read while the first does: `wait` returns at once for it (it then waits as before,
    on its future)."""
    first_reading = threading.Event()
    release = threading.Event()
    connection.on_message = lambda payload: first_reading.set()
    first = threading.Thread(target=connection.reader.wait, args=(release.is_set, None))
    first.start()
    # the first thread reads once the loop stopped watching the socket: an answer sent before then is the loop's
    deadline = time.monotonic() + 10
    while not connection.reader.reading and time.monotonic() < deadline:
        time.sleep(0.001)
    assert connection.reader.reading, "the first waiter never became the reader"
    connection.answer(b"for the first")
    assert first_reading.wait(10)
    connection.reader.wait(lambda: False, None)  # returns at once: the first reads
    assert connection.reader.reading
    release.set()
    connection.reader.wake()
    first.join(10)
    assert not first.is_alive()


@pytest.mark.timeout(30)
def test_a_ctrl_c_while_the_main_thread_handles_messages_loses_none_and_is_raised_after_them(
    connection: _Connection, no_safety_net: None, request: pytest.FixtureRequest
) -> None:
    """SIGINT arrives while the waiting main thread handles a message it read: the KeyboardInterrupt is raised once
    the messages read are handled (before, on the client's I/O thread, no signal could interrupt their handling),
    not in the middle of one, which would lose it."""
    assert threading.current_thread() is threading.main_thread()
    # Python's own handler, as in a terminal's program (a pytest-xdist test process ignores SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    finished: list[bytes] = []

    def on_message(payload: bytes) -> None:
        if payload == b"first":
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)  # the handler of a Python signal runs at once, between two bytecodes
        finished.append(payload)

    connection.on_message = on_message
    connection.answer_soon(b"first", b"second")
    with pytest.raises(KeyboardInterrupt):
        connection.reader.wait(lambda: len(finished) >= 2, None)
    assert finished == [b"first", b"second"] or finished == [b"first"], finished
    _settled(connection, 2)  # the second, if not handled yet, is read by the loop
    assert [payload for payload, _thread in connection.handled] == [b"first", b"second"]
    assert finished == [b"first", b"second"]


@pytest.mark.timeout(30)
def test_messages_a_waiter_leaves_unread_are_handed_to_the_loop(
    connection: _Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A waiter whose answer came in the first part of a long burst stops reading (its reads take at most BURST at a
    time), and its reads took the descriptor's readiness edge: the loop is told to drain the rest, which its epoll
    would not report. The loop is held in a callback meanwhile, so that only the waiter reads at first."""
    monkeypatch.setattr(waiting_reader, "BURST", 2)
    release = threading.Event()
    connection.loop.call_soon_threadsafe(release.wait, 10)
    sent = [b"%02d" % index for index in range(10)]
    connection.answer(*sent)
    with connection.lock:
        while not connection.dealer.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            pass
    connection.reader.wait(lambda: bool(connection.handled), None)
    assert [payload for payload, _thread in connection.handled] == sent[:2]
    release.set()
    _settled(connection, len(sent))
    assert [payload for payload, _thread in connection.handled] == sent
