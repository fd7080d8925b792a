"""Tiny tasks staged in a processor behind the one it computes (the scheduler stages them on its link), on a real
one-worker cluster: a crash (a real processor's death, which its agent reports with the task its mark names) fails
only the task that crashed. What staging does with cancels, timeouts and crashes of the task ahead is in
the simulation tier (tests/simulation/test_staging_stack.py: the real agent, scheduler and processor core)."""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from scaler import Client
from scaler.errors import ProcessorDiedError
from tests.integration.conftest import DEADLINE_SECONDS, wait_for_workers

pytestmark = pytest.mark.integration

WARM_UP_TASKS = 200  #: tiny calls of `step` that teach the worker it is tiny, so that it stages its calls


# ---------------------------------------------------------------- task functions (run on workers)


def step(kind: str, *arguments: Any) -> Any:
    """Every task of these tests is a call of this one function, so that what warm-up teaches the worker (its calls
    are tiny: stage them) holds for the calls under test too; `kind` says what a call does."""
    import os

    if kind == "square":
        (value,) = arguments
        return value * value
    value, crash = arguments  # "square_or_crash"
    if value in crash:
        os._exit(3)
    return value * value


# ---------------------------------------------------------------- helpers


@contextlib.contextmanager
def warm_client(make_cluster: Callable[..., Any], **settings: Any) -> Iterator[Client]:
    """A client of a one-worker cluster whose worker has seen WARM_UP_TASKS tiny calls of `step`."""
    cluster = make_cluster(1, **settings)
    wait_for_workers(cluster.monitor_address, 1)
    with Client(address=cluster.get_address()) as client:
        futures = [client.submit(step, "square", value) for value in range(WARM_UP_TASKS)]
        assert [f.result(timeout=DEADLINE_SECONDS) for f in futures] == [v * v for v in range(WARM_UP_TASKS)]
        yield client


# ---------------------------------------------------------------- tests


@pytest.mark.timeout(120)
def test_a_crash_among_staged_tiny_tasks_fails_only_the_task_that_crashed(make_cluster):
    """The tasks come on the processor's own link (its agent never sees them): the processor marks the task it
    computes where its agent reads it after its death (worker/computing_mark.py): the result of the task before the
    crash, still in the processor's ZeroMQ I/O thread, dies with it, and that task runs again rather than being
    blamed. Checked by hand with the mark never read (`read_mark` returning None: the scheduler blames its picture's
    computing task): a task before a crash failed with ProcessorDiedError in 3 runs of 3."""
    # 150, 151: two in a row, the second runs in the processor that replaced the first
    crash = (100, 150, 151, 200, 250, 300, 350, 400, 450)
    with warm_client(make_cluster) as client:
        futures = [client.submit(step, "square_or_crash", value, crash) for value in range(500)]
        concurrent.futures.wait(futures, timeout=DEADLINE_SECONDS * 2)
        for value, future in enumerate(futures):
            if value in crash:
                with pytest.raises(ProcessorDiedError):
                    future.result(timeout=0)
            else:
                assert future.result(timeout=0) == value * value, f"task {value} was blamed for another's crash"
