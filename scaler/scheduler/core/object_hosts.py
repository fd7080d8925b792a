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
- The choice (`nearer`): a host's cost for a task is the time its link takes to bring in what the task's inputs it
  lacks weigh (their known sizes at the scheduler's `--placement-link-mbit`) after what it still brings in for the
  readers already placed there (its backlog: each placement adds what that reader lacked, `reading`; it drains with
  time), then the count of inputs it lacks. The offered worker keeps the task unless another host costs less; then the
  cheapest such host with a worker that has an idle slot and a link with room takes it (ties: fewer readers,
  `WorkerRecord.readers`, then more idle slots, then the most recent holder of the first inputs first; at most
  MAX_SCANNED workers looked at in all). So readers whose inputs are spread alike (a shuffle's reducers) spread over
  the hosts instead of filling the first free one's slots, and a host holding two of a reader's four inputs whose link
  still brings in another reader's three does not take a second: each host's link carries one reader's fetches, not
  two. If no cheaper host has an idle slot, those that hold more of the inputs than the offered worker's host are
  `Busy` (named), and data_waits.py weighs waiting for one of them against fetching the inputs where the offered
  worker is.
- One owner: the lifecycle (task_lifecycle.py) calls `reading` and `placed` when it dispatches a task with inputs and
  `nearer` in its dispatch; the routing tells it of workers joining and leaving (`joined`, `left`).
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
#: The link rate placement ranks hosts by when the scheduler's setting is 0 (which turns data_waits.py off): 100 Mbit/s.
DEFAULT_LINK_BYTES_PER_SECOND = 12.5e6
#: Workers of holding hosts looked at per task before it stays where dispatch offered it (a host of 1,000 busy workers
#: must not cost a scan of them per task).
MAX_SCANNED = 64


@dataclass(frozen=True, slots=True)
class Busy:
    """`nearer`'s answer when every host holding the most of a task's inputs (more than the offered worker's host)
    has no idle slot: those hosts, for data_waits.py to weigh."""

    hosts: tuple[str, ...]


class ObjectHosts:
    def __init__(self, link_bytes_per_second: float = DEFAULT_LINK_BYTES_PER_SECOND) -> None:
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
        #: each host's link's rate for the fetches it is sent (the scheduler's placement_link_mbit)
        self._rate = link_bytes_per_second if link_bytes_per_second > 0 else DEFAULT_LINK_BYTES_PER_SECOND
        #: when each host's link ends fetching what the readers placed there lacked (a backlog, `reading`)
        self._inbound: dict[str, float] = {}

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
        self._inbound.pop(host, None)
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

    def reading(self, inputs: tuple[ObjectID, ...], host: str, now: float) -> None:
        """A task naming `inputs` is sent to a worker of `host`: the inputs of known size it lacks join its link's
        backlog (call before `placed`, which records them held there)."""
        lacked = sum(self._sizes.get(object_id, 0) for object_id in inputs if not self.holds(host, object_id))
        if lacked:
            self._inbound[host] = max(now, self._inbound.get(host, now)) + lacked / self._rate

    def backlog(self, host: str, now: float) -> float:
        """The seconds `host`'s link still takes to bring in what the readers placed there lacked (`reading`)."""
        return max(0.0, self._inbound.get(host, now) - now)

    def nearer(
        self, inputs: tuple[ObjectID, ...], offered: WorkerRecord, requirement: Capabilities, now: float
    ) -> tuple[WorkerRecord, ProcessorLink] | Busy | None:
        """A worker that can run a task of `requirement` naming `inputs`, with an idle slot and a link with room, on a
        host that would fetch less for it than `offered`'s (the worker dispatch found) (module docstring, "The
        choice"); None: `offered` keeps it; Busy: every such host holding more of them than `offered`'s has no idle
        slot (the caller counts the task away when it places it on `offered`)."""
        holders = self._holders
        counts: dict[str, int] = {}
        for object_id in inputs:
            for host in reversed(holders.get(object_id, ())):  # the most recent holder first
                counts[host] = counts.get(host, 0) + 1
        if not counts:
            return None
        own, wanted = offered.hostname, len(inputs)
        if counts.get(own) == wanted and not self.backlog(own, now) and sum(c == wanted for c in counts.values()) == 1:
            self.near_data += 1  # only the offered worker's host holds them all, its link idle: none costs less
            return None
        weighed = _weigh([own, *(host for host in counts if host != own)], self._workers, requirement)
        sizes, rate = self._sizes, self._rate

        def cost(host: str) -> tuple[float, int, int, int]:
            """Its backlog plus the fetch of what it lacks; what it lacks; its readers; its idle slots, negated."""
            lacked = sum(sizes.get(object_id, 0) for object_id in inputs if host not in holders.get(object_id, ()))
            standing, seconds = weighed[host], self.backlog(host, now) + lacked / rate
            return seconds, wanted - counts.get(host, 0), standing.readers, -standing.idle

        costs = {host: cost(host) for host in weighed}
        offered_count = counts.get(own, 0)
        better = [host for host in counts if host != own and costs[host] < costs[own]]
        free = [host for host in better if weighed[host].chosen is not None]
        if free:
            self.near_data += 1
            chosen = weighed[min(free, key=costs.__getitem__)].chosen
            assert chosen is not None
            return chosen
        holding_more = tuple(host for host in better if counts[host] > offered_count)
        if holding_more:
            return Busy(holding_more)
        if offered_count:
            self.near_data += 1
        return None


@dataclass(slots=True)
class _Standing:
    """A host as a reader's place: its readers, its idle slots, and a worker of it that can run the task on an idle
    slot with a link with room (None: none)."""

    readers: int = 0
    idle: int = 0
    chosen: tuple[WorkerRecord, ProcessorLink] | None = None


def _weigh(
    hosts: list[str], workers: dict[str, dict[PeerID, WorkerRecord]], requirement: Capabilities
) -> dict[str, _Standing]:
    """Each of `hosts`' standing (`_Standing`), looking at MAX_SCANNED workers at most in all (a host not reached
    counts as one without an idle slot)."""
    standings: dict[str, _Standing] = {}
    scanned = 0
    for host in hosts:
        standing = standings[host] = _Standing()
        for worker in workers.get(host, {}).values():
            if scanned >= MAX_SCANNED:
                break
            scanned += 1
            standing.readers += worker.readers
            if _idle_slot(worker) and worker.can_run(requirement):
                standing.idle += worker.slots + worker.beside - len(worker.assigned)
                if standing.chosen is None:
                    link = worker.link_for()
                    standing.chosen = None if link is None else (worker, link)
    return standings


def _idle_slot(worker: WorkerRecord) -> bool:
    """Whether a task sent to `worker` starts at once: a slot computes nothing, not only room to stage it behind one
    (a worker's free slots count its prefetch too; a task staged behind a busy host's own waits for it)."""
    return worker.free_slots > 0 and len(worker.assigned) - worker.beside < worker.slots
