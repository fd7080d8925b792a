"""Worker sessions: what a registered worker reports (heartbeats, results, cancel confirmations, logs, capacity,
tasks given back), directly or through its processors' own links (results and logs), and its leaving, falling silent
or draining at the end of a reclaim notice.

The tasks themselves change state only in `task_lifecycle.py`; this module says which worker the news came from.
A result for a task this instance never had is one from before a restart (`reattachment.py`). A worker whose unit
is being reclaimed leaves gracefully: none of its tasks spends a retry. A result read from a processor is its worker's
and is named in the worker's next heartbeat echo (`HeartbeatEcho.results_read`), so that the agent's result journal
forgets it; a processor's link goes with its worker. Pure: time is the core's `now`.

**Lent processors** (docs/architecture.md, "Lent processors"): a processor whose hello says `lent` takes its worker's
plain tasks on its link (task_lifecycle.py), and its agent never sees them. What only the agent would have reported
comes on the link: a task that parks on nested futures (ProcessorBlocked; it yields its slot, as at an agent, until
its ProcessorResumeRequest), and tasks it gives back unstarted (TaskReturn: it hosts an actor, which holds its
computing turn; the link is lent no more). When the link closes (the processor died or was killed), the tasks sent on
it without a result are handled as its agent handles its processor's death: the one its agent names in
ProcessorExited (read from the processor's mark, worker/computing_mark.py; without that word, the oldest one not
parked) was computing and fails with PROCESSOR_DIED; those sent before it ran, and their results died in the
processor's I/O thread (with a mark naming none, the oldest may have): they run again, a retry spent, as the parked
ones; the others were staged and go back to the queue (none spent). A retry spent bounds what a processor that keeps
dying outside any task's mark can cost. A lent
result is named read in an echo on its link after the worker's next heartbeat (the processor keeps it until then); the
lent tasks a processor's hello names that this instance does not know (from before a restart) are held as its
worker's, and adopted on that link when their client submits them again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID, TaskID, short
from scaler.scheduler.core.peers import WorkerRecord
from scaler.scheduler.core.processor_links import Fate, ProcessorLink
from scaler.scheduler.core.task_state import TaskEvent

if TYPE_CHECKING:
    from scaler.scheduler.core.scheduler_core import SchedulerCore

logger = logging.getLogger(__name__)

#: How long a lent processor's closed link waits for its agent to say why it ended (ProcessorExited) before its tasks
#: end without the reason (a frozen or partitioned agent).
LENT_EXIT_WAIT_SECONDS = 5.0


class WorkerSessions:
    def __init__(self, core: SchedulerCore) -> None:
        self._core = core

    def on_heartbeat(self, peer: PeerID, heartbeat: m.Heartbeat) -> None:
        core = self._core
        worker = core.workers[peer]
        if heartbeat.worker is not None:
            worker.status = heartbeat.worker
        worker.cpu_percent = heartbeat.cpu_percent
        worker.rss_bytes = heartbeat.rss_bytes
        worker.round_trip_seconds = heartbeat.round_trip_seconds
        read: tuple[TaskID, ...] = ()
        if worker.results_read:
            read = tuple(worker.results_read)
            worker.results_read.clear()
        core.send(peer, m.HeartbeatEcho(core.settings.object_storage_address, len(core.workers), read))
        for processor in worker.processors:
            link = core.processors.get(processor)
            if link is not None and link.results_read:  # the lent processor forgets the results it kept for a restart
                core.send(processor, m.HeartbeatEcho(results_read=tuple(link.results_read)))
                link.results_read.clear()

    def on_result(self, peer: PeerID, result: m.TaskResult) -> None:
        core = self._core
        if core.actors.is_call(result.task_id):
            core.actors.call_result(peer, result)
            return
        if core.actors.start_result(peer, result):
            return  # its actor was lost: it starts again, or died (core/actors.py)
        if result.task_id not in core.tasks.records and core.reattachment.result_for_held(peer, result, core.now):
            return  # a task from before a restart: its client gets the result when it submits the task again
        core.lifecycle.result_from(peer, result)

    def on_processor_result(self, peer: PeerID, result: m.TaskResult) -> None:
        """A result on a processor's own link: its worker's, and named read in the worker's next echo (an actor's
        call's is not: its agent never saw the call, core/actors.py rule 6)."""
        core = self._core
        link = core.processors[peer]
        worker = core.workers[link.worker]
        if core.actors.is_call(result.task_id):
            core.actors.call_result(worker.peer, result)
            return
        if link.lent:
            link.results_read.append(result.task_id)  # named in an echo on the link, after its worker's next heartbeat
            if link.long:  # the long task ended: tasks may be staged there again
                link.long = False
                worker.restage()
            if link.held:
                link.held.discard(result.task_id)
                link.held_parked.discard(result.task_id)
        record = core.tasks.get(result.task_id)
        if record is not None and record.link == peer:  # a lent task: the agent's journal never had it
            if result.ran is not None:
                worker.learn_lent(result.ran.finished_at - result.ran.started_at)  # before the slot is offered
            core.lifecycle.result_from(worker.peer, result)
            return
        worker.results_read.append(result.task_id)
        self.on_result(worker.peer, result)

    def adopted(self, task_id: TaskID, worker_peer: PeerID) -> None:
        """A task submitted again after a restart was adopted by its worker: if a lent processor named it in its hello,
        it is that link's, computing there (first in its order), so that the link's loss ends it as its others."""
        core = self._core
        worker = core.workers.get(worker_peer)
        record = core.tasks.get(task_id)
        if worker is None or record is None:
            return
        for link in worker.lent_links:
            if task_id in link.held:
                link.held.discard(task_id)
                record.link = link.peer
                parked = task_id in link.held_parked  # it waits on nested futures there: its slot serves others
                link.held_parked.discard(task_id)
                link.adopt(task_id, record.task.priority, parked, core.now)
                if parked:
                    worker.lent_parked += 1
                    core.lifecycle.worker_has_room(worker.peer)
                return

    def on_processor_log(self, peer: PeerID, log: m.TaskLog) -> None:
        self.on_task_log(self._core.processors[peer].worker, log)

    def on_cancel_confirm(self, peer: PeerID, confirm: m.TaskCancelConfirm) -> None:
        self._core.lifecycle.cancel_confirmed_by(peer, confirm)

    def on_task_log(self, peer: PeerID, log: m.TaskLog | m.StreamItem) -> None:
        """Output a task printed, or a value a streaming task yielded: to its client, from the worker that runs it."""
        if self._core.actors.call_log(peer, log):
            return
        record = self._core.tasks.get(log.task_id)
        if record is not None and record.worker == peer and not record.client_gone:
            client = self._core.clients.get(PeerID(record.client_id))
            if client is None or not client.is_away:  # output is not kept for an away client (docs/guide/bursting.md)
                self._core.send(PeerID(record.client_id), log)

    def on_capacity(self, peer: PeerID, capacity: m.WorkerCapacity) -> None:
        self._core.workers[peer].capacity = max(1, capacity.capacity)
        self._core.lifecycle.worker_has_room(peer)

    def on_leaving(self, peer: PeerID, leaving: m.WorkerLeaving) -> None:
        self.drop(peer, f"left: {leaving.reason or 'no reason given'}", graceful=True)
        self._core.send(peer, m.Shutdown("leave acknowledged"))

    def on_task_return(self, peer: PeerID, returned: m.TaskReturn) -> None:
        self._core.lifecycle.returned_by(peer, returned.task_ids)

    def drop_processor(self, peer: PeerID, exited: m.ProcessorExited | None = None, force: bool = False) -> None:
        """A processor's link closed (it ended, or was killed; `exited` None), or its agent says it ended and why
        (`exited`): forgotten; its worker stays. A lent one that holds tasks is forgotten once both are known (the
        link's closing comes after all it sent, its last words included; the agent's word gives the reason), or
        LENT_EXIT_WAIT_SECONDS after the first (`force`), so that the task it computed fails with the reason."""
        core = self._core
        processor = core.processors.get(peer)
        if processor is None:
            return
        if exited is None:
            processor.link_closed = True
        else:
            processor.exited = exited
        worker = core.workers.get(processor.worker)
        held = worker is not None and processor.lent and processor.tasks
        if held and not force and not (processor.link_closed and processor.exited is not None):
            if processor.closed_at is None:
                processor.closed_at = core.now
                assert worker is not None
                self._unlend(worker, processor)
            return
        del core.processors[peer]
        if worker is not None:
            worker.processors.discard(peer)
            if processor.lent:
                self._lent_link_gone(worker, processor, processor.exited)
        core.actors.processor_gone(peer)

    def on_processor_exited(self, peer: PeerID, exited: m.ProcessorExited) -> None:
        """A worker that lends its processors says one of them ended, and why."""
        self.drop_processor(PeerID(peer + b"/" + exited.processor_id), exited)

    def lent_exits_unexplained(self) -> None:
        """Lent links closed LENT_EXIT_WAIT_SECONDS ago that no agent explained: their tasks end without the reason."""
        core = self._core
        late = [
            link.peer
            for link in core.processors.values()
            if link.closed_at is not None and core.now - link.closed_at > LENT_EXIT_WAIT_SECONDS
        ]
        for peer in late:
            self.drop_processor(peer, force=True)

    @staticmethod
    def _unlend(worker: WorkerRecord, link: ProcessorLink) -> None:
        if link in worker.lent_links:
            worker.lent_links.remove(link)
            worker.restage()

    def _lent_link_gone(self, worker: WorkerRecord, link: ProcessorLink, exited: m.ProcessorExited | None) -> None:
        """A lent processor's link closed: its tasks without a result end as at its agent's (module docstring)."""
        self._unlend(worker, link)
        worker.lent_parked -= link.parked
        if link.held:  # named in its hello, not adopted yet: submitted again, they run again
            self._core.reattachment.forget_held(link.held)
            link.held.clear()
            link.held_parked.clear()
        lifecycle = self._core.lifecycle
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
                died = m.TaskResult(task_id, status, error_message=text)
                lifecycle.result_from(worker.peer, died)
            elif fate is Fate.LOST:
                why = f"the processor {name} it waited in died while running another task"
                lifecycle.apply(task_id, TaskEvent.WORKER_LOST, reason=why)
            elif fate is Fate.RAN:
                why = f"its lent processor {name} died before its result left (it runs again)"
                lifecycle.apply(task_id, TaskEvent.WORKER_LOST, reason=why)
            else:  # REQUEUED, or ANSWERED: a cancel's, which ends it cancelled
                why = f"its lent processor {name} died before it started"
                lifecycle.apply(task_id, TaskEvent.RETURNED, reason=why)

    def on_lent_parked(self, peer: PeerID, blocked: m.ProcessorBlocked) -> None:
        """A task on a lent processor waits on nested futures: its slot serves other tasks meanwhile."""
        core = self._core
        link = core.processors[peer]
        if link.park(blocked.task_id, core.now):
            core.workers[link.worker].lent_parked += 1
            core.lifecycle.worker_has_room(link.worker)
        elif blocked.task_id in link.held:  # from before a restart, not adopted yet: parked once it is
            link.held_parked.add(blocked.task_id)

    def on_lent_resumed(self, peer: PeerID, request: m.ProcessorResumeRequest) -> None:
        """A parked task on a lent processor goes on (its processor gives it the turn itself): it takes a slot again."""
        core = self._core
        link = core.processors[peer]
        if link.resume(request.task_id, core.now):
            core.workers[link.worker].lent_parked -= 1

    def hosts_actor(self, peer: PeerID) -> None:
        """The processor of this link built an actor, which holds its computing turn while it lives: its link is lent
        no more (the tasks sent there before are given back as it reads them)."""
        link = self._core.processors.get(peer)
        worker = self._core.workers.get(link.worker) if link is not None else None
        if link is not None and worker is not None:
            self._unlend(worker, link)

    def on_lent_cancel_confirm(self, peer: PeerID, confirm: m.TaskCancelConfirm) -> None:
        """A lent processor stopped a cancelled task, as its agent confirms one."""
        self._core.lifecycle.cancel_confirmed_by(self._core.processors[peer].worker, confirm)

    def on_lent_leaving(self, peer: PeerID, leaving: m.WorkerLeaving) -> None:
        """A lent processor ends on purpose (a cancelled task's, as its agent would have killed it): it is lent no more,
        and its loss queues again, without blame, the tasks that were on their way to it."""
        core = self._core
        link = core.processors[peer]
        link.leaving = True
        core.send(peer, m.Shutdown("leave acknowledged"))  # it exits once it has read this (outlet.last_words)
        worker = core.workers[link.worker]
        if link in worker.lent_links:
            worker.lent_links.remove(link)
            worker.restage()

    def on_lent_returned(self, peer: PeerID, returned: m.TaskReturn) -> None:
        """A lent processor gives tasks back unstarted: those it was asked for (`TaskLifecycle.take_back`), or, when it
        names one it was not asked for, all it holds, since it hosts an actor (then it is lent no more). They are
        queued again, no retry spent."""
        core = self._core
        link = core.processors[peer]
        worker = core.workers[link.worker]
        unasked = any(task_id not in link.tasks or not link.tasks[task_id].asked for task_id in returned.task_ids)
        if unasked and link in worker.lent_links:
            worker.lent_links.remove(link)
            worker.restage()
        core.lifecycle.returned_by(worker.peer, returned.task_ids)

    def withdraw_behind_long(self) -> None:
        """The agent's rule 7 for lent processors (worker/agent/core.py): the tasks staged on a lent link behind one
        that has computed STAGED_WAIT_SECONDS are asked back (TaskReturn on the link: the processor gives back those
        not started), so that another processor or worker runs them; the link gets no staged task until a result
        comes there (processor_links.py rule 3)."""
        core = self._core
        for worker in core.workers.values():
            for link in worker.lent_links:
                asked = link.behind_long(core.now)
                if asked is None:
                    continue
                worker.restage()
                if asked:
                    core.lifecycle.take_back(worker.peer, asked)

    def end_notices(self) -> None:
        """A draining worker whose reclaim notice is over has its remaining tasks moved elsewhere."""
        core = self._core
        for worker in core.workers.values():
            if worker.draining_until is not None and worker.draining_until <= core.now and worker.assigned:
                core.lifecycle.notice_over(worker)

    def drop_silent(self) -> None:
        core, timeout = self._core, self._core.settings.worker_timeout_seconds
        for peer, worker in list(core.workers.items()):
            if core.now - worker.last_seen > timeout:
                self.drop(peer, f"was silent for more than {timeout:g} s", False)

    def drop(self, peer: PeerID, reason: str, graceful: bool) -> None:
        core = self._core
        worker = core.workers.pop(peer, None)
        if worker is None:
            return
        for processor in worker.processors:  # they go with it: what they send next is refused (unknown peer)
            core.processors.pop(processor, None)
        graceful = graceful or worker.draining_until is not None  # a reclaimed unit: no retry is spent
        text = f"worker {short(peer)} (pid {worker.pid} on {worker.hostname}) {reason}"
        logger.info("%s; %d task(s) go back to the queue", text, len(worker.assigned))
        core.reattachment.worker_gone(peer)
        core.actors.worker_gone(worker, text)
        core.lifecycle.worker_gone(worker, text, graceful)
