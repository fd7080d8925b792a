"""A client for simulated stacks: the real client core (`scaler.client.core.ClientCore`: futures by task id,
resubmission after a scheduler restart, cancels, the scheduler link) behind a one-loop shell on a simulated clock and
network, doing what `client/agent.py` does with its I/O thread, without the thread.

Its futures record every answer they get (a result, a cancel confirmation, a failure), so a test can check that
each task is answered exactly once; `wait` waits for them on the simulated clock.
"""

from __future__ import annotations

import asyncio
import os
import socket as socket_module
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from scaler.client.agent import DEFAULT_LINK_SECONDS
from scaler.client.core import (
    ClientCore,
    ClientEffect,
    Closed,
    Complete,
    ConfirmCancel,
    Connected,
    Fail,
    RestoreStored,
    SendFrames,
    SendToScheduler,
    ShowLog,
    ShutdownAnswered,
    Warn,
)
from scaler.errors import DisconnectedError
from scaler.io.clock import Clock
from scaler.io.sockets import Sockets
from scaler.io.zmq_async import AsyncSocket, watch_events
from scaler.io.zmq_parts import Frames
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.handshake import local_python_version
from scaler.protocol.ids import ClientID, GraphID, TaskID
from scaler.protocol.scheduler_link import LinkSettings


class SimulatedFuture:
    """A task's future: every answer it got, in order."""

    def __init__(self, task_id: TaskID) -> None:
        self.task_id = task_id
        self.answers: list[tuple[str, Any]] = []  #: ("result", TaskResult), ("cancelled", None), ("failed", error)

    def done(self) -> bool:
        return bool(self.answers)

    @property
    def result(self) -> m.TaskResult | None:
        kind, value = self.answers[0] if self.answers else ("", None)
        return value if kind == "result" else None

    @property
    def cancelled(self) -> bool:
        return bool(self.answers) and self.answers[0][0] == "cancelled"

    def set_task_result(self, result: m.TaskResult) -> None:
        self.answers.append(("result", result))

    def set_cancel_confirmed(self) -> None:
        self.answers.append(("cancelled", None))

    def set_failed(self, error: BaseException) -> None:
        self.answers.append(("failed", error))


class SimulatedClient:
    def __init__(
        self,
        sockets: Sockets,
        clock: Clock,
        address: str,
        name: str,
        scheduler_lost_grace_seconds: float | None = 60.0,
        heartbeat_interval_seconds: float = 1.0,
        timeout_seconds: float | None = 300.0,
        resume_seconds: float = 0.0,
    ) -> None:
        """As `Client`: `timeout_seconds`, `scheduler_lost_grace_seconds` None follow the scheduler's resume window
        (at least 60 s); `resume_seconds` is the client's wish as its hello carries it (0: the scheduler's,
        negative: none)."""
        self.identity = ClientID(f"Client|{name}".encode())
        self._sockets = sockets
        self._clock = clock
        self._address = address
        info = m.ClientInfo(name, resume_seconds=resume_seconds)
        hello = m.Hello(m.PROTOCOL_VERSION, local_python_version(), os.getpid(), socket_module.gethostname(), info)
        follow_window = (timeout_seconds is None, scheduler_lost_grace_seconds is None)
        timeout_seconds = DEFAULT_LINK_SECONDS if timeout_seconds is None else timeout_seconds
        grace = DEFAULT_LINK_SECONDS if scheduler_lost_grace_seconds is None else scheduler_lost_grace_seconds
        heartbeat_seconds = min(heartbeat_interval_seconds, 1.0)  # as ClientAgent
        self._tick_seconds = heartbeat_seconds / 2
        link = LinkSettings(
            address=address,
            heartbeat_interval_seconds=heartbeat_seconds,
            timeout_seconds=timeout_seconds,
            one_heartbeat_in_flight=True,
            register_again=grace > 0,
            lost_on_disconnect=True,
            lost_grace_seconds=grace if grace > 0 else None,
            pause_after_seconds=max(1.0, 4 * self._tick_seconds),
        )
        self.core: ClientCore[SimulatedFuture] = ClientCore(hello, link, follow_window)
        self.connections = 0  #: how often it registered (again, after a restart)
        self.closed_because: BaseException | None = None
        self.warnings: list[str] = []
        self.logs: list[m.TaskLog] = []  #: what the scheduler forwarded to be shown: tasks' output, its warnings
        self._handlers: dict[type, Callable[[Any], None]] = {
            SendToScheduler: lambda effect: self._send([codec.encode(effect.message)]),
            SendFrames: lambda effect: self._send(effect.frames),
            Complete: self._complete,
            ConfirmCancel: lambda effect: effect.future.set_cancel_confirmed(),
            Fail: self._fail,
            Connected: self._connected,
            Closed: self._closed,
            ShowLog: lambda effect: self.logs.append(effect.log),
            ShutdownAnswered: lambda effect: None,
            Warn: lambda effect: self.warnings.append(effect.text),
            RestoreStored: lambda effect: None,  # its tasks' scripts name no stored object
        }
        self._ticker: asyncio.Future[None] | None = None
        self._paused: list[list[m.Message]] | None = None  #: while paused (SIGSTOP): what arrived, unread
        self._running = False  #: started and not closed

    def start(self) -> None:
        """Connect and say hello (registration follows when a scheduler answers)."""
        loop = asyncio.get_running_loop()
        sock = self._sockets.dealer(self._address, identity=self.identity)
        self._socket = AsyncSocket(loop, sock, self._on_frames)
        self._monitor = watch_events(loop, self._sockets.event_monitor(sock, zmq.EVENT_DISCONNECTED), self._on_event)
        self._running = True
        self._carry_out(self.core.start(self._clock.now()))
        self._ticker = asyncio.ensure_future(self._tick_routine())

    def submit(self, tasks: Sequence[m.Task]) -> list[SimulatedFuture]:
        futures = [SimulatedFuture(task.task_id) for task in tasks]
        frames = [(task.task_id, future, codec.encode(task)) for task, future in zip(tasks, futures, strict=True)]
        self._carry_out(self.core.submit(frames))
        return futures

    def submit_graph(
        self, graph_id: GraphID, nodes: Sequence[m.Task], targets: Sequence[TaskID]
    ) -> list[SimulatedFuture]:
        """A graph (its nodes carry `graph_id` and their dependencies); futures of its targets."""
        futures = [SimulatedFuture(target) for target in targets]
        frame = codec.encode(m.GraphTask(graph_id, self.identity, tuple(nodes), tuple(targets)))
        self._carry_out(self.core.submit_graph(graph_id, frame, [(f.task_id, f) for f in futures]))
        return futures

    @property
    def sockets(self) -> Sockets:
        return self._sockets

    def pause(self) -> None:
        """Stopped (SIGSTOP, a laptop asleep): it neither ticks nor reads; what arrives waits for it."""
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        self._paused = []

    def wake(self) -> None:
        """SIGCONT: it reads what waited and ticks again (its first tick sees the gap of its own pause)."""
        waited, self._paused = self._paused or [], None
        self._carry_out(self.core.on_tick(self._clock.now()))
        for messages in waited:
            self._carry_out(self.core.on_messages(messages, self._clock.now()))
        self._ticker = asyncio.ensure_future(self._tick_routine())

    def cancel(self, task_ids: Sequence[TaskID]) -> None:
        self._carry_out(self.core.cancel(list(task_ids)))

    def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        if self._running:
            self._running = False
            self._carry_out(self.core.on_closed(DisconnectedError("the client disconnected"), True))
            self._monitor.close()
            self._socket.close()
            self._sockets.close()

    # ------------------------------------------------------------ the shell

    def _carry_out(self, effects: list[ClientEffect[SimulatedFuture]]) -> None:
        for effect in effects:
            self._handlers[type(effect)](effect)

    def _send(self, frames: list[bytes]) -> None:
        if not self._socket.closed:
            self._socket.send(frames)

    @staticmethod
    def _complete(effect: Complete[SimulatedFuture]) -> None:
        for future, result in effect.results:
            future.set_task_result(result)

    @staticmethod
    def _fail(effect: Fail[SimulatedFuture]) -> None:
        for future in effect.futures:
            future.set_failed(effect.error)

    def _connected(self, effect: Connected) -> None:
        self.connections += 1

    def _closed(self, effect: Closed) -> None:
        self.closed_because = effect.error

    def _on_frames(self, frames: Frames) -> None:
        messages = [codec.decode(part) for frame in frames for part in codec.split(frame)]
        if self._paused is not None:
            self._paused.append(messages)
            return
        self._carry_out(self.core.on_messages(messages, self._clock.now()))

    def _on_event(self, event: int, value: int) -> None:
        self._carry_out(self.core.on_disconnected(self._clock.now()))

    async def _tick_routine(self) -> None:
        while True:
            await self._clock.sleep(self._tick_seconds)
            self._carry_out(self.core.on_tick(self._clock.now()))
