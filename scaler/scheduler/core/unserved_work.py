"""Queued work that nothing can run is said within seconds, and failed when it never can (Ray's users ask the same:
ray#18835).

Rules:
1. A queue key (a capability set) with queued tasks is *unserved* when no connected worker can run its tasks and
   no connected worker manager declares capabilities that cover them. It is judged at each tick, and only after
   it has been unserved without a break for a while (workers may still be connecting, a manager may be about to
   register): the clock starts when a tick first finds it unserved, so a scheduler that just started or restarted
   gives its peers the same time to come (re)connect.
2. After `warn_seconds` (a few seconds) the clients whose tasks wait there are told, once each per episode, with a
   line on the stderr stream of one of their waiting tasks (a TaskLog, which every client prints as it comes,
   `[task 9f3a:0] scaler: ...`), and the scheduler logs it once: what is missing, how many tasks wait, what to
   start.
3. When nothing at all is connected (no worker, no manager) that is all: workers may still come, and the tasks run
   when one does. When the cluster has workers or managers but none for this key, its queued tasks fail after
   `grace_seconds` (`CoreSettings.unrunnable_grace_seconds`) with NoWorkerError naming the capabilities (the task
   lifecycle's UNRUNNABLE event); tasks queued later for the same key fail at the next tick, until something that
   can run them connects. `grace_seconds` <= 0: they never fail, they wait as they always did.
4. An episode ends when the key is served again or has nothing queued; a later one warns again.

Pure: the times are the core's (`now` from its events).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from scaler.policy.capability import capability_needs, covers
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, PeerID, TaskID, short
from scaler.scheduler.core.core_state import CoreState
from scaler.scheduler.core.follow_ups import TaskStep
from scaler.scheduler.core.task_state import TaskEvent

logger = logging.getLogger(__name__)

#: How long queued work nothing can run waits before its clients are told (rule 2).
WARN_SECONDS = 5.0
#: What starts a warning line at a client (after its task's name).
CLIENT_PREFIX = "scaler: "


@dataclass(slots=True)
class _Episode:
    since: float  #: when a tick first found the key unserved
    logged: bool = False
    warned: set[ClientID] = field(default_factory=set)


class UnservedWork:
    def __init__(self, state: CoreState, warn_seconds: float, grace_seconds: float) -> None:
        self._state = state
        self._warn_seconds = warn_seconds
        self._grace_seconds = grace_seconds
        self._episodes: dict[m.Capabilities, _Episode] = {}

    def on_tick(self, now: float) -> None:
        queue = self._state.tasks.queue
        unserved = [key for key, count in queue.groups() if count and not self._served(key)]
        self._episodes = {key: self._episodes.get(key) or _Episode(now) for key in unserved}
        nobody = not self._state.workers and not self._state.managers
        for key, episode in self._episodes.items():
            waited = now - episode.since
            if waited >= self._warn_seconds:
                self._warn(key, episode, nobody)
            if not nobody and self._grace_seconds > 0 and waited >= self._grace_seconds:
                self._fail(key, waited)

    def _served(self, key: m.Capabilities) -> bool:
        state = self._state
        if any(worker.can_run(key) for worker in state.workers.values()):
            return True
        return any(covers(manager.capabilities, key) for manager in state.managers.values())

    # ------------------------------------------------------------ what is said and done

    def _missing(self, key: m.Capabilities, nobody: bool) -> str:
        address = self._state.settings.scheduler_address
        if nobody:
            return (
                f"no worker and no worker manager is connected to the scheduler at {address}: start some "
                f"(`scaler_cluster -n 4 {address}`, `scaler_worker_manager baremetal_native {address}`, or a stack "
                "file's [[worker_manager]] with `scaler FILE`); the tasks run once one connects"
            )
        names = _names(key)
        return (
            f"no connected worker has the capabilities {names} and no worker manager declares them: start a worker "
            f'that offers them (-pwc "{names}") or a manager that declares them'
        )

    def _warn(self, key: m.Capabilities, episode: _Episode, nobody: bool) -> None:
        state = self._state
        queued = state.tasks.queue.client_queued
        clients = [client for client, by_key in queued.items() if by_key.get(key) and client not in episode.warned]
        if not clients and episode.logged:
            return
        missing = self._missing(key, nobody)
        fails = ""
        if not nobody and self._grace_seconds > 0:
            left = max(0.0, self._grace_seconds - (state.now - episode.since))
            fails = f"; they fail in {left:.0f} s unless one connects (unrunnable_grace_seconds)"
        if not episode.logged:
            episode.logged = True
            count = state.tasks.queue.queued_count.get(key, 0)
            logger.warning("%d queued task(s) wait: %s%s", count, missing, fails)
        first = _first_task_of(state, key, set(clients))
        for client in clients:
            episode.warned.add(client)
            task_id = first.get(client)
            if task_id is None or state.tasks.records[task_id].client_gone:
                continue
            count = queued[client][key]
            text = f"{CLIENT_PREFIX}{count} task(s) of this client wait: {missing}{fails}\n"
            state.send(PeerID(client), m.TaskLog(task_id, m.LogStream.STDERR, text))
            logger.debug("told client %s that its tasks wait", short(client))

    def _fail(self, key: m.Capabilities, waited: float) -> None:
        state = self._state
        task_ids = list(state.tasks.queue.task_ids(key, state.tasks.records))  # before they leave the queue
        reason = (
            f"no worker has the capabilities {_names(key)} and no worker manager declares them (waited {waited:.0f} "
            f"s, --unrunnable-grace-seconds {self._grace_seconds:g}): start a worker that offers them "
            f'(-pwc "{_names(key)}") or a manager that declares them'
        )
        for task_id in task_ids:
            state.emit(TaskStep(task_id, TaskEvent.UNRUNNABLE, reason=reason))
        if task_ids:
            logger.warning("failed %d task(s): %s", len(task_ids), reason)


def _names(key: m.Capabilities) -> str:
    return capability_needs(key) or "(none)"


def _first_task_of(state: CoreState, key: m.Capabilities, clients: set[ClientID]) -> dict[ClientID, TaskID]:
    """A queued task of each of these clients under `key` (the warning is about it)."""
    found: dict[ClientID, TaskID] = {}
    for task_id in state.tasks.queue.task_ids(key, state.tasks.records):
        client = state.tasks.records[task_id].client_id
        if client in clients and client not in found:
            found[client] = task_id
            if len(found) == len(clients):
                break
    return found


def warning_text(log: m.TaskLog) -> str:
    """The warning a client received in `log` (for tests), without its prefix."""
    return log.text.removeprefix(CLIENT_PREFIX).rstrip("\n")
