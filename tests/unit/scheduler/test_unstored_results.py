"""Large results reported before they were stored (scheduler/core/unstored_results.py and the lifecycle around it): a
task ended with a large result is kept until the storage server says the result is stored; a result lost with its host
is made again from its task, under its own object id (its readers wait for it there), once per loss, its end answered
to nobody (the client has its answer); a stored or deleted one is forgotten, and a client that left takes its entries.

Checked with the mechanism off: with `TaskLifecycle._keep_until_stored` returning at once, the core's tests fail (no
task runs again); with `_end` not stopping at a rerun, the client is answered twice and the second test fails."""

from __future__ import annotations

import pytest

from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, ObjectID, TaskID
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.events import FatesTold
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.scheduler.core.unstored_results import MAX_RERUNS, UnstoredResults
from scaler_rehearsal.testing.simulation import PYTHON, FakeWorker, SimulatedCluster, task

pytestmark = pytest.mark.timeout(30)

RESULT = ObjectID(b"r" * 16)
MB = 1 << 20


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def test_a_kept_result_is_made_again_once_per_loss_and_forgotten_once_stored() -> None:
    unstored = UnstoredResults(max_kept=2)
    made = m.Task(tid(1), ClientID(b"c"), b"body", "f")
    unstored.kept(RESULT, made)
    assert unstored.asked() == (RESULT,)
    assert unstored.told((RESULT,), (0,)) == [], "held: nothing to do"
    again = unstored.told((RESULT,), (1,))
    assert [each.result_id for each in again] == [RESULT] and again[0].task_id == tid(1)
    assert unstored.told((RESULT,), (1,)) == [], "the same loss makes it again once"
    assert len(unstored.told((RESULT,), (2,))) == 1, "lost again: made again again"
    assert unstored.told((RESULT,), (-1,)) == [] and RESULT not in unstored, "stored: forgotten"
    unstored.kept(RESULT, made)
    assert unstored.told((RESULT,), (MAX_RERUNS + 1,)) == [] and RESULT not in unstored, "past the bound: forgotten"
    for number in (1, 2, 3):
        unstored.kept(ObjectID(bytes([number]) * 16), made)
    assert len(unstored) == 2 and unstored.dropped == 2, "the oldest go past the bound"
    unstored.client_gone(ClientID(b"c"))
    assert len(unstored) == 0


def _finish_large(sim: SimulatedCluster, worker: FakeWorker, task_id: TaskID, size: int = 10 * MB) -> None:
    worker.held.remove(task_id)
    result = m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, RESULT, stored_bytes=size)
    sim.send(worker.where.pop(task_id), result)


def _sent_tasks(sim: SimulatedCluster) -> list[m.Task]:
    return [e.message for e in sim.effects if isinstance(e, Send) and isinstance(e.message, m.Task)]


def test_a_result_lost_with_its_host_is_made_again_under_its_id_and_answered_once() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    client, first = sim.add_client(), sim.add_worker("a")
    sim.submit(client, [task(client.peer, 1)])
    _finish_large(sim, first, tid(1))
    assert client.answers[tid(1)] == [("result", "success")]
    unstored = sim.core.lifecycle.unstored
    assert unstored.asked() == (RESULT,), "kept until the storage server says it is stored"
    sim.feed(FatesTold((RESULT,), (0,), sim.now))
    assert first.held == [], "held by its host: nothing runs again"
    sim.feed(FatesTold((RESULT,), (1,), sim.now))
    assert first.held == [tid(1)], "lost: its task runs again"
    assert _sent_tasks(sim)[-1].result_id == RESULT, "under the lost result's id"
    sim.feed(FatesTold((RESULT,), (1,), sim.now))
    assert first.held == [tid(1)] and len(_sent_tasks(sim)) == 2, "once per loss"
    _finish_large(sim, first, tid(1))
    assert client.answers[tid(1)] == [("result", "success")], "the task ran twice, and was reported once"
    assert not sim.core.tasks.records
    sim.feed(FatesTold((RESULT,), (-1,), sim.now))
    assert unstored.asked() == (), "stored: forgotten"
    sim.check_invariants()


def test_small_results_are_not_kept_and_a_client_that_left_takes_its_entries() -> None:
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    client, worker = sim.add_client(), sim.add_worker("a")
    sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])
    _finish_large(sim, worker, tid(1), size=1000)
    assert sim.core.lifecycle.unstored.asked() == ()
    _finish_large(sim, worker, tid(2))
    assert sim.core.lifecycle.unstored.asked() == (RESULT,)
    sim.core.lifecycle.client_gone(ClientID(client.peer))
    assert sim.core.lifecycle.unstored.asked() == ()
