"""Job requests: a client opening or attaching to a job, a submitter leaving its jobs running, a job expiring.

The jobs themselves (records, kept answers, followers, expiry times) are `jobs.py`'s `JobTable`; this module
answers the clients' requests from it and decides what a departed submitter leaves behind: its share, quota and
objects stay while one of its jobs runs on or keeps results, and its objects are deleted when the last one
expires. Pure: time is the core's `now`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, short
from scaler.scheduler.core.effects import DeleteOwnerObjects
from scaler.scheduler.core.jobs import JobRecord

if TYPE_CHECKING:
    from scaler.scheduler.core.scheduler_core import SchedulerCore

logger = logging.getLogger(__name__)


class JobRequests:
    def __init__(self, core: SchedulerCore) -> None:
        self._core = core
        #: departed clients whose objects wait for their jobs to expire (a job's tasks and results need them)
        self._kept_for_jobs: set[ClientID] = set()

    def on_open(self, peer: PeerID, request: m.JobOpen) -> None:
        core = self._core
        client = core.clients[peer]
        reason = core.jobs.open(
            request.name, client.owner, ClientID(peer), request.task_ids, core.now, client.name,
            client.max_job_result_bytes,
        )  # fmt: skip
        if reason is None:
            logger.info("job %r opened by client %s: %d task(s)", request.name, short(peer), len(request.task_ids))
        core.send(peer, m.JobReply(request.name, reason is None, reason or "", request.task_ids, "running"))

    def on_attach(self, peer: PeerID, request: m.JobAttach) -> None:
        core = self._core
        found = core.jobs.find(request.name, core.clients[peer].owner)
        if not isinstance(found, JobRecord):
            core.send(peer, m.JobReply(request.name, False, found))
            return
        core.send(peer, m.JobReply(found.name, True, "", found.task_ids, found.state, bytes(found.submitter)))
        if request.follow:
            for answer in core.jobs.follow(found, peer):
                core.client_sessions.answer(peer, answer)

    def expire(self) -> None:
        core = self._core
        for job in core.jobs.due(core.now):
            logger.info("job %r expired: its results are freed", job.name)
            submitter = job.submitter
            if submitter in self._kept_for_jobs and not core.jobs.has_live_jobs(submitter):
                self._kept_for_jobs.discard(submitter)
                core.effects.append(DeleteOwnerObjects(submitter))

    def client_left(self, peer: PeerID) -> bool:
        """A client is gone (after the lifecycle and the task table forgot it): it stops following jobs, the tasks
        of its jobs it never sent count as cancelled, and True says its jobs run on, so what it owns stays."""
        core = self._core
        core.jobs.peer_gone(peer)
        lost = core.jobs.never_sent(ClientID(peer), lambda task_id: task_id in core.tasks.records, core.now)
        if lost:
            logger.warning(
                "client %s left before sending %d task(s) of its jobs: they count as cancelled", short(peer), len(lost)
            )
        if core.jobs.has_live_jobs(ClientID(peer)):
            self._kept_for_jobs.add(ClientID(peer))
            return True
        return False

    def kept_owners(self) -> list[ClientID]:
        """Departed submitters whose objects are kept for their jobs, in a stable order."""
        return sorted(self._kept_for_jobs)
