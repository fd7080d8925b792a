"""The monitor feed's socket: an XPUB that publishes feed messages and sees what subscribers read.

Subscribers filter by topic prefix. The socket passes on the first subscription to a prefix and the
last unsubscription from it (also when a subscriber disconnects), so the set of prefixes read is
exact; the core is told which topics someone reads and builds nothing for the others. A subscriber
that falls behind loses messages: the socket queues at most `SEND_HIGH_WATER_MARK` messages per
subscriber and drops the rest, so the scheduler never waits for a reader.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import zmq

from scaler.io.zmq_async import AsyncSocket, Frames, configure
from scaler.protocol import feed_codec
from scaler.protocol.feed import FeedMessage, FeedTopic

logger = logging.getLogger(__name__)

#: Messages queued per subscriber before the newest are dropped (about a minute of status and transitions).
SEND_HIGH_WATER_MARK = 256

_SUBSCRIBE, _UNSUBSCRIBE = 1, 0


class FeedPublisher:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        context: zmq.Context[Any],
        address: str,
        on_topics: Callable[[frozenset[FeedTopic]], None],
    ) -> None:
        sock = context.socket(zmq.XPUB)
        configure(sock)
        sock.setsockopt(zmq.SNDHWM, SEND_HIGH_WATER_MARK)
        sock.bind(address)
        self._on_topics = on_topics
        self._prefixes: set[bytes] = set()
        self._socket = AsyncSocket(loop, sock, self._on_subscription)

    def topics(self) -> frozenset[FeedTopic]:
        """The topics at least one subscriber reads now."""
        return frozenset(
            topic for topic in FeedTopic if any(topic.value.encode().startswith(prefix) for prefix in self._prefixes)
        )

    def publish(self, message: FeedMessage) -> None:
        self._socket.send(feed_codec.encode(message))

    def close(self) -> None:
        self._socket.close()

    def _on_subscription(self, frames: Frames) -> None:
        frame = bytes(frames[0]) if frames else b""
        if not frame or frame[0] not in (_SUBSCRIBE, _UNSUBSCRIBE):
            logger.debug("monitor socket: ignored a message that is not a subscription")
            return
        before = self.topics()
        if frame[0] == _SUBSCRIBE:
            self._prefixes.add(frame[1:])
        else:
            self._prefixes.discard(frame[1:])
        topics = self.topics()
        if topics != before:
            self._on_topics(topics)
