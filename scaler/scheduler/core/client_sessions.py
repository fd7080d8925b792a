"""Client sessions: a registered client's heartbeats, story questions, disconnect (or cluster shutdown) and loss.

A client that goes (disconnects, falls silent, loses its connection) has its tasks cancelled and its objects
deleted, except what its jobs still need (`job_requests.py`) and what the object retention keeps for a client that
may come back (`object_retention.py`). A client may shut the whole cluster down unless the scheduler is protected.
Pure: time is the core's `now`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, short
from scaler.scheduler.core.effects import DeleteOwnerObjects, StopScheduler

if TYPE_CHECKING:
    from scaler.scheduler.core.scheduler_core import SchedulerCore

logger = logging.getLogger(__name__)


class ClientSessions:
    def __init__(self, core: SchedulerCore) -> None:
        self._core = core

    def on_heartbeat(self, peer: PeerID, heartbeat: m.Heartbeat) -> None:
        core = self._core
        core.send(peer, m.HeartbeatEcho(core.settings.object_storage_address, len(core.workers)))

    def on_story_request(self, peer: PeerID, request: m.TaskStoryRequest) -> None:
        """A client asks for a task's story (`ScalerFuture.story()`); any client may ask about any task id."""
        self._core.send(peer, self._core.tasks.stories.story(request.task_id))

    def on_disconnect(self, peer: PeerID, request: m.ClientDisconnect) -> None:
        core = self._core
        if not request.shutdown_cluster:
            self.drop(peer, "disconnected")
            return
        if core.settings.protected:
            reason = "the scheduler is protected (started with --protected): clients cannot shut it down"
            core.send(peer, m.ShutdownReply(False, reason))
            return
        logger.info("client %s asked the cluster to shut down", short(peer))
        core.send(peer, m.ShutdownReply(True))
        self.drop(peer, "shut the cluster down")
        for other in list(core.workers) + list(core.managers):
            core.send(other, m.Shutdown("the cluster is shutting down at a client's request"))
        core.effects.extend(DeleteOwnerObjects(owner) for owner in core.retention.all_kept())  # nobody comes back
        core.effects.extend(DeleteOwnerObjects(owner) for owner in core.job_requests.kept_owners())
        core.effects.append(StopScheduler("a client asked the cluster to shut down"))

    def drop_silent(self) -> None:
        core, timeout = self._core, self._core.settings.client_timeout_seconds
        for peer, client in list(core.clients.items()):
            if core.now - client.last_seen > timeout:
                self.drop(peer, f"was silent for more than {timeout:g} s")

    def drop(self, peer: PeerID, reason: str) -> None:
        core = self._core
        if core.clients.pop(peer, None) is None:
            return
        owned = core.tasks.by_client.get(ClientID(peer), ())
        in_jobs = sum(1 for task_id in owned if core.jobs.holds(task_id))
        unfinished = len(owned) - in_jobs
        # an ordinary exit is not news; a client that leaves work behind is
        (logger.warning if unfinished else logger.debug)(
            "client %s %s; its tasks are cancelled (%d unfinished) and its objects deleted",
            short(peer),
            reason,
            unfinished,
        )
        if in_jobs:
            logger.info("client %s left %d task(s) of its jobs running; their results are kept", short(peer), in_jobs)
        core.actors.client_gone(ClientID(peer))
        core.lifecycle.client_gone(ClientID(peer))
        core.reattachment.forget_client(ClientID(peer))
        core.tasks.forget_client(ClientID(peer))
        if core.job_requests.client_left(peer):  # its jobs run on: its share, quota and objects stay for them
            return
        core.tasks.queue.forget(ClientID(peer))
        if core.retention.client_left(ClientID(peer), core.now):
            core.effects.append(DeleteOwnerObjects(ClientID(peer)))
