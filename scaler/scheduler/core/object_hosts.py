"""Which hosts hold which large objects, as far as the scheduler can tell, and the placement that follows them: a task
whose large arguments are already on a host goes to that host when it has a free slot (issue 74 item 4).

Rules:
- Learned from what the core already sees, nothing asked: a task that names large inputs (`Task.largeInputs`, the ids
  of its arguments its client stored as objects; a graph node's: its dependencies' stored results this table knows)
  dispatched to a worker of host H means that H's host cache will hold them (its processor fetches them there, once
  for the host: object_storage/host_cache); a result of LARGE_RESULT_BYTES or more stored by a worker of H is held
  there too (its processor wrote it through H's cache), so its readers follow it (`made`). A guess may be wrong (an
  object evicted from H's cache, or deleted): it costs one fetch where the task runs, never a wrong value, since a
  processor reads each object by its id wherever it runs.
- Bounded: at most MAX_OBJECTS objects, the least recently placed forgotten first, each held by at most MAX_HOSTS
  hosts (the most recent); a host's entries go when its last worker leaves.
- The choice (`nearer`): the task's inputs are looked at in its client's order; the first one some host holds decides.
  If the worker dispatch offered is on a holding host, it keeps the task; else a worker of a holding host with an idle
  slot (the most recent holder first, at most MAX_SCANNED workers looked at) takes it. If none has an idle slot, the
  offered worker keeps it at once: a task never waits for a busy host (Dask's rule with a bound of 0, since a fetch
  across a host link costs less than the run time of a task queued behind the busy host's own).
- One owner: the lifecycle (task_lifecycle.py) calls `placed` when it dispatches a task with inputs and `nearer` in its
  dispatch; the routing tells it of workers joining and leaving (`joined`, `left`).
"""

from __future__ import annotations

from collections import OrderedDict

from scaler.protocol.ids import ObjectID, PeerID
from scaler.protocol.messages import Capabilities
from scaler.scheduler.core.peers import WorkerRecord
from scaler.scheduler.core.processor_links import ProcessorLink

#: A stored result this large is remembered where it was made (smaller ones cost little to fetch anywhere).
LARGE_RESULT_BYTES = 1 << 20
#: Inputs a task's placement looks at (a client names at most as many: Task.largeInputs).
MAX_PLACEMENT_INPUTS = 4
#: Objects remembered (ids and a few host names each: about 200 bytes an object).
MAX_OBJECTS = 4096
#: Hosts remembered per object: a broadcast's object is on every host, and any of a few is as good.
MAX_HOSTS = 8
#: Workers of holding hosts looked at per task before it stays where dispatch offered it (a host of 1,000 busy workers
#: must not cost a scan of them per task).
MAX_SCANNED = 64


class ObjectHosts:
    def __init__(self) -> None:
        #: each object's holding hosts, the most recent last; the least recently placed object first
        self._holders: OrderedDict[ObjectID, list[str]] = OrderedDict()
        #: the live workers of each host
        self._workers: dict[str, dict[PeerID, WorkerRecord]] = {}
        #: tasks with inputs placed on a host that holds one of them, and those placed elsewhere because every
        #: holding host was busy (the status feed shows both)
        self.near_data = 0
        self.away_from_data = 0

    def __len__(self) -> int:
        return len(self._holders)

    def hosts_of(self, object_id: ObjectID) -> tuple[str, ...]:
        return tuple(self._holders.get(object_id, ()))

    def joined(self, worker: WorkerRecord) -> None:
        self._workers.setdefault(worker.hostname, {})[worker.peer] = worker

    def left(self, worker: WorkerRecord) -> None:
        """A worker left: when it was its host's last, what the host holds is forgotten."""
        host = worker.hostname
        workers = self._workers.get(host)
        if workers is None:
            return
        workers.pop(worker.peer, None)
        if workers:
            return
        del self._workers[host]
        for object_id, hosts in list(self._holders.items()):
            if host in hosts:
                hosts.remove(host)
                if not hosts:
                    del self._holders[object_id]

    def placed(self, inputs: tuple[ObjectID, ...], host: str) -> None:
        """A task naming `inputs` was sent to a worker of `host`: its cache will hold them."""
        holders = self._holders
        for object_id in inputs:
            hosts = holders.get(object_id)
            if hosts is None:
                if len(holders) >= MAX_OBJECTS:
                    holders.popitem(last=False)
                holders[object_id] = [host]
                continue
            holders.move_to_end(object_id)
            if hosts[-1] == host:
                continue
            if host in hosts:
                hosts.remove(host)
            elif len(hosts) >= MAX_HOSTS:
                del hosts[0]
            hosts.append(host)

    def made(self, object_id: ObjectID, host: str) -> None:
        """A worker of `host` stored a large result as `object_id`: the host's cache holds it."""
        self.placed((object_id,), host)

    def nearer(
        self, inputs: tuple[ObjectID, ...], offered: WorkerRecord, requirement: Capabilities
    ) -> tuple[WorkerRecord, ProcessorLink] | None:
        """A worker that can run a task of `requirement` naming `inputs`, with an idle slot and a link with room, on a
        host that holds them, when `offered` (the worker dispatch found) is not on one; None: `offered` keeps it."""
        for object_id in inputs:
            hosts = self._holders.get(object_id)
            if hosts is None:
                continue
            if offered.hostname in hosts:
                self.near_data += 1
                return None
            found = _free_worker_on(hosts, self._workers, requirement)
            if found is not None:
                self.near_data += 1
                return found
            self.away_from_data += 1
            return None
        return None


def _free_worker_on(
    hosts: list[str], workers: dict[str, dict[PeerID, WorkerRecord]], requirement: Capabilities
) -> tuple[WorkerRecord, ProcessorLink] | None:
    """A worker of `hosts` (the most recent first) with an idle slot and a link with room, of the first MAX_SCANNED."""
    scanned = 0
    for host in reversed(hosts):
        for worker in workers.get(host, {}).values():
            if _idle_slot(worker) and worker.can_run(requirement):
                link = worker.link_for()
                if link is not None:
                    return worker, link
            scanned += 1
            if scanned >= MAX_SCANNED:
                return None
    return None


def _idle_slot(worker: WorkerRecord) -> bool:
    """Whether a task sent to `worker` starts at once: a slot computes nothing, not only room to stage it behind one
    (a worker's free slots count its prefetch too; a task staged behind a busy host's own waits for it)."""
    return worker.free_slots > 0 and len(worker.assigned) - worker.beside < worker.slots
