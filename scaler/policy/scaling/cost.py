"""`scaling=cost`: the work policy's levels, bought from the cheapest managers first, within a budget.

Every manager may declare what one of its workers costs per hour (`worker_cost_per_hour`) and how long one
takes to connect (`expected_boot_seconds`; when it does not, the boot time it measured). Per capability set,
most specific first, over the online managers that cover the set, cheapest first (ties: the faster boot,
then the id):
1. keep work where workers already are (as `work` does);
2. fill the rest from the cheapest manager that can help in time, then the next. With `target_finish_seconds`
   T and learned run times, a new worker of a manager that boots in b seconds does T - b seconds of the
   outstanding work before the deadline: a manager with b >= T cannot help in time and is passed over, and a
   dearer, faster one takes the work. Without T every manager can help and the price alone orders them;
3. work no manager can finish in time still gets workers: the cheapest managers with room, as `work` counts.
A set never gets more workers than it has tasks, and at least one while it has any.

Levels then follow the need as in `work`: up at once, down after the cooldown, never below busy workers.
Last, the budget: while the levels cost more than `max_cost_per_hour` together, the dearest manager gives
up workers (never busy ones). The work queues instead, and each trimmed manager's reason says the budget is
why. Booting workers count: they are paid for.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from scaler.policy.capability import covers
from scaler.policy.outstanding_work import RunTimeTable, outstanding_seconds
from scaler.policy.scaling.capability_sets import CapabilitySet, capability_sets, most_specific_first, names_of
from scaler.policy.scaling.work import ROUNDING, Levels, Needs, WorkScaling, bounded, held_workers, within_limit
from scaler.policy.snapshot import ManagerView, ScalingSnapshot
from scaler.protocol.messages import WorkerLimit

#: keep work where workers are, then fill with managers whose workers connect in time, then with any
_ON_TIME = ("keep", "in_time", "late")
#: cheapest first whatever the boot time, even away from dearer workers already running
_MOST_FOR_THE_MONEY = ("late",)


def _spend(managers: list[ManagerView], needs: dict[str, Needs]) -> float:
    return sum(
        manager.worker_cost_per_hour * sum(workers for _capabilities, workers in needs[manager.manager_id].values())
        for manager in managers
    )


def price_order(manager: ManagerView) -> tuple[float, float, str]:
    """Cheapest first; between equal prices the faster boot, then the id (so the order is total)."""
    return (manager.worker_cost_per_hour, manager.boot_seconds, manager.manager_id)


@dataclass(frozen=True, slots=True)
class CostScaling(WorkScaling):
    #: the most all managers' workers may cost per hour together; None: no cap
    max_cost_per_hour: float | None = None

    @property
    def policy_word(self) -> str:
        return "cost"

    @property
    def name(self) -> str:
        words = [f"tasks_per_worker={self.tasks_per_worker}", f"cooldown_seconds={self.cooldown_seconds:g}"]
        if self.target_finish_seconds is not None:
            words.append(f"target_finish_seconds={self.target_finish_seconds:g}")
        if self.max_cost_per_hour is not None:
            words.append(f"max_cost_per_hour={self.max_cost_per_hour:g}")
        return f"cost({', '.join(words)})"

    def _spread(
        self, snapshot: ScalingSnapshot, managers: list[ManagerView], run_times: RunTimeTable
    ) -> dict[str, Needs]:
        needs = self._spread_by(snapshot, managers, run_times, _ON_TIME)
        if self.max_cost_per_hour is not None and _spend(managers, needs) > self.max_cost_per_hour + ROUNDING:
            # the deadline cannot be met within the budget: the budget buys the most work, cheapest first
            needs = self._spread_by(snapshot, managers, run_times, _MOST_FOR_THE_MONEY)
        return needs

    def _spread_by(
        self, snapshot: ScalingSnapshot, managers: list[ManagerView], run_times: RunTimeTable, stages: tuple[str, ...]
    ) -> dict[str, Needs]:
        ordered = sorted(managers, key=price_order)
        spread = _Spread(
            room={manager.manager_id: manager.max_workers for manager in ordered},
            held=held_workers(snapshot, ordered),
            needs={manager.manager_id: {} for manager in ordered},
        )
        for capability_set in most_specific_first(capability_sets(snapshot)):
            eligible = [manager for manager in ordered if covers(manager.capabilities, capability_set.capabilities)]
            seconds = self._seconds_of(snapshot, run_times, capability_set)
            spread.fill(capability_set, eligible, seconds, self.tasks_per_worker, self.target_finish_seconds, stages)
        return spread.needs

    def _seconds_of(
        self, snapshot: ScalingSnapshot, run_times: RunTimeTable, capability_set: CapabilitySet
    ) -> float | None:
        """The set's outstanding work in seconds; None when it is sized by task count."""
        if self.target_finish_seconds is None:
            return None
        groups = [group for group in snapshot.task_groups if names_of(group.capabilities) == capability_set.names]
        return outstanding_seconds(groups, run_times)

    def _capped(
        self, snapshot: ScalingSnapshot, managers: list[ManagerView], levels_of: dict[str, Levels]
    ) -> tuple[dict[str, Levels], dict[str, str]]:
        budget = self.max_cost_per_hour
        if budget is None:
            return levels_of, {}
        totals = {
            manager_id: sum(level.workers for level in levels.values()) for manager_id, levels in levels_of.items()
        }
        spend = sum(totals[manager.manager_id] * manager.worker_cost_per_hour for manager in managers)
        capped, notes = dict(levels_of), {}
        for manager in sorted(managers, key=price_order, reverse=True):
            cost = manager.worker_cost_per_hour
            if spend <= budget + ROUNDING:
                break
            if cost <= 0:
                continue
            busy = sum(1 for worker in snapshot.workers_of(manager.manager_id) if worker.is_busy)
            total = totals[manager.manager_id]
            cut = min(total - busy, ceil((spend - budget) / cost - ROUNDING))
            if cut <= 0:
                continue
            capped[manager.manager_id] = within_limit(capped[manager.manager_id], total - cut)
            spend -= cut * cost
            notes[manager.manager_id] = (
                f"budget: {cut} worker(s) held back, the managers' workers would cost more than "
                f"max_cost_per_hour={budget:g}; the work queues instead"
            )
        return capped, notes


@dataclass(slots=True)
class _Spread:
    """The managers' room, held workers and needs while capability sets are handed out in turn."""

    room: dict[str, WorkerLimit]
    held: dict[str, int]
    needs: dict[str, Needs]

    def fill(
        self,
        capability_set: CapabilitySet,
        eligible: list[ManagerView],
        seconds: float | None,
        tasks_per_worker: int,
        target_finish_seconds: float | None,
        stages: tuple[str, ...],
    ) -> None:
        """Hand the set's need to `eligible` (cheapest first), stage by stage (`_ON_TIME`, or `_MOST_FOR_THE_MONEY`
        under a budget the deadline would exceed). `seconds`: its outstanding work, None to count tasks."""
        workers_left = ceil(capability_set.tasks / tasks_per_worker)
        given = 0
        for stage in stages:
            for manager in eligible:
                wanted, per_worker = _wanted(stage, manager, seconds, workers_left, target_finish_seconds)
                if stage == "keep":
                    wanted = min(wanted, self.held[manager.manager_id])
                share = bounded(wanted, self.room[manager.manager_id])
                if share <= 0:
                    continue
                self._give(manager.manager_id, capability_set, share)
                workers_left -= share
                given += share
                if stage == "keep":
                    self.held[manager.manager_id] -= share
                if seconds is not None:
                    seconds -= share * per_worker
        if given == 0 and capability_set.tasks > 0:  # some work, no worker: one from the cheapest with room
            for manager in eligible:
                if bounded(1, self.room[manager.manager_id]) > 0:
                    self._give(manager.manager_id, capability_set, 1)
                    break

    def _give(self, manager_id: str, capability_set: CapabilitySet, share: int) -> None:
        room = self.room[manager_id]
        self.room[manager_id] = None if room is None else room - share
        _, before = self.needs[manager_id].get(capability_set.names, (capability_set.capabilities, 0))
        self.needs[manager_id][capability_set.names] = (capability_set.capabilities, before + share)


def _wanted(
    stage: str, manager: ManagerView, seconds: float | None, workers_left: int, deadline: float | None
) -> tuple[int, float]:
    """Workers the stage asks of the manager, and the seconds of work each does before the deadline."""
    if seconds is None or deadline is None:  # counted by tasks: the price alone decides
        return workers_left, 0.0
    per_worker = deadline - manager.boot_seconds if stage == "in_time" else deadline
    if per_worker <= 0 or (seconds <= ROUNDING and stage != "late"):
        return 0, per_worker  # its workers would connect after the deadline, or nothing is left to do
    return min(workers_left, ceil(max(0.0, seconds) / per_worker - ROUNDING)), per_worker
