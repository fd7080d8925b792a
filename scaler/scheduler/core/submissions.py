"""Submissions: what a client sends about its work (tasks, graphs, cancels) on its way into the lifecycle.

A task or graph must carry the id of the connection that sends it. A returning client's tasks are held back until
the workers have re-registered after a restart (`reattachment.py`), and a task a worker still holds from before the
restart is adopted by it rather than run again, but for a stream, which runs again (its worker is told to stop it).
A streaming task's credit goes to the processor that runs it. A cancel of a job's task by a client following the job is
made as its submitter would make it (`jobs.py`). Under `allocate=even_load` the first task or graph node asking
for capabilities is logged once per scheduler: they are ignored there. Pure: time is the core's `now`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scaler.policy.capability import format_capabilities
from scaler.policy.content import Allocation
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID

if TYPE_CHECKING:
    from scaler.scheduler.core.scheduler_core import SchedulerCore

logger = logging.getLogger(__name__)


class Submissions:
    def __init__(self, core: SchedulerCore) -> None:
        self._core = core
        #: capabilities are ignored (`allocate=even_load`), not yet said: the next task asking for some says so
        self._warn_ignored_capabilities = core.settings.allocate is Allocation.EVEN_LOAD

    def on_task(self, peer: PeerID, task: m.Task) -> None:
        core = self._core
        if bytes(task.client_id) != bytes(peer):
            reason = "refused: a task's client id must be the id of the connection that sends it"
            core.send(peer, m.TaskResult(task.task_id, m.ResultStatus.ERROR, error_message=reason))
            return
        if self._warn_ignored_capabilities and task.capabilities:
            self._ignored(task.capabilities)
        client = core.clients[peer]
        if core.reattachment.should_park(client.returning, core.now):
            core.reattachment.park(ClientID(peer), task)  # until the workers have re-registered
            return
        self._submit(ClientID(peer), task)

    def _submit(self, client: ClientID, task: m.Task) -> None:
        """A task a worker still holds from before a restart is adopted by it (or answered with the result it sent
        meanwhile); any other task goes to the lifecycle (which also refuses a duplicate)."""
        core = self._core
        returning = core.clients.get(PeerID(client))
        if returning is not None and returning.answers.has_answer_for(task.task_id):
            return  # a copy sent again after a resume that crossed its answer (client_answers.py): not run twice
        if task.actor_id:
            core.actors.call(client, task)  # an actor's call never enters the task table (core/actors.py)
            return
        if task.actor is not None and not core.actors.start(client, task):
            return  # refused (its name is taken)
        if task.task_id not in core.tasks.records:
            adoption = core.reattachment.take(task.task_id)
            held_at = core.link_sessions.held_at(adoption.worker, task.task_id) if adoption is not None else None
            if adoption is not None and task.stream_credit:
                # a stream runs again from its start (its client skips the values it has): values its processor sent
                # while no scheduler was there are lost, and so would be the end of a stream adopted there
                if held_at is not None:
                    core.send(held_at, m.TaskCancel((task.task_id,)))
            elif adoption is not None and core.lifecycle.adopt(task, adoption.worker, adoption.result):
                if adoption.result is None:
                    core.link_sessions.adopted(task.task_id, adoption.worker)  # on the link that named it
                    if task.actor is not None:
                        core.actors.adopted(task.task_id, adoption.worker)  # built already: its calls go there
                return
        cause = "submitted again by its client after a scheduler restart" if returning and returning.returning else ""
        core.lifecycle.submit(client, task, cause)

    def release_parked(self) -> None:
        """Tasks held back for the workers to re-register after a restart go in once their wait is over."""
        core = self._core
        for client_id, task in core.reattachment.release(core.now):
            if PeerID(client_id) in core.clients:
                self._submit(client_id, task)

    def on_graph(self, peer: PeerID, graph: m.GraphTask) -> None:
        core = self._core
        if bytes(graph.client_id) != bytes(peer) or any(bytes(node.client_id) != bytes(peer) for node in graph.nodes):
            reason = "refused: a graph's client id must be the id of the connection that sends it"
            for target in graph.targets:
                core.send(peer, m.TaskResult(target, m.ResultStatus.ERROR, error_message=reason))
            return
        if self._warn_ignored_capabilities:
            asking = next((node.capabilities for node in graph.nodes if node.capabilities), ())
            if asking:
                self._ignored(asking)
        core.lifecycle.submit_graph(ClientID(peer), graph)

    def _ignored(self, capabilities: m.Capabilities) -> None:
        """The first task asking for capabilities under `allocate=even_load`: logged once, as they are not honoured."""
        self._warn_ignored_capabilities = False
        logger.warning(
            "a task asks for the capabilities %s, which allocate=even_load ignores: it may run on a worker without "
            "them (and so may later ones; this is said once); allocate=capability in --policy-content honours them",
            format_capabilities(capabilities),
        )

    def on_stream_credit(self, peer: PeerID, credit: m.StreamCredit) -> None:
        """A streaming task's client grants it more values: to the processor that runs it, on its link (a task not
        dispatched yet starts with its own credit, and its client grants none before the first value)."""
        record = self._core.tasks.get(credit.task_id)
        if record is not None and bytes(record.client_id) == bytes(peer) and record.link is not None:
            self._core.send(record.link, credit)

    def on_cancel(self, peer: PeerID, cancel: m.TaskCancel) -> None:
        core = self._core
        of_jobs = core.jobs.followed_by(peer, cancel.task_ids)
        for submitter, task_ids in of_jobs.items():  # a follower cancels a job's tasks as its submitter would
            core.lifecycle.cancel_by_client(submitter, tuple(task_ids), cancel.queued_only)
        taken = {task_id for task_ids in of_jobs.values() for task_id in task_ids}
        rest = tuple(task_id for task_id in cancel.task_ids if task_id not in taken)
        if rest:
            core.lifecycle.cancel_by_client(ClientID(peer), rest, cancel.queued_only)
