"""Run times learned from finished tasks (issue #17): the book itself, and what the core feeds into it."""

from __future__ import annotations

import pytest

from scaler.policy.content import Allocation
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, TaskID
from scaler.scheduler.core.run_times import RunTimeBook
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler_rehearsal.testing.simulation import PYTHON, SimulatedCluster

GPU = (("gpu", -1),)


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def named(client: bytes, number: int, function: str, capabilities: m.Capabilities = ()) -> m.Task:
    return m.Task(tid(number), ClientID(client), b"body", function, capabilities=capabilities)


def test_the_first_run_sets_the_mean_and_later_runs_move_it_by_the_smoothing() -> None:
    book = RunTimeBook(smoothing=0.5)
    book.observe("f", (), 10.0)
    assert book.mean_seconds("f", ()) == 10.0
    book.observe("f", (), 20.0)
    assert book.mean_seconds("f", ()) == 15.0
    assert book.mean_seconds("g", ()) is None


def test_a_level_shift_up_or_down_is_followed_within_a_few_runs() -> None:
    book = RunTimeBook()
    for _ in range(10):
        book.observe("f", (), 2.0)
    for _ in range(5):  # the inputs grew: 10 s now
        book.observe("f", (), 10.0)
    mean = book.mean_seconds("f", ())
    assert mean is not None and 8.5 <= mean < 10.0
    for _ in range(8):  # and back to 2 s
        book.observe("f", (), 2.0)
    mean = book.mean_seconds("f", ())
    assert mean is not None and 2.0 < mean <= 2.5


def test_one_outlier_moves_the_mean_by_the_smoothing_and_is_forgotten_within_a_few_runs() -> None:
    book = RunTimeBook()
    for _ in range(10):
        book.observe("f", (), 2.0)
    book.observe("f", (), 20.0)
    assert book.mean_seconds("f", ()) == pytest.approx(2.0 + 0.3 * 18.0)  # a third of the way, not to 20 s
    for _ in range(5):
        book.observe("f", (), 2.0)
    mean = book.mean_seconds("f", ())
    assert mean is not None and mean < 3.0


def test_one_function_has_one_estimate_per_capability_set() -> None:
    book = RunTimeBook()
    book.observe("f", GPU, 1.0)
    book.observe("f", (), 4.0)
    assert (book.mean_seconds("f", GPU), book.mean_seconds("f", ())) == (1.0, 4.0)
    assert book.estimates() == (m.RunTimeEstimate("f", (), 4.0), m.RunTimeEstimate("f", GPU, 1.0))


def test_the_book_forgets_the_estimate_updated_longest_ago() -> None:
    book = RunTimeBook(max_estimates=2)
    book.observe("a", (), 1.0)
    book.observe("b", (), 2.0)
    book.observe("a", (), 1.0)  # "a" is fresher than "b" now
    book.observe("c", (), 3.0)
    assert [estimate.function_name for estimate in book.estimates()] == ["a", "c"]
    assert len(book) == 2


def test_a_negative_run_time_counts_as_zero() -> None:
    book = RunTimeBook()
    book.observe("f", (), -1.0)
    assert book.mean_seconds("f", ()) == 0.0


def test_the_core_learns_from_successes_only_and_the_view_shows_it() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker()
    sim.submit(client, [named(client.peer, 1, "inc"), named(client.peer, 2, "dec")])
    sim.advance(3.0)
    sim.finish(worker, tid(1))
    sim.advance(5.0)
    sim.finish(worker, tid(2), m.ResultStatus.FAILED)
    assert sim.core.view().run_times == (m.RunTimeEstimate("inc", (), 3.0),)


def test_a_task_held_behind_another_is_timed_from_when_the_worker_was_free() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker(capacity=2)  # holds the second task while it runs the first
    sim.submit(client, [named(client.peer, 1, "f"), named(client.peer, 2, "f")])
    sim.advance(2.0)
    sim.finish(worker, tid(1))
    sim.advance(2.0)
    sim.finish(worker, tid(2))
    assert sim.core.tasks.run_times.mean_seconds("f", ()) == pytest.approx(2.0)  # not 4 s since its dispatch


def test_a_profiled_run_time_is_the_workers_own_measure() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    worker = sim.add_worker()
    sim.submit(client, [named(client.peer, 1, "f")])
    sim.advance(10.0)
    worker.held.clear()
    profile = m.Profile(duration_seconds=0.25)
    sim.send(worker.link, m.TaskResult(tid(1), m.ResultStatus.SUCCESS, m.PayloadKind.INLINE, b"v", profile=profile))
    assert sim.core.tasks.run_times.mean_seconds("f", ()) == 0.25


def test_with_capabilities_in_use_the_estimate_is_per_capability_set() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, allocate=Allocation.CAPABILITY))
    client = sim.add_client()
    cpu, gpu = sim.add_worker("cpu"), sim.add_worker("gpu", capabilities=GPU)
    sim.submit(client, [named(client.peer, 1, "f"), named(client.peer, 2, "f", GPU)])
    assert (cpu.held, gpu.held) == ([tid(1)], [tid(2)])
    sim.advance(1.0)
    sim.finish(gpu, tid(2))
    sim.advance(5.0)
    sim.finish(cpu, tid(1))
    run_times = {
        (estimate.function_name, estimate.capabilities): estimate.mean_seconds for estimate in sim.core.view().run_times
    }
    assert run_times == {("f", GPU): 1.0, ("f", ()): 6.0}


def test_pending_groups_break_their_tasks_down_by_function() -> None:
    sim = SimulatedCluster()
    client = sim.add_client()
    first, second = sim.add_worker("one", capacity=2, slots=2, max_staged=0), sim.add_worker("two")
    tasks = [named(client.peer, number, name) for number, name in enumerate(["a", "a", "b", "a", "b", "b"], start=1)]
    sim.submit(client, tasks)  # "one" gets 1 and 3, "two" gets 2; 4, 5, 6 wait
    assert (sorted(first.held), second.held) == ([tid(1), tid(3)], [tid(2)])
    sim.advance(4.0)
    sim.finish(first, tid(1))
    sim.advance(1.0)
    (group,) = sim.core.view().pending
    assert (group.count, group.running) == (2, 3)  # 4 went to "one" when 1 finished
    loads = {load.function_name: load for load in group.functions}
    assert (loads["a"].queued, loads["b"].queued) == (0, 2)
    # "one" runs 3 (since 1 finished, 1 s ago) and holds 4 (not started); "two" has run 2 for 5 s
    assert loads["a"].running_seconds == (0.0, 5.0)
    assert loads["b"].running_seconds == (1.0,)
    sim.check_invariants()
