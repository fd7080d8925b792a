"""Processor links: what a worker's processors say on their own links, the one way their tasks come and everything
about them leaves (docs/protocol.md section 3.7), and the rules the scheduler keeps over each processor, whose worker
agent only supervises (forks, kills on request, reports deaths).

A link is its worker's: accepted while its worker is registered, it has no liveness of its own and goes with its
worker; what it sends is its worker's. Each link has one record (`processor_links.ProcessorLink`, moved by the
processor protocol's table); this module feeds it and carries out what follows:

1. A result, a CANCELED answer or a TaskReturn ends the tasks it names on the record, then in the lifecycle (a result
   for a task from before a restart waits in `reattachment.py`). A result read here is named in an echo on the link
   after its worker's next heartbeat (`echo`), or once RESULTS_READ_BATCH of them are read there (a worker of a big
   cluster beats every minute or so), and its processor forgets it then (it keeps it for a restart).
2. ProcessorBlocked and ProcessorResumeRequest park a task and let it go on: a parked task yields its slot. An
   ActorReady makes the processor the actor's host: it takes no slot and no other task. A processor that hosts an
   actor, or keeps a waiting parent with `nested_parents = "process"`, serves no slot: its worker is asked for one
   processor more per such link, and one per preemption slot (ProcessorsWanted, core/preemption.py), and once they
   serve again or the slot goes, idle ones beyond the slots are killed
   (ProcessorKill, `keep_processors`). ProcessorWriting says the processor must not be killed meanwhile.
3. On the tick: what is staged behind a long task is asked back (processor_links.py rule 3; not on a beat that came
   while the shell was behind on its reads, events.Tick); a task past its worker's
   task timeout fails timedOut and is stopped (rule 5, rule 4); a processor whose stopped task did not unwind is
   killed (rule 4). The tick looks at the links sent a task since it last found them holding none
   (`holding`) and at the closed ones waiting for their agent (`closing`), not at every link: an idle cluster's tick
   touches no link. And a walk over them that finds no task stopped and no task timeout knows the earliest beat rule 3
   can be due on any link (`walk_after`: a task computing since T is long at T + STAGED_WAIT_SECONDS, and a task that
   starts later is long later): the beats before it skip the walk. Under a flow of short tasks the walk comes once
   a second rather than on every beat (with 9,000 links holding tasks, a walk on every beat costs 1.2 us a
   task).
4. A link that closes and its agent's ProcessorExited end what the link held (processor_links.py rule 2) once both are
   known (the closing comes after everything the link sent), or EXIT_WAIT_SECONDS after the first.
5. A hello naming tasks this instance does not know (from before a restart) holds them as its worker's; when their
   client submits one again it is adopted on that link (`adopted`). One it knows (this instance gave up on the
   worker) stays there if it is still queued, and is cancelled there if another worker has it.

Pure: time is the core's `now`.
"""

from __future__ import annotations

import logging

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID, TaskID, short
from scaler.protocol.staging import STAGED_WAIT_SECONDS
from scaler.scheduler.core.core_state import CoreState
from scaler.scheduler.core.follow_ups import (
    ActorReadyAt,
    CancelConfirmed,
    GivenBack,
    HeldAgain,
    HeldForgotten,
    HeldFromBefore,
    KillLinkProcessor,
    ProcessorGone,
    RoomAt,
    StopOnLink,
    Surplus,
    TakeBack,
    TaskEnded,
    TaskStep,
)
from scaler.scheduler.core.peers import WorkerRecord
from scaler.scheduler.core.processor_links import STOP_GRACE_SECONDS, Fate, ProcessorLink
from scaler.scheduler.core.task_state import TaskEvent

logger = logging.getLogger(__name__)

#: How long a closed link waits for its agent to say why its processor ended (ProcessorExited), or an agent's word for
#: its link to close, before its tasks end without it (a frozen or partitioned agent; rule 4).
EXIT_WAIT_SECONDS = 5.0
#: Results read on a link that are named in an echo at once, without waiting for its worker's heartbeat (rule 1).
RESULTS_READ_BATCH = 1000


class LinkSessions:
    def __init__(self, state: CoreState) -> None:
        self._state = state
        #: the links sent a task since the tick last found them holding none, in the order they entered (each link's
        #: `holding`): the tick watches these (rule 3), not every link of every worker
        self.holding: dict[PeerID, None] = {}
        #: the links that closed while they held tasks, waiting for their agent's word (rule 4), in closing order
        self.closing: dict[PeerID, None] = {}
        #: the beats before this skip the walk over `holding`: no rule is due before it on any link (set by a walk;
        #: 0.0 while a task stopped in its processor waits to unwind, rule 4)
        self.walk_after = 0.0
        #: the links whose worker has a task timeout (rule 5 comes due from each task's start): while there are any,
        #: every beat walks
        self.timed: set[PeerID] = set()

    # ------------------------------------------------------------ hello

    def register(self, peer: PeerID, info: m.ProcessorInfo) -> str | None:
        """A processor's link: accepted while its worker is registered; None, or why it is refused."""
        state = self._state
        worker = state.workers.get(PeerID(info.worker_id))
        if worker is None:
            return (
                f"its worker {info.worker_id.decode(errors='replace')} is not registered (it left, or this scheduler "
                "restarted and it has not registered again): it says hello again once its worker registers"
            )
        link = state.processors.get(peer)
        if link is not None and link.worker != worker.peer:
            return "this connection is already registered as a processor of another worker"
        if link is None:
            link = state.processors[peer] = ProcessorLink(peer, worker.peer, info.processor_id, info.max_staged_tasks)
            link.holding = self.holding
            worker.links.append(link)
            if worker.task_timeout_seconds > 0:
                self.timed.add(peer)
            worker.processors.add(peer)
        unknown = []
        for task_id in info.held_tasks:  # rule 5
            if task_id in state.tasks.records:
                state.emit(HeldAgain(link, task_id))
            elif task_id not in link.tasks:
                unknown.append(task_id)
        if unknown:
            link.held.update(unknown)
            state.emit(HeldFromBefore(worker.peer, tuple(unknown)))
            logger.info("processor %s re-attached with %d task(s) from before a restart", short(peer), len(unknown))
        worker.restage()
        state.emit(RoomAt(worker.peer))
        self.keep_processors(worker)
        return None

    def adopted(self, task_id: TaskID, worker_peer: PeerID) -> None:
        """A task submitted again after a restart was adopted by its worker: it is the link's that named it in its
        hello, computing there (first in its order), or parked when the processor said so."""
        state = self._state
        worker = state.workers.get(worker_peer)
        record = state.tasks.get(task_id)
        if worker is None or record is None:
            return
        for link in worker.links:
            if task_id in link.held:
                link.held.discard(task_id)
                record.link = link.peer
                parked = task_id in link.held_parked
                link.held_parked.discard(task_id)
                link.adopt(task_id, record.traits.priority, parked, state.now)
                worker.restage()
                state.emit(RoomAt(worker.peer))
                return

    def held_at(self, worker_peer: PeerID, task_id: TaskID) -> PeerID | None:
        """The link of the worker whose hello named the task (None: none)."""
        worker = self._state.workers.get(worker_peer)
        return next((link.peer for link in worker.links if task_id in link.held), None) if worker else None

    # ------------------------------------------------------------ what a link says

    def result_read(self, peer: PeerID, result: m.TaskResult) -> ProcessorLink:
        """A result read on the link, a task's or an actor call's: named in an echo later (rule 1)."""
        link = self._state.processors[peer]
        link.results_read.append(result.task_id)
        if len(link.results_read) >= RESULTS_READ_BATCH:
            self._state.send(link.peer, m.HeartbeatEcho(results_read=tuple(link.results_read)))
            link.results_read.clear()
        return link

    def on_result(self, peer: PeerID, result: m.TaskResult) -> tuple[WorkerRecord, bool]:
        """A task's result (not an actor call's) read on its link, which ends it there: its worker, and whether the
        processors the worker keeps may change (`keep_processors`). On the path of every task: `result_read` and
        `_end` inline."""
        state = self._state
        link = state.processors[peer]
        link.results_read.append(result.task_id)
        if len(link.results_read) >= RESULTS_READ_BATCH:
            state.send(link.peer, m.HeartbeatEcho(results_read=tuple(link.results_read)))
            link.results_read.clear()
        worker = state.workers[link.worker]
        task_id = result.task_id
        parked, hosting, long = link.parked, link.hosting, link.long
        link.end(task_id, self._state.now)
        changed = link.parked != parked or link.hosting != hosting or link.long != long
        if link.held:
            link.held.discard(task_id)
            link.held_parked.discard(task_id)
        if result.ran is not None:  # before the slot is offered: the depth of staging may change
            worker.learn(result.ran.finished_at - result.ran.started_at)
        if changed:
            worker.restage()
        return worker, changed

    def on_log(self, worker: PeerID, log: m.TaskLog | m.StreamItem) -> None:
        """Output a task printed, or a value a streaming task yielded (not an actor call's), on a link of `worker`: to
        its client."""
        state = self._state
        record = state.tasks.get(log.task_id)
        if record is not None and record.worker == worker and not record.client_gone:
            client = state.clients.get(PeerID(record.client_id))
            if client is None or not client.is_away:  # output is not kept for an away client (docs/guide/bursting.md)
                state.send(PeerID(record.client_id), log)

    def on_cancel_confirm(self, peer: PeerID, confirm: m.TaskCancelConfirm) -> None:
        state = self._state
        link = state.processors[peer]
        if self._end(link, confirm.task_id):
            state.workers[link.worker].restage()
            self.keep_processors(state.workers[link.worker])
        state.emit(CancelConfirmed(link.worker, confirm))

    def on_returned(self, peer: PeerID, returned: m.TaskReturn) -> None:
        """Tasks the processor gave back unstarted: queued again, no retry spent."""
        state = self._state
        link = state.processors[peer]
        handed = tuple(task_id for task_id in returned.task_ids if link.handed_back(task_id, state.now))
        state.workers[link.worker].restage()
        state.emit(GivenBack(link.worker, handed))

    def on_parked(self, peer: PeerID, blocked: m.ProcessorBlocked) -> None:
        """A task waits on nested futures: its slot serves other tasks meanwhile."""
        state = self._state
        link = state.processors[peer]
        worker = state.workers[link.worker]
        if link.park(blocked.task_id, state.now):
            worker.restage()
            self.keep_processors(worker)
            state.emit(RoomAt(worker.peer))
        elif blocked.task_id in link.held:  # from before a restart, not adopted yet: parked once it is
            link.held_parked.add(blocked.task_id)

    def on_resumed(self, peer: PeerID, request: m.ProcessorResumeRequest) -> None:
        """A parked task goes on (its processor gives it the turn itself): it takes a slot again."""
        state = self._state
        link = state.processors[peer]
        if link.resume(request.task_id, state.now):
            worker = state.workers[link.worker]
            worker.restage()
            self.keep_processors(worker)

    def on_writing(self, peer: PeerID, writing: m.ProcessorWriting) -> None:
        """Meanwhile the processor is not killed, nor retired as not needed: once done, it may be (rule 2)."""
        link = self._state.processors[peer]
        link.writing = writing.writing
        if not writing.writing:
            self.keep_processors(self._state.workers[link.worker])

    def on_actor_ready(self, peer: PeerID, ready: m.ActorReady) -> None:
        """The actor's constructor returned in this link's processor: it hosts the actor (rule 2)."""
        state = self._state
        link = state.processors[peer]
        worker = state.workers[link.worker]
        if link.host(ready.actor_id):
            worker.restage()
            self.keep_processors(worker)
        state.emit(ActorReadyAt(worker.peer, ready, link.peer))

    # ------------------------------------------------------------ the worker's side

    def echo(self, worker: WorkerRecord) -> None:
        """The worker's heartbeat was answered: each of its links is told the results read there since (rule 1)."""
        for link in worker.links:
            if link.results_read:
                self._state.send(link.peer, m.HeartbeatEcho(results_read=tuple(link.results_read)))
                link.results_read.clear()

    def on_exited(self, worker_peer: PeerID, exited: m.ProcessorExited) -> None:
        """The worker says one of its processors ended, and why (rule 4)."""
        self.drop(PeerID(worker_peer + b"/" + exited.processor_id), exited)

    def drop(self, peer: PeerID, exited: m.ProcessorExited | None = None, force: bool = False) -> None:
        """A processor's link closed (`exited` None), or its agent says it ended and why: once both are known (or
        `force`, EXIT_WAIT_SECONDS after the first), the link is forgotten and what it held ends (rule 4)."""
        state = self._state
        link = state.processors.get(peer)
        if link is None:
            return
        if exited is None:
            link.link_closed = True
        else:
            link.exited = exited
        worker = state.workers.get(link.worker)
        if worker is not None and link in worker.links:
            worker.links.remove(link)  # it takes no task from now on
            worker.restage()
        holds = worker is not None and bool(link.tasks or link.held)
        if holds and not force and not (link.link_closed and link.exited is not None):
            if link.closed_at is None:
                link.closed_at = state.now
                self.closing[peer] = None
            return
        del state.processors[peer]
        if worker is not None:
            worker.processors.discard(peer)
            self._gone(worker, link)
            worker.restage()
            self.keep_processors(worker)
        state.emit(ProcessorGone(peer, f"the processor {link.processor_id.decode(errors='replace')} ended"))

    # ------------------------------------------------------------ time

    def on_tick(self, ask_back: bool = True) -> None:
        """Rules 3 and 4 (the unexplained exits) and 2 (the processors each worker keeps); `ask_back` False: nothing
        is asked back from behind a long task on this beat (the shell is behind on its reads: events.Tick)."""
        state = self._state
        if self.closing:
            processors = state.processors
            closing = [link for peer in self.closing if (link := processors.get(peer)) is not None]
            self.closing = {link.peer: None for link in closing}
            for link in closing:
                if link.closed_at is not None and state.now - link.closed_at > EXIT_WAIT_SECONDS:
                    self.drop(link.peer, force=True)
        if self.timed:
            self.timed.intersection_update(state.processors)
        if self.holding and (self.timed or state.now >= self.walk_after):
            self.walk_after = self._walk(ask_back)

    def _walk(self, ask_back: bool) -> float:
        """Rules 3-5 over the links holding tasks; the time before which no link's rule 3 or 4 comes due (0.0: a task
        stopped in its processor, rule 4, is watched on every beat)."""
        state = self._state
        processors, workers, holding, now = state.processors, state.workers, self.holding, state.now
        after = now + STAGED_WAIT_SECONDS  # a task that starts from now on is long from then on
        for peer in list(holding):  # the same dict every link holds: links leave it, it is never replaced
            link = processors.get(peer)
            if link is None or not link.tasks:  # holding no task: nothing to ask back, time out or kill
                del holding[peer]
                continue
            worker = workers.get(link.worker)
            if worker is None:
                continue
            # under load every link holds tasks, and with none of rules 3-5 due on most: `_watch`'s own checks,
            # the cheap ones first and inline (the walk over 9,000 links ran four times a second)
            behind = ask_back and link.waiting and not link.long and now - link.busy_since >= STAGED_WAIT_SECONDS
            if (behind or link.stops or worker.task_timeout_seconds > 0) and link in worker.links:
                self._watch(worker, link, ask_back)
            if link.stops:
                after = 0.0
            elif link.computing is not None and not link.long and link.busy_since + STAGED_WAIT_SECONDS < after:
                after = link.busy_since + STAGED_WAIT_SECONDS
        return after

    def _watch(self, worker: WorkerRecord, link: ProcessorLink, ask_back: bool) -> None:
        state, now = self._state, self._state.now
        asked = link.behind_long(now) if ask_back else None
        if asked is not None:
            worker.restage()
            if asked:
                state.emit(TakeBack(worker.peer, asked))
        if worker.task_timeout_seconds > 0:
            for task_id in link.overdue(now, worker.task_timeout_seconds):
                self._time_out(worker, link, task_id)
        if link.stuck(now):
            state.emit(KillLinkProcessor(link, f"a task stopped in it did not end within {STOP_GRACE_SECONDS:g} s"))

    def _time_out(self, worker: WorkerRecord, link: ProcessorLink, task_id: TaskID) -> None:
        timeout = worker.task_timeout_seconds
        text = f"the task ran longer than the task timeout of {timeout:g} s and was stopped"
        self._state.emit(StopOnLink(link, task_id, "its task timed out"))
        self._ended(worker, m.TaskResult(task_id, m.ResultStatus.TIMED_OUT, error_message=text))

    def keep_processors(self, worker: WorkerRecord) -> None:
        """Rule 2: the processors the worker keeps beyond its slots, and those killed as not needed (idle ones that
        serve no actor's call: `follow_ups.Surplus`)."""
        wanted = len(worker.preemption_slots) + sum(
            1 for link in worker.links if link.hosting is not None or (worker.processor_per_parent and link.parked)
        )
        if wanted != worker.beyond_slots:
            worker.beyond_slots = wanted
            self._state.send(worker.peer, m.ProcessorsWanted(wanted))
        surplus = sum(1 for link in worker.links if not link.killing) - (worker.slots + wanted)
        if surplus > 0:
            idle = tuple(link for link in worker.links if link.is_idle())
            if idle:
                self._state.emit(Surplus(worker, idle, surplus))

    # ------------------------------------------------------------ helpers

    def _end(self, link: ProcessorLink, task_id: TaskID) -> bool:
        """The processor answered for the task: its record ends it; True when the slots it offers changed (a long
        task that ended offers what the link stages again)."""
        parked, hosting, long = link.parked, link.hosting, link.long
        link.end(task_id, self._state.now)
        return link.parked != parked or link.hosting != hosting or link.long != long

    def _ended(self, worker: WorkerRecord, result: m.TaskResult) -> None:
        """A task's result made here (its processor died, or it timed out): as if its processor had sent it."""
        self._state.emit(TaskEnded(worker.peer, result))

    def _gone(self, worker: WorkerRecord, link: ProcessorLink) -> None:
        """The link's processor is gone: what it held ends (processor_links.py rule 2)."""
        state, exited = self._state, link.exited
        if link.held:  # named in its hello, not adopted yet: submitted again, they run again
            state.emit(HeldForgotten(frozenset(link.held)))
            link.held.clear()
            link.held_parked.clear()
        name = link.processor_id.decode(errors="replace")
        for task_id, fate in link.gone(exited):
            if fate is Fate.BLAMED:
                status, text = m.ResultStatus.PROCESSOR_DIED, f"the processor {name} running the task died"
                if exited is not None and exited.out_of_memory:
                    status, text = m.ResultStatus.OUT_OF_MEMORY, f"{exited.out_of_memory} (processor {name})"
                elif exited is not None and exited.description:
                    text = f"{text}: {exited.description}"
                else:
                    text = f"{text} (its link to the scheduler closed)"
                logger.warning("task %s: %s", task_id.hex(), text)
                self._ended(worker, m.TaskResult(task_id, status, error_message=text))
            elif fate is Fate.LOST:
                why = f"the processor {name} it waited in for its nested tasks ended while running another task"
                state.emit(TaskStep(task_id, TaskEvent.WORKER_LOST, reason=why))
            elif fate is Fate.RAN:
                why = f"its processor {name} ended before its result left (it runs again)"
                state.emit(TaskStep(task_id, TaskEvent.WORKER_LOST, reason=why))
            else:  # REQUEUED, or ANSWERED: a cancel's, which ends it cancelled
                why = f"its processor {name} ended before it started"
                state.emit(TaskStep(task_id, TaskEvent.RETURNED, reason=why))
