"""PutGate: a task leaves only after every put issued before it is acknowledged, in submission order.

Checked by switching the mechanism off: with `submit` returning its items at once (no holding), the tests that
expect items to be held fail."""

from __future__ import annotations

from scaler.object_storage.client_core import PutGate


def test_without_pending_puts_tasks_leave_at_once() -> None:
    gate: PutGate[str] = PutGate()
    assert gate.submit(["a", "b"]) == ["a", "b"]
    assert gate.is_idle


def test_a_task_waits_for_the_puts_issued_before_it_and_only_those() -> None:
    gate: PutGate[str] = PutGate()
    first = gate.issued()
    assert gate.submit(["t1"]) == []  # t1 may need the first put
    second = gate.issued()
    assert gate.submit(["t2"]) == []
    assert gate.acknowledged(first) == ["t1"]  # t2 still waits for the second put
    assert gate.acknowledged(second) == ["t2"]
    assert gate.is_idle


def test_tasks_leave_in_submission_order_even_when_acknowledgements_come_out_of_order() -> None:
    gate: PutGate[str] = PutGate()
    first = gate.issued()
    gate.submit(["t1"])
    second = gate.issued()
    gate.submit(["t2"])
    assert gate.submit(["t3"]) == []  # t3 needs no new put but must not overtake t1 and t2
    assert gate.acknowledged(second) == []  # t1 waits for the first, t2 and t3 behind it
    assert gate.acknowledged(first) == ["t1", "t2", "t3"]


def test_a_failed_put_fails_the_tasks_that_may_need_it_and_releases_the_earlier_ones() -> None:
    gate: PutGate[str] = PutGate()
    first = gate.issued()
    gate.submit(["t1"])
    second = gate.issued()
    gate.submit(["t2", "t3"])
    doomed, released = gate.failed(second)
    assert doomed == ["t2", "t3"] and released == []
    assert gate.acknowledged(first) == ["t1"]
    assert gate.is_idle
