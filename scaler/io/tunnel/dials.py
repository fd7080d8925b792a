"""The connecting side of a tunnel: a `Dial` is the private endpoint that stands for one target in its process.
ZeroMQ connects there, and each connection it makes is joined to a new public connection to the target
(`dialing.open_public`). While the target cannot be reached, the dial keeps ZeroMQ's connection waiting and tries
again, doubling its delay up to RETRY_MAX_SECONDS, so ZeroMQ sees a slow peer, never a failed handshake; what goes
wrong is logged once per change (`DialHealth`)."""

from __future__ import annotations

import asyncio
import logging
import socket
import time

from scaler.io.address import Address
from scaler.io.tunnel.dialing import DialFailure, Opened, open_public
from scaler.io.tunnel.pump import Joint, ReadBuffer
from scaler.io.tunnel.streams import Acceptor, Stream, Streams

logger = logging.getLogger("scaler.io.tunnel")

#: A target that could not be reached is tried again after this long, doubling up to the maximum.
RETRY_FIRST_SECONDS = 0.05
RETRY_MAX_SECONDS = 2.0
#: How long a target may not answer before it is said (a server starting after its peers is no news).
QUIET_SECONDS = 5.0
#: How long a connection made by a dial's first try waits for the socket that asked for it.
SPARE_SECONDS = 5.0


class DialHealth:
    """Whether a target answers, said once per change: `failed` and `answered` return the line to log when there is
    one to say (None otherwise); `delay` is the wait before the next try. A failure is said once it has lasted
    QUIET_SECONDS: a server starting after its peers is no news, and a refusal that trying again does not mend (a
    certificate, a proxy's rules: `refused`, its time counted from the first such try) is said by what waits for the
    server, which asks for it (`refusal`) and ends with it, one line, well within that time (a worker's processors,
    which end with it, say nothing); the relay says it for the others."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.answering: bool | None = None  #: None: never tried
        self.delay = RETRY_FIRST_SECONDS
        self._failing_since: float | None = None
        self._refused_since: float | None = None
        self._said: str | None = None  #: the failure said last (None: none said since it last answered)
        self.refused: str | None = None  #: the last try's failure, when trying again does not mend it

    def failed(self, failure: DialFailure, now: float) -> str | None:
        self.answering = False
        self.refused = str(failure) if failure.permanent else None
        self.delay = min(RETRY_MAX_SECONDS, self.delay * 2)
        if self._failing_since is None:
            self._failing_since = now
        if not failure.permanent:
            self._refused_since = None
        elif self._refused_since is None:
            self._refused_since = now
        since = self._refused_since if self._refused_since is not None else self._failing_since
        text = str(failure)
        if text == self._said or now - since < QUIET_SECONDS:
            return None
        self._said = text
        return text if failure.permanent else f"{text} (tried again until it answers)"

    def answered(self) -> str | None:
        said, self._said, self._failing_since, self._refused_since = self._said, None, None, None
        self.refused = None
        self.answering, self.delay = True, RETRY_FIRST_SECONDS
        return f"{self.target} answers again" if said is not None else None


class Dial:
    """Where ZeroMQ connects for one target: each connection accepted on `listener` (the private endpoint's, or a
    forwarder's TCP port) is joined to a new public connection to `target`."""

    def __init__(
        self, target: Address, listener: socket.socket, streams: Streams, buffer: ReadBuffer, endpoint: str
    ) -> None:
        self.target = target
        self.endpoint = endpoint  #: where ZeroMQ connects for the target
        self.health = DialHealth(str(target))
        self._streams = streams
        self._buffer = buffer
        self._loop = asyncio.get_running_loop()
        self._spare: Opened | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.acceptor = Acceptor(listener, self._loop, streams, self._accepted)

    async def try_once(self) -> DialFailure | None:
        """Open a public connection now, kept for the next connection ZeroMQ makes (for SPARE_SECONDS); the failure
        (a permanent one is not logged: the caller raises it)."""
        try:
            opened = await open_public(self.target, self._streams)
        except DialFailure as failure:
            line = self.health.failed(failure, time.monotonic())
            _log(None if failure.permanent else line, failure)
            return failure
        _log(self.health.answered(), None)
        if self._spare is not None:
            self._spare.stream.close()
        self._spare = opened
        self._loop.call_later(SPARE_SECONDS, self._expire_spare, opened)
        return None

    def _expire_spare(self, opened: Opened) -> None:
        if self._spare is opened:
            self._spare = None
            opened.stream.close()

    def _take_spare(self) -> Opened | None:
        spare, self._spare = self._spare, None
        return None if spare is None or spare.stream.closed else spare

    def _accepted(self, inner: Stream) -> None:
        task = self._loop.create_task(self._join(inner))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _join(self, inner: Stream) -> None:
        ended = inner.watch_end()  # ZeroMQ's greeting is kept until there is somewhere to send it
        opened = self._take_spare()
        while opened is None:
            try:
                opened = await open_public(self.target, self._streams)
                _log(self.health.answered(), None)
            except DialFailure as failure:
                _log(self.health.failed(failure, time.monotonic()), failure)
                await asyncio.wait([ended], timeout=self.health.delay)
            if ended.done():
                if opened is not None:
                    opened.stream.close()
                inner.close()
                return
        inner.stop_watching()
        Joint(opened.stream, opened.framing, inner, self._buffer, first=opened.first).start()

    def close(self) -> None:
        self.acceptor.close()
        for task in list(self._tasks):
            task.cancel()
        if self._spare is not None:
            self._spare.stream.close()


def _log(line: str | None, failure: DialFailure | None) -> None:
    if line is None:
        return
    if failure is None:
        logger.info("%s", line)
    elif failure.permanent:
        logger.error("%s", line)
    else:
        logger.warning("%s", line)
