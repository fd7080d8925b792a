"""The client's shell around its core (`client/core.py`): the I/O thread, the only code that touches the
client's scheduler socket, and the thread-safe methods the user's thread calls.

Every event (a submission, a cancel, messages read, a tick, a closed connection) goes into the core under one
lock; the effects it returns are carried out after the lock is released, in order: frames leave (a lone message
from the calling thread at once, messages that follow each other closely in batches from the I/O thread),
futures are completed, failed or cancelled, logs printed. The I/O thread never does blocking I/O (results are
fetched from object storage by the thread that asks for them), so heartbeats keep flowing while the user thread
computes; every pending future fails with DisconnectedError as soon as the connection is over.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import zmq

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
from scaler.client.forwarded_logs import emit_records
from scaler.errors import DisconnectedError
from scaler.io.sockets import HEARTBEAT_TIMEOUT_SECONDS, SocketFactory, TransportSecurity
from scaler.io.tunnel import TunnelError
from scaler.io.tunnel.relay import refusal
from scaler.io.waiting_reader import LoopStandby, WaitingReader, standby_loop
from scaler.io.zmq_async import AsyncSocket, watch_events
from scaler.io.zmq_parts import Frames, joined
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import GraphID, TaskID, short, short_task_id
from scaler.protocol.scheduler_link import LinkSettings
from scaler.security.connection_files import SCHEDULER_SERVICE
from scaler.security.find import FoundKeys
from scaler.security.handshake import (
    HANDSHAKE_FAILURES,
    answers_as,
    is_refusal,
    is_refusal_confirmed,
    may_be_wrong_service,
    refusal_text,
    wrong_port_text,
)
from scaler.security.key_files import KeyFileError

logger = logging.getLogger(__name__)

#: A message sent this long after the previous direct send leaves from the caller's thread at once;
#: closer ones are queued for the I/O thread, which sends them together.
DIRECT_SEND_GAP_SECONDS = 0.0005


#: How often a client that waits for its scheduler says so.
WAITING_NOTICE_SECONDS = 5.0
#: How long a client waits for a silent scheduler, or for one to answer after its connection closed, when not told:
#: this, or the scheduler's resume window for it when longer (client/core.py, rule 6).
DEFAULT_LINK_SECONDS = 60.0
#: How often a client waiting for a stack that is still starting reads its connection file again.
STACK_POLL_SECONDS = 0.5


class TaskFuture(Protocol):
    """What the agent does to a task's future (a ScalerFuture; an asyncio client's futures would do it on their
    own loop)."""

    def set_task_result(self, result: m.TaskResult) -> None: ...
    def set_cancel_confirmed(self) -> None: ...
    def set_failed(self, error: BaseException) -> None: ...
    def add_stream_item(self, item: m.StreamItem) -> int | None: ...


FutureT = TypeVar("FutureT", bound=TaskFuture)


class _JobWaiter:
    __slots__ = ("answered", "reply")

    def __init__(self) -> None:
        self.answered = threading.Event()
        self.reply: m.JobReply | m.ActorReply | None = None


class ClientAgent(Generic[FutureT]):
    def __init__(
        self,
        address: str,
        identity: bytes,
        hello: m.Hello,
        heartbeat_interval_seconds: float,
        timeout_seconds: float | None,
        keys: FoundKeys | TransportSecurity | None = None,
        scheduler_lost_grace_seconds: float | None = 0.0,
        link_heartbeat_timeout_seconds: float = HEARTBEAT_TIMEOUT_SECONDS,
    ) -> None:
        """`keys`: those `find_keys` found (found again when the scheduler refuses them before the first
        registration, or its stack is still starting), or a TransportSecurity used as is. `timeout_seconds`,
        `scheduler_lost_grace_seconds` None: 60 s, or the scheduler's resume window for this client when longer (the
        grace: only after a connection that died of silence, this client away; client/core.py, rule 6)."""
        self.address = address
        if not isinstance(keys, FoundKeys):
            keys = FoundKeys("client", address, keys, "the keys given" if keys is not None else "none (plain TCP)")
        self.keys = keys  #: the keys in use (replaced when found again)
        self.identity = identity
        self._link_heartbeat_timeout_seconds = link_heartbeat_timeout_seconds
        follow_window = (timeout_seconds is None, scheduler_lost_grace_seconds is None)
        timeout_seconds = DEFAULT_LINK_SECONDS if timeout_seconds is None else timeout_seconds
        grace = DEFAULT_LINK_SECONDS if scheduler_lost_grace_seconds is None else scheduler_lost_grace_seconds
        self._timeout = timeout_seconds
        # A client heartbeats at least every second (once the previous echo is back), so that a scheduler with
        # a short client timeout keeps a client whose user thread computes.
        heartbeat_seconds = min(heartbeat_interval_seconds, 1.0)
        self._tick_seconds = heartbeat_seconds / 2  # a beat is never late by a whole interval
        link_settings = LinkSettings(
            address=address,
            heartbeat_interval_seconds=heartbeat_seconds,
            timeout_seconds=timeout_seconds,
            one_heartbeat_in_flight=True,
            register_again=grace > 0,
            lost_on_disconnect=True,
            lost_grace_seconds=grace if grace > 0 else None,
            pause_after_seconds=max(1.0, 4 * self._tick_seconds),
        )
        self._core: ClientCore[FutureT] = ClientCore(hello, link_settings, follow_window)
        self._core_lock = threading.Lock()  #: held for every call into the core, never while effects are carried out
        self._outgoing: collections.deque[bytes] = collections.deque()
        #: Orders every send: held while frames leave the queue or the user thread sends directly.
        self._send_lock = threading.Lock()
        self._socket_lock = threading.Lock()  #: serialises ZeroMQ calls of the two threads
        #: held while the connection's messages are read and handled (by the I/O thread or a waiting user thread)
        self._reading = threading.RLock()
        self._standby: LoopStandby | None = None
        #: lets a user thread that waits for a future read the connection itself (`wait_reading`)
        self._waiting_reader: WaitingReader | None = None
        self._direct = False  #: the socket is open for direct sends from the user thread
        self._last_direct_send = 0.0
        self._ready = threading.Event()
        #: told of each batch of futures completed with their tasks' results, after they are (client/eager_reads.py)
        self.on_answered: Callable[[list[tuple[FutureT, m.TaskResult]]], None] | None = None
        self._shutdown_reply: m.ShutdownReply | None = None
        self._shutdown_answered = threading.Event()
        #: story requests not answered yet, per task (answered in order: the scheduler answers in order)
        self._story_requests: dict[TaskID, list[concurrent.futures.Future[m.TaskStoryReply]]] = {}
        #: JobOpen/JobAttach requests waiting for their JobReply, and ActorLookups for their ActorReply, by (the
        #: reply's type, name), oldest first
        self._job_waiters: dict[tuple[type, str], collections.deque[_JobWaiter]] = {}
        self._job_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._io_thread_id: int | None = None  #: the I/O thread's, once it runs: what it sends is queued and flushed
        self._thread = threading.Thread(target=self._run, name=f"scaler-client-{short(identity)}", daemon=True)
        #: how each effect of the core is carried out (tests/unit/test_client_core.py checks that none is missing)
        self._effect_handlers: dict[type, Callable[[Any], None]] = {
            Complete: self._complete,
            StreamValues: self._stream_values,
            SendFrames: self._send_frames,
            SendToScheduler: lambda effect: self._send_from_here([codec.encode(effect.message)]),
            ConfirmCancel: lambda effect: effect.future.set_cancel_confirmed(),
            Fail: self._fail,
            Connected: lambda effect: self._ready.set(),
            Closed: lambda effect: self._closed_down(),
            ShowLog: lambda effect: self._print_log(effect.log),
            ShutdownAnswered: self._shutdown_answer,
            StoryAnswered: self._story_answer,
            JobAnswered: self._job_answer,
            Warn: self._warn,
            ReconnectToScheduler: lambda effect: self._on_loop(self._reconnect),
            RestoreStored: lambda effect: self.restore_stored(),
        }
        #: stores again what object storage lost when a restarted scheduler registers this client again, before its
        #: tasks go again (the session's; it blocks the thread that carries the effects out for a few requests)
        self.restore_stored: Callable[[], None] = lambda: None

    # ------------------------------------------------------------ what the core knows (read without the lock:
    # each is one value, replaced whole)

    @property
    def error(self) -> BaseException | None:
        """Why the connection is gone, once it is."""
        return self._core.error

    @property
    def hello_reply(self) -> m.HelloReply | None:
        return self._core.hello_reply

    @property
    def worker_count(self) -> int:
        """The workers a task can go to, as the scheduler last said (its processors connected)."""
        return self._core.worker_count

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive() and self.error is None

    def unfinished(self) -> dict[TaskID, FutureT]:
        """The futures of the tasks not answered yet, by task id (a copy)."""
        with self._core_lock:
            return self._core.unfinished()

    @property
    def unfinished_count(self) -> int:
        with self._core_lock:
            return self._core.unfinished_count

    @property
    def kept_graph_count(self) -> int:
        """Graphs kept to be submitted again to a restarted scheduler."""
        with self._core_lock:
            return self._core.kept_graph_count

    # ------------------------------------------------------------ user thread side

    def start(self, connect_timeout_seconds: float | None = None) -> m.HelloReply:
        """Connect and say hello; while no scheduler answers, say so on stderr every few seconds, and give up
        after `connect_timeout_seconds` (default: the client timeout) with a ConnectionError."""
        self._wait_while_stack_starts()
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
        reply = self.hello_reply
        assert reply is not None
        return reply

    def _wait_while_stack_starts(self) -> None:
        """The connection file of the address says its stack is still starting (a cloud hub booting): wait for
        it, saying so, and take the keys it publishes (bounded by the stack's own start timeout, in its file)."""
        started = time.monotonic()
        noticed = started
        while self.keys.starting:
            now = time.monotonic()
            if now - noticed >= WAITING_NOTICE_SECONDS:
                noticed = now
                print(f"scaler: the stack at {self.address} is still starting (its hub is booting; waited "
                      f"{now - started:.0f} s)", file=sys.stderr)  # fmt: skip
            time.sleep(STACK_POLL_SECONDS)
            self.keys = self.keys.again()

    def submit(self, tasks: list[tuple[TaskID, FutureT, bytes]]) -> None:
        """Send tasks (each with its future and encoded Task); their futures complete when they are answered.
        Raises why the connection is gone, once it is."""
        with self._core_lock:
            effects = self._core.submit(tasks)
        self._carry_out(effects)

    def submit_graph(self, graph_id: GraphID, frame: bytes, targets: list[tuple[TaskID, FutureT]]) -> None:
        """Send a graph (its encoded GraphTask), whose targets' futures complete when they are answered."""
        with self._core_lock:
            effects = self._core.submit_graph(graph_id, frame, targets)
        self._carry_out(effects)

    def cancel(self, task_ids: list[TaskID], queued_only: bool = False) -> None:
        """Ask the scheduler to cancel tasks (`queued_only`: those not yet at a worker); their futures are cancelled
        when it confirms (or complete, when their result came first). A cancel that cannot be sent fails their
        futures at once."""
        with self._core_lock:
            effects = self._core.cancel(task_ids, queued_only)
        try:
            self._carry_out(effects)
        except Exception as error:
            failure = error if isinstance(error, DisconnectedError) else DisconnectedError(str(error))
            with self._core_lock:
                effects = self._core.cancel_not_sent(task_ids, failure)
            self._carry_out(effects)

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

    def request_story(self, task_id: TaskID, timeout_seconds: float) -> m.TaskStoryReply | None:
        """Ask the scheduler for a task's story; None when no answer came within the timeout."""
        answer: concurrent.futures.Future[m.TaskStoryReply] = concurrent.futures.Future()
        with self._core_lock:
            self._story_requests.setdefault(task_id, []).append(answer)
        self.send([codec.encode(m.TaskStoryRequest(task_id))])
        try:
            return answer.result(timeout_seconds)
        except concurrent.futures.TimeoutError:
            return None
        finally:
            with self._core_lock:
                waiting = self._story_requests.get(task_id)
                if waiting is not None and answer in waiting:
                    waiting.remove(answer)
                if not waiting:
                    self._story_requests.pop(task_id, None)

    def ask_job(self, request: m.JobOpen | m.JobAttach, timeout_seconds: float) -> m.JobReply:
        """Send a job request and wait for the scheduler's answer (raises TimeoutError without one)."""
        reply = self._ask(request, m.JobReply, f"job {request.name!r}", timeout_seconds)
        assert isinstance(reply, m.JobReply)
        return reply

    def ask_actor(self, request: m.ActorLookup, timeout_seconds: float) -> m.ActorReply:
        """Look an actor up by name and wait for the scheduler's answer (raises TimeoutError without one)."""
        reply = self._ask(request, m.ActorReply, f"actor {request.name!r}", timeout_seconds)
        assert isinstance(reply, m.ActorReply)
        return reply

    def _ask(
        self, request: m.JobOpen | m.JobAttach | m.ActorLookup, answer: type, what: str, timeout_seconds: float
    ) -> m.JobReply | m.ActorReply:
        waiter = _JobWaiter()
        key = (answer, request.name)
        with self._job_lock:
            self._job_waiters.setdefault(key, collections.deque()).append(waiter)
        self.send([codec.encode(request)])
        if not waiter.answered.wait(timeout_seconds) or waiter.reply is None:
            if self.error is not None:
                raise self.error
            raise TimeoutError(f"the scheduler did not answer about {what} in {timeout_seconds:g} s")
        return waiter.reply

    def follow(self, tasks: list[tuple[TaskID, FutureT]]) -> None:
        """Futures for tasks of a job another client submitted; they complete as the scheduler sends results."""
        with self._core_lock:
            effects = self._core.follow(tasks)
        self._carry_out(effects)

    def wait_reading(self, done: Callable[[], bool], timeout_seconds: float | None) -> None:
        """Called by a user thread about to wait for a future: read the connection on this thread until `done()` or
        the timeout, so that an answer wakes the waiter directly instead of the I/O thread, which would then wake it
        (`scaler.io.waiting_reader`). Returns at once when another thread reads already, or where the platform does
        not allow it: the caller then waits as before."""
        reader = self._waiting_reader
        if reader is not None and threading.get_ident() != self._io_thread_id:
            reader.wait(done, timeout_seconds)

    def wake_reader(self, _future: object = None) -> None:
        """A future completed: the user thread reading the connection, if any, looks whether it is the one it waits
        for (thread-safe; a future's done callback)."""
        reader = self._waiting_reader
        if reader is not None:
            reader.wake()

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

    # ------------------------------------------------------------ carrying out the core's effects

    def _carry_out(self, effects: list[ClientEffect[FutureT]]) -> None:
        """Performs effects, in order, on the calling thread (the I/O thread or the user's)."""
        handlers = self._effect_handlers
        for effect in effects:
            handlers[type(effect)](effect)

    def _complete(self, effect: Complete[FutureT]) -> None:
        for future, result in effect.results:
            future.set_task_result(result)
        answered = self.on_answered
        if answered is not None:
            answered(effect.results)

    def _stream_values(self, effect: StreamValues[FutureT]) -> None:
        for future, item in effect.items:
            resend = future.add_stream_item(item)
            if resend is not None:  # a run that starts over: it is given the credit its reader had
                self._send_from_here([codec.encode(m.StreamCredit(item.task_id, resend))])

    def _fail(self, effect: Fail[FutureT]) -> None:
        for future in effect.futures:
            future.set_failed(effect.error)

    def _shutdown_answer(self, effect: ShutdownAnswered) -> None:
        self._shutdown_reply = effect.reply
        self._shutdown_answered.set()

    def _story_answer(self, effect: StoryAnswered) -> None:
        with self._core_lock:
            waiting = self._story_requests.get(effect.reply.task_id)
            answer = waiting.pop(0) if waiting else None
        if answer is not None and not answer.done():
            answer.set_result(effect.reply)

    def _job_answer(self, effect: JobAnswered) -> None:
        key = (type(effect.reply), effect.reply.name)
        with self._job_lock:
            waiters = self._job_waiters.get(key)
            waiter = waiters.popleft() if waiters else None
            if waiters is not None and not waiters:
                del self._job_waiters[key]
        if waiter is not None:
            waiter.reply = effect.reply
            waiter.answered.set()

    def _send_frames(self, effect: SendFrames) -> None:
        self._send_from_here(effect.frames)

    def _send_from_here(self, frames: list[bytes]) -> None:
        if threading.get_ident() == self._io_thread_id:
            self._outgoing.extend(frames)
            self._flush()
        else:
            self.send(frames)

    def _feed(self, event: Callable[..., list[ClientEffect[FutureT]]], *arguments: Any) -> None:
        """Calls a core event (a bound method of the core) under the lock, then carries out its effects."""
        with self._core_lock:
            effects = event(*arguments)
        self._carry_out(effects)

    def _lost(self, error: BaseException, quiet: bool = False) -> None:
        self._feed(self._core.on_closed, error, quiet)

    def _closed_down(self) -> None:
        self._shutdown_answered.set()
        self._ready.set()
        with self._job_lock:
            waiters, self._job_waiters = self._job_waiters, {}
        for queued in waiters.values():
            for waiter in queued:
                waiter.answered.set()  # no reply: ask_job raises why the connection ended
        self._on_loop(self._end_main)

    def _end_main(self) -> None:
        closed = getattr(self, "_closed", None)
        if closed is not None and not closed.done():
            closed.set_result(None)

    def _on_loop(self, call: Callable[[], None]) -> None:
        """`call()` on the I/O thread: now when on it, else as soon as its loop runs (a user thread reading the
        connection may carry out effects that touch the loop)."""
        if threading.get_ident() == self._io_thread_id or self._io_thread_id is None:
            call()
            return
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(call)
            except RuntimeError:  # loop closed: the thread is over
                pass

    # ------------------------------------------------------------ the thread

    def _run(self) -> None:
        self._io_thread_id = threading.get_ident()
        loop, self._standby = standby_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except TunnelError as error:  # a tls://, ws:// or wss:// address refused for good (a certificate, a proxy)
            self._lost(error, quiet=True)
        except Exception as error:
            logger.exception("client I/O thread failed")
            self._lost(DisconnectedError(f"client I/O thread failed: {error!r}"))
        finally:
            loop.close()
            if self._standby is not None:
                self._standby.close()
            self._ready.set()

    async def _main(self) -> None:
        loop = asyncio.get_running_loop()
        self._closed = loop.create_future()
        self._open_socket(loop)
        self._feed(self._core.start, time.monotonic())
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
            self._close_socket()

    def _open_socket(self, loop: asyncio.AbstractEventLoop) -> None:
        self._sockets = SocketFactory(
            security=self.keys.security, heartbeat_timeout_seconds=self._link_heartbeat_timeout_seconds
        )
        events = zmq.EVENT_DISCONNECTED | HANDSHAKE_FAILURES  # watched from before it connects: a refusal is heard
        sock = self._sockets.dealer(self.address, identity=self.identity, heartbeat=True, events=events)
        self._socket = AsyncSocket(loop, sock, self._on_frames, lock=self._socket_lock, reading=self._reading)
        self._waiting_reader = WaitingReader(self._socket, self._standby) if self._standby is not None else None
        self._monitor = watch_events(loop, self._sockets.event_monitor(sock, events), self._on_socket_event)

    def _close_socket(self) -> None:
        if self._waiting_reader is not None:
            self._waiting_reader.close()
        self._monitor.close()
        self._socket.close()
        self._sockets.close()

    def _connect_again(self, found: FoundKeys) -> None:
        """Before the first registration: the scheduler refused the keys found for it, and they are different
        now (its stack published or changed them): a new connection with the new keys, and a new hello."""
        logger.info("the scheduler at %s refused %s: connecting with %s", self.address, self.keys.source, found.source)
        self.keys = found
        with self._send_lock:
            self._direct = False
            self._outgoing.clear()  # only hellos are sent before a registration
            self._close_socket()
            assert self._loop is not None
            self._open_socket(self._loop)
            self._direct = True
        self._feed(self._core.start, time.monotonic())

    def _reconnect(self) -> None:
        """A connection that closed was replaced by one the scheduler does not answer (client/core.py, rule 6): a new
        socket, and so a new connection; what was queued in the old one is asked for again by the ClientResume that
        follows."""
        logger.info("no answer from the scheduler at %s since the connection closed: connecting anew", self.address)
        with self._send_lock:
            self._close_socket()
            assert self._loop is not None
            self._open_socket(self._loop)

    def _flush(self) -> None:
        if not self._outgoing or self._socket.closed:
            return
        with self._send_lock:
            frames = []
            while self._outgoing:
                frames.append(self._outgoing.popleft())
            try:
                self._socket.send(joined(frames))  # a batch of small messages as one part (the scheduler splits it)
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
        messages = []
        for frame in frames:
            try:
                for part in codec.split(frame):  # one message, or a batch of them joined in one part
                    messages.append(codec.decode(part))
            except codec.DecodeError as error:
                if self.hello_reply is None and _is_storage_reply(frame):
                    answered = "an object storage server"
                    text = wrong_port_text(self.keys, SCHEDULER_SERVICE, "client", answered) or answered
                    self._lost(ConnectionError(text), quiet=True)
                    return
                logger.warning("undecodable frame from the scheduler: %s", error)
        self._feed(self._core.on_messages, messages, time.monotonic())

    def _on_socket_event(self, event: int, value: int) -> None:
        if self._stopping:
            return
        refused = is_refusal(event, value, self.keys.security is not None)
        if self.hello_reply is None:  # the first connection: a wrong port or a wrong key never gets better
            wrong_port = self._wrong_port(event if refused else 0)
            if wrong_port is not None:
                self._lost(ConnectionError(wrong_port), quiet=True)
                return
            if refused and not is_refusal_confirmed(event, value, self.address, self.keys.security):
                return  # the scheduler died mid-handshake: ZeroMQ connects again, to it once it is back
            if refused:
                found = self._found_again()
                if found is not None:
                    self._connect_again(found)
                else:
                    self._lost(ConnectionRefusedError(self._refusal(event)), quiet=True)
                return
        if not refused:
            self._feed(self._core.on_disconnected, time.monotonic())

    def _wrong_port(self, event: int) -> str | None:
        """Why the address is not a scheduler's, when its connection file says so, or when a handshake failure
        that a monitor feed also gives is one (a SUB finishes a handshake there with the same keys)."""
        text = wrong_port_text(self.keys, SCHEDULER_SERVICE, "client")
        security = self.keys.security
        if text is None and may_be_wrong_service(event) and security is not None:
            if answers_as(self.address, security, zmq.SUB):
                text = wrong_port_text(self.keys, SCHEDULER_SERVICE, "client", "a monitor feed")
        return text

    def _found_again(self) -> FoundKeys | None:
        """The keys found afresh, when they differ from those the scheduler refused (None: the same, or given)."""
        try:
            found = self.keys.again()
        except KeyFileError as error:
            logger.warning("%s", error)
            return None
        return None if found.same_keys(self.keys) else found

    def _refusal(self, event: int) -> str:
        hint = "give Client(..., curve_secret_key='DIR/client.key_secret', curve_server_key='DIR/server.key')"
        has_keys = self.keys.security is not None
        text = refusal_text("scheduler", "client", self.address, event, has_keys, hint)
        return text if self.keys.fixed else f"{text} (this client used {self.keys.source})"

    def _warn(self, effect: Warn) -> None:
        if effect.show:
            print(f"scaler: {effect.text}", file=sys.stderr, flush=True)
        else:
            logger.warning("%s", effect.text)

    async def _tick_routine(self) -> None:
        while True:
            await asyncio.sleep(self._tick_seconds)
            refused = refusal(self.address)
            if refused is not None:  # a tunnel's certificate or proxy: waiting longer does not mend it
                self._lost(TunnelError(refused), quiet=True)
                return
            self._feed(self._core.on_tick, time.monotonic())

    @staticmethod
    def _print_log(log: m.TaskLog) -> None:
        if log.stream is m.LogStream.RECORDS:
            emit_records(log)
            return
        stream = sys.stdout if log.stream is m.LogStream.STDOUT else sys.stderr
        prefix = f"[task {short_task_id(log.task_id)}] "
        lines = log.text.splitlines(keepends=True)
        stream.write("".join(prefix + line for line in lines))
        stream.flush()


def _is_storage_reply(frame: bytes) -> bool:
    """Is this frame an object storage server's reply (a client pointed at the storage port gets one to its hello)?"""
    try:
        codec.decode_storage_reply(frame)
    except codec.DecodeError:
        return False
    return True
