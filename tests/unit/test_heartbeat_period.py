"""The heartbeat period the scheduler gives its workers (scaler/protocol/heartbeat_period.py): the configured one up
to 50 heartbeats a second in all, longer beyond; death after the configured timeout or three periods."""

from __future__ import annotations

import math

from scaler.protocol.heartbeat_period import (
    HEARTBEATS_PER_SECOND,
    given_period,
    heartbeat_period,
    obeyed_period,
    silence_timeout,
)


def test_a_small_cluster_gets_the_configured_period() -> None:
    for workers in (0, 1, 50, 100):
        assert heartbeat_period(workers, 2.0) == 2.0
    assert heartbeat_period(5, 0.5) == 0.5, "a user's short period stays in a small cluster"


def test_beyond_the_floor_the_period_grows_in_whole_seconds() -> None:
    assert [heartbeat_period(n, 2.0) for n in (101, 150, 1_000, 5_000, 10_000)] == [3.0, 3.0, 20.0, 100.0, 200.0]
    assert heartbeat_period(1_000, 30.0) == 30.0, "a long configured period stays the floor"


def test_the_workers_send_at_most_the_rate_in_all() -> None:
    for workers in range(0, 100_001, 97):
        for floor in (0.5, 2.0, 7.0):
            period = heartbeat_period(workers, floor)
            assert period >= floor
            if period > floor:  # the rate decides: never more than the bound, and not far below it
                assert workers / period <= HEARTBEATS_PER_SECOND
                assert period - 1 < floor or workers / (period - 1) > HEARTBEATS_PER_SECOND


def test_a_worker_is_told_its_own_period_in_a_small_cluster() -> None:
    """0 ("your own") up to the floor's cluster size, so that a worker set to beat faster than the floor still does."""
    assert given_period(100, 2.0) == 0.0 and given_period(0, 2.0) == 0.0
    assert given_period(101, 2.0) == 3.0 and given_period(10_000, 2.0) == 200.0


def test_death_after_the_timeout_or_three_periods_beyond_the_floor() -> None:
    assert silence_timeout(51.0, 60.0, 2.0) == 153.0
    assert silence_timeout(10.0, 60.0, 2.0) == 60.0
    assert silence_timeout(2.0, 1.0, 2.0) == 1.0, "at the floor: the configured timeout, however short"
    assert silence_timeout(3.0, 1.0, 2.0) == 9.0


def test_a_worker_obeys_a_longer_given_period_only() -> None:
    assert obeyed_period(2.0, 10.0) == 10.0
    assert obeyed_period(2.0, 1.0) == 2.0
    assert obeyed_period(2.0, 0.0) == 2.0
    assert obeyed_period(2.0, math.inf) == 2.0 and obeyed_period(2.0, math.nan) == 2.0
