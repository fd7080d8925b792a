"""Where everything a processor reports goes: its channel to the agent, and its own link to the scheduler for the
results of the tasks it ran (`result_route.ResultRoute` decides which; docs/protocol.md section 3.7).

The link is a DEALER to the scheduler opened when the agent first configures the processor, with the worker's
transport security and an identity of its own (its worker's id, "/", its processor id). What the scheduler answers
on it (its HelloReply, a ProtocolError when it forgot the processor) is read without blocking whenever the
processor does its housekeeping: after every task and every read of the channel. Every call comes under one lock,
from whichever thread: the results of one processor reach the scheduler and the agent in the order they were made.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.worker.processor.channel import BlockingChannel
from scaler.worker.processor.result_route import ResultRoute

logger = logging.getLogger(__name__)

#: How long a result may wait for the results of the tasks staged behind it, so that they leave together.
HOLD_SECONDS = 0.001
#: The most results held at once.
MAX_HELD = 16


def processor_identity(worker_id: bytes, processor_id: bytes) -> bytes:
    """The identity of a processor's link to the scheduler: unique across workers, as a peer's must be."""
    return worker_id + b"/" + processor_id


class ProcessorOutlet:
    """`open_link()` makes the processor's DEALER to the scheduler (None: this processor has no link, and every
    result goes through the agent); `hello` is what it says on it."""

    def __init__(
        self, channel: BlockingChannel, open_link: Callable[[], Any] | None = None, hello: m.Hello | None = None
    ) -> None:
        self._channel = channel
        self._open_link = open_link if hello is not None else None
        self._hello = hello
        self._link: Any = None
        self._route = ResultRoute()
        self._lock = threading.Lock()
        #: the frames of results held to leave on the link together, since `_held_since`
        self._held: list[bytes] = []
        self._held_since = 0.0
        self._holding = threading.Event()  #: results began to be held: the flusher watches the time
        self._flusher: threading.Thread | None = None
        #: tasks whose every message goes through the agent (streaming tasks, actors' starts: their other news does)
        self._through_agent: set[bytes] = set()

    @property
    def route_open(self) -> bool:
        return self._route.is_open

    def report(self, message: m.Message) -> None:
        """To the agent only: ProcessorReady, ProcessorBlocked, ProcessorResumeRequest, a CANCELED answer, and what
        a task marked `through_agent` says (its result ends the mark)."""
        with self._lock:
            self._flush()
            self._channel.send(message)
            if isinstance(message, m.TaskResult) and self._through_agent:
                self._through_agent.discard(message.task_id)

    def result(self, result: m.TaskResult, more: bool = False) -> None:
        """The result of a task that ran: on the link when the route is open (and a ResultSent to the agent), else
        to the agent, which sends it on. `more`: another task of this processor starts at once (a staged one): the
        result may wait for the next ones, at most HOLD_SECONDS and MAX_HELD results, so that they leave together."""
        with self._lock:
            if not self._route.is_open:
                self._flush()
                self._channel.send(result)
                return
            frame = codec.encode(result)
            self._held.append(frame)
            if not more or len(self._held) >= MAX_HELD:
                self._flush()
            elif len(self._held) == 1:
                self._held_since = time.monotonic()
                if self._flusher is None:
                    self._flusher = threading.Thread(target=self._flush_late, name="scaler-results", daemon=True)
                    self._flusher.start()
                self._holding.set()
            # the agent hears of it now, even when it is held: a held result dies with the processor if the next task
            # crashes it, and the agent, which keeps every ResultSent, then sends it itself
            ran = result.ran
            self._channel.send(m.ResultSent(result.task_id, frame, ran.finished_at - ran.started_at if ran else 0.0))

    def _flush(self) -> None:
        """Send the results held, in one message on the link."""
        if self._held:
            held = self._held
            self._held = []
            if self._link is not None:  # closed: the processor is ending, its agent gone
                self._link.send_multipart(held)

    def _flush_late(self) -> None:
        """A thread of its own sends what was held HOLD_SECONDS, should the task after it take longer."""
        while True:
            self._holding.wait()
            self._holding.clear()
            while True:
                with self._lock:
                    if not self._held:
                        break
                    wait = self._held_since + HOLD_SECONDS - time.monotonic()
                    if wait <= 0:
                        try:
                            self._flush()
                        except zmq.ZMQError:
                            return  # the processor is ending
                        break
                time.sleep(wait)

    def through_agent(self, task_id: bytes) -> None:
        """This task's output and result go through the agent, whatever the route (until its result is reported)."""
        with self._lock:
            self._through_agent.add(task_id)

    def log(self, log: m.TaskLog) -> None:
        """A task's output: the way its result will go, so that it reaches the client before the result."""
        with self._lock:
            self._flush()
            if self._route.is_open and log.task_id not in self._through_agent:
                self._link.send_multipart((codec.encode(log),))
            else:
                self._channel.send(log)

    def configure(self) -> None:
        """The agent configured the processor (it is registered with the scheduler): say hello on the link."""
        if self._open_link is None:
            return
        with self._lock:
            if self._link is None:
                self._link = self._open_link()
            if self._route.configured():
                self._say_hello()

    def read_link(self) -> None:
        """What the scheduler sent on the link, without blocking."""
        if self._link is None:
            return
        with self._lock:
            link = self._link
            if link is None or not link.getsockopt(zmq.EVENTS) & zmq.POLLIN:
                return
            while True:
                try:
                    frames = link.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    return
                for frame in frames:
                    self._heard(frame)

    def close(self) -> None:
        with self._lock:
            if self._link is not None:
                self._link.close(linger=0)
                self._link = None

    def _heard(self, frame: bytes) -> None:
        try:
            message = codec.decode(frame)
        except codec.DecodeError as error:
            logger.warning("undecodable frame from the scheduler on a processor's link: %s", error)
            return
        if isinstance(message, m.HelloReply) and not message.accepted:
            logger.debug("the scheduler refused this processor's link (%s); its results go through its agent",
                         message.reason)  # fmt: skip
        if self._route.heard(message):
            self._say_hello()

    def _say_hello(self) -> None:
        assert self._hello is not None
        self._link.send_multipart((codec.encode(self._hello),))
