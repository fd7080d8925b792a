"""Asking the scheduler for one task's story on behalf of the dashboard (`/api/story?task=<hex>`).

The monitor feed is one-way, so a story is asked as a client asks it (`TaskStoryRequest`, answered by
`TaskStoryReply`, docs/protocol.md): a short-lived connection that says hello, asks, and says goodbye. A click is
a human's, so a connection per question is cheap; `StoryAsker` bounds how many are open at once and answers the
rest at once with a refusal, so a thousand tabs cannot open a thousand connections to the scheduler.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

from scaler.io.address import AddressError, parse_address, reference_monitor_scheduler
from scaler.io.sockets import SocketFactory, TransportSecurity
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import TaskID, new_client_id

#: story questions asked of the scheduler at once; more are refused (503) until one is answered
MAX_QUESTIONS = 4
#: the longest a task id may be, in bytes (ids are 16 bytes; this only bounds what a URL may ask)
MAX_TASK_ID_BYTES = 64


class StoryQueryError(ValueError):
    """A bad `/api/story` query (the page shows the message)."""


class StoryUnavailable(RuntimeError):
    """The scheduler did not answer, refused us, or too many questions are open (the page shows the message)."""


def scheduler_address_for(monitor_address: str, scheduler_address: str = "") -> str:
    """The scheduler to ask: the one given, else the one a 1.x default monitor name encodes, else the monitor
    address's port - 2 (the scheduler's default). AddressError, saying how to give it, when none can be derived."""
    if scheduler_address:
        return scheduler_address
    named = reference_monitor_scheduler(monitor_address)
    if named is not None:
        return str(named)
    monitor = parse_address(monitor_address)
    if monitor.port is None or monitor.port <= 2:
        raise AddressError(
            f"cannot tell the scheduler's address from the monitor address {monitor_address} (it has no port to "
            "take 2 from): give it with --scheduler-address tcp://HOST:PORT"
        )
    return str(monitor.with_port_offset(-2).connectable())


def parse_task(values: dict[str, list[str]]) -> TaskID:
    """The `task` parameter: the task id in hex, as the task log shows it."""
    given = values.get("task", [""])
    text = given[-1].strip() if given else ""
    if not text:
        raise StoryQueryError("task: give the task id in hex (?task=<hex>)")
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raise StoryQueryError(f"task: {text[:80]!r} is not a task id in hex") from None
    if not raw or len(raw) > MAX_TASK_ID_BYTES:
        raise StoryQueryError(f"task: a task id has 1 to {MAX_TASK_ID_BYTES} bytes, this one {len(raw)}")
    return TaskID(raw)


def story_json(reply: m.TaskStoryReply) -> dict[str, Any]:
    """The answer of `/api/story`: the same records `future.story()` shows, less the client's own entries."""
    return {
        "task": reply.task_id.hex(),
        "known": reply.known,
        "forgotten": not reply.known,
        "note": reply.note,
        "entries": [
            {"wall_time": e.wall_time, "component": e.component, "where": e.where, "what": e.what, "cause": e.cause}
            for e in reply.entries
        ],
    }


class StoryAsker:
    def __init__(
        self, scheduler_address: str, security: TransportSecurity | None = None, timeout_seconds: float = 5.0
    ) -> None:
        self.scheduler_address = scheduler_address
        self._security = security
        self._timeout_seconds = timeout_seconds
        self._open = threading.BoundedSemaphore(MAX_QUESTIONS)

    def ask(self, task_id: TaskID) -> m.TaskStoryReply:
        """The scheduler's story of `task_id` (known=False, with a note, when it forgot the task or never saw it);
        StoryUnavailable when it cannot be asked now."""
        if not self._open.acquire(blocking=False):
            raise StoryUnavailable(f"{MAX_QUESTIONS} story questions are open already; ask again in a moment")
        try:
            return self._ask(task_id)
        finally:
            self._open.release()

    def _ask(self, task_id: TaskID) -> m.TaskStoryReply:
        sockets = SocketFactory(security=self._security)
        asker = sockets.dealer(self.scheduler_address, identity=new_client_id("dashboard-story"))
        hello = m.Hello(
            m.PROTOCOL_VERSION, local_python_version(), os.getpid(), socket.gethostname(), m.ClientInfo("dashboard")
        )
        read: list[bytes] = []  #: messages received joined with an earlier one, not looked at yet
        try:
            asker.send(codec.encode(hello))
            welcome = self._next(asker, m.HelloReply, read)
            if not welcome.accepted:
                raise StoryUnavailable(f"the scheduler at {self.scheduler_address} refused us: {welcome.reason}")
            asker.send(codec.encode(m.TaskStoryRequest(task_id)))
            reply: m.TaskStoryReply = self._next(asker, m.TaskStoryReply, read)
            asker.send(codec.encode(m.ClientDisconnect()))
            return reply
        finally:
            asker.close(linger=100)
            sockets.close()

    def _next(self, asker: Any, kind: type[Any], read: list[bytes]) -> Any:
        """The next message of `kind` (others, such as a heartbeat echo, are skipped) within the timeout; `read` holds
        the messages received joined with earlier ones (a batch in one part), looked at first."""
        deadline = time.monotonic() + self._timeout_seconds
        while True:
            left = deadline - time.monotonic()
            if not read and (left <= 0 or not asker.poll(int(left * 1000) + 1)):
                raise StoryUnavailable(
                    f"the scheduler at {self.scheduler_address} did not answer within {self._timeout_seconds:g} s"
                )
            try:
                if not read:
                    read.extend(codec.split(asker.recv()))
                message = codec.decode(read.pop(0))
            except codec.DecodeError as error:
                raise StoryUnavailable(f"the scheduler's answer could not be read: {error}") from None
            if isinstance(message, m.ProtocolError):
                raise StoryUnavailable(f"the scheduler at {self.scheduler_address} answered: {message.reason}")
            if isinstance(message, kind):
                return message
