"""Which registry handles what, in one place: every message a peer may send (one table per role), every follow-up a
registry emits (`follow_ups.py`, one table), and the compositions where one fact concerns several registries.

A registry works on its own records and says what should follow; only this module and `scheduler_core.py` name two
registries together. The compositions, in the order their steps happen:

- a Hello: refused as incompatible or for its role (`Registration.refusal`), else registered (a processor's link by
  `LinkSessions.register`, any other peer by `Registration.register`), then answered (`Registration.reply`);
- a client's task: checked (`Submissions.accepts`), held back while a returning client's workers re-register
  (`Reattachment`), then, unless its answer was sent already, an actor's call or start (`Actors`), adopted by the worker
  that still holds it after a restart (`Reattachment.take`, `TaskLifecycle.adopt`, then its link and its actor), or
  submitted (`TaskLifecycle.submit`);
- a result on a processor's link: read on the link (rule 1 of `link_sessions.py`), an actor's call's result to its
  caller, or ended on the link, then as a task (`TaskEnded`: an actor's start, a task from before a restart, or the
  lifecycle's), then the processors its worker keeps;
- a client gone (`ClientLeft`): its calls, its tasks, its held-back tasks, its counts, its jobs (whose tasks may keep
  its share and objects), its queue and its objects (`ObjectRetention`);
- a worker gone (`WorkerLeft`): what it held from before a restart, its actors, its tasks.

Pure, as the registries are: time is the core's `now`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, short
from scaler.scheduler.core.actors import Actors
from scaler.scheduler.core.client_sessions import ClientSessions
from scaler.scheduler.core.core_state import CoreState
from scaler.scheduler.core.effects import DeleteOwnerObjects, StopScheduler
from scaler.scheduler.core.follow_ups import (
    ActorReadyAt,
    Cancel,
    CancelConfirmed,
    ClientBack,
    ClientHello,
    ClientLeft,
    ClusterShutdown,
    Drain,
    FollowUp,
    GivenBack,
    GraphSubmitted,
    HeartbeatAnswered,
    HeldAgain,
    HeldForgotten,
    HeldFromBefore,
    KillLinkProcessor,
    ManagerHello,
    NoticeOver,
    ProcessorGone,
    Reclaimed,
    RoomAt,
    ScalingDecided,
    SlotGone,
    StopOnLink,
    Surplus,
    TakeBack,
    TaskEnded,
    TaskStep,
    WorkerJoined,
    WorkerLeft,
)
from scaler.scheduler.core.job_requests import JobRequests
from scaler.scheduler.core.link_sessions import LinkSessions
from scaler.scheduler.core.manager_sessions import ManagerSessions
from scaler.scheduler.core.monitor_feed import MonitorFeed
from scaler.scheduler.core.object_retention import ObjectRetention
from scaler.scheduler.core.reattachment import Reattachment
from scaler.scheduler.core.registration import Registration
from scaler.scheduler.core.submissions import Submissions
from scaler.scheduler.core.task_lifecycle import TaskLifecycle
from scaler.scheduler.core.worker_sessions import WorkerSessions

logger = logging.getLogger(__name__)

#: message type -> the handler of a peer's message of that type
Handlers = dict[type, Callable[[PeerID, Any], None]]


@dataclass(frozen=True, slots=True)
class Registries:
    """The registries the routes lead to, each over its own records (`CoreState` holds the records)."""

    registration: Registration
    client_sessions: ClientSessions
    submissions: Submissions
    job_requests: JobRequests
    actors: Actors
    worker_sessions: WorkerSessions
    link_sessions: LinkSessions
    manager_sessions: ManagerSessions
    lifecycle: TaskLifecycle
    reattachment: Reattachment
    retention: ObjectRetention
    feed: MonitorFeed


class Routing:
    def __init__(self, state: CoreState, registries: Registries) -> None:
        self._state = state
        self._r = registries
        self.client_handlers, self.worker_handlers, self.manager_handlers, self.processor_handlers = self._wire()
        self._follow_ups = self._follow_up_table()
        state.emit = self.carry
        state.answer = registries.client_sessions.answer

    def carry(self, follow_up: FollowUp) -> None:
        """Carry out what a registry says should follow, at once (`follow_ups.py`)."""
        self._follow_ups[type(follow_up)](follow_up)

    # ------------------------------------------------------------ the tables

    def _wire(self) -> tuple[Handlers, Handlers, Handlers, Handlers]:
        """Which handler takes which message, from a client, a worker, a manager and a worker's processor."""
        r = self._r
        clients, submissions, jobs, actors = r.client_sessions, r.submissions, r.job_requests, r.actors
        workers, links, managers = r.worker_sessions, r.link_sessions, r.manager_sessions
        client_handlers: Handlers = {
            m.Heartbeat: clients.on_heartbeat,
            m.Task: self._on_task,
            m.GraphTask: submissions.on_graph,
            m.TaskCancel: submissions.on_cancel,
            m.ClientDisconnect: clients.on_disconnect,
            m.TaskStoryRequest: clients.on_story_request,
            m.JobOpen: jobs.on_open,
            m.JobAttach: jobs.on_attach,
            m.StreamCredit: submissions.on_stream_credit,
            m.ActorStop: lambda peer, stop: actors.stop(stop.actor_id),
            m.ActorLookup: actors.lookup,
            m.ClientResume: lambda peer, resume: clients.on_resume(peer, resume, actors.live_calls()),
        }
        worker_handlers: Handlers = {
            m.Heartbeat: workers.on_heartbeat,
            m.WorkerLeaving: workers.on_leaving,
            m.WorkerCapacity: workers.on_capacity,
            m.ProcessorExited: links.on_exited,
        }
        manager_handlers: Handlers = {
            m.Heartbeat: managers.on_heartbeat,
            m.UnitsReclaimed: managers.on_units_reclaimed,
        }
        processor_handlers: Handlers = {
            m.TaskResult: self._on_link_result,
            m.TaskLog: self._on_link_log,
            m.StreamItem: self._on_link_log,
            m.ProcessorBlocked: links.on_parked,
            m.ProcessorResumeRequest: links.on_resumed,
            m.TaskReturn: links.on_returned,
            m.TaskCancelConfirm: links.on_cancel_confirm,
            m.ProcessorWriting: links.on_writing,
            m.ActorReady: links.on_actor_ready,
        }
        return client_handlers, worker_handlers, manager_handlers, processor_handlers

    def _follow_up_table(self) -> dict[type, Callable[[Any], None]]:
        """Which registry (or composition) carries out each follow-up."""
        r, state = self._r, self._state
        lifecycle, actors, links = r.lifecycle, r.actors, r.link_sessions
        return {
            ClientHello: self._client_hello,
            ClientBack: lambda f: r.client_sessions.back(f.peer, f.resuming),
            ClientLeft: self._client_left,
            ClusterShutdown: self._shut_down,
            TaskStep: lifecycle.step,
            TaskEnded: lambda f: self.task_ended(f.worker, f.result),
            RoomAt: lambda f: lifecycle.worker_has_room(f.worker),
            TakeBack: lambda f: lifecycle.take_back(f.worker, f.task_ids),
            KillLinkProcessor: lambda f: lifecycle.kill_processor(f.link, f.reason),
            StopOnLink: lambda f: lifecycle.stop_on_link(f.link, f.task_id, f.reason),
            HeldAgain: lambda f: lifecycle.held_again(f.link, f.task_id, parked=False),
            CancelConfirmed: lambda f: lifecycle.cancel_confirmed_by(f.worker, f.confirm),
            GivenBack: lambda f: lifecycle.returned_by(f.worker, f.task_ids),
            Drain: lambda f: lifecycle.drain(f.worker),
            NoticeOver: lambda f: lifecycle.notice_over(f.worker),
            Cancel: lambda f: lifecycle.cancel_by_client(f.client, f.task_ids, f.queued_only),
            GraphSubmitted: lambda f: lifecycle.submit_graph(f.client, f.graph),
            WorkerJoined: self._worker_joined,
            WorkerLeft: self._worker_left,
            Reclaimed: lambda f: r.worker_sessions.reclaimed(f.worker, f.until),
            HeartbeatAnswered: lambda f: links.echo(f.worker),
            Surplus: self._retire,
            SlotGone: lambda f: links.keep_processors(f.worker),
            HeldFromBefore: lambda f: r.reattachment.worker_holds(f.worker, f.task_ids, state.now),
            HeldForgotten: lambda f: r.reattachment.forget_held(f.task_ids),
            ActorReadyAt: lambda f: actors.ready(f.worker, f.ready, f.link),
            ProcessorGone: lambda f: actors.processor_gone(f.processor, f.reason),
            ManagerHello: lambda f: r.manager_sessions.send_target(f.manager),
            ScalingDecided: lambda f: r.feed.decided(f.decision),
        }

    # ------------------------------------------------------------ peers come and go

    def on_hello(self, peer: PeerID, hello: m.Hello) -> None:
        registration = self._r.registration
        reason = registration.refusal(peer, hello)
        if reason is None:
            info = hello.info
            if isinstance(info, m.ProcessorInfo):
                reason = self._r.link_sessions.register(peer, info)
            else:
                reason = registration.register(peer, hello)
        registration.reply(peer, hello, reason)

    def peer_lost(self, peer: PeerID, reason: str, final: bool) -> None:
        """The transport says the peer is gone (`events.PeerLost`)."""
        state, r = self._state, self._r
        if peer in state.clients:
            r.client_sessions.lost(peer, reason, final)
        elif peer in state.workers:
            r.worker_sessions.drop(peer, f"connection lost ({reason})", graceful=False)
        elif peer in state.managers:
            manager = state.managers.pop(peer)
            logger.info("worker manager %r connection closed (%s)", manager.manager_id, reason)
        elif peer in state.processors:
            r.link_sessions.drop(peer)

    def _client_hello(self, hello: ClientHello) -> None:
        sessions, record = self._r.client_sessions, hello.record
        if hello.new:
            sessions.joined(record, hello.known_instance)
        elif record.is_away:  # it says hello again while its work waits for it
            sessions.back(record.peer, resuming=False)
        if self._r.retention.client_back(ClientID(record.peer)):  # it had not left for good: its objects stay
            logger.info("client %s is back within its retention time; its objects are kept", short(record.peer))

    def _client_left(self, left: ClientLeft) -> None:
        state, r, client = self._state, self._r, left.client
        r.actors.client_gone(client)
        r.lifecycle.client_gone(client)
        r.reattachment.forget_client(client)
        state.tasks.forget_client(client)
        if r.job_requests.client_left(PeerID(client)):  # its jobs run on: its share, quota and objects stay for them
            return
        state.tasks.queue.forget(client)
        if r.retention.client_left(client, state.now):
            state.effects.append(DeleteOwnerObjects(client))

    def _shut_down(self, shutdown: ClusterShutdown) -> None:
        state, r = self._state, self._r
        for other in list(state.workers) + list(state.managers):
            state.send(other, m.Shutdown("the cluster is shutting down at a client's request"))
        state.effects.extend(DeleteOwnerObjects(owner) for owner in r.retention.all_kept())  # nobody comes back
        state.effects.extend(DeleteOwnerObjects(owner) for owner in r.job_requests.kept_owners())
        state.effects.append(StopScheduler(shutdown.reason))

    def _worker_joined(self, joined: WorkerJoined) -> None:
        self._r.worker_sessions.registered(joined.worker)
        self._r.lifecycle.worker_has_room(joined.worker.peer)
        self._state.object_hosts.joined(joined.worker)

    def _worker_left(self, left: WorkerLeft) -> None:
        self._r.reattachment.worker_gone(left.worker.peer)
        self._r.actors.worker_gone(left.worker, left.reason)
        self._r.lifecycle.worker_gone(left.worker, left.reason, left.graceful)

    # ------------------------------------------------------------ a client's tasks

    def _on_task(self, peer: PeerID, task: m.Task) -> None:
        r = self._r
        if not r.submissions.accepts(peer, task):
            return
        client = self._state.clients[peer]
        if client.returning and r.reattachment.should_park(True, self._state.now):
            r.reattachment.park(ClientID(peer), task)  # until the workers have re-registered
            return
        self.submit(ClientID(peer), task)

    def submit(self, client: ClientID, task: m.Task) -> None:
        """A task a worker still holds from before a restart is adopted by it (or answered with the result it sent
        meanwhile); any other task goes to the lifecycle (which also refuses a duplicate)."""
        state, r = self._state, self._r
        returning = state.clients.get(PeerID(client))
        if returning is not None and returning.answers.has_answer_for(task.task_id):
            return  # a copy sent again after a resume that crossed its answer (client_answers.py): not run twice
        if task.actor_id:
            r.actors.call(client, task)  # an actor's call never enters the task table (core/actors.py)
            return
        if task.actor is not None and not r.actors.start(client, task):
            return  # refused (its name is taken)
        if task.task_id not in state.tasks.records:
            adoption = r.reattachment.take(task.task_id)
            held_at = r.link_sessions.held_at(adoption.worker, task.task_id) if adoption is not None else None
            if adoption is not None and task.stream_credit:
                # a stream runs again from its start (its client skips the values it has): values its processor sent
                # while no scheduler was there are lost, and so would be the end of a stream adopted there
                if held_at is not None:
                    state.send(held_at, m.TaskCancel((task.task_id,)))
            elif adoption is not None and r.lifecycle.adopt(task, adoption.worker, adoption.result):
                if adoption.result is None:
                    r.link_sessions.adopted(task.task_id, adoption.worker)  # on the link that named it
                    if task.actor is not None:
                        r.actors.adopted(task.task_id, adoption.worker)  # built already: its calls go there
                return
        cause = "submitted again by its client after a scheduler restart" if returning and returning.returning else ""
        r.lifecycle.submit(client, task, cause)

    def release_parked(self) -> None:
        """Tasks held back for the workers to re-register after a restart go in once their wait is over."""
        state = self._state
        for client_id, task in self._r.reattachment.release(state.now):
            if PeerID(client_id) in state.clients:
                self.submit(client_id, task)

    # ------------------------------------------------------------ what a processor's link brings

    def _on_link_result(self, peer: PeerID, result: m.TaskResult) -> None:
        """On the path of every task."""
        r = self._r
        links, actors = r.link_sessions, r.actors
        if result.task_id in actors.calls:
            actors.call_result(links.result_read(peer, result).worker, result)
            return
        worker, changed = links.on_result(peer, result)
        self.task_ended(worker.peer, result)
        if changed:
            links.keep_processors(worker)

    def _on_link_log(self, peer: PeerID, log: m.TaskLog | m.StreamItem) -> None:
        """Output a task printed, or a value a streaming task yielded: an actor's call's to its caller, else to the
        task's client."""
        worker = self._state.processors[peer].worker
        if not self._r.actors.call_log(worker, log):
            self._r.link_sessions.on_log(worker, log)

    def task_ended(self, worker: PeerID, result: m.TaskResult) -> None:
        """A task's result (its processor's, or one made here): an actor's start first, then a task from before a
        restart, then the lifecycle's. A plain task's (on the path of every task) is neither: two lookups here tell,
        instead of a call to each."""
        r = self._r
        task_id = result.task_id
        if task_id in r.actors.actors and r.actors.start_result(worker, result):
            return  # its actor was lost: it starts again, or died (core/actors.py)
        if task_id not in self._state.tasks.records and r.reattachment.result_for_held(worker, result, self._state.now):
            return  # a task from before a restart: its client gets the result when it submits the task again
        r.lifecycle.result_from(worker, result)

    def _retire(self, surplus: Surplus) -> None:
        """Of a worker's idle links, up to `count` that serve no actor's call are killed (link_sessions.py rule 2)."""
        count = surplus.count
        for link in surplus.idle:
            if count <= 0:
                break
            if not self._r.actors.calls_at(link.peer):
                self._r.lifecycle.kill_processor(link, "not needed any more")
                count -= 1
