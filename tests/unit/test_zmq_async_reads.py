"""What a socket on the loop costs per message it is answered (`scaler.io.zmq_async`), on real ZeroMQ sockets over
inproc: a drain asks ZeroMQ whether a message waits before each read, so that it never reads an empty socket (whose
`zmq.Again` cost more than the question, once per wake-up), and an outbox flushed at its socket's burst end gives the
frames sent during a burst no flush of their own on the next loop iteration (one iteration and one poll of every
descriptor per message answered at once: an actor's call crosses the scheduler twice). Both are on an actor call's
way (docs/performance.md, "Actors")."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import zmq

from scaler.io.zmq_async import AsyncSocket, Outbox
from scaler.io.zmq_parts import send_parts


class _CountingSocket:
    """A ZeroMQ socket whose reads are counted (every other call goes to the socket)."""

    def __init__(self, sock: zmq.Socket[Any]) -> None:
        self._sock = sock
        self.reads = 0
        self.empty_reads = 0

    def recv_multipart(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        try:
            return self._sock.recv_multipart(*args, **kwargs)
        except zmq.Again:
            self.empty_reads += 1
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _wait_for(loop: asyncio.AbstractEventLoop, condition: Any) -> None:
    """Run the loop until `condition()` holds (at most 10 s)."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold within 10 s"
        loop.run_until_complete(asyncio.sleep(0.001))


def _watch_call_soon(loop: asyncio.AbstractEventLoop) -> list[Any]:
    """The callbacks scheduled with `loop.call_soon` from now on (a flush scheduled on the loop shows there)."""
    scheduled: list[Any] = []
    call_soon = loop.call_soon

    def watching_call_soon(callback: Any, *args: Any, **kwargs: Any) -> Any:
        scheduled.append(callback)
        return call_soon(callback, *args, **kwargs)

    loop.call_soon = watching_call_soon  # type: ignore[method-assign,assignment]
    return scheduled


def _answered_without_a_scheduled_flush(
    loop: asyncio.AbstractEventLoop, dealer: zmq.Socket[Any], outbox: Outbox, scheduled: list[Any]
) -> None:
    """Three messages, each answered, and no flush of the outbox was scheduled on the loop for them."""
    for number in range(3):
        dealer.send(b"%d" % number)
        _wait_for(loop, lambda: bool(dealer.poll(0)))
        assert dealer.recv() == b"answer to %d" % number
    assert not [callback for callback in scheduled if getattr(callback, "__self__", None) is outbox]


def test_a_drain_reads_each_message_once_and_never_an_empty_socket(
    pair: tuple[zmq.Socket[Any], zmq.Socket[Any]],
) -> None:
    """Five messages waiting, then one more: six reads, none of an empty socket. Checked with the question off (the
    drain reading until zmq.Again, as it did): a read of an empty socket per wake-up (3 here)."""
    router, dealer = pair
    loop = asyncio.new_event_loop()
    try:
        counting = _CountingSocket(router)
        got: list[bytes] = []
        for number in range(5):
            dealer.send(b"%d" % number)
        sock = AsyncSocket(loop, counting, lambda frames: got.append(frames[1]))  # type: ignore[arg-type]
        _wait_for(loop, lambda: len(got) == 5)
        dealer.send(b"5")
        _wait_for(loop, lambda: len(got) == 6)
        assert got == [b"%d" % number for number in range(6)]
        assert counting.empty_reads == 0
        assert counting.reads == 6
        sock.close()
    finally:
        loop.close()


def test_frames_sent_during_a_burst_leave_at_its_end_without_a_flush_of_their_own(
    pair: tuple[zmq.Socket[Any], zmq.Socket[Any]],
) -> None:
    """A handler answers each message through an outbox its socket's burst end flushes (as the scheduler's): the
    answers arrive, and no flush was scheduled on the loop. Checked with `flushed_at_burst_end=False` (as before): a
    flush scheduled per burst."""
    router, dealer = pair
    loop = asyncio.new_event_loop()
    try:
        scheduled = _watch_call_soon(loop)
        outbox: Outbox | None = None

        def answer(frames: list[bytes]) -> None:
            assert outbox is not None
            outbox.send(frames[0], b"answer to " + frames[1])

        sock = AsyncSocket(loop, router, answer, on_burst_end=lambda: outbox.flush_unless_held() if outbox else None)
        outbox = Outbox(loop, sock, routed=True, flushed_at_burst_end=True)
        _answered_without_a_scheduled_flush(loop, dealer, outbox, scheduled)
        sock.close()
    finally:
        loop.close()


def test_frames_sent_by_the_burst_end_leave_there_without_a_flush_of_their_own(
    pair: tuple[zmq.Socket[Any], zmq.Socket[Any]],
) -> None:
    """As the scheduler's server: a burst's messages are only kept while it lasts, and answered by its `on_burst_end`
    (where the core sees them as one step), which then flushes the outbox. The answers arrive, and no flush was
    scheduled on the loop. Checked by hand with the socket's `in_burst` cleared before `on_burst_end` (as before):
    a flush scheduled per burst (a loop iteration per result in U1), and this fails."""
    router, dealer = pair
    loop = asyncio.new_event_loop()
    try:
        scheduled = _watch_call_soon(loop)
        outbox: Outbox | None = None
        kept: list[list[bytes]] = []

        def burst_end() -> None:
            assert outbox is not None
            for frames in kept:
                outbox.send(frames[0], b"answer to " + frames[1])
            kept.clear()
            outbox.flush_unless_held()

        sock = AsyncSocket(loop, router, kept.append, on_burst_end=burst_end)
        outbox = Outbox(loop, sock, routed=True, flushed_at_burst_end=True)
        _answered_without_a_scheduled_flush(loop, dealer, outbox, scheduled)
        sock.close()
    finally:
        loop.close()


class _EventsCountingSocket(_CountingSocket):
    """Also counts the questions whether a message waits (`getsockopt(zmq.EVENTS)`)."""

    def __init__(self, sock: zmq.Socket[Any]) -> None:
        super().__init__(sock)
        self.questions = 0

    def getsockopt(self, option: int) -> Any:
        if option == zmq.EVENTS:
            self.questions += 1
        return self._sock.getsockopt(option)


def test_a_flush_to_several_peers_asks_once_whether_a_message_waits() -> None:
    """An outbox flush sends to three peers (a step's task to a processor, result to a client, ...) and asks ZeroMQ
    once afterwards whether a message waits (a send may consume the descriptor's edge), not after each send: each
    question is a system call in ZeroMQ. A message that came meanwhile is still read. Checked with the question after
    every send (`check_pending=True` in `Outbox.flush`, as before): three questions, and this fails."""
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    router.bind("inproc://zmq-async-flush")
    dealers = []
    for number in range(3):
        dealer = context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.IDENTITY, b"peer-%d" % number)
        dealer.setsockopt(zmq.RCVTIMEO, 5000)
        dealer.connect("inproc://zmq-async-flush")
        dealers.append(dealer)
    loop = asyncio.new_event_loop()
    try:
        counting = _EventsCountingSocket(router)
        got: list[bytes] = []
        sock = AsyncSocket(loop, counting, lambda frames: got.append(frames[1]))  # type: ignore[arg-type]
        for dealer in dealers:  # the router knows each identity once it has read from it
            dealer.send(b"hello")
        _wait_for(loop, lambda: len(got) == 3)
        outbox = Outbox(loop, sock, routed=True)
        for number in range(3):
            outbox.send(b"peer-%d" % number, b"frame %d" % number)
        dealers[0].send(b"meanwhile")
        counting.questions = 0
        outbox.flush()
        assert counting.questions == 1
        assert [dealer.recv() for dealer in dealers] == [b"frame %d" % number for number in range(3)]
        _wait_for(loop, lambda: len(got) == 4)
        assert got[-1] == b"meanwhile"
        sock.close()
    finally:
        loop.close()
        for dealer in dealers:
            dealer.close(linger=0)
        router.close(linger=0)
        context.term()


@pytest.mark.parametrize("copy", [True, False])
def test_a_message_of_several_parts_is_read_whole_and_alone(
    pair: tuple[zmq.Socket[Any], zmq.Socket[Any]], copy: bool
) -> None:
    """A drain reads a message part by part until a part says none follows (`Frame.more`, not pyzmq's RCVMORE
    question per part): each message comes whole, as bytes with `copy`, as frames without, and two messages sent back
    to back are not run together. Checked by hand: with `more` ignored (one part read per message), this fails."""
    router, dealer = pair
    loop = asyncio.new_event_loop()
    try:
        got: list[list[bytes]] = []
        kinds: set[type] = set()

        def heard(frames: list[Any]) -> None:
            kinds.update(type(frame) for frame in frames)
            got.append([frame if isinstance(frame, bytes) else frame.bytes for frame in frames])

        sock = AsyncSocket(loop, router, heard, copy=copy)
        dealer.send_multipart([b"a", b"b", b"c"])
        dealer.send_multipart([b"d"])
        _wait_for(loop, lambda: len(got) == 2)
        assert got == [[b"peer", b"a", b"b", b"c"], [b"peer", b"d"]]
        assert kinds == ({bytes} if copy else {zmq.Frame})
        sock.close()
    finally:
        loop.close()


def test_a_message_sent_part_by_part_arrives_whole_and_in_order(pair: tuple[zmq.Socket[Any], zmq.Socket[Any]]) -> None:
    """`send_parts` sends a multipart message with plain-int flags (not pyzmq's `send_multipart`, whose flag enum
    costs about 1 us a part): every part but the last says more follow, so each message arrives whole, and messages do
    not run into each other. Checked with every part sent as a last one: the parts arrive as separate messages, the
    test fails. A part that is not bytes goes through `send_multipart`, as it did."""
    router, dealer = pair
    for sock in pair:
        sock.setsockopt(zmq.RCVTIMEO, 5000)  # a part lost (sent as a message of its own, then unroutable): fails here
    messages = [
        [b"peer", b"a", b"b", b"c"],
        [b"peer", b"d"],
        [b"peer", zmq.Frame(b"e"), b"f"],
        [b"peer", memoryview(b"g")],
    ]
    for message in messages:
        send_parts(router, message)
    received = [dealer.recv_multipart() for _ in messages]
    assert received == [[b"a", b"b", b"c"], [b"d"], [b"e", b"f"], [b"g"]]
    send_parts(dealer, [b"h", b"i"])
    assert router.recv_multipart() == [b"peer", b"h", b"i"]
