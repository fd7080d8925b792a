"""Where everything a processor reports goes: its channel to the agent, and its own link to the scheduler for the
results of the tasks it ran (`result_route.ResultRoute` decides which; docs/protocol.md section 3.7).

The link is a DEALER to the scheduler opened when the agent first configures the processor (with `direct_results`;
without, when the processor first builds an actor), with the worker's transport security and an identity of its own
(its worker's id, "/", its processor id). What the scheduler answers on it (its HelloReply, a ProtocolError when it
forgot the processor) is read without blocking whenever the processor does its housekeeping: after every task and
every read of the channel. Every call comes under one lock, from whichever thread: the results of one processor
reach the scheduler and the agent in the order they were made.

**Actors on the link** (docs/protocol.md section 3.8). An actor built while the route is open (`link_actor`) names
the link in its ActorReady: the scheduler then sends its calls and its stop on the link, the processor's threads
read the link beside the channel (`wait_fds`, `take_work`), and the calls' results and logs, then the start task's
end, go back on it, in that order. A call's result goes without a ResultSent: the agent never saw the call (if the
processor dies, the scheduler answers the calls that were at it, core/actors.py rule 2); the start task's end is a
result like any other (ResultSent, the agent's journal). Every operation on the link ends by reading what waits on
it (`_read_locked`): ZeroMQ's descriptor signals an edge, which a send from another thread could consume; the work
read that way is queued and signalled on a pipe that the reading thread's select watches as well.

**Lent processors** (`lend`; docs/architecture.md, "Lent processors"). The link opens when the agent configures the
processor, its hello says `lent`, and the reading thread watches it always, as for a linked actor: the scheduler sends
plain tasks (and their cancels) there, and everything about such a task goes back there and never to the agent: its
logs, its result (no ResultSent: the agent never saw the task; the results of tasks staged back to back are held to
leave together, as direct results are, but only where the processor marks the lent task it computes, `hold_lent`: a
crash of the next task loses the results held, and the scheduler, told which task crashed, runs them again and blames
none of them; without a mark it would blame the oldest task sent, a held one), a CANCELED answer, its
parking on nested futures and its asking to go on (ProcessorBlocked, ProcessorResumeRequest: the scheduler counts its
slot; the processor gives it the turn back itself), and tasks given back unstarted (TaskReturn): those the scheduler
asks back (TaskReturn on the link: overtaking, the balancer, a reclaim notice, a long task ahead of them) that have not
started, and every one while the processor hosts an actor. A lent task's result is kept (`_lent_kept`) until the
scheduler names it read in a HeartbeatEcho on the link; every hello on the link names the lent tasks held here,
unfinished or kept (`ProcessorInfo.heldTasks`), and once the scheduler accepts it the kept results are sent again: so a
scheduler restart loses none and runs none twice (the new instance adopts them, as it adopts the tasks an agent names
when it registers again).
"""

from __future__ import annotations

import logging
import select
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import zmq

from scaler.io.zmq_parts import EVENTS, POLLIN, joined, receive_parts, send_parts
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.protocol.staging import RESULT_HOLD_SECONDS
from scaler.worker.processor.channel import BlockingChannel
from scaler.worker.processor.result_route import ResultRoute, RouteState
from scaler.worker.processor.wake_pipe import WakePipe

logger = logging.getLogger(__name__)

#: How long a result may wait for the results of the tasks staged behind it, so that they leave together.
HOLD_SECONDS = RESULT_HOLD_SECONDS
#: How long the flusher thread (`_flush_late`) goes on looking at the time without a result held before it parks.
FLUSHER_REST_SECONDS = 5 * HOLD_SECONDS
#: The most results held at once.
MAX_HELD = 64
#: How long an actor built as the link's hello is still unanswered waits for the answer before it says it is ready
#: (then without the link: its calls come through the agent).
LINK_WAIT_SECONDS = 1.0
#: How long a processor that ends for a cancelled lent task waits for the scheduler to acknowledge its last words.
LAST_WORDS_SECONDS = 2.0
#: The most lent results kept for the scheduler to name read; beyond it the oldest are forgotten (a scheduler that
#: never names them, or a restart in the middle of that many results, would otherwise grow it without end).
MAX_LENT_KEPT = 100_000
#: As plain ints: a flag enum's `&` costs a Python call per read.


def processor_identity(worker_id: bytes, processor_id: bytes) -> bytes:
    """The identity of a processor's link to the scheduler: unique across workers, as a peer's must be."""
    return worker_id + b"/" + processor_id


class ProcessorOutlet:
    """`open_link()` makes the processor's DEALER to the scheduler (None: this processor has no link, and every
    result goes through the agent); `hello` is what it says on it."""

    def __init__(
        self,
        channel: BlockingChannel,
        open_link: Callable[[], Any] | None = None,
        hello: m.Hello | None = None,
        direct_results: bool = True,
        lend: bool = False,
        hold_lent: bool = False,
    ) -> None:
        """`hold_lent`: lent results may be held for the next ones, to leave together (its processor marks the lent
        task it computes: worker/computing_mark.py)."""
        self._channel = channel
        self._open_link = open_link if hello is not None else None
        self._direct = direct_results  #: plain tasks' results take the link (else only linked actors' do)
        self._lend = lend and self._open_link is not None  #: plain tasks come on the link too (module docstring)
        self._hold_lent = hold_lent and self._lend
        #: tasks that came on the link (lent), not ended: everything about them goes back there
        self._lent_tasks: set[bytes] = set()
        #: the frames of lent tasks' results sent on the link that the scheduler has not named read, in sending order
        self._lent_kept: dict[bytes, bytes] = {}
        #: lent tasks parked on nested futures (told with ProcessorBlocked): told again after a hello is accepted
        self._lent_parked: set[bytes] = set()
        self._configured = False  #: the agent configured the processor: a link opened later says hello at once
        self._hello = hello
        self._link: Any = None
        self._route = ResultRoute()
        self._lock = threading.Lock()
        #: the frames of results held to leave on the link together, since `_held_since`
        self._held: list[bytes] = []
        self._held_since = 0.0
        #: the flusher is parked (no result held for FLUSHER_REST_SECONDS): the next hold wakes it with `_holding`
        self._flusher_parked = True
        self._holding = threading.Event()
        self._flusher: threading.Thread | None = None
        #: tasks whose every message goes through the agent (streaming tasks, actors' starts: their other news does)
        self._through_agent: set[bytes] = set()
        #: actors here whose calls come on the link, and their calls taken and not answered (their logs go on it)
        self._linked_actors: set[bytes] = set()
        self._linked_calls: set[bytes] = set()
        self._work: list[m.Message] = []  #: calls and stops read on the link, for the task line
        self._wake: WakePipe | None = None  #: written when work is queued (the reader's select sees it)
        #: the link and what `wait_fds` returns for it (asked of ZeroMQ once per link, not once per read)
        self._link_fds: tuple[Any, tuple[int, ...]] | None = None

    @property
    def route_open(self) -> bool:
        return self._route.is_open

    def report(self, message: m.Message) -> None:
        """To the agent only: ProcessorReady, ProcessorBlocked, ProcessorResumeRequest, a CANCELED answer, and what
        a task marked `through_agent` says (its result ends the mark)."""
        with self._lock:
            self._flush()
            if self._lent_tasks and self._lent_report(message):
                return
            self._channel.send(message)
            if isinstance(message, m.TaskResult) and self._through_agent:
                self._through_agent.discard(message.task_id)

    def _lent_report(self, message: m.Message) -> bool:
        """Under the lock: a report about a lent task goes on the link (True), never to the agent."""
        task_id = getattr(message, "task_id", None)
        if task_id is None or task_id not in self._lent_tasks:
            return False
        if isinstance(message, m.TaskResult):
            self._lent_tasks.discard(task_id)
            self._lent_parked.discard(task_id)
            if message.status is m.ResultStatus.CANCELED:  # as the agent confirms a cancel
                message = m.TaskCancelConfirm(task_id, m.CancelOutcome.CANCELED)
        elif isinstance(message, m.ProcessorBlocked):
            self._lent_parked.add(task_id)
        elif isinstance(message, m.ProcessorResumeRequest):
            self._lent_parked.discard(task_id)
        if self._link is not None:
            self._send_on_link(codec.encode(message))
        return True

    def last_words(self, give_back: list[TaskID], cancelled: TaskID) -> None:
        """The processor is about to exit for a cancelled lent task: it says it leaves (the scheduler then queues
        again, without blame, what it sent here and is still on its way), the lent tasks it will not run go back, then
        the task's cancel is confirmed; the scheduler has read them when this returns (its Shutdown came back), or
        LAST_WORDS_SECONDS passed."""
        with self._lock:
            self._flush()
            self._lent_tasks.clear()
            if self._link is None:
                return
            frames = [codec.encode(m.WorkerLeaving("a cancelled lent task's processor ends"))]
            if give_back:
                frames.append(codec.encode(m.TaskReturn(tuple(give_back))))
            frames.append(codec.encode(m.TaskCancelConfirm(cancelled, m.CancelOutcome.CANCELED)))
            self._link.send_multipart(frames)
            self._await_shutdown(time.monotonic() + LAST_WORDS_SECONDS)
            self._link.close(linger=0)
            self._link = None

    def _await_shutdown(self, deadline: float) -> None:
        """Under the lock: wait until the scheduler acknowledges the last words (Shutdown: it read them, and what came
        with them), or the deadline passed. A message merely handed to ZeroMQ dies with the process that exits."""
        link = self._link
        while (left := deadline - time.monotonic()) > 0:
            if not link.poll(int(left * 1000) + 1):
                return
            for frame in link.recv_multipart():
                try:
                    if any(isinstance(codec.decode(part), m.Shutdown) for part in codec.split(frame)):
                        return
                except codec.DecodeError:
                    continue

    @property
    def lends(self) -> bool:
        """Its worker lends it: plain tasks come on its link."""
        return self._lend

    def is_lent(self, task_id: bytes) -> bool:
        """Whether the task came on the link (its worker lends this processor)."""
        return task_id in self._lent_tasks

    def give_back(self, task_ids: list[TaskID]) -> None:
        """Lent tasks this processor will not run (the scheduler asked for them back and they had not started, or it
        hosts an actor, which holds the computing turn): the scheduler queues them again."""
        with self._lock:
            self._lent_tasks.difference_update(task_ids)
            if self._link is not None:
                self._send_on_link(codec.encode(m.TaskReturn(tuple(task_ids))))

    def result(self, result: m.TaskResult, more: bool = False) -> None:
        """The result of a task that ran: on the link when the route is open (and a ResultSent to the agent), else
        to the agent, which sends it on. `more`: another task of this processor starts at once (a staged one): the
        result may wait for the next ones, at most HOLD_SECONDS and MAX_HELD results, so that they leave together;
        the results held leave now when the next one, if it computes as long as this one did, would come after the
        hold's end (it would only wait for the flusher thread, a wake-up more: so a task that computed HOLD_SECONDS or
        longer holds nothing)."""
        ran = result.ran
        took = ran.finished_at - ran.started_at if ran is not None else 0.0
        now = time.monotonic()
        with self._lock:
            lent = bool(self._lent_tasks) and result.task_id in self._lent_tasks
            if lent:
                self._lent_tasks.discard(result.task_id)
                self._lent_parked.discard(result.task_id)
                if self._link is None:
                    return  # closed: the processor is ending, and the scheduler handles its tasks as a death's
            elif not self._direct or not self._route.is_open:
                self._flush()
                self._channel.send(result)
                return
            frame = codec.encode(result)
            if lent:
                self._keep(result.task_id, frame)
            held = self._held
            held.append(frame)
            if len(held) == 1:
                self._held_since = now
            # a lent one is held only where its processor marks the task it computes: a crash of the next task then
            # loses the results held, and the scheduler, told which task crashed, runs them again (module docstring)
            if (
                not more
                or (lent and not self._hold_lent)
                or len(held) >= MAX_HELD
                or now - self._held_since + took >= HOLD_SECONDS
            ):
                self._flush()
            elif len(held) == 1 and self._flusher_parked:
                self._flusher_parked = False
                if self._flusher is None:
                    self._flusher = threading.Thread(target=self._flush_late, name="scaler-results", daemon=True)
                    self._flusher.start()
                self._holding.set()
            if lent:
                return  # the agent never saw the task
            # the agent hears of it now, even when it is held: a held result dies with the processor if the next task
            # crashes it, and the agent, which keeps every ResultSent, then sends it itself
            self._channel.send(m.ResultSent(result.task_id, frame, took))

    def _keep(self, task_id: bytes, frame: bytes) -> None:
        """Under the lock: a lent result, kept until the scheduler names it read (module docstring)."""
        kept = self._lent_kept
        kept[task_id] = frame
        if len(kept) > MAX_LENT_KEPT:
            del kept[next(iter(kept))]

    def _flush(self) -> None:
        """Send the results held, in one message on the link."""
        if self._held:
            held = self._held
            self._held = []
            if self._link is not None:  # closed: the processor is ending, its agent gone
                self._send_on_link(*held)

    def _flush_late(self) -> None:
        """A thread of its own sends what was held HOLD_SECONDS, should the task after it take longer. While results
        are held now and then it looks at each hold's end, or every HOLD_SECONDS; it parks after FLUSHER_REST_SECONDS
        without a hold, until the next one wakes it. So a processor whose results are held batch after batch (tiny
        tasks, U1's) wakes it at most once a hold, not twice per held batch (a wake-up, then its sleep until the hold's
        end), and an idle one not at all."""
        while True:
            self._holding.wait()
            while True:
                with self._lock:
                    now = time.monotonic()
                    if self._held:
                        wait = self._held_since + HOLD_SECONDS - now
                        if wait <= 0:
                            try:
                                self._flush()
                            except zmq.ZMQError:
                                return  # the processor is ending
                            wait = HOLD_SECONDS
                    elif now - self._held_since >= FLUSHER_REST_SECONDS:  # the last hold began that long ago
                        self._flusher_parked = True
                        self._holding.clear()
                        break
                    else:
                        wait = HOLD_SECONDS
                time.sleep(wait)

    def through_agent(self, task_id: bytes) -> None:
        """This task's output and result go through the agent, whatever the route (until its result is reported)."""
        with self._lock:
            self._through_agent.add(task_id)

    def log(self, log: m.TaskLog) -> None:
        """A task's output: the way its result will go, so that it reaches the client before the result."""
        with self._lock:
            self._flush()
            if log.task_id in self._lent_tasks or (
                self._route.is_open
                and (log.task_id in self._linked_calls or (self._direct and log.task_id not in self._through_agent))
            ):
                self._send_on_link(codec.encode(log))
            else:
                self._channel.send(log)

    def configure(self) -> None:
        """The agent configured the processor (it is registered with the scheduler): say hello on the link (without
        `direct_results`, only once an actor opened it)."""
        if self._open_link is None:
            return
        with self._lock:
            self._configured = True
            if self._link is None and (self._direct or self._lend):
                self._link = self._open_link()
            if self._lend and self._wake is None:
                self._wake = WakePipe()
            if self._link is not None and self._route.configured():
                self._say_hello()

    def read_link(self) -> None:
        """What the scheduler sent on the link, without blocking. Nothing to do for a lent processor: every operation
        on its link ends by reading what waits there (`_send_on_link`, `take_work`), and its reading thread's select
        watches the link (a read here, after every task and every read of the channel, was a third per task)."""
        if self._link is None or self._lend:
            return
        with self._lock:
            self._read_locked()
            self._wake_reader()

    def _wake_reader(self) -> None:
        """Work was read on the link outside `take_work`: the reading thread's select sees the pipe."""
        if self._work and self._wake is not None:
            self._wake.wake()

    def _read_locked(self) -> None:
        link = self._link
        if link is None:
            return
        # asked before each read: an empty link's zmq.Again costs more than the question
        while cast(int, link.getsockopt(EVENTS)) & POLLIN:
            try:
                frames = receive_parts(link)
            except zmq.Again:
                return
            for frame in frames:
                self._heard(frame)

    def close(self) -> None:
        with self._lock:
            if self._link is not None:
                self._link.close(linger=0)
                self._link = None
            if self._wake is not None:
                self._wake.close()
                self._wake = None

    # ------------------------------------------------------------ actors on the link

    def open_for_actor(self) -> None:
        """An actor is about to be built here: open the link (and say hello on it) if it is not open, so that the
        scheduler has answered by the time the actor is ready."""
        if self._open_link is None or self._link is not None:
            return
        with self._lock:
            if self._link is None:
                self._link = self._open_link()
                if self._configured and self._route.configured():
                    self._say_hello()

    def link_actor(self, actor_id: bytes, wait_seconds: float = LINK_WAIT_SECONDS) -> bytes:
        """The actor is built: the identity of the link its calls are to come on (once the scheduler answered the
        link's hello, at most `wait_seconds`), or b"" when they go through the agent (no link, or not accepted)."""
        if self._link is None or self._hello is None:
            return b""
        deadline = time.monotonic() + wait_seconds
        while True:
            with self._lock:
                self._read_locked()
                self._wake_reader()
                state = self._route.state
                if state is RouteState.OPEN:
                    self._linked_actors.add(actor_id)
                    if self._wake is None:
                        self._wake = WakePipe()
                    return self._identity()
                if state is RouteState.CLOSED or self._link is None:
                    return b""
                link_fd = int(self._link.getsockopt(zmq.FD))
            left = deadline - time.monotonic()
            if left <= 0:
                return b""
            select.select([link_fd], [], [], min(left, 0.05))

    def call_taken(self, actor_id: bytes, call_id: bytes) -> None:
        """The actor's thread takes a call: its logs and result go the way the actor's calls come."""
        with self._lock:
            if actor_id in self._linked_actors:
                self._linked_calls.add(call_id)
            else:
                self._through_agent.add(call_id)

    def call_result(self, result: m.TaskResult) -> None:
        """An actor's call's result: on the link when the call came there (and the route is open), else to the
        agent, which sends it on."""
        with self._lock:
            if result.task_id in self._linked_calls:
                self._linked_calls.discard(result.task_id)
                if self._route.is_open:
                    self._flush()
                    self._send_on_link(codec.encode(result))
                    return
            self._through_agent.discard(result.task_id)
            self._flush()
            self._channel.send(result)

    def actor_ended(self, actor_id: bytes, result: m.TaskResult | None) -> None:
        """The actor's start task ended (`result`: None when it was stopped, its answer went to the agent): a linked
        actor's end goes on the link, after its calls' results, and the agent hears of it with a ResultSent (its
        journal keeps it); any other actor's goes to the agent."""
        with self._lock:
            linked = actor_id in self._linked_actors
            self._linked_actors.discard(actor_id)
            self._through_agent.discard(actor_id)
            if result is None:
                return
            self._flush()
            if not linked or not self._route.is_open:
                self._channel.send(result)
                return
            frame = codec.encode(result)
            self._send_on_link(frame)
            ran = result.ran
            self._channel.send(m.ResultSent(result.task_id, frame, ran.finished_at - ran.started_at if ran else 0.0))

    def wait_fds(self) -> tuple[int, ...]:
        """What the reading thread's select watches beside the channel: the link and the wake-up pipe while an actor
        here takes its calls on the link, else nothing."""
        if not (self._linked_actors or self._lend) or self._link is None or self._wake is None:
            return ()
        if self._link_fds is None or self._link_fds[0] is not self._link:  # the same while the link is
            self._link_fds = (self._link, (int(self._link.getsockopt(zmq.FD)), self._wake.read_fd))
        return self._link_fds[1]

    def has_work(self) -> bool:
        return bool(self._work)

    def take_work(self) -> list[m.Message]:
        """The calls and stops read on the link since the last take (reading what waits there now)."""
        if not self._linked_actors and not self._work and not self._lend:
            return []
        with self._lock:
            self._read_locked()
            work, self._work = self._work, []
            if self._wake is not None:
                self._wake.drain()
            return work

    def _send_on_link(self, *frames: bytes) -> None:
        """Under the lock: a message on the link, then what waits there is read (the descriptor's edge stays)."""
        send_parts(self._link, joined(list(frames)), block=True)  # a batch of small results as one part
        if self._linked_actors or self._lend:
            self._read_locked()
            self._wake_reader()

    def _identity(self) -> bytes:
        identity = self._link.getsockopt(zmq.ROUTING_ID)
        return bytes(identity)

    def _heard(self, frame: bytes) -> None:
        try:
            parts = codec.split(frame)  # one message, or a batch of them joined in one part
        except codec.DecodeError as error:
            logger.warning("undecodable frame from the scheduler on a processor's link: %s", error)
            return
        for part in parts:
            self._heard_one(part)

    def _heard_one(self, frame: bytes) -> None:
        try:
            message = codec.decode(frame)
        except codec.DecodeError as error:
            logger.warning("undecodable frame from the scheduler on a processor's link: %s", error)
            return
        if isinstance(message, (m.Task, m.ActorStop)):  # an actor's call or stop, or a lent task: for the task line
            if self._lend and isinstance(message, m.Task) and not message.actor_id:
                self._lent_tasks.add(message.task_id)
            self._work.append(message)
            return
        if isinstance(message, (m.TaskCancel, m.TaskReturn)) and self._lend:  # of lent tasks
            self._work.append(message)
            return
        if isinstance(message, m.HeartbeatEcho):  # lent results the scheduler read: forgotten here
            kept = self._lent_kept
            for task_id in message.results_read:
                kept.pop(task_id, None)
            return
        if isinstance(message, m.HelloReply) and not message.accepted:
            logger.debug("the scheduler refused this processor's link (%s); its results go through its agent",
                         message.reason)  # fmt: skip
        if self._route.heard(message):
            self._say_hello()
        elif isinstance(message, m.HelloReply) and message.accepted and (self._lent_kept or self._lent_parked):
            # the scheduler may not have read them (a restart): the results kept, and which held tasks are parked
            parked = (codec.encode(m.ProcessorBlocked(TaskID(t))) for t in self._lent_parked)
            if self._held:  # the lent results held are kept too: they go now, with the others, and once
                kept_frames = {id(frame) for frame in self._lent_kept.values()}
                self._held = [frame for frame in self._held if id(frame) not in kept_frames]
                self._flush()
            self._send_on_link(*self._lent_kept.values(), *parked)

    def _say_hello(self) -> None:
        """Under the lock: hello on the link, naming the lent tasks held here (module docstring)."""
        hello = self._hello
        assert hello is not None
        if self._lend and (self._lent_tasks or self._lent_kept):
            info = hello.info
            assert isinstance(info, m.ProcessorInfo)
            held = tuple(TaskID(t) for t in (*self._lent_tasks, *self._lent_kept))
            hello = replace(hello, info=replace(info, held_tasks=held))
        self._send_on_link(codec.encode(hello))
