"""The browser client's connection to a cluster: the client's pure core (`client/core.py`: registration, heartbeats,
futures, resubmission, cancels) over a DEALER link to the scheduler, and its object storage (`storage.py`), all on one
event loop, with no thread.

It is the browser's shell around the same parts the thread-based client uses: the core, the task encoder
(`payload.task_encoder`), the result reader and `ScalerFuture`, whose waits read the connection here
(`ReadingWait`: `future.result()` runs the loop until the future is done). The core's effects are carried out as the
thread-based agent (`client/agent.py`) carries them out, by a table with one handler per effect type.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scaler.browser.links import DealerLink
from scaler.browser.links_base import is_browser
from scaler.browser.storage import BrowserStorage
from scaler.browser.waiting import Waiting
from scaler.client.core import (
    ClientCore,
    ClientEffect,
    Closed,
    Complete,
    ConfirmCancel,
    Connected,
    Fail,
    JobAnswered,
    ReconnectToScheduler,
    RestoreStored,
    SendFrames,
    SendToScheduler,
    ShowLog,
    ShutdownAnswered,
    StoryAnswered,
    StreamValues,
    Warn,
)
from scaler.client.future import ScalerFuture
from scaler.errors import DisconnectedError
from scaler.io.tunnel.front import storage_for
from scaler.payload.result_reader import ResultReader
from scaler.payload.serializer import DefaultSerializer, Serializer
from scaler.payload.stored_objects import StoredOnce
from scaler.payload.task_encoder import TaskEncoder
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import ClientID, TaskID, new_client_id, new_task_id, short
from scaler.protocol.scheduler_link import LinkSettings
from scaler.protocol.zmtp_curve import CurveKeys

logger = logging.getLogger(__name__)

#: How often the core is ticked (heartbeats, silence): the thread-based client ticks at half its heartbeat.
TICK_SECONDS = 0.5
#: The largest batch of small messages joined into one part (the scheduler splits it again: `codec.split`).
JOIN_LIMIT_BYTES = 64 * 1024


@dataclass(frozen=True)
class BrowserSettings:
    """What the browser client is opened with (`Client`'s arguments of the same names)."""

    object_storage_address: str | None = None
    timeout_seconds: float = 60.0  #: a silent scheduler, a storage request
    connect_timeout_seconds: float = 15.0
    heartbeat_interval_seconds: float = 1.0
    profiling: bool = False
    stream_output: bool = False
    serializer: Serializer = field(default_factory=DefaultSerializer)
    keys: CurveKeys | None = None  #: CURVE on both connections (None: unsecured)


class BrowserSession:
    """One connection to a cluster (see the module's docstring); connects when made."""

    def __init__(self, address: str, settings: BrowserSettings) -> None:
        self.address = address
        self.settings = settings
        self.identity = ClientID(new_client_id())
        self._name = short(self.identity)
        self._waiting = Waiting()
        self._changed = asyncio.Event()  #: set whenever something a waiting call may wait for happened
        where = ("browser", 0) if is_browser() else (socket.gethostname(), os.getpid())
        hello = m.Hello(m.PROTOCOL_VERSION, local_python_version(), where[1], where[0], m.ClientInfo(""))
        link_settings = LinkSettings(
            address=address, heartbeat_interval_seconds=settings.heartbeat_interval_seconds,
            timeout_seconds=settings.timeout_seconds, one_heartbeat_in_flight=True, register_again=False,
            lost_on_disconnect=True, pause_after_seconds=max(1.0, 4 * TICK_SECONDS),
        )  # fmt: skip
        self._core: ClientCore[ScalerFuture[Any]] = ClientCore(hello, link_settings)
        self._link = DealerLink(address, self.identity, self._on_frames, self._on_lost, settings.keys)
        self._handlers: dict[type, Callable[[Any], None]] = {
            Complete: _complete,
            Fail: _fail,
            ConfirmCancel: lambda effect: effect.future.set_cancel_confirmed(),
            SendToScheduler: lambda effect: self._send([codec.encode(effect.message)]),
            SendFrames: lambda effect: self._send(effect.frames),
            Connected: lambda effect: None,
            Closed: lambda effect: self._link.close(),
            ShowLog: lambda effect: _print_log(effect.log),
            Warn: _warn,
            StreamValues: lambda effect: logger.warning("streaming tasks are not supported in the browser"),
            ShutdownAnswered: lambda effect: None,
            StoryAnswered: lambda effect: None,
            JobAnswered: lambda effect: None,
            ReconnectToScheduler: lambda effect: None,  # the link closed: the core ends it (lost_on_disconnect)
            RestoreStored: lambda effect: None,
        }
        self._ticking: asyncio.Future[Any] | None = None
        try:
            reply = self._waiting.run(self._connect())
        except BaseException:
            self._stop()
            raise
        self.storage = BrowserStorage(
            settings.object_storage_address or storage_for(reply.object_storage_address, reply.tunnel_address, address),
            self.identity, self._waiting, settings.timeout_seconds, settings.keys,
        )  # fmt: skip
        self._objects = StoredOnce(self.storage.put)
        self._encoder = TaskEncoder(self.identity, settings.serializer, self._objects)
        #: results read are left stored: this client's objects are deleted when it leaves (one request, not one each)
        self._reader = ResultReader(settings.serializer, lambda: self.storage, keep_objects=True)
        self._cancel_one = self.cancel_one

    # ------------------------------------------------------------ connecting

    async def _connect(self) -> m.HelloReply:
        await self._link.open()
        self._carry_out(self._core.start(time.monotonic()))
        self._ticking = asyncio.ensure_future(self._tick())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.connect_timeout_seconds
        while self._core.hello_reply is None and self._core.error is None:
            self._changed.clear()
            left = deadline - loop.time()
            if left <= 0:
                self._carry_out(self._core.on_closed(ConnectionError(self._no_answer()), quiet=True))
                break
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except asyncio.TimeoutError:
                pass
        if self._core.error is not None:
            raise self._core.error
        assert self._core.hello_reply is not None
        return self._core.hello_reply

    def _no_answer(self) -> str:
        return (
            f"no scheduler answered at {self.address} within {self.settings.connect_timeout_seconds:g} s: is the "
            "cluster running, and is this the address it binds for browsers?"
        )

    async def _tick(self) -> None:
        while self._core.error is None:
            await asyncio.sleep(TICK_SECONDS)
            self._carry_out(self._core.on_tick(time.monotonic()))

    # ------------------------------------------------------------ what the connection brings

    def _on_frames(self, frames: list[bytes]) -> None:
        messages = []
        for frame in frames:
            try:
                messages += [codec.decode(part) for part in codec.split(frame)]
            except codec.DecodeError as error:
                logger.warning("undecodable frame from the scheduler: %s", error)
        self._carry_out(self._core.on_messages(messages, time.monotonic()))

    def _on_lost(self, reason: str) -> None:
        failure = ConnectionError(reason) if self._core.hello_reply is None else DisconnectedError(reason)
        self._carry_out(self._core.on_closed(failure, quiet=self._core.hello_reply is None))

    def _carry_out(self, effects: list[ClientEffect[ScalerFuture[Any]]]) -> None:
        for effect in effects:
            self._handlers[type(effect)](effect)
        self._changed.set()

    def _send(self, frames: list[bytes]) -> None:
        """Small messages joined into parts of up to JOIN_LIMIT_BYTES, as the thread-based agent joins a batch."""
        part: list[bytes] = []
        size = 0
        for frame in frames:
            if part and size + len(frame) > JOIN_LIMIT_BYTES:
                self._link.send([b"".join(part)])
                part, size = [], 0
            part.append(frame)
            size += len(frame)
        if part:
            self._link.send([b"".join(part)])

    # ------------------------------------------------------------ what the client asks

    @property
    def error(self) -> BaseException | None:
        return self._core.error

    @property
    def worker_count(self) -> int:
        return self._core.worker_count

    @property
    def hello_reply(self) -> m.HelloReply | None:
        return self._core.hello_reply

    def check_open(self) -> None:
        if self._core.error is not None:
            raise self._core.error

    def submit(self, fn: Any, calls: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[ScalerFuture[Any]]:
        """fn(*args, **kwargs) for each call, each a task; their futures."""
        self.check_open()
        entry = self._encoder.function(fn)
        tasks = []
        for args, kwargs in calls:
            entry.check_call(args, kwargs)
            task_id = TaskID(new_task_id())
            arguments = self._encoder.arguments(args, kwargs)
            task = self._encoder.task(
                task_id, entry, arguments, profiling=self.settings.profiling,
                stream_output=self.settings.stream_output, priority=0, capabilities=(),
            )  # fmt: skip
            future: ScalerFuture[Any] = ScalerFuture(
                task_id, self._reader, self._cancel_one, self.settings.profiling, None, self._name, self
            )
            tasks.append((task_id, future, codec.encode(task)))
        self._carry_out(self._core.submit(tasks))
        return [future for _, future, _ in tasks]

    def store(self, payload: Any, name: str) -> Any:
        """An object's frames stored once (`send_object`); its object id."""
        return self._encoder.put_object(payload, name)

    def read(self, object_id: bytes) -> list[memoryview]:
        return self.storage.get_frames(object_id)

    def cancel_one(self, task_id: TaskID) -> None:
        self.cancel([task_id])

    def cancel(self, task_ids: list[TaskID]) -> None:
        if self._core.error is None and task_ids:
            self._carry_out(self._core.cancel(task_ids))

    def wait(self, done: Callable[[], bool], timeout_seconds: float | None) -> bool:
        """Run the loop until `done()` or the timeout; whether it is done."""
        return self._waiting.until(done, self._changed, timeout_seconds)

    # ReadingWait (client/future.py): a future's result() waits by running the loop here
    def wait_reading(self, done: Callable[[], bool], timeout_seconds: float | None) -> None:
        self.wait(done, timeout_seconds)

    def wake_reader(self, _future: object = None) -> None:
        self._changed.set()

    def close(self, timeout_seconds: float = 10.0) -> None:
        """Cancel what is unfinished, delete what this client stored, say goodbye and close. Idempotent."""
        if self._core.error is None:
            unfinished = list(self._core.unfinished().values())
            self.cancel([future.task_id for future in unfinished if not future.done()])
            self.wait(lambda: all(future.done() for future in unfinished), timeout_seconds)
            try:
                self.storage.delete_owner()
            except Exception as error:  # the scheduler deletes a leaving client's objects too
                logger.debug("could not delete this client's objects: %s", error)
            self._send([codec.encode(m.ClientDisconnect(shutdown_cluster=False))])
            self._carry_out(self._core.on_closed(DisconnectedError("the client disconnected"), quiet=True))
        self.storage.close()
        self._stop()

    def _stop(self) -> None:
        self._link.close()
        if self._ticking is not None:
            self._ticking.cancel()
        self._waiting.close()


def _warn(effect: Warn) -> None:
    """What the user waits on, on stderr (the page's cell); the rest to the log (a page's long synchronous work,
    pickling or sealing a large object, is a pause of the client the core notices: not the reader's concern)."""
    if effect.show:
        print(f"scaler: {effect.text}", file=sys.stderr, flush=True)
    else:
        logger.info("%s", effect.text)


def _complete(effect: Complete[ScalerFuture[Any]]) -> None:
    for future, result in effect.results:
        future.set_task_result(result)


def _fail(effect: Fail[ScalerFuture[Any]]) -> None:
    for future in effect.futures:
        future.set_failed(effect.error)


def _print_log(log: m.TaskLog) -> None:
    stream = sys.stderr if log.stream is m.LogStream.STDERR else sys.stdout
    prefix = f"[task {log.task_id[-4:].hex()}] "
    stream.write("".join(prefix + line for line in log.text.splitlines(keepends=True)))
    stream.flush()
