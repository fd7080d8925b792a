"""`scaling=cost`: the work policy's levels, bought from the cheapest managers first, within a budget.

Every manager may declare what one of its workers costs per hour (`worker_cost_per_hour`) and how long one
takes to connect (`expected_boot_seconds`; when it does not, the boot time it measured). The outstanding work
(learned run times, `outstanding_work`) is sized to finish within a deadline T: `target_finish_seconds`, or
by default twice the slowest online manager's boot time and at least a minute (`default_deadline`), so a new
worker of any manager spends at most half the time to the deadline booting.

Per capability set, most specific first, over the online managers that cover the set, cheapest first (ties:
the faster boot, then the id):
1. keep work on workers the managers already hold, cheapest first: a connected worker does T seconds of the
   work before the deadline, one still booting T minus half a boot (launches are spread over the boot: on
   average half of it is left). A dearer manager keeps workers only for work no cheaper manager with room can
   start in time, so a load that began on a fast dear manager moves to the cheap one;
2. fill the rest from the cheapest manager that can help in time, then the next: a new worker of a manager
   that boots in b seconds does T - b seconds of the work, so a manager with b >= T is passed over while a
   dearer, faster one has room;
3. work no manager can finish in time still gets workers: the cheapest managers with room, T seconds each.
A set never gets more workers than it has tasks (but for the learning worker below), and at least one while it
has any. While nothing is known of a set's run times (none of its functions has finished in it and none of its
tasks runs), its first worker comes from the fastest-booting manager: the queue starts moving within that boot
and the run times are learned before the slow cheap workers connect, so those are sized from real run times.

Levels then follow the need as in `work`: up at once, down after the cooldown or half the manager's boot,
whichever is longer (relaunching costs a whole boot of money and of waiting, so an idle worker is kept that long
for work that comes back), never below busy workers. Unlike `work`, memory keeps the policy's own level, not the
busy floor: a worker kept only because it is busy goes once it is idle.
Last, the budget: a manager is paid for the workers it holds (connected, or launched and booting) until they
stop. While the managers would cost more than `max_cost_per_hour`, what they would add is held back first,
dearest manager first, then their idle workers; busy ones never. The work queues instead, and each trimmed
manager's reason says the budget is why. While several clients have work, the cap is lowered so that none takes
more than its part of the budget (`budget_split.py`: by share, or its key's own part).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from math import ceil

from scaler.policy.capability import covers
from scaler.policy.outstanding_work import RunTimeTable, outstanding_seconds
from scaler.policy.scaling.budget_split import HeldBack, note, split_limit
from scaler.policy.scaling.capability_sets import CapabilitySet, capability_sets, most_specific_first, names_of
from scaler.policy.scaling.work import ROUNDING, Levels, Needs, WorkScaling, bounded, held_workers, within_limit
from scaler.policy.snapshot import ManagerView, ScalingSnapshot, TaskGroup
from scaler.protocol.messages import WorkerLimit

#: keep work where workers are, then fill with managers whose workers connect in time, then with any
_ON_TIME = ("keep", "in_time", "late")
#: cheapest first whatever the boot time, even away from dearer workers already running
_MOST_FOR_THE_MONEY = ("late",)

#: Without `target_finish_seconds`, T is this many slowest boots ...
DEFAULT_DEADLINE_BOOTS = 2.0
#: ... and at least this long.
DEFAULT_DEADLINE_SECONDS = 60.0


def default_deadline(managers: Iterable[ManagerView]) -> float:
    """T when none is given: twice the slowest manager's boot, at least a minute."""
    slowest = max((manager.boot_seconds for manager in managers), default=0.0)
    return max(DEFAULT_DEADLINE_SECONDS, DEFAULT_DEADLINE_BOOTS * slowest)


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

    def _deadline(self, snapshot: ScalingSnapshot) -> float:
        if self.target_finish_seconds is not None:
            return self.target_finish_seconds
        return default_deadline(snapshot.online_managers())

    def _deadline_note(self) -> str:
        if self.target_finish_seconds is not None:
            return ""
        return " (no target_finish_seconds: twice the slowest manager's boot, at least 60 s)"

    def _remembered(self, sent: Levels, followed: Levels) -> Levels:
        """Never more than the policy's own level: the busy floor raises what is sent, not the level, so a worker
        kept only because it is busy (a dear one whose work moved to a cheaper manager) goes once it is idle
        instead of starting another cooldown each time it takes a task."""
        return {
            names: replace(level, workers=min(level.workers, followed[names].workers if names in followed else 0))
            for names, level in sent.items()
        }

    def _cooldown_of(self, manager: ManagerView) -> float:
        """At least half the manager's boot: relaunching costs a whole boot of paid time and of waiting, so an idle
        worker is worth keeping that long for work that comes back."""
        return max(self.cooldown_seconds, manager.boot_seconds / 2)

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
            connected={manager.manager_id: len(snapshot.workers_of(manager.manager_id)) for manager in ordered},
            needs={manager.manager_id: {} for manager in ordered},
        )
        deadline = self._deadline(snapshot)
        for capability_set in most_specific_first(capability_sets(snapshot)):
            eligible = [manager for manager in ordered if covers(manager.capabilities, capability_set.capabilities)]
            groups = [group for group in snapshot.task_groups if names_of(group.capabilities) == capability_set.names]
            seconds = outstanding_seconds(groups, run_times)
            spread.fill(capability_set, eligible, seconds, deadline, self.tasks_per_worker, stages)
            if capability_set.running == 0 and not _any_learned(groups, run_times):
                spread.first_from_the_fastest(capability_set, eligible)
        return spread.needs

    def _capped(
        self, snapshot: ScalingSnapshot, managers: list[ManagerView], levels_of: dict[str, Levels]
    ) -> tuple[dict[str, Levels], dict[str, str]]:
        """Within `max_cost_per_hour`: a manager is paid for the workers it still holds (connected, or launched)
        until they stop, so first what the managers would add is held back, dearest first; then, while the
        workers held still cost too much, the idle ones, dearest first. Busy workers are never cut."""
        budget = self.max_cost_per_hour
        if budget is None:
            return levels_of, {}
        totals = {
            manager_id: sum(level.workers for level in levels.values()) for manager_id, levels in levels_of.items()
        }
        held = held_workers(snapshot, managers)
        busy = {
            manager.manager_id: sum(1 for worker in snapshot.workers_of(manager.manager_id) if worker.is_busy)
            for manager in managers
        }
        spend = sum(max(totals[m.manager_id], held[m.manager_id]) * m.worker_cost_per_hour for m in managers)
        prices = [manager.worker_cost_per_hour for manager in managers if manager.worker_cost_per_hour > 0]
        split: tuple[HeldBack, ...] = ()
        if snapshot.clients and prices:  # one client's work may not take the whole budget (budget_split.py)
            budget, split = split_limit(budget, snapshot.clients, spend, min(prices))
        cuts: dict[str, int] = {}
        for is_growth in (True, False):
            for manager in sorted(managers, key=price_order, reverse=True):
                manager_id, cost = manager.manager_id, manager.worker_cost_per_hour
                if spend <= budget + ROUNDING:
                    break
                if cost <= 0:
                    continue
                floor = max(busy[manager_id], held[manager_id]) if is_growth else busy[manager_id]
                cut = min(totals[manager_id] - floor, ceil((spend - budget) / cost - ROUNDING))
                if cut <= 0:
                    continue
                totals[manager_id] -= cut
                spend -= cut * cost
                cuts[manager_id] = cuts.get(manager_id, 0) + cut
        capped = {
            manager_id: within_limit(levels, totals[manager_id]) if manager_id in cuts else levels
            for manager_id, levels in levels_of.items()
        }
        limit = f"max_cost_per_hour={self.max_cost_per_hour:g}"
        if split:
            limit = f"{budget:.2f} of {limit} ({note(split)})"
        notes = {
            manager_id: f"budget: {cut} worker(s) held back, the managers' workers would cost more than {limit}; "
            "the work queues instead"
            for manager_id, cut in cuts.items()
        }
        return capped, notes


def _any_learned(groups: list[TaskGroup], run_times: RunTimeTable) -> bool:
    """Whether a run time was learned for one of the groups' functions (in the group's capability set)."""
    return any(
        (function.function_name, group.capabilities) in run_times.means
        for group in groups
        for function in group.functions
    )


@dataclass(slots=True)
class _Spread:
    """The managers' room, held and connected workers, and needs while capability sets are handed out in turn."""

    room: dict[str, WorkerLimit]
    held: dict[str, int]  #: connected workers, or the last target if larger (launches in flight count)
    connected: dict[str, int]
    needs: dict[str, Needs]

    def fill(
        self,
        capability_set: CapabilitySet,
        eligible: list[ManagerView],
        seconds: float,
        deadline: float,
        tasks_per_worker: int,
        stages: tuple[str, ...],
    ) -> None:
        """Hand the set's need to `eligible` (cheapest first), stage by stage (`_ON_TIME`, or `_MOST_FOR_THE_MONEY`
        under a budget the deadline would exceed). `seconds`: its outstanding work."""
        workers_left = ceil(capability_set.tasks / tasks_per_worker)
        given = 0
        for stage in stages:
            for manager in eligible:
                if stage == "keep" and self._can_start_in_time_cheaper(manager, eligible, deadline):
                    continue
                for per_worker, available, is_connected in self._offers(stage, manager, deadline):
                    if per_worker <= 0 or (seconds <= ROUNDING and stage != "late"):
                        continue  # its workers would connect after the deadline, or nothing is left to do
                    wanted = min(workers_left, ceil(max(0.0, seconds) / per_worker - ROUNDING))
                    share = bounded(
                        wanted if available is None else min(wanted, available), self.room[manager.manager_id]
                    )
                    if share <= 0:
                        continue
                    self._give(manager.manager_id, capability_set, share)
                    workers_left -= share
                    given += share
                    seconds -= share * per_worker
                    if stage == "keep":
                        self._take_held(manager.manager_id, share, is_connected)
        if given == 0 and capability_set.tasks > 0:  # some work, no worker: one from the cheapest with room
            for manager in eligible:
                if bounded(1, self.room[manager.manager_id]) > 0:
                    self._give(manager.manager_id, capability_set, 1)
                    break

    def first_from_the_fastest(self, capability_set: CapabilitySet, eligible: list[ManagerView]) -> None:
        """The set's first worker from the fastest-booting manager with room, unless that one already has one."""
        with_room = [manager for manager in eligible if bounded(1, self.room[manager.manager_id]) > 0]
        if not with_room:
            return
        fastest = min(with_room, key=lambda manager: (manager.boot_seconds, *price_order(manager)))
        if capability_set.names not in self.needs[fastest.manager_id]:
            self._give(fastest.manager_id, capability_set, 1)

    def _offers(self, stage: str, manager: ManagerView, deadline: float) -> list[tuple[float, int | None, bool]]:
        """What the stage offers of the manager: (seconds of work one worker does before the deadline, how many
        such workers there are or None for any number, whether they are connected ones it holds)."""
        if stage == "keep":
            held = self.held[manager.manager_id]
            connected = min(held, self.connected[manager.manager_id])
            return [(deadline, connected, True), (deadline - manager.boot_seconds / 2, held - connected, False)]
        if stage == "in_time":
            return [(deadline - manager.boot_seconds, None, False)]
        return [(deadline, None, False)]

    def _can_start_in_time_cheaper(self, manager: ManagerView, eligible: list[ManagerView], deadline: float) -> bool:
        """Whether a cheaper manager with room could start the work in time (then `manager` keeps no workers)."""
        return any(
            other.worker_cost_per_hour < manager.worker_cost_per_hour
            and other.boot_seconds < deadline
            and bounded(1, self.room[other.manager_id]) > 0
            for other in eligible
        )

    def _take_held(self, manager_id: str, share: int, is_connected: bool) -> None:
        self.held[manager_id] -= share
        if is_connected:
            self.connected[manager_id] -= share

    def _give(self, manager_id: str, capability_set: CapabilitySet, share: int) -> None:
        room = self.room[manager_id]
        self.room[manager_id] = None if room is None else room - share
        _, before = self.needs[manager_id].get(capability_set.names, (capability_set.capabilities, 0))
        self.needs[manager_id][capability_set.names] = (capability_set.capabilities, before + share)
