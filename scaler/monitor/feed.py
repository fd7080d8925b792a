"""Subscribing to a scheduler's monitor feed (docs/protocol.md, monitor feed).

`FeedReader(address)` subscribes to the topics asked for and returns typed messages (`StatusSnapshot`,
`TaskTransitions`, `ScalingDecisions`). A message of another feed version, or one that cannot be decoded,
raises `FeedVersionError` with a message that says what to install, so a mismatched `scaler_top` says why
instead of showing nonsense.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from scaler.io.sockets import SocketFactory, TransportSecurity
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.feed import SCALING_TOPIC, STATUS_TOPIC, TASKS_TOPIC

ALL_TOPICS = (STATUS_TOPIC, TASKS_TOPIC, SCALING_TOPIC)

FeedMessage = m.StatusSnapshot | m.TaskTransitions | m.ScalingDecisions


class FeedVersionError(Exception):
    """The feed was published by a scheduler of another version."""


def check_feed_message(message: m.Message) -> FeedMessage:
    if not isinstance(message, (m.StatusSnapshot, m.TaskTransitions, m.ScalingDecisions)):
        raise FeedVersionError(f"unexpected {type(message).__name__} on the monitor feed")
    if message.feed_version != m.FEED_VERSION:
        raise FeedVersionError(
            f"the scheduler publishes monitor feed version {message.feed_version}, this reader reads version "
            f"{m.FEED_VERSION}: install the same scaler version as the scheduler"
        )
    return message


class FindKeys:
    """`FeedReader(..., security=FIND_KEYS)`: the keys a client of this user finds for the address by itself."""


FIND_KEYS = FindKeys()


class FeedReader:
    """A subscription to one scheduler's monitor address. Not thread-safe; close it when done. `security`: by
    default the keys a client finds for the address (`scaler.io.default_security`); None: plain TCP."""

    def __init__(
        self,
        address: str,
        topics: Sequence[bytes] = ALL_TOPICS,
        security: TransportSecurity | FindKeys | None = FIND_KEYS,
    ) -> None:
        self.address = address
        if isinstance(security, FindKeys):
            from scaler.io.default_security import connecting_security

            security = connecting_security({}, address, "client")
        self._sockets = SocketFactory(security=security)
        self._socket = self._sockets.subscriber(address, topics)

    def receive(self, timeout_seconds: float) -> FeedMessage | None:
        """The next message, or None when nothing arrived within the timeout."""
        if not self._socket.poll(int(timeout_seconds * 1000)):
            return None
        frames = self._socket.recv_multipart()
        try:
            message = codec.decode(frames[-1])
        except codec.DecodeError as error:
            raise FeedVersionError(
                f"cannot read the monitor feed at {self.address} ({error}): is the scheduler the same scaler version?"
            ) from None
        return check_feed_message(message)

    def messages(self, timeout_seconds: float) -> list[FeedMessage]:
        """Everything that arrives within the timeout (at least one wait; stops early once the socket is idle)."""
        deadline = time.monotonic() + timeout_seconds
        received: list[FeedMessage] = []
        while True:
            remaining = deadline - time.monotonic()
            message = self.receive(max(0.0, remaining))
            if message is None:
                return received
            received.append(message)
            if remaining <= 0:
                return received

    def close(self) -> None:
        self._socket.close(linger=0)
        self._sockets.close()

    def __enter__(self) -> FeedReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
