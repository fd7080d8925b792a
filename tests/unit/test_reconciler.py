"""The worker manager's reconciler: a pure function of target, listed units and time (plus bookkeeping)."""

from __future__ import annotations

import pytest

from scaler.protocol.messages import ManagerTarget, TargetEntry, UnitWaits
from scaler.worker_manager.backend import UnitInfo, UnitState, UnitWait, unit_id_of_worker, worker_type_for_unit
from scaler.worker_manager.reconciler import Reconciler, ReconcilerSettings, Target, choose_victims
from scaler.worker_manager.unit_waits import describe_waits

RUNNING, PENDING, STOPPING, GONE = UnitState.RUNNING, UnitState.PENDING, UnitState.STOPPING, UnitState.GONE
T0 = 1_000_000.0  #: wall-clock-like times, as the runner passes them


def unit(
    unit_id: str, state: UnitState = RUNNING, created_at: float = T0 - 100, workers: tuple[str, ...] = ()
) -> UnitInfo:
    return UnitInfo(unit_id, state, created_at, workers)


def worker_of(unit_id: str, n: int = 0) -> str:
    return f"Worker|{worker_type_for_unit('NAT', unit_id)}|{n:032x}"


def reconciler(**settings: object) -> Reconciler:
    return Reconciler(ReconcilerSettings(**settings))  # type: ignore[arg-type]


# ---------------------------------------------------------------- counting and launching


def test_no_target_yet_changes_nothing() -> None:
    r = reconciler()
    plan = r.plan(None, [unit("a"), unit("b")], T0)
    assert plan.is_empty
    assert r.units == 2


def test_launches_what_is_missing() -> None:
    plan = reconciler().plan(Target(3), [unit("a")], T0)
    assert plan.launch == 2 and plan.terminate == ()


def test_units_round_up_and_respect_max_units() -> None:
    assert reconciler(workers_per_unit=4).plan(Target(5), [], T0).launch == 2
    assert reconciler(max_units=3).plan(Target(10), [], T0).launch == 3
    assert reconciler(max_units=0).plan(Target(10), [], T0).launch == 0


def test_launches_not_listed_yet_count_so_nothing_is_doubled() -> None:
    r = reconciler()
    assert r.plan(Target(2), [], T0).launch == 2
    r.launched(["a", "b"], 2, T0)
    assert r.plan(Target(2), [], T0 + 1).is_empty  # the backend does not list them yet
    assert (r.units, r.pending_units) == (2, 2)
    assert r.plan(Target(2), [unit("a", created_at=T0), unit("b", PENDING, T0)], T0 + 2).is_empty
    assert (r.units, r.pending_units) == (2, 1)


def test_adopts_units_that_exist_at_start_up() -> None:
    r = reconciler()
    units = [unit("old1", created_at=T0 - 200), unit("old2", created_at=T0 - 100)]
    assert r.plan(Target(2), units, T0).is_empty
    assert r.plan(Target(1), units, T0).terminate == ("old2",)  # without idle workers: the newest first


def test_stopping_and_gone_units_do_not_count() -> None:
    plan = reconciler().plan(Target(2), [unit("a"), unit("b", STOPPING), unit("c", GONE)], T0)
    assert plan.launch == 1 and plan.terminate == ()


def test_target_sums_every_entry_without_matching_values() -> None:
    # #905: the scheduler only sends entries for this manager; their capability values are not compared
    message = ManagerTarget(
        entries=(TargetEntry((("gpu", 2),), 2), TargetEntry((), 3), TargetEntry((("linux", -1),), 1)),
        drain=("w1",),
    )
    assert Target.of(message) == Target(6, ("w1",))
    assert Target.of(ManagerTarget(entries=())) == Target(0)


# ---------------------------------------------------------------- dead units and back-off


def test_a_dead_unit_is_replaced_at_once() -> None:
    r = reconciler()
    assert r.plan(Target(2), [unit("a"), unit("b")], T0).is_empty
    plan = r.plan(Target(2), [unit("a"), unit("b", GONE)], T0 + 1)  # b died after running for a long time
    assert plan.launch == 1
    assert any("b ended on its own" in note for note in plan.notes)
    assert r.failures == 0


def test_a_unit_one_listing_leaves_out_is_counted_once_more_and_lost_at_the_next() -> None:
    """Rule 4: an eventually consistent listing that misses a running unit once must not double it (CI: the ECS
    listing left a unit out 3 s after its launch, its replacement was launched, and the surplus then terminated the
    unit that was running the work). Checked with the unseen unit dropped at once: the first assert fails."""
    r = reconciler()
    assert r.plan(Target(2), [unit("a"), unit("b")], T0).is_empty
    missed = r.plan(Target(2), [unit("a")], T0 + 1)
    assert missed.is_empty and r.units == 2, "b is counted once more"
    assert r.plan(Target(2), [unit("a"), unit("b")], T0 + 2).is_empty, "b is back: nothing happened"
    r.plan(Target(2), [unit("a")], T0 + 3)
    lost = r.plan(Target(2), [unit("a")], T0 + 4)
    assert lost.launch == 1 and any("b ended on its own" in note for note in lost.notes)


def test_early_deaths_back_off_exponentially_up_to_the_cap() -> None:
    r = reconciler(backoff_base_seconds=1, backoff_cap_seconds=4, early_death_seconds=10)
    now = T0
    delays = []
    for attempt in range(5):
        plan = r.plan(Target(1), [], now)
        assert plan.launch == 1, f"attempt {attempt}"
        r.launched([f"u{attempt}"], 1, now)
        r.plan(Target(1), [unit(f"u{attempt}", created_at=now)], now)
        now += 1  # ... and it dies one second later
        assert r.plan(Target(1), [unit(f"u{attempt}", GONE, created_at=now - 1)], now).launch == 0
        delays.append(r.backoff_seconds())
        now += r.backoff_seconds()  # the failure happened at `now - delay`: the next launch is allowed now
    assert delays == [1, 2, 4, 4, 4]


def test_a_backend_that_cannot_list_is_asked_again_later_and_later_until_a_list_works() -> None:
    r = reconciler(backoff_base_seconds=1, backoff_cap_seconds=4)
    assert [r.list_failed() for _ in range(5)] == [1, 2, 4, 4, 4]
    r.plan(Target(1), [], T0)  # the units were listed at last
    assert r.list_failed() == 1
    assert r.failures == 0 and r.backoff_seconds() == 0  # listing is not launching: launches do not wait


def test_a_young_unit_whose_workers_registered_is_replaced_at_once_without_back_off() -> None:
    """#19: workers killed every few seconds (the OOM killer) must not leave the manager backing off."""
    r = reconciler(early_death_seconds=10)
    now = T0
    for attempt in range(5):
        plan = r.plan(Target(1), [], now)
        assert plan.launch == 1, f"attempt {attempt}: no launch while backing off"
        r.launched([f"u{attempt}"], 1, now)
        r.plan(Target(1, connected=(worker_of(f"u{attempt}"),)), [unit(f"u{attempt}", created_at=now)], now + 0.5)
        now += 2  # its worker registered, then it was killed two seconds after its launch
        lost = r.plan(Target(1), [unit(f"u{attempt}", GONE, created_at=now - 2)], now)
        assert any("after its workers registered" in note for note in lost.notes)
        assert lost.launch == 1, "the replacement waits for a back-off"
        r.launched([], 0, now)  # (the replacement is not followed further; the next round launches anew)
    assert r.failures == 0


def test_boot_time_is_measured_from_launch_to_registration_of_its_own_launches_only() -> None:
    r = reconciler()
    adopted = unit("old", created_at=T0 - 3600)  # there before this manager started: not a boot to measure
    assert r.plan(Target(2, connected=(worker_of("old"),)), [adopted], T0).launch == 1
    assert r.boot_seconds == 0.0, "nothing measured yet"
    r.launched(["u1"], 1, T0)
    r.plan(Target(2, connected=(worker_of("old"),)), [adopted, unit("u1", PENDING, created_at=T0)], T0 + 20)
    assert r.boot_seconds == 0.0, "u1 has not registered"
    r.plan(Target(2, connected=(worker_of("old"), worker_of("u1"))), [adopted, unit("u1", created_at=T0)], T0 + 40)
    assert r.boot_seconds == 40.0
    r.plan(Target(3, connected=(worker_of("old"), worker_of("u1"))), [adopted, unit("u1", created_at=T0)], T0 + 50)
    r.launched(["u2"], 1, T0 + 50)
    units = [adopted, unit("u1", created_at=T0), unit("u2", created_at=T0 + 50)]
    r.plan(Target(3, connected=(worker_of("old"), worker_of("u1"), worker_of("u2"))), units, T0 + 60)
    assert r.boot_seconds == pytest.approx(0.7 * 40.0 + 0.3 * 10.0), "a mean that follows changes"


def test_a_young_unit_that_never_registered_is_a_failed_launch() -> None:
    r = reconciler(early_death_seconds=10)
    r.plan(Target(1), [], T0)
    r.launched(["u"], 1, T0)
    r.plan(Target(1), [unit("u", created_at=T0)], T0 + 0.5)
    plan = r.plan(Target(1), [unit("u", GONE, created_at=T0)], T0 + 2)
    assert plan.launch == 0 and r.failures == 1
    assert any("before any of its workers registered" in note for note in plan.notes)


def test_back_off_holds_launches_until_the_delay_has_passed() -> None:
    r = reconciler(backoff_base_seconds=1)
    r.launch_failed(T0)
    r.launch_failed(T0)  # two failures: 2 s
    assert r.plan(Target(1), [], T0 + 1.9).launch == 0
    assert r.plan(Target(1), [], T0 + 2.0).launch == 1


def test_back_off_is_noted_once() -> None:
    r = reconciler()
    r.launch_failed(T0)
    first = r.plan(Target(1), [], T0 + 0.1)
    second = r.plan(Target(1), [], T0 + 0.2)
    assert len(first.notes) == 1 and second.notes == ()


def test_a_partial_launch_counts_as_a_failure() -> None:
    r = reconciler()
    r.launched(["a"], 3, T0)
    assert r.failures == 1
    assert r.plan(Target(3), [], T0 + 0.5).launch == 0


def test_a_healthy_unit_launched_after_the_failures_clears_them() -> None:
    r = reconciler(early_death_seconds=10)
    r.launch_failed(T0)
    r.launch_failed(T0)
    r.plan(Target(1), [unit("old", created_at=T0 - 500)], T0 + 20)  # an old unit proves nothing
    assert r.failures == 2
    r.plan(Target(1), [unit("new", created_at=T0 + 5)], T0 + 20)
    assert r.failures == 0


def test_a_unit_listed_gone_right_after_its_launch_is_a_failure() -> None:
    r = reconciler()
    r.launched(["a"], 1, T0)
    plan = r.plan(Target(1), [unit("a", GONE, T0)], T0 + 1)
    assert r.failures == 1 and plan.launch == 0


def test_a_unit_whose_workers_registered_and_that_ended_before_its_first_listing_is_named() -> None:
    """Seen in a whole run: a worker killed by hand right after it registered, before the manager listed its unit;
    the unit was replaced and nothing said why."""
    r = reconciler()
    r.launched(["a"], 1, T0)
    plan = r.plan(Target(1, connected=(worker_of("a"),)), [unit("a", GONE, T0)], T0 + 1)
    assert any("a ended on its own" in note and "after its workers registered" in note for note in plan.notes)
    assert r.failures == 0 and plan.launch == 1


def test_a_unit_stuck_pending_is_terminated_and_replaced() -> None:
    r = reconciler(pending_timeout_seconds=60, backoff_base_seconds=1)
    stuck = unit("a", PENDING, created_at=T0)
    plan = r.plan(Target(1), [stuck], T0 + 61)
    assert plan.terminate == ("a",) and plan.launch == 0  # the failure backs off the replacement by 1 s
    r.terminating(["a"])
    assert r.plan(Target(1), [unit("a", STOPPING, T0)], T0 + 62).launch == 1


def test_a_running_unit_whose_workers_never_register_is_named_and_replaced_after_the_boot_timeout() -> None:
    """#28: a unit that cannot reach the scheduler runs (the cloud says RUNNING) but its workers never register:
    named, with what it reported, and terminated as a failed launch. Checked by switching it off: without the
    rule, the unit is kept for ever (the plan terminates nothing)."""
    r = reconciler(pending_timeout_seconds=60)
    r.plan(Target(1), [], T0)
    r.launched(["u"], 1, T0)
    cut_off = UnitInfo("u", RUNNING, T0, detail="task 1; unreachable, cannot reach the scheduler at tcp://x:1")
    assert r.plan(Target(1), [cut_off], T0 + 59).terminate == ()
    plan = r.plan(Target(1), [cut_off], T0 + 61)
    assert plan.terminate == ("u",) and r.failures == 1
    assert any("none of its workers registered within 60 s" in note and "cannot reach" in note for note in plan.notes)
    registered = reconciler(pending_timeout_seconds=60)
    registered.plan(Target(1), [], T0)
    registered.launched(["v"], 1, T0)
    assert registered.plan(Target(1, connected=(worker_of("v"),)), [unit("v", created_at=T0)], T0 + 5).is_empty
    assert registered.plan(Target(1, connected=()), [unit("v", created_at=T0)], T0 + 100).terminate == ()


def test_a_launch_never_listed_is_given_up_after_the_pending_timeout() -> None:
    r = reconciler(pending_timeout_seconds=60)
    r.launched(["ghost"], 1, T0)
    plan = r.plan(Target(1), [], T0 + 61)
    assert plan.terminate == ("ghost",)
    assert r.failures == 1


# ---------------------------------------------------------------- shrinking


def test_terminated_units_are_not_counted_nor_lost() -> None:
    r = reconciler()
    units = [unit("a", created_at=T0 - 200), unit("b", created_at=T0 - 100)]
    plan = r.plan(Target(1), units, T0)
    assert plan.terminate == ("b",)
    r.terminating(list(plan.terminate))
    assert r.plan(Target(1), units, T0 + 1).is_empty  # still listed RUNNING by a slow backend: not counted
    after = r.plan(Target(1), units[:1], T0 + 2)  # gone on request
    assert after.is_empty and after.notes == () and r.failures == 0


def test_a_failed_terminate_is_retried() -> None:
    r = reconciler()
    units = [unit("a", created_at=T0 - 200), unit("b", created_at=T0 - 100)]
    victims = r.plan(Target(1), units, T0).terminate
    r.terminating(list(victims))
    r.terminate_failed(list(victims))
    assert r.plan(Target(1), units, T0 + 1).terminate == victims


def test_victims_pending_first_then_unlisted_then_idle_in_drain_order_then_newest() -> None:
    alive = [
        unit("busy_old", created_at=T0 - 50),
        unit("idle1", created_at=T0 - 40),
        unit("pend", PENDING, T0 - 5),
        unit("busy_new", created_at=T0 - 10),
        unit("idle2", created_at=T0 - 30),
    ]
    drain = (worker_of("idle2"), worker_of("idle1"))
    order = choose_victims(alive, {"launching": T0}, drain, workers_per_unit=1, count=10)
    assert order == ["pend", "launching", "idle2", "idle1", "busy_new", "busy_old"]


def test_never_a_busy_unit_while_an_idle_one_exists() -> None:
    r = reconciler()
    units = [unit("busy1", created_at=T0 - 1), unit("busy2", created_at=T0 - 2), unit("idle", created_at=T0 - 300)]
    plan = r.plan(Target(2, drain=(worker_of("idle"),)), units, T0)
    assert plan.terminate == ("idle",)


def test_drain_ids_match_exact_worker_ids_when_the_backend_knows_them() -> None:
    units = [unit("a", workers=("w-a",)), unit("b", created_at=T0 - 1, workers=("w-b",))]
    assert choose_victims(units, {}, ("w-a",), workers_per_unit=1, count=1) == ["a"]


def test_a_multi_worker_unit_is_idle_only_when_all_its_workers_are() -> None:
    units = [unit("half", created_at=T0 - 100), unit("full", created_at=T0 - 200)]
    drain = (worker_of("half", 0), worker_of("full", 0), worker_of("full", 1))
    assert choose_victims(units, {}, drain, workers_per_unit=2, count=1) == ["full"]


def test_shrinking_to_zero_terminates_everything() -> None:
    units = [unit("a"), unit("b", PENDING), unit("c")]
    plan = reconciler().plan(Target(0), units, T0)
    assert sorted(plan.terminate) == ["a", "b", "c"]


def test_unknown_drain_ids_are_ignored() -> None:
    units = [unit("a", created_at=T0 - 2), unit("b", created_at=T0 - 1)]
    drain = ("Worker|FIX|0123", "Client|x", worker_of("zzz"))
    assert choose_victims(units, {}, drain, workers_per_unit=1, count=1) == ["b"]


# ---------------------------------------------------------------- worker ids <-> unit ids


def test_unit_ids_round_trip_through_worker_ids() -> None:
    assert unit_id_of_worker(worker_of("3f2a9c1b0d4e")) == "3f2a9c1b0d4e"
    assert unit_id_of_worker("Worker|MY-TYPE-abc|ffff") == "abc"  # a prefix may contain '-'
    assert unit_id_of_worker("Worker|FIX|ffff") is None
    assert unit_id_of_worker("Worker|NAT-|ffff") is None
    assert unit_id_of_worker("Client|NAT-a|ffff") is None


@pytest.mark.parametrize("bad", ["", "a-b", "a|b"])
def test_unit_ids_with_separators_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        worker_type_for_unit("NAT", bad)


def test_workers_per_unit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        reconciler(workers_per_unit=0)


def test_a_scale_down_cooldown_keeps_a_surplus_until_it_has_lasted_that_long() -> None:
    r = reconciler(scale_down_cooldown_seconds=30)
    units = [unit("a"), unit("b")]
    assert r.plan(Target(2), units, T0).is_empty
    held = r.plan(Target(1), units, T0 + 1)
    assert not held.terminate and any("cooldown" in note for note in held.notes)
    assert not r.plan(Target(1), units, T0 + 30).terminate
    assert r.plan(Target(2), units, T0 + 31).is_empty  # the surplus ended: the clock starts over
    assert not r.plan(Target(1), units, T0 + 40).terminate
    assert len(r.plan(Target(1), units, T0 + 71).terminate) == 1


# ---------------------------------------------------------------- rule 10: reclaimed units


def test_a_reclaimed_unit_is_reported_once_and_replaced_at_once() -> None:
    from dataclasses import replace

    r = reconciler()
    assert r.plan(Target(2), [unit("a"), unit("b")], T0).is_empty
    reclaimed = replace(unit("b"), reclaim_at=T0 + 120)
    plan = r.plan(Target(2), [unit("a"), reclaimed], T0 + 1)
    assert plan.reclaimed == (("b", 119.0),) and plan.launch == 1, "its replacement starts while it drains"
    assert r.failures == 0, "a unit the provider takes back is not a failed launch"
    again = r.plan(Target(2), [unit("a"), reclaimed, unit("c", created_at=T0 + 2)], T0 + 3)
    assert again.reclaimed == () and again.launch == 0 and again.terminate == ()


# ---------------------------------------------------------------- rule 11: billing-aware scale-down


def test_a_surplus_unit_is_kept_until_its_paid_time_ends_and_the_cheapest_to_stop_goes_first() -> None:
    r = reconciler(billing_granularity_seconds=3600, billing_margin_seconds=10)
    # hourly billing: "a" started 3,590 s ago (10 s of its hour left), "b" 600 s ago (3,000 s left); both idle
    units = [unit("a", created_at=T0 - 3590, workers=(worker_of("a"),)),
             unit("b", created_at=T0 - 600, workers=(worker_of("b"),))]  # fmt: skip
    assert r.plan(Target(2), units, T0).is_empty
    drain = (worker_of("b"), worker_of("a"))  # the scheduler would stop "b" first; billing says "a"
    plan = r.plan(Target(1, drain=drain), units, T0 + 1)
    assert plan.terminate == ("a",), "the unit whose paid hour ends now goes; the other is paid for"
    both = r.plan(Target(0, drain=drain), units[1:], T0 + 2)
    assert both.terminate == () and any("paid time" in note for note in both.notes)
    assert not any("paid time" in note for note in r.plan(Target(0, drain=drain), units[1:], T0 + 3).notes)
    later = r.plan(Target(0, drain=drain), units[1:], T0 - 600 + 3600 - 5)
    assert later.terminate == ("b",), "at the end of its paid hour, a unit still in surplus goes"


def test_paid_time_follows_the_minimum_and_the_granularity() -> None:
    r = reconciler(billing_granularity_seconds=1, billing_minimum_seconds=60)
    assert r.paid_seconds_left(unit("a", created_at=T0 - 20), T0) == 40  # EC2: a 60 s minimum
    assert r.paid_seconds_left(unit("a", created_at=T0 - 90.5), T0) == 0.5  # then per second
    assert reconciler().paid_seconds_left(unit("a"), T0) == 0.0


# ---------------------------------------------------------------- units waiting in their provider's queue (12, 13)


def waiting(unit_id: str, reason: str = "Resources", created_at: float = T0, never: bool = False) -> UnitInfo:
    return UnitInfo(unit_id, PENDING, created_at, wait=UnitWait(reason, f"words of {reason}", never))


def test_waiting_units_count_as_pending_capacity_and_are_reported_by_reason() -> None:
    r = reconciler()
    units = [unit("a"), waiting("b"), waiting("c"), waiting("d", "Priority"), unit("e", PENDING, T0)]
    assert r.plan(Target(5), units, T0 + 1).is_empty  # nothing more is launched because units wait
    assert (r.units, r.pending_units) == (5, 4)
    words = "words of Resources", "words of Priority"
    assert r.queue.waits == (UnitWaits("Resources", 2, words[0]), UnitWaits("Priority", 1, words[1]))
    assert r.queue.held == ""


def test_a_unit_waiting_in_the_queue_is_not_stuck_however_long_it_waits() -> None:
    r = reconciler(pending_timeout_seconds=300)
    plan = r.plan(Target(2), [waiting("a", created_at=T0), unit("b", PENDING, T0)], T0 + 3600)
    assert plan.terminate == ("b",)  # the booting one is stuck (rule 6); the one in the queue waits on (rule 13)


def test_at_most_max_waiting_units_wait_at_once() -> None:
    r = reconciler(max_waiting_units=3)
    plan = r.plan(Target(10), [waiting("a")], T0)
    assert plan.launch == 2  # 1 waits: 2 more may, the other 7 are held back
    assert "max_waiting_units" in r.queue.held
    assert any("launching 2 of the 9 missing" in note for note in plan.notes)
    r.launched(["b", "c"], 2, T0)
    plan = r.plan(Target(10), [waiting("a")], T0 + 1)  # b and c not listed yet: they may wait too
    assert plan.launch == 0 and plan.notes == ()  # said once
    plan = r.plan(Target(10), [unit("a"), waiting("b"), unit("c")], T0 + 2)  # a and c started: 2 more may wait
    assert plan.launch == 2
    r.launched(["d", "e"], 2, T0 + 2)
    everything = [unit("a"), waiting("b"), unit("c"), unit("d"), unit("e"), unit("f")]
    assert r.plan(Target(7), everything, T0 + 3).launch == 1
    assert r.queue.held == ""  # 1 missing, 1 waits: under the cap


def test_booting_units_are_not_capped_as_waiting() -> None:
    r = reconciler(max_waiting_units=2)
    assert r.plan(Target(6), [unit(name, PENDING, T0) for name in "abcd"], T0).launch == 2


def test_a_unit_that_can_never_start_is_ended_named_and_holds_launches_back() -> None:
    r = reconciler(never_starts_hold_seconds=300)
    plan = r.plan(Target(2), [unit("a"), waiting("b", "PartitionConfig", never=True)], T0)
    assert plan.terminate == ("b",) and plan.launch == 0
    assert plan.notes[0].startswith("unit b can never start as asked (PartitionConfig: words of PartitionConfig)")
    assert r.failures == 1
    r.terminating(["b"])
    plan = r.plan(Target(2), [unit("a"), UnitInfo("b", STOPPING, T0)], T0 + 100)
    assert plan.is_empty  # not relaunched at once ...
    assert r.queue.held.startswith("a unit can never start as asked (PartitionConfig")
    assert r.plan(Target(2), [unit("a")], T0 + 301).launch == 1  # ... but once the hold is over


def test_unit_waits_are_described_in_one_line() -> None:
    assert describe_waits(()) == ""
    waits = (UnitWaits("Resources", 3, "no room"), UnitWaits("Priority", 1))
    assert describe_waits(waits) == "4 unit(s) wait in the provider's queue: 3 Resources (no room), 1 Priority"
    assert UnitWait("Resources").describe() == "Resources"
    assert UnitWait("Unschedulable", "0/3 nodes are available").describe() == "Unschedulable: 0/3 nodes are available"
