"""The scheduler core's records and clock, as its registries see them: `CoreState`.

The core makes one and hands it to every registry. It holds records and tables only (the peers' records, the
processors' links, the task, graph and job tables), the time of the event being handled, the effects of the step so
far, and `emit`: the way a registry says what should follow (`follow_ups.py`), which the core routes. No registry is
reachable from here, so a registry can change its own records and read the others, and whatever another registry must
do goes through the core's table (`routing.py`). Pure: time comes in with the events.
"""

from __future__ import annotations

from collections.abc import Callable

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID
from scaler.scheduler.core.client_answers import Answer
from scaler.scheduler.core.effects import Effect, new_send
from scaler.scheduler.core.follow_ups import FollowUp
from scaler.scheduler.core.graphs import GraphRegistry
from scaler.scheduler.core.jobs import JobTable
from scaler.scheduler.core.object_hosts import ObjectHosts
from scaler.scheduler.core.peers import ClientRecord, ManagerRecord, WorkerRecord
from scaler.scheduler.core.processor_links import ProcessorLink
from scaler.scheduler.core.settings import CoreSettings
from scaler.scheduler.core.task_table import TaskTable


def _unrouted(follow_up: FollowUp) -> None:
    raise RuntimeError(f"{type(follow_up).__name__} emitted before the core routed its follow-ups")


def _unanswered(peer: PeerID, message: Answer) -> None:
    raise RuntimeError(f"{type(message).__name__} answered before the core routed answers")


class CoreState:
    def __init__(self, settings: CoreSettings, tasks: TaskTable, graphs: GraphRegistry, jobs: JobTable) -> None:
        self.settings = settings
        self.tasks = tasks
        self.graphs = graphs
        self.jobs = jobs
        self.clients: dict[PeerID, ClientRecord] = {}
        self.workers: dict[PeerID, WorkerRecord] = {}
        self.managers: dict[PeerID, ManagerRecord] = {}
        #: the links of workers' processors, where their tasks go and everything about them comes (link_sessions.py)
        self.processors: dict[PeerID, ProcessorLink] = {}
        #: which hosts hold the large inputs tasks name, learned by the lifecycle's dispatch, which places by it
        self.object_hosts = ObjectHosts(settings.placement_link_mbit * 1e6 / 8)
        self.effects: list[Effect] = []
        #: what a registry says should follow; the core routes each to the registry that carries it out
        self.emit: Callable[[FollowUp], None] = _unrouted
        #: an answer for a client (sent, or held while it is away), as the core routes it (`routing.py`: the client
        #: sessions'); on the path of every task, so a call the core binds once rather than a follow-up routed each time
        self.answer: Callable[[PeerID, Answer], None] = _unanswered
        self.now = 0.0
        #: latest wall-clock time minus monotonic `now`, from the ticks; stamps what the monitor feed shows
        self.wall_offset = 0.0
        #: batches of events handled so far: a decision cached for one step is stale in the next, even at the same `now`
        self.steps = 0
        self.beats = 0  #: beats of the core's clock so far (`ready_worker_count` counts at most once per beat)
        #: `ready_worker_count`'s last count, and what it was counted at: (beats, workers, links)
        self._ready_count = 0
        self._ready_at: tuple[int, int, int] = (-1, 0, 0)

    def send(self, peer: PeerID, message: m.Message, may_wait: bool = False) -> None:
        self.effects.append(new_send(peer, message, may_wait))

    @property
    def wall_time(self) -> float:
        """Seconds since the epoch now, as far as the shell's ticks tell (0 before the first)."""
        return self.now + self.wall_offset if self.wall_offset else 0.0

    def ready_worker_count(self) -> int:
        """The workers a task can go to now, as clients are told (`workerCount`): a local cluster's start waits for
        all of them (`ray.init()`), and a map sizes its chunks by them. Counted once per beat of the clock, and again
        as soon as a worker or a processor's link comes or goes; a worker's room that changes between beats shows at
        the next. Every client's heartbeat echo carries it: counted for each, 100 clients' heartbeats would walk every
        worker 50 times a second (6 ms a walk with 10,000 workers: 30% of a core)."""
        at = (self.beats, len(self.workers), len(self.processors))
        if at != self._ready_at:
            self._ready_at = at
            self._ready_count = sum(1 for worker in self.workers.values() if worker.takes_tasks)
        return self._ready_count
