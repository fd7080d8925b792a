"""Job requests: a client opening or attaching to a job, a submitter leaving its jobs running, a job expiring.

The jobs themselves (records, kept answers, followers, expiry times) are `jobs.py`'s `JobTable`; this module
answers the clients' requests from it and decides what a departed submitter leaves behind: its share, quota and
objects stay while one of its jobs runs on or keeps results, and its objects are deleted when the last one
expires. Pure: time is the core's `now`.
"""

from __future__ import annotations

import logging

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, short
from scaler.scheduler.core.core_state import CoreState
from scaler.scheduler.core.effects import DeleteOwnerObjects
from scaler.scheduler.core.jobs import JobRecord

logger = logging.getLogger(__name__)


class JobRequests:
    def __init__(self, state: CoreState) -> None:
        self._state = state
        #: departed clients whose objects wait for their jobs to expire (a job's tasks and results need them)
        self._kept_for_jobs: set[ClientID] = set()

    def on_open(self, peer: PeerID, request: m.JobOpen) -> None:
        state = self._state
        client = state.clients[peer]
        reason = state.jobs.open(
            request.name, client.owner, ClientID(peer), request.task_ids, state.now, client.name,
            client.max_job_result_bytes,
        )  # fmt: skip
        if reason is None:
            logger.info("job %r opened by client %s: %d task(s)", request.name, short(peer), len(request.task_ids))
        state.send(peer, m.JobReply(request.name, reason is None, reason or "", request.task_ids, "running"))

    def on_attach(self, peer: PeerID, request: m.JobAttach) -> None:
        state = self._state
        found = state.jobs.find(request.name, state.clients[peer].owner)
        if not isinstance(found, JobRecord):
            state.send(peer, m.JobReply(request.name, False, found))
            return
        state.send(peer, m.JobReply(found.name, True, "", found.task_ids, found.state, bytes(found.submitter)))
        if request.follow:
            for answer in state.jobs.follow(found, peer):
                state.answer(peer, answer)

    def expire(self) -> None:
        state = self._state
        for job in state.jobs.due(state.now):
            logger.info("job %r expired: its results are freed", job.name)
            submitter = job.submitter
            if submitter in self._kept_for_jobs and not state.jobs.has_live_jobs(submitter):
                self._kept_for_jobs.discard(submitter)
                state.effects.append(DeleteOwnerObjects(submitter))

    def client_left(self, peer: PeerID) -> bool:
        """A client is gone (after the lifecycle and the task table forgot it): it stops following jobs, the tasks
        of its jobs it never sent count as cancelled, and True says its jobs run on, so what it owns stays."""
        state = self._state
        state.jobs.peer_gone(peer)
        lost = state.jobs.never_sent(ClientID(peer), lambda task_id: task_id in state.tasks.records, state.now)
        if lost:
            logger.warning(
                "client %s left before sending %d task(s) of its jobs: they count as cancelled", short(peer), len(lost)
            )
        if state.jobs.has_live_jobs(ClientID(peer)):
            self._kept_for_jobs.add(ClientID(peer))
            return True
        return False

    def kept_owners(self) -> list[ClientID]:
        """Departed submitters whose objects are kept for their jobs, in a stable order."""
        return sorted(self._kept_for_jobs)
