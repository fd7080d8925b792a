"""The pure decision of a worker manager: given the target and the units that exist, what to launch and
what to terminate. No I/O, no clock: time comes in as `now` (wall-clock seconds, the clock of
`UnitInfo.created_at`). The runner calls `plan` on every new target and on a timer, performs the plan,
and reports back with `launched`, `launch_failed`, `terminating`, `terminate_failed` and `list_failed`.

Rules (docs/worker_managers.md explains why):
1. Count the units listed PENDING or RUNNING (not those being terminated), plus launches the backend
   returned but does not list yet. Units that already existed when the manager started are listed,
   so they count: a restarted manager adopts its units instead of doubling them.
2. Wanted units: ceil(target workers / workers per unit), at most `max_units`. No target received yet
   (the `no` policy): launch and shrink nothing.
3. Fewer than wanted: launch the difference, unless backing off after failures (rule 7).
4. A unit that died is simply not listed as PENDING/RUNNING any more, so rule 3 replaces it. A unit counted at
   the previous listing that a listing leaves out altogether (not even as stopping or gone) is counted once more,
   and only missing from the next listing too is it lost: the clouds' listings are eventually consistent (ECS
   ListTasks, EC2 DescribeInstances), and one that missed a running unit once doubled it (the replacement
   launched, then the surplus terminated the unit that was doing the work).
5. More than wanted: terminate the surplus in this order: PENDING units (newest first), launches not
   listed yet, units whose workers are all idle (in the scheduler's drain order), and only then the
   other units, newest first (most likely still booting). A unit with a busy worker is never chosen
   while an idle one exists.
   With `scale_down_cooldown_seconds`, a surplus is terminated only once it has lasted that long.
6. A unit PENDING for longer than `pending_timeout_seconds` is terminated (and, by rule 3, replaced); so is a
   unit this manager launched that runs but whose workers have not registered within that time (they cannot
   reach the scheduler, or never start), named with its detail.
7. Failures: a launch that raised or returned fewer units than asked, a unit stuck PENDING (rule 6), a
   launch never listed within the pending timeout, and a unit that ended on its own within
   `early_death_seconds` of its launch *without any of its workers ever registering* with the scheduler.
   After n failures no launch happens before 1 s, 2 s, 4 s ... (at most `backoff_cap_seconds`) after the
   latest one. A unit launched after the latest failure that has been RUNNING for `early_death_seconds`,
   or whose workers registered, clears the count.
8. A unit whose workers registered (the scheduler lists them in the target's `connected`) and that then
   ended is not a failed launch, however young: it is replaced at once (rule 3). Workers killed by the OOM
   killer every few seconds must not leave the manager backing off with no capacity.
9. A backend that cannot list its units is asked again after 1 s, 2 s, 4 s ... (at most
   `backoff_cap_seconds`); a successful list resets the count.
10. A unit the provider reclaims (`UnitInfo.reclaim_at`, a spot interruption; alive or already stopping) is
   reported once in `Plan.reclaimed` (the runner tells the scheduler, which drains its workers) and no longer
   counts: its replacement is launched at once.
11. With a billing period (`billing_granularity_seconds`, e.g. EC2's 1 s after a 60 s minimum, or an hour), a
   surplus RUNNING unit is stopped only when its paid time ends within `billing_margin_seconds`: until then
   stopping it saves nothing, and work that comes back finds it. Idle units whose paid time ends soonest go
   first. The cooldown (rule 5) applies before this.
12, 13. Units waiting in their provider's queue (`UnitInfo.wait`): one that can never start is terminated and holds
   launches back; at most `max_waiting_units` wait at once; the pending timeout does not apply to them
   (`unit_waits.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from math import ceil

from scaler.protocol.messages import ManagerTarget
from scaler.worker_manager.backend import UnitInfo, UnitState, unit_id_of_worker
from scaler.worker_manager.unit_waits import QueueRules, is_waiting, waits_of

#: Back-off exponent cap, only to keep the arithmetic small; the delay is capped by the settings anyway.
_MAX_EXPONENT = 30


@dataclass(frozen=True, slots=True)
class ReconcilerSettings:
    workers_per_unit: int = 1
    max_units: int | None = None  #: None = unlimited
    pending_timeout_seconds: float = 300.0  #: a unit PENDING longer than this is replaced
    backoff_base_seconds: float = 1.0
    backoff_cap_seconds: float = 30.0
    #: a unit ending on its own younger than this, its workers never registered, is a failed launch (a minute:
    #: a container or instance that crashes after a slow start on a busy host must back off too)
    early_death_seconds: float = 60.0
    #: a surplus of units is stopped only once it has lasted this long (--scale-down-cooldown-seconds)
    scale_down_cooldown_seconds: float = 0.0
    #: the provider bills a unit by this period (EC2: 1 s after a 60 s minimum; 0: billing ignored): rule 11
    billing_granularity_seconds: float = 0.0
    billing_minimum_seconds: float = 0.0
    #: a surplus RUNNING unit is stopped only when its paid time ends within this margin (rule 11)
    billing_margin_seconds: float = 10.0
    #: most units waiting in their provider's queue at once (rule 13); None: no cap
    max_waiting_units: int | None = None
    #: after a unit that can never start as asked, no launch for this long (rule 12)
    never_starts_hold_seconds: float = 300.0


@dataclass(frozen=True, slots=True)
class Target:
    """What the scheduler's latest ManagerTarget asks of this manager."""

    workers: int
    drain: tuple[str, ...] = ()  #: idle worker ids, best to stop first
    connected: tuple[str, ...] = ()  #: every connected worker of this manager

    @classmethod
    def of(cls, message: ManagerTarget) -> Target:
        # Every entry the scheduler sends is meant for this manager (a policy only names capability sets
        # the manager covers), so the entries are summed without matching capability values (#905).
        return cls(sum(max(0, entry.workers) for entry in message.entries), message.drain, message.connected)


@dataclass(frozen=True, slots=True)
class Plan:
    launch: int = 0  #: units to launch
    terminate: tuple[str, ...] = ()  #: unit ids to terminate
    notes: tuple[str, ...] = ()  #: what was noticed and decided, for the log
    #: units newly found reclaimed by the provider, with the seconds left: the scheduler drains their workers
    reclaimed: tuple[tuple[str, float], ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.launch and not self.terminate


class Reconciler:
    """Target + listed units + time -> a Plan. Keeps only the bookkeeping the next plan needs."""

    def __init__(self, settings: ReconcilerSettings) -> None:
        if settings.workers_per_unit < 1:
            raise ValueError("workers_per_unit must be at least 1")
        self.settings = settings
        self.failures = 0  #: failures since the count was last cleared (rule 7)
        self.units = 0  #: units counted at the last plan (heartbeat `units`)
        self.pending_units = 0  #: of those, PENDING or not listed yet (heartbeat `pending_units`)
        #: unit id -> created_at of the units counted at the last plan; a unit that leaves it unasked was lost
        self._counted: dict[str, float] = {}
        #: counted units the latest listing left out (rule 4): lost if the next one leaves them out too
        self._unseen: set[str] = set()
        #: unit id -> launch time, for ids `launch` returned that `list_units` has not shown yet
        self._unlisted: dict[str, float] = {}
        #: units terminate was asked for; dropped once the backend stops listing them (or lists them GONE)
        self._terminating: set[str] = set()
        self._last_failure_at = 0.0
        self._backoff_noted = False
        #: units whose workers the scheduler has listed as connected (rule 8); dropped with the unit
        self._registered: set[str] = set()
        #: since when there have been more units than wanted (rule 5's cooldown); None while there are not
        self._surplus_since: float | None = None
        self._list_failures = 0  #: failed listings in a row (rule 9)
        self._reclaimed: set[str] = set()  #: units reported reclaimed (rule 10), each once
        self._kept_for_billing: set[str] = set()  #: surplus units kept for their paid time (rule 11)
        #: unit id -> when this manager launched it, until its workers register (to measure boot time)
        self._launched_at: dict[str, float] = {}
        #: smoothed launch-to-registration time of the units this manager launched; 0 until one registered
        self.boot_seconds = 0.0
        #: rules 12 and 13; its `waits` and `held` are the heartbeat's
        self.queue = QueueRules(settings.max_waiting_units, settings.never_starts_hold_seconds)

    # ------------------------------------------------------------ the decision

    def wanted_units(self, workers: int) -> int:
        units = ceil(max(0, workers) / self.settings.workers_per_unit)
        max_units = self.settings.max_units
        return units if max_units is None else min(units, max_units)

    def plan(self, target: Target | None, units: Sequence[UnitInfo], now: float) -> Plan:
        self._list_failures = 0  # the units were listed
        notes: list[str] = []
        reclaimed = self._newly_reclaimed(units, now, notes)
        units = [unit for unit in units if unit.reclaim_at is None]  # going anyway: replaced now (rule 10)
        listed = {unit.unit_id: unit for unit in units}
        self._note_registered(target, listed, now)
        self._forget_finished(listed, now, notes)
        alive = [unit for unit in units if unit.is_alive and unit.unit_id not in self._terminating]
        unseen = {  # left out of this listing, not of the one before (rule 4): still counted, this once
            unit_id: created_at
            for unit_id, created_at in self._counted.items()
            if unit_id not in listed and unit_id not in self._unseen and unit_id not in self._terminating
        }
        self._unseen = set(unseen)
        self._note_losses(listed, {unit.unit_id for unit in alive} | self._unseen, now, notes)
        terminate = self._stuck(alive, now, notes) + self._expired_launches(now, notes)
        never = self.queue.never_starting(alive, now, notes)  # rule 12
        for _ in never:
            self._failure(now)
        terminate += never
        alive = [unit for unit in alive if unit.unit_id not in terminate]
        self.queue.held = ""
        self.queue.waits = waits_of(alive)
        self._clear_failures_if_healthy(alive, now)
        self._counted = {unit.unit_id: unit.created_at for unit in alive} | unseen
        count = len(alive) + len(self._unlisted)  # what a surplus is taken from: the unseen are not terminated
        self.units = count + len(unseen)
        self.pending_units = sum(1 for unit in alive if unit.state is UnitState.PENDING) + len(self._unlisted)
        launch = 0
        if target is not None:
            wanted = self.wanted_units(target.workers)
            if count + len(unseen) < wanted:
                waiting = sum(1 for unit in alive if is_waiting(unit)) + len(self._unlisted)
                launch = self.queue.allowed(wanted - count - len(unseen), waiting, now, notes)  # rules 12, 13
                launch = self._launches_allowed(launch, now, notes) if launch else 0
            elif count > wanted and self._cooling_down(now, count, wanted, notes):
                pass
            elif count > wanted:
                victims = choose_victims(
                    alive,
                    self._unlisted,
                    target.drain,
                    self.settings.workers_per_unit,
                    count - wanted,
                    self.paid_seconds_left if self.settings.billing_granularity_seconds > 0 else None,
                    now,
                )
                victims = self._paid_for_kept(alive, victims, now, notes)
                if victims:
                    notes.append(f"{count} units for a target of {wanted}: terminating {', '.join(victims)}")
                terminate.extend(victims)
                for unit_id in victims:  # going on request, not lost
                    self._counted.pop(unit_id, None)
        if target is None or count <= self.wanted_units(target.workers):
            self._surplus_since = None
        return Plan(launch, tuple(terminate), tuple(notes), reclaimed)

    def paid_seconds_left(self, unit: UnitInfo, now: float) -> float:
        """Seconds of the unit's current billing period still paid for (rule 11)."""
        granularity = self.settings.billing_granularity_seconds
        if granularity <= 0:
            return 0.0
        age = max(0.0, now - unit.created_at)
        paid = max(self.settings.billing_minimum_seconds, ceil(age / granularity) * granularity)
        return max(0.0, unit.created_at + paid - now)

    def _paid_for_kept(self, alive: Sequence[UnitInfo], victims: list[str], now: float, notes: list[str]) -> list[str]:
        """Rule 11: a surplus RUNNING unit whose paid time does not end soon stays (stopping it saves nothing
        yet, and work may come back); it goes at the end of its paid period if still surplus then."""
        if self.settings.billing_granularity_seconds <= 0:
            return victims
        running = {unit.unit_id: unit for unit in alive if unit.state is UnitState.RUNNING}
        margin = self.settings.billing_margin_seconds
        kept = [
            unit_id for unit_id in victims
            if unit_id in running and self.paid_seconds_left(running[unit_id], now) > margin
        ]  # fmt: skip
        new = [unit_id for unit_id in kept if unit_id not in self._kept_for_billing]
        self._kept_for_billing = set(kept)
        if new:  # said once per unit, not on every pass
            notes.append(f"keeping {', '.join(new)} until their paid time ends (billing)")
        return [unit_id for unit_id in victims if unit_id not in kept]

    def _newly_reclaimed(
        self, units: Sequence[UnitInfo], now: float, notes: list[str]
    ) -> tuple[tuple[str, float], ...]:
        # a unit the provider already began stopping counts too (Fargate Spot: desired STOPPED from the notice on)
        found = tuple(
            (unit.unit_id, max(0.0, unit.reclaim_at - now))
            for unit in units
            if unit.reclaim_at is not None
            and _is_on_the_way(unit)
            and unit.unit_id not in self._reclaimed
            and unit.unit_id not in self._terminating
        )
        for unit_id, seconds in found:
            self._reclaimed.add(unit_id)
            self._counted.pop(unit_id, None)  # going on the provider's word: not a lost unit (rule 7)
            notes.append(f"unit {unit_id} is reclaimed by its provider in {seconds:.0f} s: draining and replacing it")
        self._reclaimed &= {unit.unit_id for unit in units if _is_on_the_way(unit)}
        return found

    def _cooling_down(self, now: float, count: int, wanted: int, notes: list[str]) -> bool:
        """Whether a surplus is still within the scale-down cooldown (and kept)."""
        cooldown = self.settings.scale_down_cooldown_seconds
        if cooldown <= 0:
            return False
        if self._surplus_since is None:
            self._surplus_since = now
            notes.append(f"{count} units for a target of {wanted}: keeping them for the {cooldown:g} s cooldown")
        return now - self._surplus_since < cooldown

    # ------------------------------------------------------------ what the runner reports back

    def launched(self, unit_ids: Sequence[str], requested: int, now: float) -> None:
        for unit_id in unit_ids:
            self._unlisted[unit_id] = now
            self._launched_at[unit_id] = now
        if len(unit_ids) < requested:
            self._failure(now)

    def launch_failed(self, now: float) -> None:
        self._failure(now)

    def terminating(self, unit_ids: Sequence[str]) -> None:
        for unit_id in unit_ids:
            self._terminating.add(unit_id)
            self._unlisted.pop(unit_id, None)

    def terminate_failed(self, unit_ids: Sequence[str]) -> None:
        """The backend raised: count the units again, so that the next plan retries."""
        self._terminating.difference_update(unit_ids)

    def list_failed(self) -> float:
        """The backend could not list its units: seconds until the next attempt (rule 9)."""
        self._list_failures += 1
        return self._backoff(self._list_failures)

    def backoff_seconds(self) -> float:
        """How long launches wait after the latest failure (rule 7)."""
        return self._backoff(self.failures)

    def _backoff(self, failures: int) -> float:
        if not failures:
            return 0.0
        exponent = min(failures - 1, _MAX_EXPONENT)
        return float(min(self.settings.backoff_cap_seconds, self.settings.backoff_base_seconds * 2**exponent))

    # ------------------------------------------------------------ bookkeeping

    def _forget_finished(self, listed: Mapping[str, UnitInfo], now: float, notes: list[str]) -> None:
        for unit_id in list(self._terminating):
            unit = listed.get(unit_id)
            if unit is None or unit.state is UnitState.GONE:
                self._terminating.discard(unit_id)
        for unit_id, launched_at in list(self._unlisted.items()):
            unit = listed.get(unit_id)
            if unit is None:
                continue
            del self._unlisted[unit_id]
            if unit.is_alive or unit_id in self._terminating:
                continue
            ended = _ended(unit_id, now - launched_at, unit.detail)
            if unit_id in self._registered:  # its workers came and it ended before a listing counted it
                notes.append(f"{ended} after its workers registered: replacing it")
            else:
                notes.append(f"{ended} before any of its workers registered: counted as a failed launch")
                self._failure(now)

    def _note_registered(self, target: Target | None, listed: Mapping[str, UnitInfo], now: float) -> None:
        self._registered &= listed.keys() | self._counted.keys()
        known = listed.keys() | self._unlisted.keys()
        self._launched_at = {unit_id: at for unit_id, at in self._launched_at.items() if unit_id in known}
        if target is None:
            return
        for worker_id in target.connected:
            unit_id = unit_id_of_worker(worker_id)
            if unit_id is not None and unit_id in known:
                if unit_id not in self._registered and self.failures:
                    self.failures = 0  # a launch worked: the back-off is over (rule 7)
                self._registered.add(unit_id)
                launched_at = self._launched_at.pop(unit_id, None)
                if launched_at is not None:
                    self._measured_boot(max(0.0, now - launched_at))

    def _measured_boot(self, seconds: float) -> None:
        """A new launch-to-registration sample (to the heartbeat's precision): a mean that follows changes."""
        self.boot_seconds = seconds if self.boot_seconds == 0 else 0.7 * self.boot_seconds + 0.3 * seconds

    def _note_losses(self, listed: Mapping[str, UnitInfo], alive_ids: set[str], now: float, notes: list[str]) -> None:
        for unit_id, created_at in self._counted.items():
            if unit_id in alive_ids or unit_id in self._terminating:
                continue
            age = now - created_at
            ended = _ended(unit_id, age, listed[unit_id].detail if unit_id in listed else "")
            if unit_id in self._registered:
                notes.append(f"{ended} after its workers registered: replacing it")
            elif age < self.settings.early_death_seconds:
                notes.append(f"{ended} before any of its workers registered: counted as a failed launch")
                self._failure(now)
            else:
                notes.append(f"{ended}: it will be replaced")

    def _stuck(self, alive: Sequence[UnitInfo], now: float, notes: list[str]) -> list[str]:
        stuck = []
        limit = self.settings.pending_timeout_seconds
        for unit in alive:
            waited = now - unit.created_at
            launched_at = self._launched_at.get(unit.unit_id)
            if unit.state is UnitState.PENDING and unit.wait is not None:
                continue  # waits in its provider's queue, which decides when it starts (rule 13)
            if unit.state is UnitState.PENDING and waited > limit:
                notes.append(
                    f"unit {unit.unit_id} is still booting after {waited:.0f} s (--boot-timeout-seconds {limit:g}): "
                    "terminating it"
                )
            elif launched_at is not None and now - launched_at > limit and unit.unit_id not in self._registered:
                # running, but its workers never reached the scheduler (rule 6): its detail says why if it knows
                detail = f" ({unit.detail})" if unit.detail else ""
                notes.append(
                    f"unit {unit.unit_id} runs but none of its workers registered within {limit:g} s "
                    f"(--boot-timeout-seconds){detail}: terminating it"
                )
            else:
                continue
            self._failure(now)
            stuck.append(unit.unit_id)
        return stuck

    def _expired_launches(self, now: float, notes: list[str]) -> list[str]:
        expired = [
            unit_id
            for unit_id, launched_at in self._unlisted.items()
            if now - launched_at > self.settings.pending_timeout_seconds
        ]
        for unit_id in expired:
            notes.append(f"unit {unit_id} was launched but never listed: terminating it")
            del self._unlisted[unit_id]
            self._failure(now)
        return expired

    def _clear_failures_if_healthy(self, alive: Sequence[UnitInfo], now: float) -> None:
        if self.failures and any(
            unit.state is UnitState.RUNNING
            and unit.created_at > self._last_failure_at
            and now - unit.created_at >= self.settings.early_death_seconds
            for unit in alive
        ):
            self.failures = 0

    def _failure(self, now: float) -> None:
        self.failures += 1
        self._last_failure_at = max(self._last_failure_at, now)
        self._backoff_noted = False

    def _launches_allowed(self, missing: int, now: float, notes: list[str]) -> int:
        delay = self.backoff_seconds()
        if delay and now < self._last_failure_at + delay:
            self.queue.held = f"{self.failures} failed launch(es) in a row: backing off up to {delay:g} s"
            if not self._backoff_noted:
                self._backoff_noted = True
                notes.append(f"{self.failures} failure(s) in a row: next launch {delay:g} s after the last one")
            return 0
        return missing


def _ended(unit_id: str, age_seconds: float, detail: str) -> str:
    return f"unit {unit_id} ended on its own {age_seconds:.0f} s after its launch" + (f" ({detail})" if detail else "")


def choose_victims(
    alive: Sequence[UnitInfo],
    unlisted: Mapping[str, float],
    drain: Sequence[str],
    workers_per_unit: int,
    count: int,
    paid_seconds_left: Callable[[UnitInfo, float], float] | None = None,
    now: float = 0.0,
) -> list[str]:
    """The `count` units to terminate first (rule 5); with billing (rule 11), idle units whose paid time ends
    soonest go first (they save the most)."""
    by_worker = {worker_id: unit.unit_id for unit in alive for worker_id in unit.worker_ids}
    idle_workers: dict[str, int] = {}
    first_rank: dict[str, int] = {}
    for rank, worker_id in enumerate(drain):
        unit_id = by_worker.get(worker_id) or unit_id_of_worker(worker_id)
        if unit_id is None:
            continue
        idle_workers[unit_id] = idle_workers.get(unit_id, 0) + 1
        first_rank.setdefault(unit_id, rank)

    def is_idle(unit: UnitInfo) -> bool:
        return idle_workers.get(unit.unit_id, 0) >= (len(unit.worker_ids) or workers_per_unit)

    def newest_first(unit: UnitInfo) -> tuple[float, str]:
        return -unit.created_at, unit.unit_id

    pending = sorted((unit for unit in alive if unit.state is UnitState.PENDING), key=newest_first)
    running = [unit for unit in alive if unit.state is not UnitState.PENDING]
    idle = sorted((unit for unit in running if is_idle(unit)), key=lambda unit: first_rank[unit.unit_id])
    if paid_seconds_left is not None:
        idle.sort(key=lambda unit: paid_seconds_left(unit, now))  # stable: the drain order breaks ties
    others = sorted((unit for unit in running if not is_idle(unit)), key=newest_first)
    not_listed = sorted(unlisted, key=lambda unit_id: (-unlisted[unit_id], unit_id))
    order = [unit.unit_id for unit in pending] + not_listed + [unit.unit_id for unit in idle + others]
    return order[:count]


def _is_on_the_way(unit: UnitInfo) -> bool:
    """Alive, or stopping but not gone yet."""
    return unit.is_alive or unit.state is UnitState.STOPPING
