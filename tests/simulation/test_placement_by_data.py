"""Placement that follows data (scheduler/core/object_hosts.py) over random histories of the real scheduler core: 4
hosts of 2 workers, tasks each reading one of 4 large objects, arriving and finishing in random order with a few
running at a time, and workers now and then leaving.

Every task is placed by the rule: a task whose object a host with an idle worker holds (a host that ran a reader of it
before, as the scheduler knows: its workers' placements) runs on such a host; a task runs on a host that does not hold
its object only when every holding host's workers are all computing. (How many hosts each object reaches is printed,
not checked: with idle workers taken in join order, load alone also keeps a light load on the first hosts.)

Checked with the mechanism off (`ObjectHosts.nearer` returning None): the rule's check fails at the first reader
placed away from an idle holding host (the first history's 15th task).

The waits for a busy holding host (scheduler/core/data_waits.py) over random histories on simulated time: none beyond
its bound, every task answered once (each test says how it fails with its mechanism off)."""

from __future__ import annotations

import random
from dataclasses import replace

from scaler.protocol import messages as m
from scaler.protocol.ids import ObjectID, TaskID
from scaler.scheduler.core.object_hosts import LARGE_RESULT_BYTES
from scaler.scheduler.core.settings import CoreSettings
from scaler_rehearsal.testing.simulation import PYTHON, FakeClient, FakeWorker, SimulatedCluster, task

OBJECTS = [ObjectID(bytes([number]) * 16) for number in range(4)]
HOSTS = [f"host-{name}" for name in "abcd"]


def host_of(worker: FakeWorker) -> str:
    return worker.peer.decode().rsplit("|", 1)[1].split("-")[0].replace("_", "-")


def run_history(seed: int) -> set[tuple[ObjectID, str]]:
    """One random history: the (object, host) pairs fetched (a reader placed on a host not holding its object yet)."""
    rng = random.Random(seed)
    sim = SimulatedCluster()
    workers = [sim.add_worker(f"{host.replace('-', '_')}-{n}", host=host) for host in HOSTS for n in range(2)]
    client = sim.add_client()
    object_of: dict[TaskID, ObjectID] = {}
    held: dict[ObjectID, set[str]] = {object_id: set() for object_id in OBJECTS}
    fetched: set[tuple[ObjectID, str]] = set()

    def placed_so_far() -> None:  # tasks placed in earlier steps (from the queue, or again after a worker left)
        for worker in workers:
            for task_id in worker.held:
                if host_of(worker) not in held[object_of[task_id]]:
                    fetched.add((object_of[task_id], host_of(worker)))
                    held[object_of[task_id]].add(host_of(worker))

    for number in range(300):
        placed_so_far()
        running = [worker for worker in workers if worker.alive and worker.held]
        if running and (len(running) >= 3 or rng.random() < 0.4):
            sim.finish(rng.choice(running))
            continue
        if rng.random() < 0.02 and sum(worker.alive for worker in workers) > 2:  # a worker leaves
            gone = rng.choice([worker for worker in workers if worker.alive])
            sim.kill(gone)
            if not any(worker.alive for worker in workers if host_of(worker) == host_of(gone)):
                for hosts in held.values():  # its host's last: what the host held is gone with it
                    hosts.discard(host_of(gone))
            continue
        object_id = rng.choice(OBJECTS)
        task_id = TaskID(number.to_bytes(16, "big"))
        object_of[task_id] = object_id
        idle_holders = {
            host_of(w) for w in workers if w.alive and not w.held and host_of(w) in held[object_id]
        }  # fmt: skip
        sim.submit(client, [replace(task(client.peer, number), large_inputs=(object_id,))])
        placed = next((worker for worker in workers if task_id in worker.held), None)
        if placed is None:
            continue  # every worker full: queued, placed later by load (not checked)
        host = host_of(placed)
        assert host in held[object_id] or not idle_holders, (seed, number, host, idle_holders)
    sim.check_invariants()
    return fetched


def test_every_reader_runs_where_its_object_is_when_a_slot_is_idle_there() -> None:
    pairs = [len(run_history(seed)) for seed in range(20)]
    print(f"(object, host) pairs fetched in 20 histories of {len(OBJECTS)} objects on {len(HOSTS)} hosts: {pairs}")


RESULT = ObjectID(b"\x7f" * 16)


def _two_hosts() -> tuple[SimulatedCluster, FakeWorker, FakeWorker]:
    """Hosts a and b of one worker each, a's first (so that dispatch offers a free a first)."""
    sim = SimulatedCluster()
    return sim, sim.add_worker("host_a-0", host="host-a"), sim.add_worker("host_b-0", host="host-b")


def _finish_stored(sim: SimulatedCluster, worker: FakeWorker, task_id: TaskID, stored_bytes: int) -> None:
    """`worker` ends `task_id` with a result it stored as RESULT."""
    worker.held.remove(task_id)
    done = m.TaskResult(task_id, m.ResultStatus.SUCCESS, m.PayloadKind.OBJECT_ID, RESULT, stored_bytes=stored_bytes)
    sim.send(worker.where.pop(task_id), done)


def test_a_task_naming_a_large_result_runs_on_the_host_that_made_it() -> None:
    """b makes a large result while a is busy; then, both idle, a task naming it goes to b, not to a (dispatch's
    first offer); a result under the threshold is not followed. Checked with `ObjectHosts.made` doing nothing: the
    reader goes to a."""
    for stored_bytes, follows in ((LARGE_RESULT_BYTES, True), (LARGE_RESULT_BYTES - 1, False)):
        sim, a, b = _two_hosts()
        client = sim.add_client()
        sim.submit(client, [task(client.peer, 1), task(client.peer, 2)])  # 1 on a, 2 on b
        assert a.held == [TaskID((1).to_bytes(16, "big"))] and b.held == [TaskID((2).to_bytes(16, "big"))]
        _finish_stored(sim, b, b.held[0], stored_bytes)
        sim.finish(a)
        sim.submit(client, [replace(task(client.peer, 3), large_inputs=(RESULT,))])
        assert (b if follows else a).held == [TaskID((3).to_bytes(16, "big"))], stored_bytes
        sim.check_invariants()


def test_a_graph_node_runs_on_the_host_that_made_its_dependencys_large_result() -> None:
    """A graph's first node runs on b (a busy) and stores a large result; its dependent node, ready when both are
    idle, runs on b. Checked with `_placement_inputs` ignoring graphs: the node goes to a."""
    sim, a, b = _two_hosts()
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 1)])  # keeps a busy
    first, second = task(client.peer, 2), task(client.peer, 3)
    sim.submit_graph(client, 1, [first, replace(second, dependencies=(first.task_id,))], [second.task_id])
    assert b.held == [first.task_id]
    sim.finish(a)
    _finish_stored(sim, b, first.task_id, 2 * LARGE_RESULT_BYTES)
    assert b.held == [second.task_id] and not a.held
    sim.finish(b)
    assert client.answers[second.task_id]
    sim.check_invariants()


def test_a_graph_node_waits_for_the_busy_host_that_made_its_dependencys_large_result() -> None:
    """The shuffle's reducer: its dependency's 40 MB result was made on a host whose workers all compute a task of a
    function known to take 1 s when a worker of another host frees: the node waits for the maker's host (3.2 s to fetch
    the result elsewhere) and runs there once a slot frees. Checked with data_waits.py off
    (`placement_max_wait_seconds=0`): it goes to the other host's worker at once."""
    for max_wait, waits in ((5.0, True), (0.0, False)):
        settings = CoreSettings("tcp://sim:1", "tcp://sim:2", PYTHON, placement_max_wait_seconds=max_wait)
        sim = SimulatedCluster(settings)
        workers = [sim.add_worker("host_a-0", host="host-a")] + [
            sim.add_worker(f"host_b-{n}", host="host-b") for n in range(2)
        ]
        client = sim.add_client()
        sim.submit(client, [task(client.peer, 100)])  # f's run time learned: 1 s
        sim.advance(1.0)
        sim.finish(next(worker for worker in workers if worker.held))
        first, second = task(client.peer, 2), task(client.peer, 3)
        sim.submit_graph(client, 1, [first, replace(second, dependencies=(first.task_id,))], [second.task_id])
        (maker,) = [worker for worker in workers if worker.held == [first.task_id]]
        sim.submit(client, [task(client.peer, 4), task(client.peer, 5)])  # the other two busy
        sim.submit(client, [task(client.peer, 6, priority=1)])  # queued ahead of the node: the maker takes it next
        _finish_stored(sim, maker, first.task_id, 40_000_000)
        assert maker.held == [TaskID((6).to_bytes(16, "big"))]
        freed = next(worker for worker in workers if host_of(worker) != host_of(maker))
        sim.finish(freed)
        if not waits:
            assert freed.held == [second.task_id]
            continue
        assert freed.held == [], "waits for the maker's host"
        sim.finish(maker)
        assert maker.held == [second.task_id] and freed.held == []
        sim.check_invariants()


TIMES = 0.25  # the busy pace's beat


def _random_step(
    sim: SimulatedCluster, rng: random.Random, client: FakeClient, workers: list[FakeWorker], number: int
) -> None:
    """A reader submitted, a worker killed, a task cancelled, or a beat."""
    roll = rng.random()
    if roll < 0.5:
        sim.submit(client, [replace(task(client.peer, number), large_inputs=(rng.choice(OBJECTS),))])
    elif roll < 0.53 and sum(worker.alive for worker in workers) > 2:
        sim.kill(rng.choice([worker for worker in workers if worker.alive]))
    elif roll < 0.56 and client.unanswered():
        sim.cancel(client, [rng.choice(client.unanswered())])
    else:
        sim.advance(TIMES)


def run_history_with_waits(seed: int) -> int:
    """A random history on simulated time: tasks of one function (0.5 to 10 s) reading one of 4 results of 40 MB made on
    4 hosts, finishing as time passes, workers now and then killed, tasks now and then cancelled. Checked at every
    step: a task queued while a worker is idle, or while a task submitted after it was placed, is one held for a busy
    host within its bound (none waits beyond it), and at the end every task was answered once. Returns how many were
    held. Checked with the bound off (a hold kept while its host is busy): the check fails in the first history."""
    rng = random.Random(seed)
    sim = SimulatedCluster()
    workers = [sim.add_worker(f"{host.replace('-', '_')}-{n}", host=host) for host in HOSTS for n in range(2)]
    client = sim.add_client()
    sim.submit(client, [task(client.peer, 10_000)])
    sim.advance(1.0)
    sim.finish(next(worker for worker in workers if worker.held))
    hosts = sim.core.state.object_hosts
    for object_id, host in zip(OBJECTS, HOSTS, strict=True):
        hosts.made(object_id, host, 40_000_000)
    waits = sim.core.lifecycle.data_waits
    started: dict[TaskID, float] = {}
    runs: dict[TaskID, float] = {}
    placed_before: set[TaskID] = set()
    for number in range(300):
        _random_step(sim, rng, client, workers, number)
        for worker in workers:
            for task_id in worker.held:
                if task_id not in started:
                    started[task_id] = sim.now
                    runs[task_id] = rng.choice((0.5, 1.0, 10.0, 10.0))  # some run far past the mean
            if worker.alive and worker.held and sim.now - started[worker.held[0]] >= runs[worker.held[0]]:
                sim.finish(worker)
        idle = any(worker.alive and not worker.held for worker in workers)
        placed = {task_id for worker in workers for task_id in worker.held}
        latest = max((int.from_bytes(task_id, "big") for task_id in placed - placed_before), default=-1)
        placed_before = placed
        for task_id, record in sim.core.tasks.records.items():
            if record.state.value == "queued" and (idle or int.from_bytes(task_id, "big") < latest):
                host, until = waits.hold_of(task_id)  # queued while a worker is idle, or a later task went: held
                assert host and sim.now < until + TIMES, (seed, number, task_id.hex(), host, until, sim.now)
        sim.check_invariants()
    while client.unanswered():
        sim.advance(TIMES)
        for worker in workers:
            if worker.alive and worker.held:
                sim.finish(worker)
    assert all(len(answers) == 1 for answers in client.answers.values())
    sim.check_invariants()
    return waits.held


def test_tasks_wait_for_busy_holding_hosts_never_beyond_their_bound_and_every_task_ends_once() -> None:
    held = [run_history_with_waits(seed) for seed in range(10)]
    print(f"tasks held for a busy host in 10 histories: {held}")
    assert sum(held), "no history held a task: the check above checked nothing"
