"""Every task transition, implemented once. Callers name an event; `task_state.TRANSITIONS` picks the
outcome; the methods here carry it out and append effects. Nothing else mutates task records.

Also owns dispatch: handing QUEUED tasks to workers with free credit, least loaded first (the index of free workers
is `free_workers.py`; a task naming large inputs goes to a free worker of a host that holds them, `object_hosts.py`, or
waits a bounded while for a busy one, `data_waits.py`),
each on the link of one of its worker's processors (`WorkerRecord.link_for`): the only way a task reaches a processor.
What is sent on a link goes into that link's record (`processor_links.py`), which the processor's answers on the link
update (`link_sessions.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from scaler.protocol.ids import ClientID, ObjectID, PeerID, TaskID, short
from scaler.protocol.messages import (
    CancelOutcome,
    Capabilities,
    GraphTask,
    PayloadKind,
    ProcessorKill,
    ResultStatus,
    Task,
    TaskCancel,
    TaskCancelConfirm,
    TaskInput,
    TaskResult,
    TaskReturn,
)
from scaler.scheduler.core.core_state import CoreState
from scaler.scheduler.core.data_waits import DataWaits, slot_wait
from scaler.scheduler.core.effects import DeleteObjects, new_send
from scaler.scheduler.core.follow_ups import SlotGone, TaskStep
from scaler.scheduler.core.free_workers import FreeEntry, FreeWorkers
from scaler.scheduler.core.graphs import GraphRecord, graph_problem
from scaler.scheduler.core.memory_retry import bigger_place, not_retried, retried
from scaler.scheduler.core.object_hosts import LARGE_RESULT_BYTES, MAX_PLACEMENT_INPUTS, Busy
from scaler.scheduler.core.peers import WorkerRecord
from scaler.scheduler.core.preemption import Preemption
from scaler.scheduler.core.processor_links import ProcessorLink
from scaler.scheduler.core.story_book import Words, cause_of
from scaler.scheduler.core.task_record import Entry, TaskRecord, task_of
from scaler.scheduler.core.task_state import Outcome, TaskEvent, TaskState, outcome
from scaler.scheduler.core.unstored_results import RESULT_FROM_BYTES, UnstoredResults

logger = logging.getLogger(__name__)

#: The states of a task no worker holds yet (what a queued-only cancel cancels).
NOT_DISPATCHED = frozenset({TaskState.WAITING, TaskState.QUEUED})


#: The lifecycle event of a worker's result, by its status (any other: RESULT).
_RESULT_EVENTS = {
    ResultStatus.OUT_OF_MEMORY: TaskEvent.OUT_OF_MEMORY,
    ResultStatus.INPUT_UNREACHABLE: TaskEvent.INPUT_UNREACHABLE,
}

#: The states in which a worker's result finishes a task (the table's FINISH for RESULT).
_FINISHED_BY_RESULT = frozenset(state for state in TaskState if outcome(state, TaskEvent.RESULT) is Outcome.FINISH)
#: The states in which dispatch assigns a task (the table's ASSIGN for DISPATCH).
_ASSIGNED_BY_DISPATCH = frozenset(state for state in TaskState if outcome(state, TaskEvent.DISPATCH) is Outcome.ASSIGN)
#: The members read on the path of every task, bound once: an enum class's attribute is read through the hook of
#: `EnumType.__getattr__` (Python 3.10 and 3.11), a method-wrapper made and called each time, about ten times the cost
#: of a global's
_QUEUED, _DISPATCHED = TaskState.QUEUED, TaskState.DISPATCHED
_SUCCESS, _HOST_LOST, _OBJECT_ID = ResultStatus.SUCCESS, ResultStatus.HOST_LOST, PayloadKind.OBJECT_ID

#: Clients whose submit cause is kept for sharing (`submit`); past it the cache starts again.
MAX_SHARED_CAUSES = 4096
#: The story's cause of a task's first few dispatches, one object each for every task: a cause made per dispatch was a
#: tuple more for the collector to walk per task in flight (20,000 of them with 10,000 workers).
_DISPATCH_CAUSES: tuple[Words, ...] = tuple(("dispatch attempt {}", attempt) for attempt in range(8))


class TaskLifecycle:
    def __init__(self, state: CoreState, max_task_retries: int, max_tasks_waiting: int) -> None:
        tasks, workers = state.tasks, state.workers
        self._tasks = tasks
        #: the processors' links: every dispatched task is sent on one (`_assign`)
        self._processors = state.processors
        #: what should follow (`follow_ups.py`): an answer reaches a client through its session
        self._state = state
        #: a job's tasks outlive their client, and their answers go to the job's followers (core/jobs.py)
        self._jobs = state.jobs
        self._workers = workers
        #: the connected managers: whether one declares workers bigger than one a task ran out of memory on
        self._managers = state.managers
        #: the workers with a free slot, least loaded first (free_workers.py)
        self._free = FreeWorkers(workers)
        #: which hosts hold the large inputs tasks name: dispatch places such a task near them (object_hosts.py)
        self._object_hosts = state.object_hosts
        #: tasks held a bounded while for a busy host that holds their inputs (data_waits.py)
        settings = state.settings
        self.data_waits = DataWaits(settings.placement_link_mbit * 1e6 / 8, settings.placement_max_wait_seconds)
        #: the workers' preemption slots: a nested task waiting behind parents that keep their slots (preemption.py)
        self.preemption = Preemption()
        #: large results reported before they were stored: their tasks, to make them again if lost (unstored_results.py)
        self.unstored = UnstoredResults()
        self._graphs = state.graphs
        self._effects = state.effects
        self._max_task_retries = max_task_retries
        self._max_tasks_waiting = max_tasks_waiting
        #: each client's "submitted by" cause, one tuple for all its tasks' stories (a tuple per task was 56 bytes of
        #: every queued task)
        self._submitted_causes: dict[ClientID, tuple[str, ClientID]] = {}
        #: each worker's "result success" cause, one tuple for all its results' stories (`_succeeded_on`)
        self._success_causes: dict[PeerID, Words] = {}
        self.now = 0.0
        #: why the transition being carried out happens (for the task's story); set by `apply`
        self._cause: Words = ""
        #: how each outcome is carried out; `details` are the keyword details of the event (see `apply`)
        self._outcomes: dict[Outcome, Callable[[TaskRecord, dict[str, object]], None]] = {
            Outcome.ENQUEUE: lambda record, details: self._enqueue(record),
            Outcome.ASSIGN: lambda record, details: self._assign(record, _detail(details, "worker", WorkerRecord)),
            Outcome.FINISH: self._finish_with,
            Outcome.CANCEL_NOW: lambda record, details: self._cancel_now(record),
            Outcome.CANCEL_AT_WORKER: lambda record, details: self._cancel_at_worker(record),
            Outcome.END_CANCELED: lambda record, details: self._end_canceled(record),
            Outcome.REDISPATCH: lambda record, details: self._redispatch(record, _detail(details, "reason", str)),
            Outcome.REQUEUE: lambda record, details: self._requeue(record),
            Outcome.FAIL_FROM_DEPENDENCY: lambda record, details: self._fail_from_dependency(
                record, _detail(details, "failure", TaskResult)
            ),
            Outcome.RETRY_BIGGER: lambda record, details: self._retry_bigger(
                record, _detail(details, "result", TaskResult)
            ),
            Outcome.FAIL_UNRUNNABLE: lambda record, details: self._fail_unrunnable(
                record, _detail(details, "reason", str)
            ),
            Outcome.REFETCH: lambda record, details: self._refetch(record, _detail(details, "result", TaskResult)),
        }

    # ------------------------------------------------------------ entry points

    def submit(self, client: ClientID, task: Task, cause: str = "") -> None:
        if task.task_id in self._tasks.records:
            logger.warning("task %s submitted twice; the second copy is ignored", task.task_id.hex())
            return
        if self._max_tasks_waiting >= 0 and len(self._tasks.queue) >= self._max_tasks_waiting:
            reason = f"refused: {len(self._tasks.queue)} tasks already wait for a worker (max-number-of-tasks-waiting)"
            self._state.answer(PeerID(client), TaskResult(task.task_id, ResultStatus.NO_WORKER, error_message=reason))
            return
        words: Words = cause
        if not cause:
            shared = self._submitted_causes.get(client)
            if shared is None:
                if len(self._submitted_causes) >= MAX_SHARED_CAUSES:
                    self._submitted_causes.clear()
                shared = self._submitted_causes[client] = ("submitted by client {}", client)
            words = shared
        record = self._tasks.add(task, _QUEUED, self.now, words)
        self._tasks.queue.push(record)

    def submit_graph(self, client: ClientID, graph: GraphTask) -> None:
        problem = graph_problem(graph)
        if problem is None and any(node.task_id in self._tasks.records for node in graph.nodes):
            problem = "a node reuses the id of a task that is still running"
        if problem is not None:
            for target in graph.targets:
                self._state.answer(PeerID(client), TaskResult(target, ResultStatus.ERROR, error_message=problem))
            return
        self._graphs.register(graph)
        cause = ("graph submitted by client {}", client)  # one for its nodes' openings
        for node in graph.nodes:
            state = TaskState.QUEUED if not node.dependencies else TaskState.WAITING
            added = self._tasks.add(node, state, self.now, cause)
            if state is TaskState.QUEUED:
                self._tasks.queue.push(added)

    def apply(self, task_id: TaskID, event: TaskEvent, **details: object) -> None:
        record = self._tasks.get(task_id)
        if record is not None:
            self._apply(record, event, details)

    def _apply(self, record: TaskRecord, event: TaskEvent, details: dict[str, object]) -> None:
        """`apply` for a caller that holds the live record already."""
        action = outcome(record.state, event)
        if action is Outcome.IGNORE:
            logger.debug("task %s: %s ignored in state %s", record.task_id.hex(), event.value, record.state.value)
            return
        if self._tasks.stories.enabled and event is not TaskEvent.DISPATCH:  # _assign words its own cause
            self._cause = cause_of(event, record.extras.client_gone, record.worker or b"", details)
        self._outcomes[action](record, details)

    def result_from(self, worker: PeerID, result: TaskResult) -> None:
        record = self._tasks.records.get(result.task_id)  # the table's `get` without the call: once per task
        if record is None or record.worker != worker:
            logger.debug("stale result for task %s dropped", result.task_id.hex())
            return
        if result.status is _HOST_LOST:  # a proxy's remote machine was lost: as if its worker died
            self.apply(result.task_id, TaskEvent.WORKER_LOST, reason=result.error_message or "its host was lost")
            return
        status = result.status  # an enum member hashes through a Python call: the common status is not looked up
        if status is _SUCCESS and not result.error_message and record.state in _FINISHED_BY_RESULT:
            # on the path of every task: `_apply`'s outcome and cause, without the event's details
            if self._tasks.stories.enabled:
                self._cause = self._succeeded_on(worker)
            self._finish(record, result)
            return
        event = TaskEvent.RESULT if status is ResultStatus.SUCCESS else _RESULT_EVENTS.get(status, TaskEvent.RESULT)
        self._apply(record, event, {"result": result})

    def _succeeded_on(self, worker: PeerID) -> Words:
        """The story's cause of a successful result from `worker` (`cause_of`'s), one object for all its results."""
        cause = self._success_causes.get(worker)
        if cause is None:
            if len(self._success_causes) >= MAX_SHARED_CAUSES:
                self._success_causes.clear()
            cause = self._success_causes[worker] = ("result {} from worker {}", ResultStatus.SUCCESS._value_, worker)
        return cause

    def cancel_confirmed_by(self, worker: PeerID, confirm: TaskCancelConfirm) -> None:
        record = self._tasks.get(confirm.task_id)
        if record is None or record.worker != worker:
            return
        self.apply(confirm.task_id, TaskEvent.CANCEL_CONFIRMED)

    def cancel_by_client(self, client: ClientID, task_ids: tuple[TaskID, ...], queued_only: bool = False) -> None:
        """`queued_only`: only tasks that have not started are cancelled (TaskCancel.queuedOnly): those not yet
        dispatched (waiting or queued, outside a graph) at once, and those staged in a processor behind the one it
        computes (or starts next) when it gives them back unstarted (asked with TaskReturn; `returned_by`); the others
        run on, and this cancel gets no answer for them."""
        answered: set[TaskID] = set()  #: targets of graphs this request cancelled: they have their answer
        staged: dict[PeerID, list[TaskID]] = {}  #: queued-only: staged tasks to ask back, by worker
        for task_id in task_ids:
            if task_id in answered:
                continue
            record = self._tasks.get(task_id)
            if record is None or record.client_id != client:
                self._tasks.not_found += 1
                self._state.answer(PeerID(client), TaskCancelConfirm(task_id, CancelOutcome.NOT_FOUND))
                continue
            graph = self._graphs.get(record.graph_id) if record.graph_id else None
            if queued_only and (graph is not None or record.state not in NOT_DISPATCHED):
                link = self._processors.get(record.link) if record.link is not None else None
                if graph is None and link is not None and record.worker and link.is_staged(task_id):
                    record.cancel_when_returned = True  # staged behind the one its processor computes
                    staged.setdefault(record.worker, []).append(task_id)
                continue
            if graph is not None:
                answered.update(graph.targets)
                self.cancel_graph(graph)
            else:
                self.apply(task_id, TaskEvent.CANCEL)
        for worker, asked in staged.items():
            self.take_back(worker, tuple(asked))

    def cancel_graph(self, graph: GraphRecord) -> None:
        graph.canceled = True
        for node in sorted(graph.live, key=lambda n: self._tasks.records[n].sequence):
            self.apply(node, TaskEvent.CANCEL)

    def client_gone(self, client: ClientID) -> None:
        self.unstored.client_gone(client)
        for task_id in self._tasks.owned_by(client):
            record = self._tasks.records.get(task_id)
            if record is None:
                continue
            record.client_gone = True
            if not self._jobs.holds(task_id):  # a job's task runs on; its answer is kept for the job
                self.apply(task_id, TaskEvent.CANCEL)

    def fates_told(self, object_ids: tuple[ObjectID, ...], losses: tuple[int, ...]) -> None:
        """The storage server's fates of the large results reported before they were stored (unstored_results U3): a
        result lost with its host is made again from its task, under its own id (its readers wait for it there)."""
        dropped = self.unstored.dropped
        for task in self.unstored.told(object_ids, losses):
            if task.task_id in self._tasks.records:
                continue  # made again already, and still under way
            logger.warning(
                "task %s: its result %s was lost with its host before it was stored: the task runs again to make it",
                task.task_id.hex(), task.result_id.hex(),
            )  # fmt: skip
            record = self._tasks.add(task, TaskState.QUEUED, self.now, "its result was lost before it was stored")
            record.rerun = task
            self._tasks.queue.push(record)
        if self.unstored.dropped > dropped:
            logger.warning("%d large result(s) not known to be stored are no longer followed: lost with their hosts, "
                           "they are not made again", self.unstored.dropped - dropped)  # fmt: skip

    def worker_has_room(self, worker: PeerID) -> None:
        """A worker joined or its capacity changed: consider it at the next dispatch."""
        record = self._workers.get(worker)
        if record is not None:
            self._free.offer(record)

    def drain(self, worker: WorkerRecord) -> None:
        """A worker whose unit is reclaimed: it gives back what it has not started (TaskReturn, requeued at no
        retry cost); its running tasks have until the notice ends."""
        if worker.assigned:
            self.take_back(worker.peer, tuple(sorted(worker.assigned)))

    def take_back(self, worker: PeerID, task_ids: tuple[TaskID, ...]) -> None:
        """Ask a worker's processors to give back tasks they have not started (TaskReturn on each task's link; each
        answers with those it gives back, processor protocol rule 9)."""
        links: dict[PeerID, list[TaskID]] = {}
        for task_id in task_ids:
            record = self._tasks.get(task_id)
            link = self._processors.get(record.link) if record is not None and record.link is not None else None
            if link is not None and link.worker == worker:
                links.setdefault(link.peer, []).extend(link.ask_back((task_id,)))
        for peer, asked in links.items():
            if asked:
                self._send(peer, TaskReturn(tuple(asked)))

    def stop_on_link(self, link: ProcessorLink, task_id: TaskID, reason: str) -> None:
        """Stop a task held on a link (cancelled, or timed out; processor_links.py rule 4): its processor is killed
        when it computes alone, else it is stopped there (TaskCancel on the link)."""
        if link.stops_by_kill(task_id):
            link.cancel(task_id)
            self.kill_processor(link, reason)
        else:
            link.stopped(task_id, self.now)
            self._send(link.peer, TaskCancel((task_id,)))

    def kill_processor(self, link: ProcessorLink, reason: str) -> None:
        """Ask the link's worker to kill its processor (ProcessorKill): its loss then ends what it held, blaming none
        (processor_links.py rule 2). The link takes no task meanwhile."""
        if link.killing:
            return
        link.killing = reason
        self._send(link.worker, ProcessorKill(link.processor_id, reason))
        worker = self._workers.get(link.worker)
        if worker is not None:
            worker.restage()

    def notice_over(self, worker: WorkerRecord) -> None:
        """A draining worker's notice ended with tasks still there: they go back to the queue (no retry spent)
        and the worker is told to stop them."""
        moved = sorted(worker.assigned, key=lambda t: self._tasks.records[t].sequence)
        links = [self._tasks.records[task_id].link for task_id in moved]
        for task_id in moved:
            self.apply(task_id, TaskEvent.RETURNED, reason=f"the drain of worker {short(worker.peer)} ended")
        for task_id, peer in zip(moved, links, strict=True):
            link = self._processors.get(peer) if peer is not None else None
            if link is not None:
                link.stopped(task_id, self.now)
                self._send(link.peer, TaskCancel((task_id,)))

    def worker_gone(self, worker: WorkerRecord, reason: str, graceful: bool) -> None:
        event = TaskEvent.RETURNED if graceful else TaskEvent.WORKER_LOST
        for task_id in sorted(worker.assigned, key=lambda t: self._tasks.records[t].sequence):
            self.apply(task_id, event, reason=reason)
        worker.assigned.clear()
        self._object_hosts.left(worker)

    def returned_by(self, worker: PeerID, task_ids: tuple[TaskID, ...]) -> None:
        """The worker gives these back unstarted: queued again (no retry spent), or cancelled when a queued-only
        cancel asked for them (`cancel_by_client`)."""
        for task_id in task_ids:
            record = self._tasks.get(task_id)
            if record is not None and record.worker == worker:
                self.apply(task_id, TaskEvent.RETURNED, reason=f"worker {short(worker)} gave it back unstarted")
                if record.cancel_when_returned:
                    self.apply(task_id, TaskEvent.CANCEL)

    def held_again(self, link: ProcessorLink, task_id: TaskID, parked: bool) -> None:
        """A processor of a worker this instance had given up on says hello again still holding a task it knows: a
        task that waits in the queue stays with that processor (it runs there already); one given to another worker
        meanwhile is cancelled there."""
        record, worker = self._tasks.get(task_id), self._workers.get(link.worker)
        if record is None or worker is None or record.worker == link.worker:
            return
        if record.state is not TaskState.QUEUED:
            self._send(link.peer, TaskCancel((task_id,)))
            return
        self._tasks.queue.left(record)  # its heap entry is dropped when met
        record.worker, record.link = link.worker, link.peer
        record.dispatched_at = self.now
        self._tasks.set_state(record, TaskState.DISPATCHED, self.now, "its worker registered again still holding it")
        worker.assigned.add(task_id)
        link.adopt(task_id, record.traits.priority, parked, self.now)
        worker.restage()
        self._free.offer(worker)

    def adopt(self, task: Task, worker_peer: PeerID, result: TaskResult | None) -> bool:
        """A task submitted again after a restart that a worker still runs (or already finished, with `result`):
        it is not run again. False when its worker is gone meanwhile and there is no result (submit it as usual)."""
        worker = self._workers.get(worker_peer)
        if worker is None and result is None:
            return False
        cause = "submitted again by its client after a scheduler restart"
        record = self._tasks.add(task, TaskState.QUEUED, self.now, cause)  # not in the queue: dispatched at once below
        record.worker = worker_peer
        record.attempts = 1
        record.dispatched_at = self.now
        adopted = "scheduler restart: adopted from the worker that held it before the restart (not run again)"
        self._tasks.set_state(record, TaskState.DISPATCHED, self.now, adopted)
        if worker is not None:
            worker.assigned.add(task.task_id)
            self._free.offer(worker)  # its load changed: a fresh entry in the free-worker heap
        if result is not None:
            self.apply(task.task_id, TaskEvent.RESULT, result=result)
        return True

    # ------------------------------------------------------------ dispatch

    def dispatch(self) -> None:
        """Hand QUEUED tasks to workers with free credit, the least loaded worker first."""
        queue = self._tasks.queue
        if not queue.queued_count:
            return
        passed_over: list[FreeEntry] = []  #: workers that can run nothing queued, this round
        #: tasks waiting for a busy host that holds their inputs, queued again below (made when one is: the common round
        #: holds none)
        held: list[TaskRecord] | None = None
        while queue.queued_count:
            found = self._free.next_free()
            if found is None:
                break
            entry, worker = found
            link = worker.link_for()
            if link is None:  # no processor's link with room (the next link's hello, or room there, offers it again)
                passed_over.append(entry)
                continue
            key, top = self._best_queue_for(worker)
            if key is None:
                passed_over.append(entry)
                continue
            record = queue.pop(key, self._tasks.records, top)
            traits = record.traits
            if traits.large_inputs or traits.graph_id:  # placement follows data: a free worker of a holding host
                placed = self._by_data(record, worker, link, key, entry)
                if placed is None:  # it waits for a busy host that holds its inputs
                    if held is None:
                        held = []
                    held.append(record)
                    continue
                worker, link = placed
            if record.state in _ASSIGNED_BY_DISPATCH:  # `_apply`'s way, without its details
                self._assign(record, worker, link)  # it offers the worker again if not full, and words its own cause
            else:
                self._apply(record, TaskEvent.DISPATCH, {"worker": worker})
        self._free.put_back(passed_over)
        if held:  # in their places again (a queued task keeps its turn); pushed before, so no overtaking to plan
            pushed_top = queue.pushed_top
            for record in held:
                queue.push(record)
            queue.pushed_top = pushed_top

    def on_beat(self) -> None:
        """The clock beat: tasks followed by data_waits.py that left the queue meanwhile are forgotten."""
        if not len(self.data_waits):
            return
        records = self._tasks.records

        def queued(task_id: TaskID) -> bool:
            record = records.get(task_id)
            return record is not None and record.state is TaskState.QUEUED

        self.data_waits.sweep(queued)

    def _by_data(
        self, record: TaskRecord, worker: WorkerRecord, link: ProcessorLink, key: Capabilities, entry: FreeEntry
    ) -> tuple[WorkerRecord, ProcessorLink] | None:
        """Where a task naming large inputs goes: the offered `worker` (on `link`), a worker with an idle slot of a
        host holding more of them (object_hosts.py), or nowhere yet (None: it waits for a busy host holding them,
        data_waits.py). The offered worker stays a candidate for the next task unless it takes this one."""
        inputs = self._placement_inputs(record)
        nearer = self._object_hosts.nearer(inputs, worker, key, self.now)
        if nearer is None:
            return worker, link
        if isinstance(nearer, Busy):
            if self._waits_for(record, inputs, nearer, worker, key):
                self._free.put_back([entry])
                return None
            self._object_hosts.away_from_data += 1
            return worker, link
        self._free.put_back([entry])
        return nearer

    def _waits_for(
        self, record: TaskRecord, inputs: tuple[ObjectID, ...], busy: Busy, offered: WorkerRecord, key: Capabilities
    ) -> bool:
        """Whether a task whose inputs only busy hosts hold more of than `offered`'s waits for one (data_waits.py)."""
        hosts, now = self._object_hosts, self.now

        def wait_of(host: str, ahead: int) -> float | None:
            workers = (worker for worker in hosts.workers_of(host) if worker.can_run(key))
            return slot_wait(workers, ahead, self._expected_run, now)

        waits = self.data_waits
        before = waits.held
        held = waits.holds(
            record.task_id, inputs, busy.hosts, offered.hostname, now, hosts.size_of, hosts.holds, wait_of,
            lambda host: hosts.backlog(host, now),
        )  # fmt: skip
        if waits.held > before:  # held now, for the first time in this stay in the queue
            host, until = waits.hold_of(record.task_id)
            logger.debug("task %s waits up to %.2f s for host %s, which holds its inputs", record.task_id.hex(),
                         until - now, host)  # fmt: skip
            if self._tasks.stories.enabled:
                self._tasks.stories.note(
                    record.task_id, now + self._tasks.wall_offset, "waiting", host,
                    ("waits up to {} s for the host holding its inputs", round(until - now, 2)),
                )  # fmt: skip
        return held

    def _expected_run(self, task_id: TaskID) -> tuple[float | None, float]:
        """A task at a worker: its expected run time (data_waits W3: its function's mean, else its worker's recent
        tasks'; None: neither known) and when it was dispatched."""
        record = self._tasks.records[task_id]
        mean = self._tasks.run_times.mean_seconds(record.traits.function_name, self._tasks.queue.key(record))
        if mean is None and record.worker is not None:
            worker = self._workers.get(record.worker)
            mean = worker.run_seconds if worker is not None else None
        return mean, record.dispatched_at

    def _best_queue_for(self, worker: WorkerRecord) -> tuple[tuple[tuple[str, int], ...] | None, Entry | None]:
        """The queue key whose best task `worker` takes (None: none it can run), and that task's entry."""
        queue, records = self._tasks.queue, self._tasks.records
        best_key, best_entry = None, None
        for key in queue.queued_count:  # not copied: `peek` may drop a key's emptied heap, never a count
            if not worker.can_run(key):  # the key is () when capabilities are ignored, but for a memory floor
                continue
            entry = queue.peek(key, records)
            if entry is not None and (best_entry is None or entry < best_entry):
                best_key, best_entry = key, entry
        return best_key, best_entry

    def _assign(self, record: TaskRecord, worker: WorkerRecord, link: ProcessorLink | None = None) -> None:
        """`link`: the worker's link with room (`WorkerRecord.link_for`), when the caller has it."""
        if link is None:
            link = worker.link_for()
        assert link is not None, "dispatch gives a task only to a worker with a link that has room"
        attempt = record.placed(worker.peer, link.peer, self.now)
        cause = _DISPATCH_CAUSES[attempt] if attempt < len(_DISPATCH_CAUSES) else ("dispatch attempt {}", attempt)
        self._tasks.set_state(record, _DISPATCHED, self.now, cause)
        worker.assigned.add(record.task_id)
        if worker.preemption_slots:
            self.preemption.filled(worker, record.task_id)
        traits = record.traits
        link.send(
            record.task_id,
            traits.priority,
            self.now,
            "actor" if traits.actor else "stream" if traits.stream_credit else "",
        )
        if link.actor_start is not None:  # `holds_actor`'s test, not the property: on the path of every task
            worker.restage()  # nothing is staged behind an actor's start
        self._free.offer(worker)
        if traits.large_inputs or traits.graph_id:
            self.data_waits.forget(record.task_id)
            inputs = self._placement_inputs(record)
            if inputs:
                self._object_hosts.reading(inputs, worker.hostname, self.now)
                self._object_hosts.placed(inputs, worker.hostname)
                worker.readers += 1
                record.reads_data = True
        graph = self._graphs.get(traits.graph_id) if traits.graph_id else None
        rerun = record.extras.rerun
        if rerun is not None:  # made again for its lost result: sent as kept (a graph node's inputs included)
            self._send(link.peer, rerun)
        elif graph is None:  # the Task its client sent if it came in this step (task_table.py), else written again
            came = self._tasks.arrived.pop(record.task_id, None)
            self._send(link.peer, came if came is not None else task_of(record))
        else:  # a node gets the results of the nodes it depends on
            needs = graph.dependencies[record.task_id]
            self._send(link.peer, task_of(record, needs, self._graphs.inputs_of(graph, record.task_id)))

    def _placement_inputs(self, record: TaskRecord) -> tuple[ObjectID, ...]:
        """The large inputs a task's placement follows: those its client named, or a graph node's dependencies'
        stored results that are known to be on some host (large results: object_hosts.py)."""
        traits = record.traits
        graph = self._graphs.get(traits.graph_id) if traits.graph_id and not traits.large_inputs else None
        if graph is None:
            return traits.large_inputs
        known = self._object_hosts.hosts_of
        stored = [
            ObjectID(given.data)
            for given in self._graphs.inputs_of(graph, record.task_id)
            if given.kind is PayloadKind.OBJECT_ID and known(ObjectID(given.data))
        ]
        return tuple(stored[:MAX_PLACEMENT_INPUTS])

    # ------------------------------------------------------------ outcomes (named after task_state.Outcome)

    def _enqueue(self, record: TaskRecord) -> None:
        self._tasks.set_state(record, TaskState.QUEUED, self.now, self._cause)
        self._tasks.queue.push(record)

    def _finish(self, record: TaskRecord, result: TaskResult) -> None:
        ran_on = record.worker or b""
        if result.payload_kind is _OBJECT_ID and result.stored_bytes >= LARGE_RESULT_BYTES:
            maker = self._workers.get(PeerID(ran_on))
            if maker is not None:  # its readers are placed near it (object_hosts.py)
                self._object_hosts.made(ObjectID(result.payload), maker.hostname, result.stored_bytes)
            if result.stored_bytes >= RESULT_FROM_BYTES and result.status is ResultStatus.SUCCESS:
                self._keep_until_stored(record, ObjectID(result.payload))
        if result.ran is not None:  # the processor's own times (the scale harness's fake ones send none)
            self._tasks.stories.ran(record.task_id, ran_on, record.attempts, result)
        run_seconds = self._learn_run_time(record, result)
        self._release_worker(record)
        if result.status is _SUCCESS:
            self._tasks.succeeded += 1
        else:
            self._tasks.failed += 1
        self._end(record, result, ran_on=ran_on, run_seconds=run_seconds)

    def _keep_until_stored(self, record: TaskRecord, object_id: ObjectID) -> None:
        """Its large result may be on its host alone yet: its task is kept until the storage server says it is stored
        (unstored_results U1). An actor's start and a stream's end are not made again."""
        traits = record.traits
        if traits.actor is not None or traits.stream_credit:
            return
        rerun = record.extras.rerun
        if rerun is not None:
            self.unstored.kept(object_id, rerun)
            return
        graph = self._graphs.get(traits.graph_id) if traits.graph_id else None
        if graph is None:
            task = task_of(record)
        else:
            task = task_of(record, graph.dependencies[record.task_id], self._graphs.inputs_of(graph, record.task_id))
        self.unstored.kept(object_id, task)

    def _finish_with(self, record: TaskRecord, details: dict[str, object]) -> None:
        """FINISH with the event's result (on the path of every task: the common detail read without `_detail`)."""
        result = details.get("result")
        self._finish(record, result if type(result) is TaskResult else _detail(details, "result", TaskResult))

    def _cancel_now(self, record: TaskRecord) -> None:
        self._tasks.canceled += 1
        self._end(record, TaskCancelConfirm(record.task_id, CancelOutcome.CANCELED))

    def _cancel_at_worker(self, record: TaskRecord) -> None:
        assert record.worker is not None
        self._tasks.set_state(record, TaskState.CANCELING, self.now, self._cause)
        link = self._processors.get(record.link) if record.link is not None else None
        if link is not None:
            self.stop_on_link(link, record.task_id, "its task was cancelled")

    def _end_canceled(self, record: TaskRecord) -> None:
        self._release_worker(record)
        self._tasks.canceled += 1
        self._end(record, TaskCancelConfirm(record.task_id, CancelOutcome.CANCELED))

    def _redispatch(self, record: TaskRecord, reason: str) -> None:
        self._release_worker(record)
        record.lost_workers += (reason,)
        if record.attempts > self._max_task_retries:
            self._tasks.worker_died += 1
            text = (
                f"the task's worker (or the processor or host it ran in) was lost {record.attempts} time(s), more "
                f"than the retry budget of "
                f"{self._max_task_retries}; last: {reason}"
            )
            self._cause = f"retry budget spent ({self._max_task_retries}): {reason}"
            self._end(record, TaskResult(record.task_id, ResultStatus.WORKER_DIED, error_message=text))
            return
        retry = f"retry {record.attempts} of {self._max_task_retries}: {reason}"
        self._tasks.set_state(record, TaskState.QUEUED, self.now, retry)
        self._tasks.queue.push(record)

    def _refetch(self, record: TaskRecord, result: TaskResult) -> None:
        """Its input could not be fetched (task_state rule 6): queued again as if its worker died, within the same
        retry budget; past it, the worker's result ends it (it names the input and why)."""
        reason = result.error_message or "an input could not be fetched"
        if record.attempts > self._max_task_retries:
            text = (f"the task's input could not be fetched {record.attempts} time(s), more than the retry budget of "
                    f"{self._max_task_retries}; last: {reason}")  # fmt: skip
            self._cause = f"retry budget spent ({self._max_task_retries}): {reason}"
            self._finish(record, replace(result, error_message=text))
            return
        self._tasks.stories.ran(record.task_id, record.worker or b"", record.attempts, result)
        self._release_worker(record)
        retry = f"retry {record.attempts} of {self._max_task_retries}: {reason}"
        self._tasks.set_state(record, TaskState.QUEUED, self.now, retry)
        self._tasks.queue.push(record)

    def _retry_bigger(self, record: TaskRecord, result: TaskResult) -> None:
        """Queued again for a worker with more memory than the one it died on, if there is or may be one
        (memory_retry.py); else it ends with its error, saying why it was not retried."""
        worker = self._workers.get(record.worker) if record.worker is not None else None
        outgrown = worker.memory_bytes if worker is not None else 0
        key = self._tasks.queue.key_for(record, outgrown)
        place = bigger_place(self._workers.values(), self._managers.values(), key) if outgrown > 0 else ""
        if not place:
            self._finish(record, replace(result, error_message=f"{result.error_message}; {not_retried(outgrown)}"))
            return
        self._tasks.stories.ran(record.task_id, record.worker or b"", record.attempts, result)
        self._cause = retried(record.worker or b"", outgrown, place)
        self._release_worker(record)
        record.attempts -= 1  # the retry budget is for lost workers
        record.outgrew_bytes = outgrown
        self._tasks.set_state(record, TaskState.QUEUED, self.now, self._cause)
        self._tasks.queue.push(record)

    def _requeue(self, record: TaskRecord) -> None:
        self._release_worker(record)
        record.attempts -= 1
        self._tasks.set_state(record, TaskState.QUEUED, self.now, ("{} (no retry spent)", self._cause))
        self._tasks.queue.push(record)

    def _fail_from_dependency(self, record: TaskRecord, failure: TaskResult) -> None:
        self._tasks.failed += 1
        # the node that failed first already failed everything downstream of it, this node included
        self._end(record, replace(failure, task_id=record.task_id), propagate=False)

    def _fail_unrunnable(self, record: TaskRecord, reason: str) -> None:
        self._tasks.failed += 1  # the reason is the transition's cause too (story_book.cause_of)
        self._end(record, TaskResult(record.task_id, ResultStatus.NO_WORKER, error_message=reason))

    # ------------------------------------------------------------ helpers

    def _learn_run_time(self, record: TaskRecord, result: TaskResult) -> float:
        """The worker finished a task now: how long it ran (for the monitor feed); a successful task's run time
        also goes into `run_times`. The run time is the worker's own measure when it profiled the task, else the
        time since it could start there: since its dispatch, or since the worker's previous result if that came
        later (a worker runs its tasks one at a time; the ones it holds meanwhile wait)."""
        worker = self._workers.get(record.worker) if record.worker is not None else None
        started = record.dispatched_at
        if worker is not None:
            if worker.last_finished_at > started:  # `max`, without the call: once per task
                started = worker.last_finished_at
            worker.last_finished_at = self.now
        seconds = result.profile.duration_seconds or self.now - started
        if result.status is _SUCCESS:
            self._tasks.run_times.observe(record.traits.function_name, self._tasks.queue.key(record), seconds)
        return seconds

    def _release_worker(self, record: TaskRecord) -> None:
        if record.worker is not None:
            worker = self._workers.get(record.worker)
            if worker is not None:
                worker.assigned.discard(record.task_id)
                if record.extras.reads_data:
                    worker.readers -= 1
                if worker.preemption_slots and self.preemption.released(
                    worker, record.task_id, self._tasks.queue.has_nested()
                ):
                    self._state.emit(SlotGone(worker))
                self._free.offer(worker)
            if record.extras.reads_data:  # also when its worker is gone: a dispatch elsewhere counts it afresh
                record.reads_data = False
        record.released()

    def _end(
        self,
        record: TaskRecord,
        answer: TaskResult | TaskCancelConfirm,
        propagate: bool = True,
        ran_on: bytes = b"",
        run_seconds: float = 0.0,
    ) -> None:
        """Remove the record; tell the client if it waits for this task; advance its graph. `ran_on`, `run_seconds`:
        the worker whose result `answer` is and how long the task held it (the monitor feed shows them). A task made
        again for its lost result (`rerun`) is answered to nobody: its client has its answer, and waits for the
        result's object."""
        if record.extras.rerun is not None:
            self._end_rerun(record, answer, ran_on, run_seconds)
            return
        if isinstance(answer, TaskResult):
            peak = answer.profile.peak_memory_bytes if ran_on else 0
            # `_value_`, the member's plain slot: `value` is a Python-level property, read once per task here
            self._tasks.remove(record, answer.status._value_, self.now, ran_on, run_seconds, peak, self._cause)
        else:
            self._tasks.remove(record, "canceled", self.now, cause=self._cause)
        graph_id = record.traits.graph_id  # its traits' and extras' slots, not the record's properties: once per task
        graph = self._graphs.get(graph_id) if graph_id else None
        if graph is None and self._jobs.holds(record.task_id):
            admitted, followers = self._jobs.answered(record.task_id, answer, self.now)
            if admitted.deleted is not None:  # over its owner's storage quota: refused, its object freed
                self._effects.append(DeleteObjects((admitted.deleted,)))
            for follower in sorted(followers):
                self._state.answer(follower, admitted.answer)
            return
        if graph is None:
            if not record.extras.client_gone:
                self._state.answer(PeerID(record.client_id), answer)
            return
        self._end_graph_node(graph, record, answer, propagate)

    def _end_rerun(
        self, record: TaskRecord, answer: TaskResult | TaskCancelConfirm, ran_on: bytes, run_seconds: float
    ) -> None:
        if isinstance(answer, TaskResult):
            if answer.status is not ResultStatus.SUCCESS:
                logger.warning(
                    "task %s, run again to make its lost result, ended %s: %s", record.task_id.hex(),
                    answer.status.value, answer.error_message or "(no reason given)",
                )  # fmt: skip
            self._tasks.remove(record, answer.status._value_, self.now, ran_on, run_seconds, 0, self._cause)
        else:
            self._tasks.remove(record, "canceled", self.now, cause=self._cause)

    def _end_graph_node(
        self, graph: GraphRecord, record: TaskRecord, answer: TaskResult | TaskCancelConfirm, propagate: bool
    ) -> None:
        node = record.task_id
        released: list[TaskInput] = []
        if isinstance(answer, TaskResult) and answer.status is ResultStatus.SUCCESS:
            ready, released = self._graphs.succeeded(graph, node, answer)
            for user in ready:
                self.apply(user, TaskEvent.READY)
        elif isinstance(answer, TaskResult) and propagate:
            for user in self._graphs.downstream(graph, node):
                self.apply(user, TaskEvent.DEPENDENCY_FAILED, failure=answer)
        if node in graph.targets and not record.client_gone:
            self._state.answer(PeerID(record.client_id), answer)
        released.extend(self._graphs.ended(graph, node))
        garbage = tuple(
            ObjectID(given.data)
            for given in released
            if given.kind is PayloadKind.OBJECT_ID and given.task_id not in graph.targets
        )
        if garbage:
            self._effects.append(DeleteObjects(garbage))

    def _send(
        self, peer: PeerID, message: Task | TaskResult | TaskCancel | TaskCancelConfirm | TaskReturn | ProcessorKill
    ) -> None:
        self._effects.append(new_send(peer, message))

    def step(self, step: TaskStep) -> None:
        """A lifecycle event another registry asks for (`follow_ups.TaskStep`), with only the details it gives."""
        if step.result is not None:
            self.apply(step.task_id, step.event, result=step.result)
        elif step.reason:
            self.apply(step.task_id, step.event, reason=step.reason)
        else:
            self.apply(step.task_id, step.event)


_T = TypeVar("_T")


def _detail(details: dict[str, object], name: str, kind: type[_T]) -> _T:
    """A detail the outcome needs; its absence is a bug in the caller of `apply`, so it raises."""
    value = details.get(name)
    if not isinstance(value, kind):
        raise TypeError(f"this outcome needs a {name} ({kind.__name__}) with the event, got {value!r}")
    return value
