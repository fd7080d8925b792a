"""Each client's quotas (docs/guide/sharing.md, "Quotas"), and which of its queued tasks they hold back.

A client may have two quotas, from its hello (and capped by its CURVE key's, `scheduler/peer_keys.py`):

- `max_running_tasks`: the most of its tasks at workers at once (running or prefetched);
- `max_workers`: the most workers' worth of spend it holds. A worker runs one task at a time (its default slot
  count) and the scaling policies size the pool one worker per task (`policy/outstanding_work.py`), so one
  worker's worth is `TASKS_PER_WORKER` tasks at workers: N workers' worth is N times that.

Both are kept to as one limit on its tasks at workers, the smaller (`ClientQuota.held_limit`), by the dispatch
queue (`task_table.DispatchQueue`). The scaling policies and the "why pending" reason need more: which queued
tasks could not start even if workers were free (`held_back`), so that the pool is never grown for them, from a
cold start on (before any of them reached the top of a queue), and the reason names the quota that holds them.
Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scaler.protocol.ids import ClientID
from scaler.protocol.messages import Capabilities, ClientInfo

#: Tasks at workers that make one worker's worth of spend: a worker runs one task at a time by default.
TASKS_PER_WORKER = 1

RUNNING_TASKS = "max_running_tasks"
WORKERS = "max_workers"


@dataclass(frozen=True, slots=True)
class ClientQuota:
    running_tasks: int = 0  #: the most of its tasks at workers at once (0: none)
    workers: int = 0  #: the most workers' worth of spend it holds (0: none)

    @property
    def held_limit(self) -> int:
        """The most of its tasks at workers at once under both quotas (0: no limit)."""
        limits = [limit for limit in (self.running_tasks, self.workers * TASKS_PER_WORKER) if limit]
        return min(limits, default=0)

    @property
    def binding(self) -> str:
        """The setting that limits it (the smaller; the workers' worth on a tie, the one that says spend)."""
        if self.workers and (not self.running_tasks or self.workers * TASKS_PER_WORKER <= self.running_tasks):
            return WORKERS
        return RUNNING_TASKS

    def words(self, count: int) -> str:
        """The "why pending" words for `count` of its tasks held back."""
        if self.binding == WORKERS:
            worth = "worker's" if self.workers == 1 else "workers'"
            return f"{count} at their client's quota of {self.workers} {worth} worth of spend ({WORKERS})"
        return f"{count} at their client's quota of running tasks ({RUNNING_TASKS})"


def quota_of(info: ClientInfo) -> ClientQuota | None:
    quota = ClientQuota(info.max_running_tasks, info.max_workers)
    return quota if quota.held_limit else None


def startable(quota: ClientQuota | None, held: int, queued: Mapping[Capabilities, int]) -> dict[Capabilities, int]:
    """Of a client's queued tasks per capability set, those that could start now on free workers: within its room
    (its limit less its tasks at workers), its capability sets taken in order; all of them without a quota."""
    if quota is None:
        return dict(queued)
    room = max(0, quota.held_limit - held)
    found: dict[Capabilities, int] = {}
    for key in sorted(queued):
        found[key] = min(room, queued[key])
        room -= found[key]
    return found


def held_back(
    quotas: Mapping[ClientID, ClientQuota],
    queued: Mapping[ClientID, Mapping[Capabilities, int]],
    held: Mapping[ClientID, int],
) -> dict[Capabilities, dict[str, int]]:
    """Per capability set and binding setting, the queued tasks of clients with a quota that could not start now
    even on free workers (`startable`'s complement)."""
    found: dict[Capabilities, dict[str, int]] = {}
    for client, quota in quotas.items():
        by_key = queued.get(client)
        if not by_key:
            continue
        for key, starting in startable(quota, held.get(client, 0), by_key).items():
            if by_key[key] > starting:
                kinds = found.setdefault(key, {})
                kinds[quota.binding] = kinds.get(quota.binding, 0) + by_key[key] - starting
    return found


def reason_words(quotas: Mapping[ClientID, ClientQuota], counts: Mapping[str, int]) -> str:
    """The reason's words for a capability set's tasks held back, by binding setting."""
    example = {quota.binding: quota for quota in quotas.values()}
    parts = []
    for kind in (WORKERS, RUNNING_TASKS):
        count = counts.get(kind, 0)
        if count:
            quota = example.get(kind)
            parts.append(quota.words(count) if quota is not None and _alone(quotas, kind) else _plural(kind, count))
    return "; ".join(parts)


def _alone(quotas: Mapping[ClientID, ClientQuota], kind: str) -> bool:
    """One figure for this setting among the clients it binds (the words may name it)."""
    figures = {(quota.workers, quota.running_tasks) for quota in quotas.values() if quota.binding == kind}
    return len(figures) == 1


def _plural(kind: str, count: int) -> str:
    if kind == WORKERS:
        return f"{count} at their client's quota of workers' worth of spend ({WORKERS})"
    return f"{count} at their client's quota of running tasks ({RUNNING_TASKS})"
