"""Subscribing to a scheduler's monitor feed (docs/protocol.md, monitor feed).

`FeedReader(address)` subscribes to the topics asked for and returns typed messages (`StatusSnapshot`,
`TaskTransitions`, `ScalingDecisions`). A message of another feed version, or one that cannot be decoded,
raises `FeedVersionError` with a message that says what to install, so a mismatched `scaler_top` says why
instead of showing nonsense.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import zmq

from scaler.io.sockets import SocketFactory, TransportSecurity
from scaler.io.tunnel import TunnelError
from scaler.io.tunnel.relay import refusal
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.feed import SCALING_TOPIC, STATUS_TOPIC, TASKS_TOPIC
from scaler.security.connection_files import MONITOR_SERVICE
from scaler.security.find import FoundKeys, find_keys
from scaler.security.handshake import (
    HANDSHAKE_FAILURES,
    answers_as,
    is_refusal,
    may_be_wrong_service,
    refusal_text,
    wrong_port_text,
)

logger = logging.getLogger(__name__)

ALL_TOPICS = (STATUS_TOPIC, TASKS_TOPIC, SCALING_TOPIC)

FeedMessage = m.StatusSnapshot | m.TaskTransitions | m.ScalingDecisions


class FeedError(Exception):
    """The monitor feed cannot be read; the message says why and what to do."""


class FeedVersionError(FeedError):
    """The feed was published by a scheduler of another version."""


class FeedConnectionError(FeedError, ConnectionError):
    """The address is not a monitor feed (a scheduler's or an object storage's port), or it refused this reader's
    keys for good."""


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

#: A reader refused after it has read the feed, or by a stack still starting, waits this long for the address's stack
#: to publish other keys (a stack restarting with new keys), or for a refusal in passing to end (a server killed
#: mid-handshake), before it gives up.
REFUSED_KEYS_WAIT_SECONDS = 30.0
#: The same for a reader refused from the start, and for keys given to it (flags, settings): the feed that answers
#: is the one it will read, and keys given will not change, so only a refusal in passing is waited out (scaler_top
#: with another user's keys says so in seconds, not in half a minute).
REFUSED_GIVEN_KEYS_WAIT_SECONDS = 3.0
#: How often a reader refused with keys it found looks for them again.
FIND_AGAIN_SECONDS = 0.5


class FeedReader:
    """A subscription to one scheduler's monitor address. Not thread-safe; close it when done. `security`: by
    default the keys a client finds for the address (`scaler.security.find_keys`), found again when the feed
    refuses them (a stack that published or changed its keys since); None: plain TCP. An address that is not a
    monitor feed, or that refuses this reader's keys for REFUSED_KEYS_WAIT_SECONDS once it has read the feed (or while
    its stack starts), REFUSED_GIVEN_KEYS_WAIT_SECONDS from the start or for keys given to it, raises
    FeedConnectionError from `receive`."""

    def __init__(
        self,
        address: str,
        topics: Sequence[bytes] = ALL_TOPICS,
        security: TransportSecurity | FoundKeys | FindKeys | None = FIND_KEYS,
    ) -> None:
        self.address = address
        self._topics = topics
        if isinstance(security, FindKeys):
            self._keys = find_keys("client", address)
        elif isinstance(security, FoundKeys):
            self._keys = security
        else:
            self._keys = FoundKeys("client", address, security, "the keys given" if security else "none (plain TCP)")
        self._refused_since: float | None = None
        self._refusal_event = 0  #: the handshake failure of the refusal under way (its text says which)
        self._found_at = 0.0
        self._has_read = False  #: a message came: a refusal now is a stack that changed, worth the longer wait
        self._open()

    @property
    def keys(self) -> FoundKeys:
        """The keys this reader uses now, and where they came from."""
        return self._keys

    def _open(self) -> None:
        self._sockets = SocketFactory(security=self._keys.security)
        try:
            self._socket = self._sockets.subscriber(self.address, self._topics, events=HANDSHAKE_FAILURES)
        except TunnelError as error:  # a tls:// or wss:// address refused for good (a certificate, a proxy)
            self._sockets.close()
            raise FeedConnectionError(str(error)) from None
        self._events = self._sockets.event_monitor(self._socket, HANDSHAKE_FAILURES)
        self._poller = zmq.Poller()
        self._poller.register(self._socket, zmq.POLLIN)
        self._poller.register(self._events, zmq.POLLIN)

    def _close_sockets(self) -> None:
        self._events.close(linger=0)
        self._socket.close(linger=0)
        self._sockets.close()

    def receive(self, timeout_seconds: float) -> FeedMessage | None:
        """The next message, or None when nothing arrived within the timeout. Raises FeedConnectionError when the
        address is not a monitor feed or refuses this reader for good."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            refused = refusal(self.address)
            if refused is not None:  # a tunnel's certificate or proxy: waiting longer does not mend it
                raise FeedConnectionError(refused)
            self._find_again_if_refused()
            ready = dict(self._poller.poll(max(0, int((deadline - time.monotonic()) * 1000))))
            if self._events in ready:
                self._on_event(*_event_of(self._events.recv_multipart()))
                continue
            if self._socket in ready:
                self._refused_since, self._has_read = None, True
                return self._decode(self._socket.recv_multipart())
            if time.monotonic() >= deadline:
                return None

    def _decode(self, frames: list[bytes]) -> FeedMessage:
        try:
            message = codec.decode(frames[-1])
        except codec.DecodeError as error:
            raise FeedVersionError(
                f"cannot read the monitor feed at {self.address} ({error}): is the scheduler the same scaler version?"
            ) from None
        return check_feed_message(message)

    def _on_event(self, event: int, value: int) -> None:
        if not is_refusal(event, value, self._keys.security is not None):
            return  # a connection lost mid-handshake (the scheduler restarting): ZeroMQ connects again
        self._refusal_event = event
        first = self._refused_since is None
        if first:  # ZeroMQ connects again every 100 ms: what the port serves is asked once per refusal, not each time
            wrong_port = self._wrong_port(event)
            if wrong_port is not None:
                raise FeedConnectionError(wrong_port)
            self._refused_since = time.monotonic()
            if not self._keys.fixed:  # keys given are not looked for: a refusal of them is said by the error
                logger.info(
                    "the monitor feed at %s refused %s: looking for its keys again", self.address, self._keys.source
                )
        self._find_again_if_refused(event, now=first)

    def _wrong_port(self, event: int) -> str | None:
        """Why the address is not a monitor feed, when its connection file says so, or when it answers a DEALER
        (a scheduler's or an object storage's ROUTER) with the keys the feed refused."""
        text = wrong_port_text(self._keys, MONITOR_SERVICE, "monitor reader")
        if text is None and may_be_wrong_service(event) and answers_as(self.address, self._keys.security, zmq.DEALER):
            answered = "a scheduler or an object storage server"
            text = wrong_port_text(self._keys, MONITOR_SERVICE, "monitor reader", answered)
        return text

    def _find_again_if_refused(self, event: int = 0, now: bool = False) -> None:
        """Refused with found keys: find them again (a restarted stack's new ones), at most every
        FIND_AGAIN_SECONDS; give up REFUSED_KEYS_WAIT_SECONDS after the first refusal."""
        since = self._refused_since
        if since is None or (not now and time.monotonic() - self._found_at < FIND_AGAIN_SECONDS):
            return
        self._found_at = time.monotonic()
        found = self._keys.again()
        if not found.same_keys(self._keys):
            logger.info("the monitor feed at %s: using %s", self.address, found.source)
            self._keys, self._refused_since = found, None
            self._close_sockets()
            self._open()
        elif time.monotonic() - since > self._patience(found):
            raise FeedConnectionError(self._refusal(event or self._refusal_event))

    def _patience(self, found: FoundKeys) -> float:
        """How long a refusal with the same keys is waited out (REFUSED_KEYS_WAIT_SECONDS, REFUSED_GIVEN_...)."""
        if found.fixed or not (self._has_read or found.starting):
            return REFUSED_GIVEN_KEYS_WAIT_SECONDS
        return REFUSED_KEYS_WAIT_SECONDS

    def _refusal(self, event: int) -> str:
        hint = "give scaler_top --curve-secret-key DIR/client.key_secret --curve-server-key DIR/server.key"
        has_keys = self._keys.security is not None
        return refusal_text("monitor feed", "reader", self.address, event, has_keys, hint)

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
        self._close_sockets()

    def __enter__(self) -> FeedReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _event_of(frames: list[bytes]) -> tuple[int, int]:
    from zmq.utils.monitor import parse_monitor_message

    message = parse_monitor_message(frames)
    return int(message["event"]), int(message["value"])
