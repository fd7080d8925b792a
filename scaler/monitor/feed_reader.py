"""FeedReader: subscribes to a scheduler's monitor feed and yields its messages as typed values.

    with FeedReader("tcp://127.0.0.1:8518", reader="scaler_top") as feed:
        for message in feed:                    # FeedMessage: version, wall_time, topic, body
            if isinstance(message.body, SchedulerView): ...

A message of another feed version raises `FeedVersionError` (nothing from that scheduler is readable:
"monitor feed version 2, scaler_top reads version 1: install the same scaler version as the
scheduler"). Any other unreadable message is logged, counted in `skipped` and skipped. A reader that
falls behind loses messages at its end too (`receive_high_water_mark`), never slowing the scheduler.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import Any

import zmq

from scaler.io.zmq_async import configure
from scaler.protocol import feed_codec
from scaler.protocol.feed import FeedMessage, FeedTopic

logger = logging.getLogger(__name__)

#: Messages a reader queues before it drops new ones (a status per second: over a minute of backlog).
RECEIVE_HIGH_WATER_MARK = 128


class FeedReader:
    def __init__(
        self,
        address: str,
        topics: Iterable[FeedTopic] = tuple(FeedTopic),
        reader: str = "this reader",
        receive_high_water_mark: int = RECEIVE_HIGH_WATER_MARK,
    ) -> None:
        self.address = address
        self.reader = reader  #: the program's name, for version errors
        self.skipped = 0  #: messages that could not be decoded
        self._context: zmq.Context[Any] = zmq.Context()
        self._socket = self._context.socket(zmq.SUB)
        configure(self._socket)
        self._socket.setsockopt(zmq.RCVHWM, receive_high_water_mark)
        for topic in topics:
            self._socket.setsockopt(zmq.SUBSCRIBE, topic.value.encode())
        self._socket.connect(address)

    def receive(self, timeout_seconds: float | None = None) -> FeedMessage | None:
        """The next message, or None when none arrived within `timeout_seconds` (None: wait forever)."""
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        while True:
            wait_ms = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
            if not self._socket.poll(wait_ms):
                return None
            frames = self._socket.recv_multipart()
            try:
                return feed_codec.decode(frames, self.reader)
            except feed_codec.FeedVersionError:
                raise
            except feed_codec.FeedDecodeError as error:
                self.skipped += 1
                logger.warning("monitor feed at %s: message skipped: %s", self.address, error)
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def next_matching(self, predicate: Callable[[FeedMessage], bool], timeout_seconds: float) -> FeedMessage:
        """The next message for which `predicate` holds; TimeoutError naming the last one seen otherwise."""
        deadline = time.monotonic() + timeout_seconds
        last: FeedMessage | None = None
        while (left := deadline - time.monotonic()) > 0:
            message = self.receive(left)
            if message is None:
                break
            last = message
            if predicate(message):
                return message
        raise TimeoutError(
            f"no matching monitor feed message from {self.address} within {timeout_seconds:g} s; last: {last}"
        )

    def __iter__(self) -> Iterator[FeedMessage]:
        while True:
            message = self.receive()
            if message is not None:
                yield message

    def close(self) -> None:
        self._socket.close(linger=0)
        self._context.term()

    def __enter__(self) -> FeedReader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()
