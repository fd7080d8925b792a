"""The `Outbox`'s frames that may wait (`send(..., may_wait=True)`): held up to `wait_seconds` or `most_waiting` frames,
then sent together; a frame that may not wait takes its peer's held ones along, in order. On a recording socket and
a loop whose timers run by hand."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from scaler.io.zmq_async import Outbox


class HandLoop:
    """`call_soon` and `call_later` recorded; `run_soon()` and `run_timers()` run them."""

    def __init__(self) -> None:
        self.soon: list[Callable[[], Any]] = []
        self.timers: list[tuple[float, Callable[[], Any]]] = []

    def call_soon(self, callback: Callable[[], Any]) -> None:
        self.soon.append(callback)

    def call_later(self, seconds: float, callback: Callable[[], Any]) -> None:
        self.timers.append((seconds, callback))

    def run_soon(self) -> None:
        soon, self.soon = self.soon, []
        for callback in soon:
            callback()

    def run_timers(self) -> None:
        timers, self.timers = self.timers, []
        for _, callback in timers:
            callback()


class RecordingSocket:
    def __init__(self) -> None:
        self.in_burst = False
        self.sent: list[list[bytes]] = []

    def send(self, frames: Sequence[bytes], copy: bool = True, check_pending: bool = True) -> None:
        self.sent.append(list(frames))

    def check_pending(self) -> None:
        pass


def make(wait_seconds: float = 0.01, most_waiting: int = 256) -> tuple[Outbox, HandLoop, RecordingSocket]:
    loop, sock = HandLoop(), RecordingSocket()
    outbox = Outbox(loop, sock, routed=True, wait_seconds=wait_seconds, most_waiting=most_waiting)  # type: ignore[arg-type]
    return outbox, loop, sock


def test_frames_that_may_wait_leave_together_when_their_time_is_up() -> None:
    outbox, loop, sock = make()
    for number in range(3):
        outbox.send(b"client", b"answer%d" % number, may_wait=True)
    loop.run_soon()
    outbox.flush_unless_held()
    assert sock.sent == [] and outbox.holding == 3
    assert [seconds for seconds, _ in loop.timers] == [0.01], "one timer for all that wait"
    loop.run_timers()
    assert sock.sent == [[b"client", b"answer0answer1answer2"]] and outbox.holding == 0


def test_a_frame_that_may_not_wait_takes_its_peers_held_frames_along_in_order() -> None:
    outbox, loop, sock = make()
    outbox.send(b"client", b"a1", may_wait=True)
    outbox.send(b"other", b"o1", may_wait=True)
    outbox.send(b"client", b"echo")
    outbox.send(b"client", b"a2", may_wait=True)  # its peer has frames leaving now: it leaves with them
    loop.run_soon()
    assert sock.sent == [[b"client", b"a1echoa2"]]
    assert outbox.holding == 1, "another peer's held frame still waits"
    loop.run_timers()
    assert sock.sent[-1] == [b"other", b"o1"]


def test_held_frames_leave_once_a_peer_has_most_waiting() -> None:
    outbox, loop, sock = make(most_waiting=4)
    for number in range(4):
        outbox.send(b"client", b"%d" % number, may_wait=True)
    loop.run_soon()
    assert sock.sent == [[b"client", b"0123"]]


def test_a_stopping_owner_sends_what_is_held() -> None:
    outbox, _, sock = make()
    outbox.send(b"client", b"a1", may_wait=True)
    outbox.flush()
    assert sock.sent == []
    outbox.flush(everything=True)
    assert sock.sent == [[b"client", b"a1"]]


def test_without_wait_seconds_nothing_is_held() -> None:
    outbox, loop, sock = make(wait_seconds=0.0)
    outbox.send(b"client", b"a1", may_wait=True)
    loop.run_soon()
    assert sock.sent == [[b"client", b"a1"]] and not loop.timers
