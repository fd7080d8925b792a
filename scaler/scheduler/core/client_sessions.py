"""Client sessions: a registered client's heartbeats, story questions, disconnect (or cluster shutdown), its going
away and coming back, and its loss.

Rules:
1. A client that disconnects (ClientDisconnect) is dropped: its tasks are cancelled and its objects deleted, except
   what its jobs still need (`job_requests.py`) and what the object retention keeps (`object_retention.py`).
2. A client that falls silent past the client timeout, or whose connection is lost after it fell silent, is *away*,
   not dropped, when it has a resume window (`ClientRecord.resume_seconds`: the scheduler's `client_resume_seconds`,
   or the client's own shorter wish): its tasks go on, its answers are held for it (`client_answers.py`), its
   objects stay. It is dropped as in rule 1 once it has been silent for its window (counted from the last message
   heard from it); without a window it is dropped at once, as before there were windows. A connection that closes
   while its client was talking (within `CRASH_SILENCE_SECONDS` of its last message: a client heartbeats every
   second) was most likely closed by the other end's kernel: its process ended (killed, crashed) and nobody will
   come back for the work, so it is dropped unless it speaks again within `CRASH_GRACE_SECONDS` (ZeroMQ connects
   again within a second: a connection replaced looks the same); a laptop asleep, cut off or moved falls silent
   first and its connection times out later. A scheduler that was itself paused (`PAUSE_SECONDS` between two of its
   events: stopped, its machine asleep) reads its clients' messages late, and a client's connection ended by that
   client's ZeroMQ heartbeats meanwhile looks closed while talking: connections found lost within
   `AFTER_PAUSE_SECONDS` of such a pause make their clients away with their whole window. A peer lost
   for good (its key revoked, its identity taken) is dropped whatever its window. Going away is a warning only when
   the client leaves tasks unfinished: a client made inside a task ends with its processor, without a goodbye, and
   is no news.
3. Any message from an away client brings it back: the answers held for it are sent (a `ClientResume` says which
   answers a lost connection took with it: `client_answers.py`, rule 3). A client dropped for its silence (past its
   window, or at its timeout without one) or its lost connection may come back: the ids of the tasks cancelled then
   are kept (`EXPIRED_KEPT` clients, `EXPIRED_BYTES` of ids at most), its messages are answered UNKNOWN_PEER with
   why, and once it registers again its ClientResume is told which of its unfinished tasks were cancelled (their
   futures fail) and which never arrived (sent after the drop: it sends them again).
4. A client may shut the whole cluster down unless the scheduler is protected.
5. An answer for a present client that still has at least `ANSWERS_WAIT_AT_LIVE` tasks live may wait a few
   milliseconds to leave with its next ones (`Send.may_wait`; the shell's `Outbox` holds it at most
   `server.ANSWERS_WAIT_SECONDS`): a client with many tasks in flight waits on all of them, not on one, and one
   message for several answers costs it and the scheduler a send and a read each instead of one per answer. Its last
   answers, and those of a client waiting on few tasks, leave at once.
Pure: time is the core's `now`.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, ObjectID, PeerID, TaskID, short
from scaler.scheduler.core.client_answers import Answer, pack_task_ids, unpack_task_ids
from scaler.scheduler.core.core_state import CoreState
from scaler.scheduler.core.effects import DeleteObjects, LoadAnswers, StoreAnswers
from scaler.scheduler.core.events import AnswersLoaded, AnswersStored
from scaler.scheduler.core.follow_ups import ClientLeft, ClusterShutdown
from scaler.scheduler.core.peers import ClientRecord

logger = logging.getLogger(__name__)

#: How object ids of held answers' bundles begin (then the scheduler's instance id and a counter).
BUNDLE_PREFIX = b"held-answers|"
#: Clients dropped for their silence or lost connection whose return is answered with why, and told which of their
#: tasks were cancelled (rule 3); the oldest are forgotten first past either bound.
EXPIRED_KEPT = 1024
EXPIRED_BYTES = 64 << 20
#: A client with at least this many tasks live may get its answers a few milliseconds late, joined (rule 5).
ANSWERS_WAIT_AT_LIVE = 32
#: A bundle that could not be read is read again this long after.
LOAD_RETRY_SECONDS = 5.0
#: A client's connection that closes less than this long after its last message was closed by its process's end
#: (rule 2): its client is dropped, not kept away. Clients heartbeat every second at most.
CRASH_SILENCE_SECONDS = 5.0
#: ... and such a client is dropped once it has not spoken again for this long.
CRASH_GRACE_SECONDS = 5.0
#: A gap this long between two events of the core: the scheduler itself was paused (stopped, its machine asleep, its
#: loop blocked), and what it reads next was sent long before (rule 2). A client's ZeroMQ heartbeats end a
#: connection whose other end stops answering for 15 s, so a longer pause closes every client's connection.
PAUSE_SECONDS = 10.0
#: ... connections found lost this long after such a pause are not judged by their clients' last messages.
AFTER_PAUSE_SECONDS = 10.0


@dataclass(frozen=True)
class Expired:
    """A client dropped while it may come back (rule 3): why, and the tasks cancelled then (packed ids)."""

    reason: str
    cancelled: bytes


class ClientSessions:
    def __init__(self, state: CoreState) -> None:
        self._state = state
        self._bundles = 0  #: bundles of held answers made so far (numbers their object ids)
        #: clients dropped while they may come back -> why, and what was cancelled (rule 3)
        self._expired: OrderedDict[PeerID, Expired] = OrderedDict()
        self._expired_bytes = 0
        #: the latest pause of the scheduler itself: when it began and ended (rule 2)
        self._pause: tuple[float, float] | None = None

    # ------------------------------------------------------------ messages

    def on_heartbeat(self, peer: PeerID, heartbeat: m.Heartbeat) -> None:
        state = self._state
        state.clients[peer].answers.acknowledge(heartbeat.answers_epoch, heartbeat.answers_received)
        state.send(peer, m.HeartbeatEcho(state.settings.object_storage_address, state.ready_worker_count()))

    def on_story_request(self, peer: PeerID, request: m.TaskStoryRequest) -> None:
        """A client asks for a task's story (`ScalerFuture.story()`); any client may ask about any task id."""
        self._state.send(peer, self._state.tasks.stories.story(request.task_id))

    def on_resume(self, peer: PeerID, resume: m.ClientResume, live_calls: set[TaskID]) -> None:
        """Its connection was lost (rule 3): the answers it may not have had go again, after a ClientResumed that
        names the tasks this scheduler never received (the client sends them again). `live_calls`: the actors' calls
        not answered yet (core/actors.py), which it need not send again."""
        state = self._state
        client = state.clients[peer]
        log = client.answers
        again = log.resume(resume.answers_epoch, resume.answers_received) + log.release_written()
        answered = log.answered()
        records, jobs, calls = state.tasks.records, state.jobs, live_calls
        dropped, client.cancelled_ids = set(unpack_task_ids(client.cancelled_ids)), b""
        cancelled = tuple(task_id for task_id in resume.unfinished if task_id in dropped)
        unknown = tuple(
            task_id
            for task_id in resume.unfinished
            if task_id not in records
            and task_id not in answered
            and not jobs.holds(task_id)
            and task_id not in dropped
            and task_id not in calls  # an actor's call it holds (core/actors.py)
        )
        if client.forgot_cancelled:  # rule 3: nothing of what it had runs again
            cancelled, unknown, client.forgot_cancelled = cancelled + unknown, (), False
        state.send(peer, m.ClientResumed(log.epoch, unknown, cancelled))
        for answer in again:
            state.send(peer, answer)
        loads = self._load_bundles(client)
        logger.info(
            "client %s resumed: %d answer(s) sent again, %d read back from object storage, %d task(s) it must send "
            "again",
            short(peer), len(again), loads, len(unknown),
        )  # fmt: skip

    def on_disconnect(self, peer: PeerID, request: m.ClientDisconnect) -> None:
        state = self._state
        if not request.shutdown_cluster:
            self.drop(peer, "disconnected")
            return
        if state.settings.protected:
            reason = "the scheduler is protected (started with --protected): clients cannot shut it down"
            state.send(peer, m.ShutdownReply(False, reason))
            return
        logger.info("client %s asked the cluster to shut down", short(peer))
        state.send(peer, m.ShutdownReply(True))
        self.drop(peer, "shut the cluster down")
        state.emit(ClusterShutdown("a client asked the cluster to shut down"))

    # ------------------------------------------------------------ answers on their way to a client

    def answer(self, peer: PeerID, message: Answer) -> None:
        """An answer for a client: sent (and kept until acknowledged) while it is present, held while it is away."""
        state = self._state
        client = state.clients.get(peer)
        if client is None:
            state.send(peer, message)  # not a registered client: sent as it is, nothing waits for it
            return
        log = client.answers
        if not client.away_reason:  # `is_away`, without the property's call: once per task
            log.sent_one(message)
            state.send(peer, message, state.tasks.live_of(ClientID(peer)) >= ANSWERS_WAIT_AT_LIVE)
            return
        log.hold(message)
        if log.may_spill and log.held_bytes >= state.settings.held_answers_memory_bytes:
            self._bundles += 1
            object_id = ObjectID(BUNDLE_PREFIX + state.settings.instance_id + self._bundles.to_bytes(8, "big"))
            answers = log.take_bundle(object_id)
            state.effects.append(StoreAnswers(ClientID(peer), object_id, answers))

    def on_stored(self, event: AnswersStored) -> None:
        """A bundle of held answers was written to object storage, or could not be."""
        state = self._state
        client = state.clients.get(PeerID(event.client))
        kept = client is not None and client.answers.stored(event.object_id, event.ok)
        if event.ok and not kept:  # its answers went from memory meanwhile, or its client is gone
            state.effects.append(DeleteObjects((event.object_id,)))
        elif not event.ok and client is not None:
            logger.warning(
                "could not write answers held for client %s to object storage: they stay in the scheduler's memory",
                short(event.client),
            )

    def on_loaded(self, event: AnswersLoaded) -> None:
        """A bundle of held answers was read back: its answers go to the client (or wait again if it left again)."""
        state = self._state
        peer = PeerID(event.client)
        client = state.clients.get(peer)
        if client is None:
            return
        if event.answers is None:
            client.answers.load_failed(event.object_id, state.now + LOAD_RETRY_SECONDS)
            logger.warning("could not read back answers held for client %s; trying again", short(peer))
            return
        for answer in client.answers.loaded(event.object_id, event.answers, present=not client.is_away):
            state.send(peer, answer)
        state.effects.append(DeleteObjects((event.object_id,)))

    # ------------------------------------------------------------ away, back, dropped

    def on_tick(self) -> None:
        """Silent clients go away, clients away past their window are dropped, and bundles that could not be read
        are read again."""
        state = self._state
        timeout, now = state.settings.client_timeout_seconds, state.now
        for peer, client in list(state.clients.items()):
            silent = now - client.last_seen
            if not client.is_away:
                if silent > timeout:
                    self.away(peer, f"silent for more than {timeout:g} s")
                elif client.answers.bundles:
                    self._load_bundles(client)
            elif client.drop_at is not None and now >= client.drop_at:
                self.drop(peer, f"{client.away_reason}, and did not come back within {CRASH_GRACE_SECONDS:g} s", True)
            elif silent > client.resume_seconds:
                self.drop(peer, f"was away for more than its resume window of {client.resume_seconds:g} s", True)

    def lost(self, peer: PeerID, reason: str, final: bool) -> None:
        """Its connection is lost (or, `final`, it may not come back: its key was revoked or its identity taken)."""
        client = self._state.clients.get(peer)
        if client is None:
            return
        silent = self._state.now - client.last_seen
        paused = self._paused_seconds()
        if final:
            self.drop(peer, f"connection lost ({reason})")
        elif paused is not None:  # its last messages were read late: they tell nothing of its silence (rule 2)
            self.away(peer, f"connection lost ({reason}) while this scheduler was paused for {paused:.0f} s")
        elif silent < CRASH_SILENCE_SECONDS:  # its process ended, most likely (rule 2)
            self.away(peer, f"connection lost ({reason}) while it was talking", grace=CRASH_GRACE_SECONDS)
            if client.is_away:
                client.drop_at = self._state.now + CRASH_GRACE_SECONDS
        else:
            self.away(peer, f"connection lost ({reason}) after {silent:.0f} s of silence")

    def paused(self, since: float, until: float) -> None:
        """The scheduler itself did not run from `since` to `until` (rule 2)."""
        if self._pause is not None and since < self._pause[1]:  # the same pause, seen again by an event stamped in it
            self._pause = (self._pause[0], max(until, self._pause[1]))
            return
        self._pause = (since, until)
        logger.info(
            "the scheduler did not run for %.0f s (stopped, or its machine asleep): connections found lost in the "
            "next %g s are taken for clients away, not ended",
            until - since, AFTER_PAUSE_SECONDS,
        )  # fmt: skip

    def _paused_seconds(self) -> float | None:
        """How long the scheduler was paused, when that pause ended less than AFTER_PAUSE_SECONDS ago."""
        pause = self._pause
        if pause is None or self._state.now - pause[1] >= AFTER_PAUSE_SECONDS:
            return None
        return pause[1] - pause[0]

    def away(self, peer: PeerID, reason: str, grace: float | None = None) -> None:
        """The client is away: its work waits for it for its resume window, or, `grace`, only that long (its
        connection closed while it talked: its process ended, most likely)."""
        state = self._state
        client = state.clients.get(peer)
        if client is None or client.is_away:
            return
        if client.resume_seconds <= 0:
            self.drop(peer, reason, expired=True)
            return
        client.away_reason = reason
        unfinished = state.tasks.live_of(ClientID(peer))
        if grace is None or grace >= client.resume_seconds:
            cancelled = f"cancelled if it stays silent for {client.resume_seconds:g} s"
        else:
            cancelled = f"cancelled unless it speaks again within {grace:g} s"
        # with nothing unfinished nothing waits for it: the end of a client that left without a goodbye (a client
        # made inside a task ends with its processor) is not news; a client that leaves work behind is
        (logger.warning if unfinished else logger.info)(
            "client %s is away (%s): its %d unfinished task(s) go on and their answers wait for it; its work is %s",
            short(peer), reason, unfinished, cancelled,
        )  # fmt: skip

    def back(self, peer: PeerID, resuming: bool) -> None:
        """An away client spoke: it is present again, and what waits for it is sent (by its resume, if `resuming`)."""
        state = self._state
        client = state.clients[peer]
        logger.info(
            "client %s is back after %.0f s away (%s); %d answer(s) waited for it",
            short(peer), state.now - client.last_seen, client.away_reason, client.answers.waiting_count,
        )  # fmt: skip
        client.away_reason, client.drop_at = "", None
        if resuming:
            return
        for answer in client.answers.release_held() + client.answers.release_written():
            state.send(peer, answer)
        self._load_bundles(client)

    def expired_reason(self, peer: PeerID) -> str | None:
        """Why an unknown peer is unknown, when it is a client dropped while it may come back (rule 3)."""
        expired = self._expired.get(peer)
        return expired.reason if expired is not None else None

    def take_expired(self, peer: PeerID) -> bytes:
        """A client registers again: the ids of its tasks cancelled when it was dropped (packed; b"": none)."""
        expired = self._expired.pop(peer, None)
        if expired is None:
            return b""
        self._expired_bytes -= len(expired.cancelled)
        return expired.cancelled

    def joined(self, record: ClientRecord, known_instance: bytes) -> None:
        """A new client's record (rule 3): the ids of its tasks cancelled when it was dropped, if it was; and, when
        this very instance dropped it and kept nothing of it, that what it had is to be told cancelled."""
        record.cancelled_ids = self.take_expired(record.peer)
        instance = self._state.settings.instance_id
        record.forgot_cancelled = known_instance == instance != b"" and not record.cancelled_ids

    def drop(self, peer: PeerID, reason: str, expired: bool = False) -> None:
        state = self._state
        client = state.clients.pop(peer, None)
        if client is None:
            return
        owned = state.tasks.owned_by(ClientID(peer))
        in_jobs = sum(1 for task_id in owned if state.jobs.holds(task_id))
        unfinished = len(owned) - in_jobs
        # an ordinary exit is not news; a client that leaves work behind is
        (logger.warning if unfinished else logger.debug)(
            "client %s %s; its tasks are cancelled (%d unfinished) and its objects deleted",
            short(peer),
            reason,
            unfinished,
        )
        if expired:  # what it had: its live tasks, and those whose answers it has not acknowledged (lost with it)
            had = [task_id for task_id in owned if not state.jobs.holds(task_id)]
            cancelled = pack_task_ids(had + sorted(client.answers.answered() - set(had)))
            text = f"this client {reason}: its {unfinished} unfinished task(s) were cancelled and its objects deleted"
            self._remember_expired(peer, Expired(text, cancelled))
        if in_jobs:
            logger.info("client %s left %d task(s) of its jobs running; their results are kept", short(peer), in_jobs)
        state.emit(ClientLeft(ClientID(peer)))

    # ------------------------------------------------------------ helpers

    def _remember_expired(self, peer: PeerID, expired: Expired) -> None:
        self.take_expired(peer)
        self._expired[peer] = expired
        self._expired_bytes += len(expired.cancelled)
        while self._expired and (len(self._expired) > EXPIRED_KEPT or self._expired_bytes > EXPIRED_BYTES):
            _, oldest = self._expired.popitem(last=False)
            self._expired_bytes -= len(oldest.cancelled)

    def _load_bundles(self, client: ClientRecord) -> int:
        """Ask the shell to read back the bundles of a present client that are in storage and not being read."""
        state = self._state
        bundles = client.answers.loadable(state.now)
        state.effects.extend(LoadAnswers(ClientID(client.peer), bundle.object_id) for bundle in bundles)
        return len(bundles)
