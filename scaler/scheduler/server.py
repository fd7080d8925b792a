"""The scheduler's asyncio shell: sockets in, `SchedulerCore.handle` in the middle, effects out.

It decides nothing. It decodes frames, stamps them with the monotonic clock, feeds the core (what one burst of
reads brought as one step), and performs the effects the core returns: sends (coalesced per peer), status
publication, object deletions. It also turns transport facts into events: a peer whose connection closed is probed
(ROUTER_MANDATORY makes a send to a gone identity fail at once) and reported as `PeerLost`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

import zmq

from scaler.io.clock import REAL_CLOCK, Clock
from scaler.io.sockets import Sockets
from scaler.io.zmq_async import AsyncSocket, Outbox, PeerUnreachable, watch_events
from scaler.io.zmq_parts import Frames
from scaler.object_storage.async_connection import AsyncObjectStorageConnection
from scaler.protocol import codec
from scaler.protocol import messages as m
from scaler.protocol.exit_codes import ExitCode
from scaler.protocol.feed import FEED_TOPICS, STATUS_TOPIC
from scaler.protocol.ids import PeerID
from scaler.protocol.storage_messages import StorageTraffic
from scaler.scheduler.core.client_answers import Answer
from scaler.scheduler.core.effects import (
    DeleteObjects,
    DeleteOwnerObjects,
    Effect,
    LoadAnswers,
    Publish,
    Send,
    StopScheduler,
    StoreAnswers,
)
from scaler.scheduler.core.events import (
    AnswersLoaded,
    AnswersStored,
    Beats,
    Event,
    FatesTold,
    PeerLost,
    ShellStats,
    Undecodable,
    Watchers,
    new_received,
)
from scaler.scheduler.core.scheduler_core import SchedulerCore
from scaler.scheduler.heap import Heap
from scaler.scheduler.peer_keys import REVOKED, PeerKeys

logger = logging.getLogger(__name__)

STATS_SECONDS = 1.0
#: How often the storage server is asked what became of the large results reported before they were stored, while
#: there are any (scheduler/core/unstored_results.py): a result lost with its host is made again this much later.
FATES_SECONDS = 1.0
#: Delays after a closed connection at which its peers are probed (the routing entry goes away
#: a moment after the close event).
PROBE_DELAYS_SECONDS = (0.05, 0.5, 2.0)
#: How long an answer that may wait (a client with many tasks live: client_sessions.py, rule 5) is held at most, for
#: its client's next answers to leave with it.
ANSWERS_WAIT_SECONDS = 0.01
#: How often the keys of connected peers are checked against the authorised folder (CURVE only).
REVOCATION_CHECK_SECONDS = 1.0


class SchedulerServer:
    def __init__(
        self,
        core: SchedulerCore,
        bind_address: str,
        monitor_address: str,
        object_storage_address: str,
        sockets: Sockets,
        on_publish: Callable[[object], None] | None = None,
        clock: Clock = REAL_CLOCK,
        heap: Heap | None = None,
    ) -> None:
        self._core = core
        self._on_publish = on_publish  #: also given each published message (the scheduler's own /metrics)
        self._bind_address = bind_address
        self._monitor_address = monitor_address
        self._object_storage_address = object_storage_address
        self._sockets = sockets  #: the scheduler's, with its transport security; closed when the server stops
        self._clock = clock  #: every wait; `now` stamps every event
        self._now = clock.now
        self._stopped = asyncio.Event()
        self.stop_reason = ""
        self.exit_code: int = ExitCode.OK  #: of the scheduler process, once stopped
        self._fd_peers: dict[int, set[PeerID]] = {}
        self._received = 0
        #: events read in the current burst of the router's reads, not yet given to the core (`_feed_inbound`)
        self._inbound: list[Event] = []
        #: message type name -> [sent, received], for the monitor feed
        self._message_counts: dict[str, list[int]] = {}
        self._background_tasks: set[asyncio.Future[Any]] = set()
        #: memory given back, and the scheduler process's objects frozen (`heap.py`): only the process's own (its
        #: entry point's), since a freeze is the whole process's (a server in a test's process has none)
        self._heap = heap if heap is not None else Heap(freeze=None)
        #: the last echo encoded and its frame: the core hands every worker the same echo value while nothing changes
        self._echo: tuple[object, bytes] = (None, b"")
        #: the monitor feed's topics with a subscriber, as the publisher (an XPUB) says; b"" (every topic) while the
        #: scheduler's own /metrics is fed each publication
        self._watched: set[bytes] = {b""} if on_publish is not None else set()
        roles = sockets.security.peer_roles() if sockets.security is not None else None
        #: with CURVE: each registered peer's key, checked on every message and every second (revocation)
        self._keys = PeerKeys(roles, core.settings.python_version) if roles is not None else None

    @property
    def stopping(self) -> bool:
        """True once `stop` was called: the server is shutting down, or has."""
        return self._stopped.is_set()

    def stop(self, reason: str, exit_code: int = ExitCode.OK) -> None:
        if not self._stopped.is_set():
            self.stop_reason = reason
            self.exit_code = exit_code
            self._stopped.set()

    async def run(self, on_bound: Callable[[], None] | None = None) -> str:
        """Serve until stopped; `on_bound()` once every socket is bound. Returns why it stopped."""
        loop = asyncio.get_running_loop()
        router_socket = self._sockets.router(self._bind_address, mandatory=True, handover=True)
        try:
            publisher = self._sockets.publisher(self._monitor_address, watch_subscriptions=True)
        except BaseException:
            router_socket.close(linger=0)
            raise
        self._router = AsyncSocket(
            loop,
            router_socket,
            self._on_frames,
            copy=False,
            on_burst_end=self._burst_end,
            pause_after_burst=self._paused,
            collector_paused=True,
        )
        self._outbox = Outbox(
            loop,
            self._router,
            routed=True,
            on_unreachable=self._on_unreachable,
            flushed_at_burst_end=True,
            wait_seconds=ANSWERS_WAIT_SECONDS,
        )
        self._publisher = AsyncSocket(loop, publisher, self._on_subscriptions)
        self._feed([Watchers(frozenset(self._watched))])
        monitor = self._sockets.event_monitor(router_socket, zmq.EVENT_DISCONNECTED)
        self._monitor = watch_events(loop, monitor, self._on_socket_event)
        self._storage = AsyncObjectStorageConnection(
            self._object_storage_address, role="scheduler", sockets=self._sockets
        )
        if on_bound is not None:
            on_bound()
        routines = [
            asyncio.ensure_future(self._tick_routine()),
            asyncio.ensure_future(self._stats_routine()),
            asyncio.ensure_future(self._fates_routine()),
        ]
        if self._keys is not None:
            routines.append(asyncio.ensure_future(self._revocation_routine(self._keys)))
        try:
            await self._stopped.wait()
        finally:
            for routine in routines:
                routine.cancel()
            await asyncio.gather(*routines, return_exceptions=True)
            if self._background_tasks:  # object deletions in flight get a moment to finish
                await asyncio.wait(self._background_tasks, timeout=1.0)
                for task in self._background_tasks:
                    task.cancel()
                await asyncio.gather(*self._background_tasks, return_exceptions=True)
            self._outbox.flush(everything=True)
            await self._clock.sleep(0.05)  # let the last replies (shutdown answers) leave
            self._monitor.close()
            self._router.close()
            self._publisher.close()
            self._storage.close()
            self._sockets.close()
        return self.stop_reason

    # ------------------------------------------------------------ inbound

    def _on_frames(self, frames: Frames) -> None:
        if len(frames) < 2:
            return
        peer = PeerID(frames[0].bytes)
        keys = self._keys
        key = keys.key_of(frames[1]) if keys is not None else None
        now = self._now()
        events: list[Event] = []
        decode, split, counts = codec.decode, codec.split, self._message_counts
        parts: list[bytes] = []
        for frame in frames[1:]:
            try:
                parts.extend(split(frame.bytes))  # `bytes`: a frame's copy, word-aligned as capnp needs
            except codec.DecodeError as error:  # one message, or a batch of them joined in one part
                events.append(Undecodable(peer, str(error), now))
        self._received += len(parts)
        for part in parts:
            try:
                message = decode(part, forwarding=True)
            except codec.DecodeError as error:
                events.append(Undecodable(peer, str(error), now))
                continue
            if keys is not None:
                refusal = keys.refusal(peer, key, message)
                if refusal is not None:
                    if refusal.owner_gone:
                        events.append(PeerLost(peer, "its identity was taken by another CURVE key", now, final=True))
                    self._inbound.extend(events)  # what came before it is answered before it
                    events = []
                    self._feed_inbound()
                    self._outbox.send(peer, codec.encode(refusal.answer))
                    continue
                message = keys.settled(key, message)
            if isinstance(message, m.Hello):
                self._remember_fd(peer, frames[1])
            name = type(message).__name__
            counted = counts.get(name)  # `_count(name, 1)` inline: it runs for every message
            if counted is None:
                counted = counts[name] = [0, 0]
            counted[1] += 1
            events.append(new_received(peer, message, now))
        self._inbound.extend(events)
        if not self._router.in_burst:
            self._feed_inbound()

    def _on_subscriptions(self, frames: Frames) -> None:
        """The publisher passes on a topic's first subscription (b"\\x01" + topic) and the end of its last one
        (b"\\x00" + topic): the core publishes only watched topics (`Watchers`)."""
        before = set(self._watched)
        for frame in frames:
            data = frame.bytes if isinstance(frame, zmq.Frame) else bytes(frame)
            if data[:1] == b"\x01":
                self._watched.add(data[1:])
            elif data[:1] == b"\x00" and (data[1:] or self._on_publish is None):  # /metrics keeps b"" watched
                self._watched.discard(data[1:])
        if self._watched != before:
            self._feed([Watchers(frozenset(self._watched))])

    def _paused(self) -> float:
        return 0.0 if self._stopped.is_set() else self._core.pace().read_pause_seconds

    def _burst_end(self) -> None:
        try:
            self._feed_inbound()
        finally:  # what the core sent in this step has no flush of its own scheduled (`Outbox`, flushed_at_burst_end)
            self._outbox.flush_unless_held()

    def _feed_inbound(self) -> None:
        """The core gets what a burst of reads brought as one step (`handle_all`: its events in order, then one
        dispatch): the outbox sends nothing before the burst's end anyway, and a step has costs of its own (a dispatch
        round, overtaking, the actors' sweep) that a peer sending one message at a time (a processor's
        results) would otherwise pay per message."""
        if self._inbound:
            events, self._inbound = self._inbound, []
            self._feed(events)

    def _remember_fd(self, peer: PeerID, frame: zmq.Frame) -> None:
        try:
            fd = int(frame.get(zmq.SRCFD))
        except (zmq.ZMQError, ValueError, TypeError):
            return
        self._fd_peers.setdefault(fd, set()).add(peer)

    def _on_socket_event(self, event: int, value: int) -> None:
        peers = self._fd_peers.pop(value, None)
        if not peers:
            return
        for delay in PROBE_DELAYS_SECONDS:
            self._clock.call_later(delay, self._probe, tuple(peers))

    def _probe(self, peers: tuple[PeerID, ...]) -> None:
        """Send a Ping to each peer; an unroutable one is gone."""
        for peer in peers:
            if self._router.closed:
                return
            try:
                self._router.send([peer, codec.encode(m.Ping())])
            except PeerUnreachable:
                self._feed([PeerLost(peer, "connection closed", self._now())])
            except zmq.ZMQError:
                return

    def _on_unreachable(self, identity: bytes) -> None:
        lost: list[Event] = [PeerLost(PeerID(identity), "connection closed", self._now())]
        asyncio.get_running_loop().call_soon(self._feed, lost)

    # ------------------------------------------------------------ the core and its effects

    def _feed(self, events: list[Event]) -> None:
        try:
            effects = self._core.handle_all(events)  # logs and drops an event whose handling fails
        except Exception:
            logger.exception("the scheduler core failed on a batch of %d event(s)", len(events))
            return
        self._perform(effects)

    def _perform(self, effects: list[Effect]) -> None:
        send, encode, counts = self._outbox.send, codec.encode, self._message_counts
        for effect in effects:
            try:
                if isinstance(effect, Send):
                    message = effect.message
                    kind = type(message)
                    frame = self._echo_frame(message) if kind is m.HeartbeatEcho else encode(message)  # type: ignore[arg-type]
                    send(effect.peer, frame, effect.may_wait)
                    name = kind.__name__
                    counted = counts.get(name)  # `_count(name, 0)` inline: it runs for every message sent
                    if counted is None:
                        counted = counts[name] = [0, 0]
                    counted[0] += 1
                elif isinstance(effect, Publish):
                    self._publisher.send([FEED_TOPICS[type(effect.message)], codec.encode(effect.message)])
                    if self._on_publish is not None:
                        self._on_publish(effect.message)
                elif isinstance(effect, DeleteObjects):
                    self._background(self._storage.delete(list(effect.object_ids)), "delete objects")
                elif isinstance(effect, DeleteOwnerObjects):
                    self._background(self._storage.delete_owner(effect.owner), "delete a client's objects")
                elif isinstance(effect, StoreAnswers):
                    self._background(self._store_answers(effect), "write answers held for a client")
                elif isinstance(effect, LoadAnswers):
                    self._background(self._load_answers(effect), "read answers held for a client")
                elif isinstance(effect, StopScheduler):
                    logger.info("stopping: %s", effect.reason)
                    self._clock.call_later(0.2, self.stop, effect.reason)
            except Exception:
                logger.exception("could not perform %s", type(effect).__name__)

    def _echo_frame(self, echo: m.HeartbeatEcho) -> bytes:
        """An echo's frame, encoded once for the value the core hands every heartbeat while nothing changes."""
        if self._echo[0] is not echo:
            self._echo = (echo, codec.encode(echo))
        return self._echo[1]

    def _count(self, name: str, index: int) -> None:
        """Count a message of this type sent (index 0) or received (index 1)."""
        counts = self._message_counts.get(name)
        if counts is None:
            counts = self._message_counts[name] = [0, 0]
        counts[index] += 1

    def _background(self, work: Any, what: str) -> None:
        task = asyncio.ensure_future(work)
        self._background_tasks.add(task)

        def done(finished: asyncio.Future[Any]) -> None:
            self._background_tasks.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                logger.warning("could not %s in object storage: %s", what, finished.exception())

        task.add_done_callback(done)

    async def _store_answers(self, effect: StoreAnswers) -> None:
        """Write a bundle of answers held for an away client (client_answers.py, rule 4); the core hears how it went."""
        ok = False
        try:
            payload = bundle_payload(effect.answers)
            await self._storage.put(effect.object_id, payload, owner_id=effect.client, name="held answers")
            ok = True
        except Exception as error:  # the core keeps them in memory instead
            logger.warning("could not write %d held answer(s) to object storage: %s", len(effect.answers), error)
        self._feed([AnswersStored(effect.client, effect.object_id, ok, self._now())])

    async def _load_answers(self, effect: LoadAnswers) -> None:
        answers: tuple[Answer, ...] | None = None
        try:
            answers = answers_of(bytes(await self._storage.get(effect.object_id)))
        except Exception as error:  # the core reads it again later
            logger.warning("could not read held answers back from object storage: %s", error)
        self._feed([AnswersLoaded(effect.client, effect.object_id, answers, self._now())])

    # ------------------------------------------------------------ routines

    async def _tick_routine(self) -> None:
        beats = Beats()
        self._feed([beats.tick(self._now(), self._clock.wall())])  # at once: the core's wall times are right at once
        while True:
            interval = self._core.pace().tick_seconds  # a beat a second while a big cluster idles (`pace.py`)
            await self._clock.sleep(interval)
            self._feed([beats.tick(self._now(), self._clock.wall(), interval, reads_behind=self._router.behind)])

    async def _fates_routine(self) -> None:
        """Every second while the core keeps large results not known to be stored: their fates, asked of the storage
        server (a result lost with its host is made again from its task; one stored is forgotten)."""
        unstored = self._core.lifecycle.unstored
        while True:
            await self._clock.sleep(FATES_SECONDS)
            asked = unstored.asked()
            if not asked:
                continue
            try:
                losses = await self._storage.fates(asked, timeout_seconds=FATES_SECONDS * 10)
            except Exception as error:  # asked again on the next round
                logger.debug("object storage fates unavailable: %s", error)
                continue
            self._feed([FatesTold(asked, losses, self._now())])

    async def _revocation_routine(self, keys: PeerKeys) -> None:
        """Every second: a peer whose key left the authorised folder is dropped (its tasks go as if it had
        disconnected) and told so; its next hello is refused at registration."""
        while True:
            await self._clock.sleep(REVOCATION_CHECK_SECONDS)
            core = self._core
            registered = set(core.clients) | set(core.workers) | set(core.managers) | set(core.processors)
            revoked = keys.revoked(registered)
            if not revoked:
                continue
            now = self._now()
            for peer in revoked:
                notice = m.ProtocolError(REVOKED, m.ProtocolErrorKind.UNKNOWN_PEER)
                self._outbox.send(peer, codec.encode(notice))
            self._feed([PeerLost(peer, "its CURVE key was revoked", now, final=True) for peer in revoked])

    def _status_read(self) -> bool:
        """Whether the status topic has a subscriber (or /metrics is fed): the shell's figures (its CPU and memory, the
        object storage's, the message counts) go only into the status, and a scaling policy's view (managers)."""
        return any(STATUS_TOPIC.startswith(topic) for topic in self._watched)

    async def _stats_routine(self) -> None:
        """Every second: the shell's figures for the status (while it is read, `_status_read`; the first status a new
        subscriber gets may have them up to a second old), and memory given back after a big queue drained."""
        import psutil

        process = psutil.Process(os.getpid())
        process.cpu_percent()
        object_count = object_bytes = 0
        storage = StorageTraffic()
        while True:
            await self._clock.sleep(STATS_SECONDS)
            if not (self._status_read() or self._core.managers):  # nobody reads them: not gathered (a wake-up saved)
                self._heap.after(len(self._core.tasks.records), self._core.tasks.unplaced, len(self._core.workers))
                continue
            try:
                # the timeout given to the call itself: a wait_for around it would leave the call's own timer (60 s by
                # default) cancelled but scheduled, 60 of them at a time, each pinning the memory arena it was
                # allocated in (amid a big queue's tasks, an arena that cannot go back after they ran)
                info = await self._storage.info(timeout_seconds=STATS_SECONDS)
                object_count, object_bytes, storage = info.object_count, info.total_bytes, info.traffic
            except Exception as error:
                logger.debug("object storage info unavailable: %s", error)
            stats = ShellStats(
                cpu_percent=process.cpu_percent(),
                rss_bytes=process.memory_info().rss,
                object_count=object_count,
                object_bytes=object_bytes,
                storage=storage,
                messages_received=self._received,
                messages_sent=self._outbox.frames_sent,
                message_counts=tuple(
                    m.MessageCount(name, sent, received)
                    for name, (sent, received) in sorted(self._message_counts.items())
                ),
            )
            self._feed([stats])
            self._heap.after(len(self._core.tasks.records), self._core.tasks.unplaced, len(self._core.workers))


def bundle_payload(answers: tuple[Answer, ...]) -> bytes:
    """Answers as one object: each encoded frame (a forwarded result's own) after its length (8 bytes)."""
    parts = []
    for answer in answers:
        frame = codec.encode(answer)
        parts += [len(frame).to_bytes(8, "big"), frame]
    return b"".join(parts)


def answers_of(payload: bytes) -> tuple[Answer, ...]:
    """The answers of a bundle, in order (results keep their frames, to be forwarded unchanged)."""
    answers: list[Answer] = []
    index = 0
    while index < len(payload):
        size = int.from_bytes(payload[index : index + 8], "big")
        message = codec.decode(payload[index + 8 : index + 8 + size], forwarding=True)
        if not isinstance(message, (m.TaskResult, m.TaskCancelConfirm)):
            raise codec.DecodeError(f"a bundle of held answers holds a {type(message).__name__}")
        answers.append(message)
        index += 8 + size
    return tuple(answers)
