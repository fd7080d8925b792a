"""Simulated time (`scaler.io.simulated_time`), the one model of time of the simulators: timers run in order of
their second (ties in the order they were set), a cancelled one never runs, time never goes back, and one
instance shared by the fake clock, the simulated cluster and the policy simulator is one clock for all."""

from __future__ import annotations

import asyncio

import pytest

from scaler.io.simulated_time import SimulatedTime
from scaler.policy.registry import make_policy
from scaler.policy.traces import one_shot_trace
from scaler.policy_simulator.cluster_simulation import SimulatedManager, simulate
from scaler_rehearsal.testing.fake_clock import FakeClock
from scaler_rehearsal.testing.simulation import SimulatedCluster


def test_timers_run_in_order_of_their_second_and_ties_in_the_order_they_were_set() -> None:
    time = SimulatedTime()
    seen: list[tuple[str, float]] = []
    for name, when in (("c", 3.0), ("a", 1.0), ("b1", 2.0), ("b2", 2.0)):
        time.call_at(when, lambda name=name: seen.append((name, time.now)))
    cancelled = time.call_later(1.5, seen.append, ("cancelled", -1.0))
    cancelled.cancel()
    while time.run_next():
        pass
    assert seen == [("a", 1.0), ("b1", 2.0), ("b2", 2.0), ("c", 3.0)]
    assert time.next_due() is None


def test_advance_runs_what_is_due_and_stops_at_the_second_asked() -> None:
    time = SimulatedTime(start=10.0)
    seen: list[float] = []
    time.call_later(5.0, lambda: seen.append(time.now))
    time.call_later(5.0, lambda: time.call_later(1.0, lambda: seen.append(time.now)))  # set while advancing
    time.call_later(20.0, lambda: seen.append(time.now))
    time.advance(8.0)
    assert (seen, time.now) == ([15.0, 16.0], 18.0)
    with pytest.raises(ValueError, match="does not go back"):
        time.advance_to(17.0)


def test_one_time_shared_by_the_fake_clock_and_the_simulated_cluster() -> None:
    """The asyncio shells' clock and the hand-driven cluster read one time: a jump of the fake clock's loop moves the
    cluster's `now` (with a clock of its own, the cluster would still read 0)."""
    time = SimulatedTime()
    clock = FakeClock(time=time)
    cluster = SimulatedCluster(time=time)

    async def main() -> None:
        await asyncio.sleep(30.0)

    clock.run(main())
    assert clock.now() == cluster.now == 30.0
    cluster.advance(5.0)
    assert clock.now() == 35.0


def test_the_policy_simulator_runs_on_simulated_time() -> None:
    """One task of 0.1 s on one fixed worker: its result comes back 0.1 s after it arrived, to the timer."""
    policy = make_policy("simple", "allocate=capability; scaling=no").scaling
    report = simulate(policy, one_shot_trace(1, 0.1), (SimulatedManager("m", initial_workers=1),))
    assert report.completed_tasks == 1
    assert report.latency_max_seconds == pytest.approx(0.1)
