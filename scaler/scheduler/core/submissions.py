"""Submissions: what a client sends about its work (tasks, graphs, cancels), checked on its way into the lifecycle.

A task or graph must carry the id of the connection that sends it. Under `allocate=even_load` the first task or graph
node asking for capabilities is logged once per scheduler: they are ignored there. A streaming task's credit goes to
the processor that runs it. A cancel of a job's task by a client following the job is made as its submitter would make
it (`jobs.py`). Where an accepted task goes (held back for a returning client, an actor's call or start, adopted by the
worker that still holds it after a restart, or the lifecycle) is the core's composition (`routing.py`). Pure: time is
the core's `now`.
"""

from __future__ import annotations

import logging

from scaler.policy.capability import format_capabilities
from scaler.policy.content import Allocation
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID
from scaler.scheduler.core.core_state import CoreState
from scaler.scheduler.core.follow_ups import Cancel, GraphSubmitted

logger = logging.getLogger(__name__)


class Submissions:
    def __init__(self, state: CoreState) -> None:
        self._state = state
        #: capabilities are ignored (`allocate=even_load`), not yet said: the next task asking for some says so
        self._warn_ignored_capabilities = state.settings.allocate is Allocation.EVEN_LOAD

    def accepts(self, peer: PeerID, task: m.Task) -> bool:
        """Whether a client's task goes on into the scheduler (a refused one is answered here)."""
        if bytes(task.client_id) != bytes(peer):
            reason = "refused: a task's client id must be the id of the connection that sends it"
            self._state.send(peer, m.TaskResult(task.task_id, m.ResultStatus.ERROR, error_message=reason))
            return False
        if self._warn_ignored_capabilities and task.capabilities:
            self._ignored(task.capabilities)
        return True

    def on_graph(self, peer: PeerID, graph: m.GraphTask) -> None:
        state = self._state
        if bytes(graph.client_id) != bytes(peer) or any(bytes(node.client_id) != bytes(peer) for node in graph.nodes):
            reason = "refused: a graph's client id must be the id of the connection that sends it"
            for target in graph.targets:
                state.send(peer, m.TaskResult(target, m.ResultStatus.ERROR, error_message=reason))
            return
        if self._warn_ignored_capabilities:
            asking = next((node.capabilities for node in graph.nodes if node.capabilities), ())
            if asking:
                self._ignored(asking)
        state.emit(GraphSubmitted(graph, ClientID(peer)))

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
        record = self._state.tasks.get(credit.task_id)
        if record is not None and bytes(record.client_id) == bytes(peer) and record.link is not None:
            self._state.send(record.link, credit)

    def on_cancel(self, peer: PeerID, cancel: m.TaskCancel) -> None:
        state = self._state
        of_jobs = state.jobs.followed_by(peer, cancel.task_ids)
        for submitter, task_ids in of_jobs.items():  # a follower cancels a job's tasks as its submitter would
            state.emit(Cancel(submitter, tuple(task_ids), cancel.queued_only))
        taken = {task_id for task_ids in of_jobs.values() for task_id in task_ids}
        rest = tuple(task_id for task_id in cancel.task_ids if task_id not in taken)
        if rest:
            state.emit(Cancel(ClientID(peer), rest, cancel.queued_only))
