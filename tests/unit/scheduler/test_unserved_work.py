"""#38 finding 4 (ray-project/ray#18835): queued work nothing can run is said within seconds, and a task needing
capabilities no worker has and no manager declares fails after the grace period, naming them
(scheduler/core/unserved_work.py). The real scheduler core on a fake clock: a client with no worker and no manager
is warned at 5 s and nothing fails; a capability task in a cluster without it fails at the grace period with
NO_WORKER, and later ones at the next tick; a worker or a manager that can run it, connecting within the grace,
saves it; a grace of 0 never fails.

Checked by switching the mechanism off: with `UnservedWork.on_tick` returning at once, the first, second and last
fail (no warning, no failure); the two that save the task pass either way (they check that nothing fails)."""

from __future__ import annotations

import logging

import pytest

from scaler.policy.capability import parse_capabilities
from scaler.policy.content import Allocation
from scaler.protocol import messages as m
from scaler.protocol.ids import TaskID
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.scheduler.core.unserved_work import warning_text
from scaler_rehearsal.testing.simulation import PYTHON, FakeClient, SimulatedCluster, hello, task

GPU = parse_capabilities("gpu")


def cluster(grace_seconds: float = 60.0) -> SimulatedCluster:
    settings = CoreSettings("tcp://sim:1", "o", PYTHON, allocate=Allocation.CAPABILITY,
                            unrunnable_grace_seconds=grace_seconds)  # fmt: skip
    return SimulatedCluster(settings)


def tid(number: int) -> TaskID:
    return TaskID(number.to_bytes(16, "big"))


def warnings_to(sim: SimulatedCluster, client: FakeClient) -> list[str]:
    return [
        warning_text(effect.message)
        for effect in sim.effects
        if isinstance(effect, Send) and effect.peer == client.peer and isinstance(effect.message, m.TaskLog)
    ]


def results_to(sim: SimulatedCluster, client: FakeClient) -> list[m.TaskResult]:
    return [
        effect.message
        for effect in sim.effects
        if isinstance(effect, Send) and effect.peer == client.peer and isinstance(effect.message, m.TaskResult)
    ]


def wait(sim: SimulatedCluster, seconds: float, keep_alive: tuple[bytes, ...] = ()) -> None:
    """`seconds` of ticks, one a second, the peers in `keep_alive` sending heartbeats meanwhile."""
    for _ in range(int(seconds)):
        for peer in keep_alive:
            is_manager = peer.startswith(b"Manager")
            sim.send(peer, m.Heartbeat(manager=m.ManagerStatus()) if is_manager else m.Heartbeat())
        sim.advance(1.0)


def test_a_client_with_no_worker_and_no_manager_is_told_within_seconds_and_nothing_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sim = cluster()
    client = sim.add_client()
    sim.submit(client, [task(client.peer, number) for number in range(3)])
    wait(sim, 4, (client.peer,))
    assert warnings_to(sim, client) == []
    with caplog.at_level(logging.WARNING, logger="scaler.scheduler.core.unserved_work"):
        wait(sim, 2, (client.peer,))
    (warning,) = warnings_to(sim, client)
    assert warning.startswith("3 task(s) of this client wait: no worker and no worker manager is connected")
    assert "scaler_cluster" in warning and "tcp://sim:1" in warning
    assert "3 queued task(s) wait: no worker and no worker manager" in caplog.text
    wait(sim, 120, (client.peer,))
    assert len(warnings_to(sim, client)) == 1, "said once per episode"
    assert results_to(sim, client) == [], "nothing fails: workers may still come"
    worker = sim.add_worker()
    assert worker.held == [tid(0)], "the tasks run once a worker connects"


def test_a_capability_nobody_offers_fails_after_the_grace_naming_it() -> None:
    sim = cluster(grace_seconds=30)
    client = sim.add_client()
    plain = sim.add_worker("plain")
    sim.submit(client, [task(client.peer, 1, capabilities=GPU), task(client.peer, 2)])
    assert plain.held == [tid(2)]
    wait(sim, 6, (client.peer, plain.peer))
    (warning,) = warnings_to(sim, client)
    assert "no connected worker has the capabilities gpu and no worker manager declares them" in warning
    assert "they fail in 2" in warning  # 30 s less the 5 or 6 waited
    wait(sim, 25, (client.peer, plain.peer))
    (failed,) = results_to(sim, client)
    assert failed.task_id == tid(1) and failed.status is m.ResultStatus.NO_WORKER
    assert "no worker has the capabilities gpu and no worker manager declares them" in failed.error_message
    assert "--unrunnable-grace-seconds 30" in failed.error_message
    sim.submit(client, [task(client.peer, 3, capabilities=GPU)])
    wait(sim, 1, (client.peer, plain.peer))
    assert [r.task_id for r in results_to(sim, client)] == [tid(1), tid(3)], "a later one fails at the next tick"
    sim.check_invariants()
    assert not sim.core.tasks.records.get(tid(1)) and not sim.core.tasks.records.get(tid(3))


@pytest.mark.parametrize("who", ["worker", "manager"])
def test_a_worker_or_manager_for_it_within_the_grace_saves_the_task(who: str) -> None:
    sim = cluster(grace_seconds=30)
    client = sim.add_client()
    plain = sim.add_worker("plain")
    sim.submit(client, [task(client.peer, 1, capabilities=GPU)])
    wait(sim, 20, (client.peer, plain.peer))
    keep = [client.peer, plain.peer]
    if who == "worker":
        gpu = sim.add_worker("gpu", capabilities=GPU)
        assert gpu.held == [tid(1)]
        keep.append(gpu.peer)
    else:
        sim.send(b"Manager|gpus", hello(m.ManagerInfo("gpus", GPU, max_workers=2)))
        keep.append(b"Manager|gpus")
    wait(sim, 120, tuple(keep))
    assert results_to(sim, client) == [], "not failed"
    assert who == "worker" or sim.core.tasks.records[tid(1)].state.value == "queued", "waits for the manager's worker"


def test_a_grace_of_zero_never_fails_and_the_clock_restarts_after_an_episode() -> None:
    sim = cluster(grace_seconds=0)
    client = sim.add_client()
    plain = sim.add_worker("plain")
    sim.submit(client, [task(client.peer, 1, capabilities=GPU)])
    wait(sim, 300, (client.peer, plain.peer))
    assert results_to(sim, client) == [] and len(warnings_to(sim, client)) == 1
    gpu = sim.add_worker("gpu", capabilities=GPU)
    sim.finish(gpu)
    wait(sim, 1, (client.peer, plain.peer, gpu.peer))  # a tick finds the key served: the episode ends
    sim.submit(client, [task(client.peer, 2, capabilities=GPU)])
    sim.kill(gpu)  # unserved again: a new episode, a new warning
    wait(sim, 6, (client.peer, plain.peer))
    assert len(warnings_to(sim, client)) == 2
