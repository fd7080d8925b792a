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
  hosts (the most recent); a host's entries go when its last worker leaves. A stored result's size is kept with it
  (a client's object's is not known here: counted as 0 bytes, so never waited for).
- The choice (`nearer`): the hosts that hold the most of the task's inputs (counted per input) are its best hosts.
  When the worker dispatch offered is on the one best host, it keeps the task. When several tie (a shuffle's reducer,
  whose inputs are one on each host), the best host whose workers hold the fewest tasks placed by their inputs
  (`WorkerRecord.readers`), then with the most idle slots, takes it (the offered worker's host when it ranks as well;
  else the most recent holder of the first inputs first), so that readers whose inputs are spread alike spread over
  the hosts instead of filling the first free one's slots: each host's link then carries one reader's fetches, not
  two. A worker of that host with an idle slot and a link with room takes it (at most
  MAX_SCANNED workers looked at in all). If no best host has an idle slot, `nearer` says so (`Busy`, naming them) and
  data_waits.py weighs waiting for one of them against fetching the inputs where the offered worker is.
- One owner: the lifecycle (task_lifecycle.py) calls `placed` when it dispatches a task with inputs and `nearer` in its
  dispatch; the routing tells it of workers joining and leaving (`joined`, `left`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class Busy:
    """`nearer`'s answer when every host holding the most of a task's inputs (more than the offered worker's host)
    has no idle slot: those hosts, for data_waits.py to weigh."""

    hosts: tuple[str, ...]


class ObjectHosts:
    def __init__(self) -> None:
        #: each object's holding hosts, the most recent last; the least recently placed object first
        self._holders: OrderedDict[ObjectID, list[str]] = OrderedDict()
        #: the size of the objects in `_holders` whose size is known (stored results)
        self._sizes: dict[ObjectID, int] = {}
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

    def size_of(self, object_id: ObjectID) -> int:
        """Its size in bytes, 0 when not known."""
        return self._sizes.get(object_id, 0)

    def holds(self, host: str, object_id: ObjectID) -> bool:
        hosts = self._holders.get(object_id)
        return hosts is not None and host in hosts

    def workers_of(self, host: str) -> Iterator[WorkerRecord]:
        return iter(self._workers.get(host, {}).values())

    def workers_on(self, host: str) -> int:
        """The live workers of `host` (a worker joining there is ranked by them: free_workers.py)."""
        workers = self._workers.get(host)
        return 0 if workers is None else len(workers)

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
                    self._sizes.pop(object_id, None)

    def placed(self, inputs: tuple[ObjectID, ...], host: str) -> None:
        """A task naming `inputs` was sent to a worker of `host`: its cache will hold them."""
        holders = self._holders
        for object_id in inputs:
            hosts = holders.get(object_id)
            if hosts is None:
                if len(holders) >= MAX_OBJECTS:
                    self._sizes.pop(holders.popitem(last=False)[0], None)
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

    def made(self, object_id: ObjectID, host: str, size: int = 0) -> None:
        """A worker of `host` stored a large result of `size` bytes as `object_id`: the host's cache holds it."""
        self.placed((object_id,), host)
        if size:
            self._sizes[object_id] = size

    def nearer(
        self, inputs: tuple[ObjectID, ...], offered: WorkerRecord, requirement: Capabilities
    ) -> tuple[WorkerRecord, ProcessorLink] | Busy | None:
        """A worker that can run a task of `requirement` naming `inputs`, with an idle slot and a link with room, on a
        host that holds the most of them, when `offered` (the worker dispatch found) is not the best placed (module
        docstring, "The choice"); None: `offered` keeps it; Busy: no host holding more of them than `offered`'s has
        an idle slot (the caller counts the task away when it places it on `offered`)."""
        holders = self._holders
        counts: dict[str, int] = {}
        for object_id in inputs:
            for host in reversed(holders.get(object_id, ())):  # the most recent holder first
                counts[host] = counts.get(host, 0) + 1
        if not counts:
            return None
        most = max(counts.values())
        tied = [host for host, count in counts.items() if count == most]
        offered_holds = offered.hostname in counts and counts[offered.hostname] == most
        if offered_holds and len(tied) == 1:
            self.near_data += 1
            return None
        found = _least_read(tied, self._workers, requirement)
        if found is None and not offered_holds:
            return Busy(tuple(tied))
        if found is None or (offered_holds and found[0] >= _standing(offered.hostname, self._workers)):
            self.near_data += 1
            return None
        self.near_data += 1
        return found[1]


def _least_read(
    hosts: list[str], workers: dict[str, dict[PeerID, WorkerRecord]], requirement: Capabilities
) -> tuple[tuple[int, int], tuple[WorkerRecord, ProcessorLink]] | None:
    """Of `hosts` (in order) with a worker that can run the task on an idle slot with a link with room, the one whose
    workers hold the fewest tasks placed by their inputs, then with the most idle slots (the first on a tie): its
    standing (`_standing`) and that worker with its link; None when none has one. At most MAX_SCANNED workers are looked
    at in all."""
    best: tuple[tuple[int, int], tuple[WorkerRecord, ProcessorLink]] | None = None
    scanned = 0
    for host in hosts:
        readers = idle = 0
        chosen: tuple[WorkerRecord, ProcessorLink] | None = None
        for worker in workers.get(host, {}).values():
            scanned += 1
            readers += worker.readers
            if _idle_slot(worker) and worker.can_run(requirement):
                idle += worker.slots + worker.beside - len(worker.assigned)
                if chosen is None:
                    link = worker.link_for()
                    chosen = None if link is None else (worker, link)
            if scanned >= MAX_SCANNED:
                break
        if chosen is not None and (best is None or (readers, -idle) < best[0]):
            best = (readers, -idle), chosen
        if scanned >= MAX_SCANNED:
            break
    return best


def _standing(host: str, workers: dict[str, dict[PeerID, WorkerRecord]]) -> tuple[int, int]:
    """How a host ranks for a reader, the lower the better: the tasks its workers hold placed by their inputs, and its
    idle slots, negated (at most MAX_SCANNED workers looked at)."""
    readers = idle = 0
    for scanned, worker in enumerate(workers.get(host, {}).values()):
        if scanned >= MAX_SCANNED:
            break
        readers += worker.readers
        if _idle_slot(worker):
            idle += worker.slots + worker.beside - len(worker.assigned)
    return readers, -idle


def _idle_slot(worker: WorkerRecord) -> bool:
    """Whether a task sent to `worker` starts at once: a slot computes nothing, not only room to stage it behind one
    (a worker's free slots count its prefetch too; a task staged behind a busy host's own waits for it)."""
    return worker.free_slots > 0 and len(worker.assigned) - worker.beside < worker.slots
