"""A processor's link to the scheduler: the one way its tasks come and everything about them leaves (docs/protocol.md
section 3.7). What the link keeps (its hellos, the results not named read, the tasks held) is
`link_state.ProcessorLinkState`'s.

The link is a DEALER to the scheduler, opened when the agent first configures the processor, with the worker's
transport security and an identity of its own (its worker's id, "/", its processor id). Every call comes under one
lock, from whichever thread, so that what the processor says leaves in the order it was said. Every operation on the
link ends by reading what waits there (`_read_locked`): ZeroMQ's descriptor signals an edge, which a send from another
thread could consume; the work read so is queued and signalled on a pipe that the reading thread's select watches.

The results of tasks staged back to back may be held to leave together (`result`): one send for the processor, one
read for the scheduler. Only where the processor marks the task it computes (worker/computing_mark.py): a crash of
the next task loses the results held, and the scheduler, told which task crashed, runs them again and blames none of
them. A processor that still writes large results readers follow (object_storage/followed_put.py) says so before
the result that ends its task (ProcessorWriting), and again once those writes are done (`settled`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, cast

import zmq

from scaler.io.zmq_parts import EVENTS, POLLIN, joined, receive_parts, send_parts
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.staging import RESULT_HOLD_SECONDS
from scaler.worker.processor.link_state import Heard, ProcessorLinkState
from scaler.worker.processor.wake_pipe import WakePipe

#: How long a result may wait for the results of the tasks staged behind it, so that they leave together.
HOLD_SECONDS = RESULT_HOLD_SECONDS
#: How long the flusher thread (`_flush_late`) goes on looking at the time without a result held before it parks.
FLUSHER_REST_SECONDS = 5 * HOLD_SECONDS
#: The most results held at once.
MAX_HELD = 64


def processor_identity(worker_id: bytes, processor_id: bytes) -> bytes:
    """The identity of a processor's link to the scheduler: unique across workers, as a peer's must be."""
    return worker_id + b"/" + processor_id


class ProcessorOutlet:
    """`open_link()` makes the processor's DEALER to the scheduler; `hello` is what it says on it; `hold`: results may
    wait for the next ones (the module docstring); `writing()`: whether results it announced are still being
    written."""

    def __init__(
        self,
        open_link: Callable[[], Any],
        hello: m.Hello,
        hold: bool = False,
        writing: Callable[[], bool] = lambda: False,
    ) -> None:
        self._open_link = open_link
        self._state = ProcessorLinkState(hello)
        self._hold = hold
        self._writing = writing
        self._told_writing = False  #: the scheduler was told it writes, and not yet that it is done
        self._link: Any = None
        self._lock = threading.Lock()
        self._held: list[bytes] = []  #: the frames of results held to leave together, since `_held_since`
        self._held_since = 0.0
        #: the flusher is parked (no result held for FLUSHER_REST_SECONDS): the next hold wakes it with `_holding`
        self._flusher_parked = True
        self._holding = threading.Event()
        self._flusher: threading.Thread | None = None
        self._work: list[m.Message] = []  #: what was read on the link for the task line
        self._wake = WakePipe()  #: written when work is queued (the reader's select sees it)
        self._link_fds: tuple[Any, tuple[int, ...]] | None = None  #: the link and its descriptors (asked once)

    def configure(self) -> None:
        """The agent configured the processor (it is registered with the scheduler): hello on the link."""
        with self._lock:
            if self._link is None:
                self._link = self._open_link()
            self._send_on_link(codec.encode(self._state.hello()))

    def send(self, message: m.Message) -> None:
        """Anything about a task but its result (TaskLog, StreamItem, ProcessorBlocked, ProcessorResumeRequest,
        TaskCancelConfirm, TaskReturn, ActorReady), after the results held."""
        frame = codec.encode(message)
        with self._lock:
            self._state.sent(message, frame)
            self._flush()
            self._send_on_link(frame)

    def result(self, result: m.TaskResult, more: bool = False) -> None:
        """A task's result. `more`: another task of this processor starts at once (a staged one): the result may wait
        for the next ones, at most HOLD_SECONDS and MAX_HELD results; the results held leave now when the next one, if
        it computes as long as this one did, would come after the hold's end (it would only wait for the flusher
        thread, a wake-up more: so a task that computed HOLD_SECONDS or longer holds nothing)."""
        ran = result.ran
        took = ran.finished_at - ran.started_at if ran is not None else 0.0
        frame = codec.encode(result)
        now = time.monotonic()
        with self._lock:
            self._state.sent(result, frame)
            held = self._held
            if not self._told_writing and self._writing():
                self._told_writing = True
                held.append(codec.encode(m.ProcessorWriting(True)))
            held.append(frame)
            if len(held) == 1:
                self._held_since = now
            if not more or not self._hold or len(held) >= MAX_HELD or now - self._held_since + took >= HOLD_SECONDS:
                self._flush()
            elif self._flusher_parked:
                self._flusher_parked = False
                if self._flusher is None:
                    self._flusher = threading.Thread(target=self._flush_late, name="scaler-results", daemon=True)
                    self._flusher.start()
                self._holding.set()

    def settled(self) -> None:
        """The writes readers follow are all finished (stored, or given up and their readers told): called back by
        the writer's thread."""
        with self._lock:
            if self._told_writing and not self._writing() and self._link is not None:
                self._told_writing = False
                self._flush()
                self._send_on_link(codec.encode(m.ProcessorWriting(False)))

    def wait_fds(self) -> tuple[int, ...]:
        """What the reading thread's select watches beside the agent's channel: the link and the wake-up pipe."""
        link = self._link
        if link is None:
            return ()
        if self._link_fds is None or self._link_fds[0] is not link:
            self._link_fds = (link, (int(link.getsockopt(zmq.FD)), self._wake.read_fd))
        return self._link_fds[1]

    def has_work(self) -> bool:
        return bool(self._work)

    def take_work(self) -> list[m.Message]:
        """What was read on the link since the last take (reading what waits there now)."""
        if self._link is None:
            return []
        with self._lock:
            self._read_locked()
            work, self._work = self._work, []
            self._wake.drain()
            return work

    def close(self) -> None:
        with self._lock:
            if self._link is not None:
                self._link.close(linger=0)
                self._link = None
            self._wake.close()

    # ------------------------------------------------------------ under the lock

    def _flush(self) -> None:
        """Send the results held, in one message."""
        if self._held and self._link is not None:
            held, self._held = self._held, []
            self._send_on_link(*held)

    def _send_on_link(self, *frames: bytes) -> None:
        """A message on the link (a batch of small ones as one part), then what waits there is read."""
        send_parts(self._link, joined(list(frames)), block=True)
        self._read_locked()

    def _read_locked(self) -> None:
        link = self._link
        # asked before each read: an empty link's zmq.Again costs more than the question
        while link is not None and cast(int, link.getsockopt(EVENTS)) & POLLIN:
            try:
                frames = receive_parts(link)
            except zmq.Again:
                return
            for frame in frames:
                self._heard(frame)

    def _heard(self, frame: bytes) -> None:
        try:
            messages = [codec.decode(part) for part in codec.split(frame)]  # one message, or a batch of them
        except codec.DecodeError:
            return  # the scheduler's answer to what it cannot read is a ProtocolError; this one is not ours to answer
        for message in messages:
            heard = self._state.heard(message)
            if heard is Heard.WORK:
                self._work.append(message)
                self._wake.wake()
            elif heard is Heard.HELLO:
                self._send_on_link(codec.encode(self._state.hello()))
            elif heard is Heard.ACCEPTED:
                kept, parked = self._state.again()
                if kept or parked:
                    self._held = [frame for frame in self._held if frame not in kept]  # they go now, and once
                    self._flush()
                    self._send_on_link(*kept, *(codec.encode(message) for message in parked))

    def _flush_late(self) -> None:
        """A thread of its own sends what was held HOLD_SECONDS, should the task after it take longer. While results
        are held now and then it looks at each hold's end, or every HOLD_SECONDS; it parks after FLUSHER_REST_SECONDS
        without a hold, until the next one wakes it (a wake-up per hold at most, none while idle)."""
        while True:
            self._holding.wait()
            while True:
                with self._lock:
                    now = time.monotonic()
                    if self._held:
                        wait = self._held_since + HOLD_SECONDS - now
                        if wait <= 0:
                            try:
                                self._flush()
                            except zmq.ZMQError:
                                return  # the processor is ending
                            wait = HOLD_SECONDS
                    elif now - self._held_since >= FLUSHER_REST_SECONDS:  # the last hold began that long ago
                        self._flusher_parked = True
                        self._holding.clear()
                        break
                    else:
                        wait = HOLD_SECONDS
                time.sleep(wait)
