"""Actors (`Client.actor`): an instance of a class that lives on one worker, its method calls run on it in order.

An actor is its *start task* (`Task.actor` set; the actor's id is the task's id), an ordinary task for the lifecycle:
queued, dispatched by capabilities, held by its worker while the actor lives (so it holds its slot, and counts
against its client's quotas, for exactly that long), ended by its result. This module keeps what the lifecycle does
not know: each actor's *calls* (tasks with `Task.actor_id` set), which never enter the task table.

1. A call waits here (`pending`) until its actor is ready (ActorReady on the link of the processor that runs the start
   task), then goes on that link, in the order the calls came (`at_worker`), and so does its stop. Its result comes
   back on the link and goes to the client that made it.
2. The actor is lost when its worker is lost, or its processor dies (a start task's PROCESSOR_DIED, OUT_OF_MEMORY,
   WORKER_DIED or HOST_LOST result). Its calls at the worker end ACTOR_RESTARTED (they do not run again: they may
   have run in part), and it is started again from its constructor: its start task goes back to the queue at no
   retry cost, with its pending calls kept in order for the new instance. Past `ActorSpec.max_restarts` (-1: no
   limit) it dies instead: every call ends ACTOR_DIED, and so does its start task.
3. ActorStop: the calls made before it are served, then the actor's start task ends (a success); calls made after it
   are refused ACTOR_DIED. The calls' results and the start task's end come on one link, in that order; should the
   end come first all the same (a result sent again after a restart), the actor is "stopped" (its name is free, calls
   to it are refused) and ends with the last of those results, or ACTOR_DIED for them when its processor or worker is
   lost first (they may have run). An actor whose start task ended any other way (its constructor raised, its client
   left or cancelled it) is gone too: its calls end ACTOR_DIED with the reason (`sweep`, once per step).
4. An actor's story is its start task's (`future.story()` of `handle.started`): its placements, the readiness of
   each instance, each restart and its end.
5. A name (`ActorSpec.name`) is unique among the live actors of one owner (a CURVE key; "" without CURVE); ActorLookup
   finds it. A client inside a task connects with its worker's key; its start or lookup names the task it comes from
   (`fromTask`), and then counts as the key of that task's client, when the task runs now at a worker registered with
   the key this client connected with (a task's code looks up its driver's actors, as in Ray; a stranger's key
   claiming someone's task gets its own key's).
6. The processor that hosts an actor takes no slot and no other task while the actor lives (link_sessions.py rule 2);
   its link closing loses the actor (rule 2), unless its start task's end was heard first.

Pure: time is the core's `now`.
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass, field

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, TaskID, short
from scaler.scheduler.core.core_state import CoreState
from scaler.scheduler.core.follow_ups import TaskStep
from scaler.scheduler.core.peers import WorkerRecord
from scaler.scheduler.core.task_state import TaskEvent

logger = logging.getLogger(__name__)

#: Ended actors whose reason is kept, to answer calls made to them after (each a short text).
ENDED_KEPT = 1000

#: A start task's result that means its processor or worker was lost (or could not fetch the constructor's input),
#: not that the actor ended (rule 2).
_LOSSES = frozenset(
    {
        m.ResultStatus.PROCESSOR_DIED,
        m.ResultStatus.OUT_OF_MEMORY,
        m.ResultStatus.WORKER_DIED,
        m.ResultStatus.HOST_LOST,
        m.ResultStatus.INPUT_UNREACHABLE,
    }
)
#: The states of an actor asked to stop: calls to it are refused.
_STOPPED = frozenset({"stopping", "stopped"})


@dataclass(slots=True)
class ActorRecord:
    actor_id: TaskID
    client_id: ClientID  #: the client that started it
    owner: str  #: its client's key: names are unique per owner
    class_name: str
    spec: m.ActorSpec
    started_at: float
    #: "placing" (its start task is queued or building it), "running", "stopping" (its stop was sent), "stopped" (its
    #: start task ended after its stop while calls sent to it were unanswered: it waits for their results, rule 3)
    state: str = "placing"
    worker: PeerID | None = None  #: where it lives, once ready
    link: PeerID | None = None  #: its processor's link, where its calls go (rule 1)
    restarts: int = 0
    calls_done: int = 0
    #: calls waiting for it to be ready, in order: (caller, call); None: the stop, once the calls before it are sent
    pending: collections.deque[tuple[ClientID, m.Task] | None] = field(default_factory=collections.deque)
    at_worker: dict[TaskID, ClientID] = field(default_factory=dict)  #: calls sent to its worker, and their callers
    ended_because: str = ""  #: why it ended, once its start task's result says so
    stopped: bool = False  #: its start task ended a success: it was stopped (rule 3)


class Actors:
    def __init__(self, state: CoreState) -> None:
        self._state = state
        self.actors: dict[TaskID, ActorRecord] = {}
        #: a call at a worker -> its actor (routing.py reads it for every result on a link: is it a call's?)
        self.calls: dict[TaskID, TaskID] = {}
        self._names: dict[tuple[str, str], TaskID] = {}
        #: why actors ended, for calls made to them after (the latest ENDED_KEPT, oldest first)
        self._ended: dict[TaskID, str] = {}
        #: the sweep looks at every actor only when a start task ended (or was refused) since it last looked, so
        #: that a step of plain tasks pays nothing for the actors that live
        self._swept_at = 0
        self._sweep_due = False

    # ------------------------------------------------------------ from clients

    def start(self, client: ClientID, task: m.Task) -> bool:
        """An actor's start task: False (answered) when its name is taken; else the actor is known from now on."""
        state, spec = self._state, task.actor
        assert spec is not None
        owner = self._owner(client, spec.from_task)
        if spec.name and (owner, spec.name) in self._names:
            reason = f"an actor named {spec.name!r} is alive already; pick another name, or look it up (get_actor)"
            answer = m.TaskResult(task.task_id, m.ResultStatus.ERROR, error_message=reason)
            state.answer(PeerID(client), answer)
            return False
        record = ActorRecord(task.task_id, client, owner, task.function_name, spec, state.now)
        self.actors[task.task_id] = record
        self._sweep_due = True  # the lifecycle may refuse its start task without ever holding it
        if spec.name:
            self._names[(owner, spec.name)] = task.task_id
        return True

    def call(self, client: ClientID, task: m.Task) -> None:
        """A method call (rule 1)."""
        actor = self.actors.get(task.actor_id)
        if actor is None or actor.state in _STOPPED or (actor.pending and actor.pending[-1] is None):
            why = "it was asked to stop" if actor is not None else self._ended.get(task.actor_id, "")
            why = why or "no such actor is alive (it ended, or never was)"
            self._answer(client, task.task_id, m.ResultStatus.ACTOR_DIED, f"the actor's call was refused: {why}")
            return
        if actor.state == "running" and actor.link is not None:
            self._to_worker(actor, client, task)
        else:
            actor.pending.append((client, task))

    def stop(self, actor_id: TaskID) -> None:
        """ActorStop (rule 3)."""
        actor = self.actors.get(actor_id)
        if actor is None or actor.state in _STOPPED or (actor.pending and actor.pending[-1] is None):
            return
        if actor.state == "running" and actor.link is not None:
            actor.state = "stopping"
            self._state.send(actor.link, m.ActorStop(actor_id))
        else:
            actor.pending.append(None)  # sent once it is ready, after the calls before it

    def lookup(self, peer: PeerID, lookup: m.ActorLookup) -> None:
        actor_id = self._names.get((self._owner(ClientID(peer), lookup.from_task), lookup.name))
        actor = self.actors.get(actor_id) if actor_id is not None else None
        if actor is None:
            reason = f"no live actor is named {lookup.name!r} (among those of this client's key)"
            self._state.send(peer, m.ActorReply(lookup.name, False, reason=reason))
            return
        reply = m.ActorReply(lookup.name, True, actor.actor_id, actor.class_name, actor.spec.interface)
        self._state.send(peer, reply)

    # ------------------------------------------------------------ from workers

    def ready(self, peer: PeerID, ready: m.ActorReady, link: PeerID) -> None:
        """The actor's constructor returned in the processor of `link`, a processor of worker `peer`: its waiting calls
        go there, in order (and its stop)."""
        actor = self.actors.get(ready.actor_id)
        start = self._state.tasks.get(ready.actor_id)
        if actor is None or start is None or start.worker != peer:
            return  # stale: from a worker given up on
        actor.worker, actor.state, actor.link = peer, "running", link
        held = sum(1 for w in actor.pending if w is not None)
        because = f"its constructor returned; {held} call(s) waiting for it go to its processor"
        self._state.tasks.stories.note(ready.actor_id, self._state.wall_time, "actor ready", peer, because)
        while actor.pending:
            waiting = actor.pending.popleft()
            if waiting is None:
                actor.state = "stopping"
                self._state.send(link, m.ActorStop(actor.actor_id))
                break
            self._to_worker(actor, *waiting)

    def adopted(self, actor_id: TaskID, worker: PeerID) -> None:
        """After a scheduler restart, the actor's start task was adopted on the link of the processor that still runs
        it: the actor is there, built (its ActorReady went to the instance before). Calls its clients submit again go
        there; one that was unanswered at the restart may run a second time."""
        start = self._state.tasks.get(actor_id)
        if start is not None and start.link is not None:
            link = self._state.processors.get(start.link)
            if link is not None:
                link.host(actor_id)
            self.ready(worker, m.ActorReady(actor_id), start.link)

    def live_calls(self) -> set[TaskID]:
        """The calls not answered yet, waiting here or at a worker (a resuming client need not send them again)."""
        found = set(self.calls)
        for actor in self.actors.values():
            found.update(waiting[1].task_id for waiting in actor.pending if waiting is not None)
        return found

    def calls_at(self, link: PeerID) -> bool:
        """Whether calls sent on this link are not answered yet (an actor there, or its last calls)."""
        return any(actor.link == link and actor.at_worker for actor in self.actors.values())

    def call_result(self, peer: PeerID, result: m.TaskResult) -> None:
        """A call's result: to its caller (a stale one, from a worker the actor left, is dropped)."""
        actor = self.actors.get(self.calls.get(result.task_id, TaskID(b"")))
        if actor is None or actor.worker != peer:
            return
        del self.calls[result.task_id]
        caller = actor.at_worker.pop(result.task_id)
        actor.calls_done += 1
        self._state.answer(PeerID(caller), result)
        if actor.state == "stopped" and not actor.at_worker:
            self._forget(actor, f"the actor {actor.class_name} ended: it was stopped")  # its last call answered

    def call_log(self, peer: PeerID, log: m.TaskLog | m.StreamItem) -> bool:
        """Output a call printed: to its caller. False when the task is no call."""
        actor = self.actors.get(self.calls.get(log.task_id, TaskID(b"")))
        if actor is None:
            return False
        caller = actor.at_worker.get(log.task_id)
        if caller is not None and actor.worker == peer and PeerID(caller) in self._state.clients:
            self._state.send(PeerID(caller), log)
        return True

    def start_result(self, peer: PeerID, result: m.TaskResult) -> bool:
        """The start task's result: True when it was taken here (the actor was lost and starts again, rule 2; or is
        dead and its start task ended); False for the lifecycle to end the start task as any other."""
        actor = self.actors.get(result.task_id)
        if actor is None:  # the common case: not an actor's start
            return False
        start = self._state.tasks.get(result.task_id)
        if start is None or start.worker != peer:
            return False
        if result.status in _LOSSES:
            return self._lost(actor, result.error_message or result.status.value)
        if result.status is m.ResultStatus.SUCCESS:
            actor.ended_because, actor.stopped = "it was stopped", True
        else:
            actor.ended_because = f"its constructor failed: {result.error_message or result.status.value}"
        return False

    def worker_gone(self, worker: WorkerRecord, reason: str) -> None:
        """Before the lifecycle hears of it: the actors at the worker are lost (rule 2); a stopped one's calls still
        unanswered there end (rule 3)."""
        for actor in [a for a in self.actors.values() if a.actor_id in worker.assigned]:
            self._lost(actor, reason)
            worker.assigned.discard(actor.actor_id)
        for actor in [a for a in self.actors.values() if a.state == "stopped" and a.worker == worker.peer]:
            self._stopped_lost(actor, f"its worker was lost ({reason})")

    def processor_gone(self, processor: PeerID, reason: str) -> None:
        """A processor's link is gone: the actors it hosted whose start task is still live are lost (rule 2; the start
        task's own end, a processor's death, was heard first when it came); a stopped one's calls still unanswered
        there end (rule 3)."""
        for actor in list(self.actors.values()):
            if actor.link != processor:
                continue
            if actor.state == "stopped":
                self._stopped_lost(actor, "its processor's link closed")
            elif actor.actor_id in self._state.tasks.records:
                self._lost(actor, reason)

    def client_gone(self, client: ClientID) -> None:
        """Its calls are answered nobody (its actors end with their start tasks, which the lifecycle cancels)."""
        for actor in self.actors.values():
            actor.pending = collections.deque(w for w in actor.pending if w is None or w[0] != client)

    def sweep(self) -> None:
        """Actors whose start task ended are gone: their calls end ACTOR_DIED (rule 3)."""
        tasks = self._state.tasks
        if not self._sweep_due and tasks.actor_starts_ended == self._swept_at:
            return
        self._sweep_due, self._swept_at = False, tasks.actor_starts_ended
        records = tasks.records
        for actor_id in [a for a, actor in self.actors.items() if a not in records and actor.state != "stopped"]:
            actor = self.actors[actor_id]
            because = actor.ended_because or "it was cancelled (killed, or its client left)"
            why = ended = f"the actor {actor.class_name} ended: {because}"
            if actor.stopped and actor.at_worker:
                if actor.link is not None and actor.worker is not None:
                    self._wait_for_calls(actor)
                    continue
                why = f"the actor {actor.class_name} was stopped, and the call's result never came: it was lost"
            self._fail_all(actor, m.ResultStatus.ACTOR_DIED, why)
            self._forget(actor, ended)

    # ------------------------------------------------------------ the read model

    def summaries(self) -> tuple[m.ActorSummary, ...]:
        return tuple(self._summary(actor) for actor in self.actors.values())

    def _summary(self, a: ActorRecord) -> m.ActorSummary:
        calls = len(a.at_worker) + sum(1 for waiting in a.pending if waiting is not None)
        return m.ActorSummary(
            a.actor_id, a.class_name, a.spec.name, bytes(a.client_id), bytes(a.worker or b""), a.state, a.restarts,
            calls, a.calls_done, max(0.0, self._state.now - a.started_at),
        )  # fmt: skip

    # ------------------------------------------------------------ helpers

    def _lost(self, actor: ActorRecord, reason: str) -> bool:
        """Rule 2: the actor starts again, or dies; True (its start task was taken care of)."""
        actor.restarts += 1
        limit = actor.spec.max_restarts
        actor.worker = actor.link = None
        stopping = actor.state == "stopping"
        if stopping or (limit >= 0 and actor.restarts > limit):
            spent = "it was stopping" if stopping else f"its restarts are spent ({limit} allowed)"
            why = f"the actor {actor.class_name} was lost ({reason}) and {spent}"
            actor.ended_because = f"it was lost ({reason}) and {spent}"
            self._fail_all(actor, m.ResultStatus.ACTOR_DIED, why)
            ended = m.TaskResult(actor.actor_id, m.ResultStatus.ACTOR_DIED, error_message=why)
            self._state.emit(TaskStep(actor.actor_id, TaskEvent.RESULT, result=ended))
            return True
        allowed = "no limit" if limit < 0 else f"of {limit} allowed"
        why = (
            f"the actor {actor.class_name} was lost ({reason}) while the call was at it; it restarts (restart "
            f"{actor.restarts}, {allowed}) from its constructor, and the call does not run again"
        )
        logger.info("actor %s lost (%s): restart %d", short(actor.actor_id), reason, actor.restarts)
        for call_id, caller in actor.at_worker.items():
            self.calls.pop(call_id, None)
            self._answer(caller, call_id, m.ResultStatus.ACTOR_RESTARTED, why)
        actor.at_worker.clear()
        actor.state = "placing"
        self._state.emit(TaskStep(actor.actor_id, TaskEvent.RETURNED, reason=f"its actor restarts: {reason}"))
        return True

    def _wait_for_calls(self, actor: ActorRecord) -> None:
        """Rule 3: its start task ended after its stop, and calls sent to it are unanswered: it is "stopped", its name
        free, until their results come on the link, or the link or its worker is lost."""
        actor.state = "stopped"
        if actor.spec.name:
            self._names.pop((actor.owner, actor.spec.name), None)
        because = f"its start task ended after its stop; {len(actor.at_worker)} call(s) at it wait for their results"
        where = actor.worker or b""
        self._state.tasks.stories.note(actor.actor_id, self._state.wall_time, "actor stopped", where, because)

    def _stopped_lost(self, actor: ActorRecord, reason: str) -> None:
        """A stopped actor's calls still unanswered can be answered no more (rule 3)."""
        why = f"the actor {actor.class_name} was stopped, and {reason} before the call's result came (it may have run)"
        self._fail_all(actor, m.ResultStatus.ACTOR_DIED, why)
        self._forget(actor, f"the actor {actor.class_name} ended: it was stopped")

    def _forget(self, actor: ActorRecord, why: str) -> None:
        """The actor is gone: known from now on only by why it ended, for calls made to it after."""
        del self.actors[actor.actor_id]
        if actor.spec.name and self._names.get((actor.owner, actor.spec.name)) == actor.actor_id:
            del self._names[(actor.owner, actor.spec.name)]
        self._ended[actor.actor_id] = why
        if len(self._ended) > ENDED_KEPT:
            del self._ended[next(iter(self._ended))]

    def _fail_all(self, actor: ActorRecord, status: m.ResultStatus, why: str) -> None:
        for call_id, caller in actor.at_worker.items():
            self.calls.pop(call_id, None)
            self._answer(caller, call_id, status, why)
        actor.at_worker.clear()
        while actor.pending:
            waiting = actor.pending.popleft()
            if waiting is not None:
                self._answer(waiting[0], waiting[1].task_id, status, why)

    def _to_worker(self, actor: ActorRecord, client: ClientID, task: m.Task) -> None:
        assert actor.link is not None
        actor.at_worker[task.task_id] = client
        self.calls[task.task_id] = actor.actor_id
        self._state.send(actor.link, task)

    def _answer(self, client: ClientID, task_id: TaskID, status: m.ResultStatus, why: str) -> None:
        if PeerID(client) in self._state.clients:
            self._state.answer(PeerID(client), m.TaskResult(task_id, status, error_message=why))

    def _owner(self, client: ClientID, from_task: bytes = b"") -> str:
        """The key whose actors' names a client's start or lookup sees (rule 5)."""
        state = self._state
        record = state.clients.get(PeerID(client))
        own = record.owner if record is not None else ""
        task = state.tasks.get(TaskID(from_task)) if from_task else None
        worker = state.workers.get(task.worker) if task is not None and task.worker is not None else None
        if task is None or worker is None or worker.owner != own:
            return own
        parent = state.clients.get(PeerID(task.client_id))
        return parent.owner if parent is not None else own
