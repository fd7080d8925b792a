"""The client's sharing settings, checked at the call (client/sharing.py)."""

from __future__ import annotations

import math

import pytest

from scaler.client.sharing import (
    DEPTH_BITS,
    MAX_DEPTH,
    checked_priority,
    checked_quota,
    checked_share,
    user_priority,
    wire_priority,
)
from scaler.payload import processor_context


@pytest.mark.parametrize("bad", [1.5, "3", None, True, [1]])
def test_a_priority_that_is_not_an_integer_is_refused(bad: object) -> None:
    with pytest.raises(TypeError, match="priority must be an integer"):
        checked_priority(bad)


def test_a_priority_beyond_the_wire_range_is_refused() -> None:
    with pytest.raises(ValueError, match="priority must be between"):
        checked_priority(1 << 40)


@pytest.mark.parametrize("bad", [0, -1, -0.5, math.nan, math.inf])
def test_a_share_that_is_not_positive_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="share must be a positive number"):
        checked_share(bad)


@pytest.mark.parametrize("bad", [0, -3])
def test_a_quota_of_zero_or_less_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="max_running_tasks must be a positive integer"):
        checked_quota("max_running_tasks", bad)


@pytest.mark.parametrize("bad", [0, -1])
def test_a_workers_worth_quota_of_zero_or_less_is_refused_naming_it(bad: int) -> None:
    with pytest.raises(ValueError, match="max_workers must be a positive integer"):
        checked_quota("max_workers", bad)
    with pytest.raises(TypeError, match="max_workers must be a positive integer or None, not float"):
        checked_quota("max_workers", 1.5)


def test_no_quota_is_zero_on_the_wire() -> None:
    assert checked_quota("max_running_tasks", None) == 0 and checked_quota("max_running_tasks", 5) == 5


class _Threads:
    def __init__(self, priority: int) -> None:
        self._priority = priority

    def priority(self) -> int:
        return self._priority

    def task_id(self) -> bytes:
        return b""

    def on_block(self) -> bool:
        return False

    def on_unblock(self) -> None:
        pass

    def on_submitted(self, future: object) -> None:
        pass


def test_nested_tasks_keep_their_parents_priority_one_level_deeper_and_ahead_of_new_work() -> None:
    top_low, top_high = wire_priority(None), wire_priority(2)
    assert top_high > top_low and user_priority(top_high) == 2
    processor_context.install(processor_context.ProcessorContext("tcp://x:1", threads=_Threads(top_low)))
    try:
        child = wire_priority(None)
        assert user_priority(child) == 0 and child > top_low  # ahead of new work of its priority
        assert child < top_high  # behind new work of a higher one
        processor_context.install(processor_context.ProcessorContext("tcp://x:1", threads=_Threads(child)))
        assert wire_priority(None) == child + 1
        assert user_priority(wire_priority(5)) == 5  # a nested task may name its own
        deepest = (7 << DEPTH_BITS) | MAX_DEPTH
        processor_context.install(processor_context.ProcessorContext("tcp://x:1", threads=_Threads(deepest)))
        assert wire_priority(None) == deepest  # depth saturates instead of spilling into the priority
    finally:
        processor_context.install(None)


def test_negative_priorities_order_below_zero_with_their_depth() -> None:
    low = wire_priority(-3)
    processor_context.install(processor_context.ProcessorContext("tcp://x:1", threads=_Threads(low)))
    try:
        child = wire_priority(None)
    finally:
        processor_context.install(None)
    assert low < child < wire_priority(-2) < wire_priority(0) and user_priority(child) == -3
