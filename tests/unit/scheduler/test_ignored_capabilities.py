"""Capabilities under each allocation (scheduler/core/submissions.py): by default (`allocate=capability`) a task asking
for some waits for a worker that has them; an explicit `allocate=even_load` ignores them, and the scheduler logs that
once, at the first task (or graph node) asking for some, naming them and the allocation that honours them.

Checked by switching the warning off (`_ignored` not called): the first two tests fail; with the flag never cleared,
the first fails (a warning per task)."""

from __future__ import annotations

import logging

import pytest

from scaler.policy.content import Allocation
from scaler.protocol.ids import TaskID
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler_rehearsal.testing.simulation import PYTHON, SimulatedCluster, task

pytestmark = pytest.mark.timeout(30)

GPU = (("gpu", -1),)
LOGGER = "scaler.scheduler.core.submissions"


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def ignored_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The scheduler's warnings that capabilities are ignored."""
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING and "allocate=even_load ignores" in record.getMessage()
    ]


def test_even_load_runs_capability_tasks_anywhere_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, allocate=Allocation.EVEN_LOAD))
    client = sim.add_client()
    plain = sim.add_worker("plain", capacity=10)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        sim.submit(client, [task(client.peer, 1)])
        assert ignored_warnings(caplog) == [], "a task without capabilities is nothing to say"
        sim.submit(client, [task(client.peer, 2, capabilities=GPU), task(client.peer, 3, capabilities=(("tpu", 2),))])
        sim.submit_graph(client, 1, [task(client.peer, 4, capabilities=GPU)], [tid(4)])
    assert plain.held == [tid(1), tid(2), tid(3), tid(4)], "even_load ignores the capabilities"
    (warning,) = ignored_warnings(caplog)
    assert warning.startswith("a task asks for the capabilities gpu, which allocate=even_load ignores")
    assert "allocate=capability" in warning and "honours them" in warning


def test_a_graph_node_asking_for_capabilities_is_said_too(caplog: pytest.LogCaptureFixture) -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, allocate=Allocation.EVEN_LOAD))
    client = sim.add_client()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        sim.submit_graph(client, 1, [task(client.peer, 1), task(client.peer, 2, capabilities=(("tpu", 2),))], [tid(2)])
    (warning,) = ignored_warnings(caplog)
    assert "capabilities tpu=2" in warning


def test_by_default_capabilities_are_honoured_and_nothing_is_said(caplog: pytest.LogCaptureFixture) -> None:
    assert CoreSettings("s", "o", PYTHON).allocate is Allocation.CAPABILITY
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    client = sim.add_client()
    plain = sim.add_worker("plain", capacity=10)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        sim.submit(client, [task(client.peer, 1, capabilities=GPU), task(client.peer, 2)])
    assert plain.held == [tid(2)], "the task asking for a gpu waits for a worker that has one"
    gpu = sim.add_worker("gpu", capabilities=GPU)
    assert gpu.held == [tid(1)]
    assert ignored_warnings(caplog) == []
