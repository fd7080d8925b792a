"""The client's background I/O thread: the only code that touches the client's scheduler socket.

The user thread hands it encoded frames (`send`), which leave in batches; it completes futures from
the scheduler's answers, heartbeats, and fails every pending future with DisconnectedError as soon
as the connection closes or the scheduler stops answering. It never does blocking I/O (results are
fetched from object storage by the thread that asks for them), so heartbeats keep flowing while the
user thread computes.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import sys
import threading
import time
from dataclasses import replace

import zmq

from scaler.client.future import ScalerFuture
from scaler.errors import DisconnectedError, IncompatiblePeerError
from scaler.io.sockets import SocketFactory, TransportSecurity
from scaler.io.zmq_async import AsyncSocket, Frames, watch_events
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import GraphID, TaskID, short
from scaler.protocol.scheduler_link import (
    LinkEffect,
    LinkSettings,
    Lost,
    Refused,
    Registered,
    SchedulerLink,
    SendHeartbeat,
    SendHello,
    StillWaiting,
)

logger = logging.getLogger(__name__)

#: A message sent this long after the previous direct send leaves from the caller's thread at once;
#: closer ones are queued for the I/O thread, which sends them together.
DIRECT_SEND_GAP_SECONDS = 0.0005


#: Connection events that mean the scheduler refused this side's keys (or their absence).
HANDSHAKE_FAILURES = (
    zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)


def is_mechanism_mismatch(event: int, value: int) -> bool:
    """A client without keys met a CURVE server. Other handshake failures of a plain connection (a scheduler
    that died or restarted mid-handshake) are only a lost connection, which the client waits out."""
    return event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH


#: How often a client that waits for its scheduler says so.
WAITING_NOTICE_SECONDS = 5.0


class ClientAgent:
    def __init__(
        self,
        address: str,
        identity: bytes,
        hello: m.Hello,
        heartbeat_interval_seconds: float,
        timeout_seconds: float,
        security: TransportSecurity | None = None,
        scheduler_lost_grace_seconds: float = 0.0,
    ) -> None:
        self.address = address
        #: encoded Task frames of the unfinished tasks, submitted again to a scheduler that restarted
        self.resubmittable: dict[TaskID, bytes] = {}
        #: encoded GraphTask frames of the graphs with unfinished targets, submitted again likewise
        self.resubmittable_graphs: dict[GraphID, bytes] = {}
        self._graph_of_target: dict[TaskID, GraphID] = {}
        self._targets_left: dict[GraphID, int] = {}
        #: tasks whose cancel was asked and not answered yet: not submitted again after a restart, but cancelled
        self.cancel_requested: set[TaskID] = set()
        self._security = security
        self.identity = identity
        self.futures: dict[TaskID, ScalerFuture] = {}
        self.hello_reply: m.HelloReply | None = None
        self.worker_count = 0
        self.error: BaseException | None = None  #: why the connection is gone, once it is
        self._hello = hello
        self._timeout = timeout_seconds
        # A client heartbeats at least every second (once the previous echo is back), so that a scheduler with
        # a short client timeout keeps a client whose user thread computes.
        heartbeat_seconds = min(heartbeat_interval_seconds, 1.0)
        self._tick_seconds = heartbeat_seconds / 2  # a beat is never late by a whole interval
        self._link = SchedulerLink(
            LinkSettings(
                address=address,
                heartbeat_interval_seconds=heartbeat_seconds,
                timeout_seconds=timeout_seconds,
                one_heartbeat_in_flight=True,
                register_again=scheduler_lost_grace_seconds > 0,
                lost_on_disconnect=True,
                lost_grace_seconds=scheduler_lost_grace_seconds if scheduler_lost_grace_seconds > 0 else None,
            )
        )
        self._outgoing: collections.deque[bytes] = collections.deque()
        #: Orders every send: held while frames leave the queue or the user thread sends directly.
        self._send_lock = threading.Lock()
        self._socket_lock = threading.Lock()  #: serialises ZeroMQ calls of the two threads
        self._direct = False  #: the socket is open for direct sends from the user thread
        self._last_direct_send = 0.0
        self._ready = threading.Event()
        self._shutdown_reply: m.ShutdownReply | None = None
        self._shutdown_answered = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"scaler-client-{short(identity)}", daemon=True)

    # ------------------------------------------------------------ user thread side

    def start(self, connect_timeout_seconds: float | None = None) -> m.HelloReply:
        """Connect and say hello; while no scheduler answers, say so on stderr every few seconds, and give up
        after `connect_timeout_seconds` (default: the client timeout) with a ConnectionError."""
        self._thread.start()
        limit = self._timeout if connect_timeout_seconds is None else min(connect_timeout_seconds, self._timeout)
        waited = 0.0
        while not self._ready.wait(min(WAITING_NOTICE_SECONDS, limit - waited)):
            waited += WAITING_NOTICE_SECONDS
            if waited >= limit:
                self.stop(0.5)
                raise ConnectionError(
                    f"no scheduler answered at {self.address} within {limit:g} s: is it running, and is this its "
                    "address? (Client(..., connect_timeout_seconds=...) waits longer)"
                )
            print(f"scaler: still waiting for the scheduler at {self.address} ({waited:.0f} s)", file=sys.stderr)
        if self.error is not None:
            self.stop(0.5)
            raise self.error
        assert self.hello_reply is not None
        return self.hello_reply

    def send(self, frames: list[bytes]) -> None:
        """Send frames to the scheduler (thread-safe). A lone message leaves at once from the calling
        thread; messages that follow each other closely are queued and leave together from the I/O
        thread, in order either way."""
        if self.error is not None:
            raise self.error
        with self._send_lock:
            now = time.monotonic()
            if self._direct and not self._outgoing and now - self._last_direct_send > DIRECT_SEND_GAP_SECONDS:
                self._last_direct_send = now
                try:
                    self._socket.send_from_other_thread(frames)
                    return
                except zmq.ZMQError:
                    pass  # the socket is closing: queue, the I/O thread reports what happened
            was_empty = not self._outgoing
            self._outgoing.extend(frames)
        if was_empty and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._flush)
            except RuntimeError:  # loop closed
                pass

    def request_shutdown(self, timeout_seconds: float) -> m.ShutdownReply | None:
        self.send([codec.encode(m.ClientDisconnect(shutdown_cluster=True))])
        self._shutdown_answered.wait(timeout_seconds)
        return self._shutdown_reply

    def stop(self, timeout_seconds: float) -> None:
        """Close the connection (after sending what is queued) and end the thread."""
        loop = self._loop
        if loop is not None and not self._stopping:
            try:
                loop.call_soon_threadsafe(self._begin_stop)
            except RuntimeError:
                pass
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout_seconds)

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive() and self.error is None

    # ------------------------------------------------------------ the thread

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except Exception as error:
            logger.exception("client I/O thread failed")
            self._lost(DisconnectedError(f"client I/O thread failed: {error!r}"))
        finally:
            loop.close()
            self._ready.set()

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        self._closed = loop.create_future()
        sockets = SocketFactory(security=self._security)
        sock = sockets.dealer(self.address, identity=self.identity)
        self._socket = AsyncSocket(loop, sock, self._on_frames, lock=self._socket_lock)
        events = zmq.EVENT_DISCONNECTED | HANDSHAKE_FAILURES
        self._monitor = watch_events(loop, sockets.event_monitor(sock, events), self._on_socket_event)
        self._follow_link(self._link.start(time.monotonic()))
        self._direct = True
        heartbeat = asyncio.ensure_future(self._tick_routine())
        try:
            await self._closed
        finally:
            with self._send_lock:
                self._direct = False
            heartbeat.cancel()
            await asyncio.gather(heartbeat, return_exceptions=True)
            self._flush()
            await asyncio.sleep(0)
            self._monitor.close()
            self._socket.close()
            sockets.close()

    def _flush(self) -> None:
        if not self._outgoing or self._socket.closed:
            return
        with self._send_lock:
            frames = []
            while self._outgoing:
                frames.append(self._outgoing.popleft())
            try:
                self._socket.send(frames)
                return
            except zmq.Again:
                # no connection right now (one just failed its handshake, or is being made again): the frames
                # wait for the next flush; the link's timeout, or the handshake's failure event, decides the rest
                self._outgoing.extendleft(reversed(frames))
                return
            except zmq.ZMQError as error:
                failure = DisconnectedError(f"could not send to the scheduler at {self.address}: {error}")
        self._lost(failure)

    def _begin_stop(self) -> None:
        self._stopping = True
        self._flush()
        if not self._closed.done():
            self._closed.set_result(None)
        self._lost(DisconnectedError("the client disconnected"), quiet=True)

    def _on_frames(self, frames: Frames) -> None:
        for frame in frames:
            try:
                message = codec.decode(frame)
            except codec.DecodeError as error:
                logger.warning("undecodable frame from the scheduler: %s", error)
                continue
            self._on_message(message)

    def keep_graph(self, graph_id: GraphID, frame: bytes, targets: tuple[TaskID, ...]) -> None:
        """Keep a graph's frame until each of its targets has its answer (called before the graph is sent)."""
        self._targets_left[graph_id] = len(targets)
        for target in targets:
            self._graph_of_target[target] = graph_id
        self.resubmittable_graphs[graph_id] = frame

    def _answered(self, task_id: TaskID) -> None:
        self.resubmittable.pop(task_id, None)
        self.cancel_requested.discard(task_id)
        graph_id = self._graph_of_target.pop(task_id, None)
        if graph_id is not None:
            self._targets_left[graph_id] -= 1
            if self._targets_left[graph_id] <= 0:
                del self._targets_left[graph_id]
                self.resubmittable_graphs.pop(graph_id, None)

    def _on_message(self, message: m.Message) -> None:
        self._follow_link(self._link.on_message(message, time.monotonic()))
        if isinstance(message, m.TaskResult):
            self._answered(message.task_id)
            future = self.futures.pop(message.task_id, None)
            if future is not None:
                future._complete(message)
        elif isinstance(message, m.TaskCancelConfirm):
            self._answered(message.task_id)
            future = self.futures.pop(message.task_id, None)
            if future is not None:
                future._confirm_cancelled()
        elif isinstance(message, m.HeartbeatEcho):
            self.worker_count = message.worker_count
        elif isinstance(message, m.TaskLog):
            self._print_log(message)
        elif isinstance(message, m.ShutdownReply):
            self._shutdown_reply = message
            self._shutdown_answered.set()
        elif isinstance(message, m.ProtocolError) and message.kind is not m.ProtocolErrorKind.UNKNOWN_PEER:
            logger.warning("the scheduler refused a message of this client: %s", message.reason)

    def _follow_link(self, effects: list[LinkEffect]) -> None:
        for effect in effects:
            if isinstance(effect, SendHello):
                self._outgoing.append(codec.encode(replace(self._hello, known_instance=self._link.known_instance)))
                self._flush()
            elif isinstance(effect, SendHeartbeat):
                self._outgoing.append(codec.encode(m.Heartbeat(round_trip_seconds=effect.round_trip_seconds)))
                self._flush()
            elif isinstance(effect, Registered):
                self.hello_reply = effect.reply
                self.worker_count = effect.reply.worker_count
                if effect.again:
                    self._submit_again()
                self._ready.set()
            elif isinstance(effect, Refused):
                self._lost(ConnectionRefusedError(effect.reason) if effect.authentication
                           else IncompatiblePeerError(effect.reason))  # fmt: skip
            elif isinstance(effect, Lost):
                never_connected = not effect.was_registered
                self._lost(ConnectionError(effect.reason) if never_connected else DisconnectedError(effect.reason))
            elif isinstance(effect, StillWaiting):
                logger.warning("%s", effect.text)

    def _submit_again(self) -> None:
        """A restarted scheduler forgot this client: its unfinished tasks and graphs go again, in submission
        order (a graph whole: the nodes that had finished run again)."""
        self._cancel_what_was_being_cancelled()
        frames = [frame for task_id, frame in list(self.resubmittable.items()) if task_id in self.futures]
        graphs = list(self.resubmittable_graphs.values())
        logger.warning(
            "the scheduler at %s restarted and forgot this client: submitting its %d unfinished task(s) and %d "
            "graph(s) again", self.address, len(frames), len(graphs),
        )  # fmt: skip
        frames += graphs
        self._outgoing.extend(frames)
        self._flush()

    def _cancel_what_was_being_cancelled(self) -> None:
        """A cancel the old instance may never have read: the task (or the graph of a target) is not submitted
        again, and its future is cancelled here; a worker still running it is never heard from."""
        for task_id in list(self.cancel_requested):
            graph_id = self._graph_of_target.get(task_id)
            doomed = [task_id]
            if graph_id is not None:
                self.resubmittable_graphs.pop(graph_id, None)
                doomed = [target for target, graph in self._graph_of_target.items() if graph == graph_id]
            for doomed_id in doomed:
                self._answered(doomed_id)
                future = self.futures.pop(doomed_id, None)
                if future is not None:
                    future._confirm_cancelled()

    def _on_socket_event(self, event: int, value: int) -> None:
        if event & HANDSHAKE_FAILURES and (self._security is not None or is_mechanism_mismatch(event, value)):
            if self.hello_reply is None:  # the first connection: a wrong key never gets better by waiting
                self._lost(ConnectionRefusedError(self._refusal(event)), quiet=True)
                if not self._closed.done():
                    self._closed.set_result(None)
            return
        if not self._stopping:
            self._follow_link(self._link.on_disconnected(time.monotonic()))

    def _refusal(self, event: int) -> str:
        if self._security is None:
            return (
                f"the scheduler at {self.address} requires authentication (CURVE keys) and this client has none: "
                "give Client(..., curve_secret_key='NAME.key_secret', curve_server_key='server.key')"
            )
        if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            return (
                f"authentication failed: the scheduler at {self.address} refused this client's CURVE key (it is not "
                "in the scheduler's folder of authorised keys, or was removed from it)"
            )
        return (
            f"authentication failed with the scheduler at {self.address}: the CURVE handshake did not complete "
            "(a wrong server key, or a scheduler without CURVE)"
        )

    async def _tick_routine(self) -> None:
        while True:
            await asyncio.sleep(self._tick_seconds)
            self._follow_link(self._link.on_tick(time.monotonic()))

    def _lost(self, error: BaseException, quiet: bool = False) -> None:
        if self.error is None:
            self.error = error
            if not quiet:
                logger.warning("%s", error)
        pending = list(self.futures.values())
        self.futures.clear()
        self.resubmittable.clear()
        self.resubmittable_graphs.clear()
        self.cancel_requested.clear()
        for future in pending:
            future._fail(error)
        self._shutdown_answered.set()
        self._ready.set()
        closed = getattr(self, "_closed", None)
        if closed is not None and not closed.done():
            closed.set_result(None)

    @staticmethod
    def _print_log(log: m.TaskLog) -> None:
        stream = sys.stdout if log.stream is m.LogStream.STDOUT else sys.stderr
        prefix = f"[task {log.task_id.hex()[:8]}] "
        lines = log.text.splitlines(keepends=True)
        stream.write("".join(prefix + line for line in lines))
        stream.flush()
