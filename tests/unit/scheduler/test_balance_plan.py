"""The balance plan (scheduler/core/balancing.py) serves idle workers from a heap of donors (issue 58): the same plan as
sorting every donor for every idle worker, which was quadratic in the workers."""

from __future__ import annotations

import random

from scaler.protocol.ids import PeerID, TaskID
from scaler.scheduler.core.balancing import balance_plan
from scaler.scheduler.core.peers import WorkerRecord
from scaler.scheduler.core.processor_links import ProcessorLink


def worker_with_link(index: int, capabilities: tuple[tuple[str, int], ...] = (), link: bool = True) -> WorkerRecord:
    worker = WorkerRecord(PeerID(b"w%d" % index), capabilities, frozenset(n for n, _ in capabilities), 4, "", "", "",
                          0, 0.0, 0.0, sequence=index)  # fmt: skip
    if link:  # its processor said hello: a task can go to it
        worker.links.append(ProcessorLink(PeerID(b"w%d/p1" % index), worker.peer, b"p1", max_staged=1))
    return worker


def reference_plan(workers, requirement_of, dispatch_order, already_asked):  # type: ignore[no-untyped-def]
    """The plan as it was computed before: every donor sorted again for each idle worker."""
    workers = list(workers)
    idle = [w for w in workers if w.is_idle and w.free_slots > 0 and w.takes_tasks]
    spare = {}
    for worker in workers:
        if len(worker.assigned) > 1:
            candidates = sorted((t for t in worker.assigned if not already_asked(t)), key=dispatch_order)
            spare[worker.peer] = candidates[1:]
    plan: dict[PeerID, list[TaskID]] = {}
    for taker in idle:
        for donor in sorted(spare, key=lambda peer: -len(spare[peer])):
            movable = next((t for t in reversed(spare[donor]) if taker.can_run(requirement_of(t))), None)
            if movable is not None:
                spare[donor].remove(movable)
                plan.setdefault(donor, []).append(movable)
                break
    return {donor: tuple(sorted(tasks)) for donor, tasks in plan.items() if tasks}


def test_the_heap_plan_is_the_plan_of_a_sort_per_idle_worker() -> None:
    chance = random.Random(58)
    moved = 0
    for _ in range(200):
        workers, requirement, order = [], {}, {}
        number = 0
        for index in range(chance.randint(2, 40)):
            gpu = chance.random() < 0.3
            capabilities = (("gpu", -1),) if gpu else ()
            worker = worker_with_link(index, capabilities)
            for _ in range(chance.choice([0, 0, 1, 2, 3, 5, 8])):
                task_id = TaskID(number.to_bytes(16, "big"))
                number += 1
                worker.assigned.add(task_id)
                requirement[task_id] = (("gpu", -1),) if gpu and chance.random() < 0.5 else ()
                order[task_id] = (chance.random(), number)
            workers.append(worker)
        asked = {t for t in requirement if chance.random() < 0.1}
        arguments = (workers, requirement.__getitem__, order.__getitem__, asked.__contains__)
        plan = balance_plan(*arguments)
        assert plan == reference_plan(*arguments)
        moved += sum(map(len, plan.values()))
    assert moved > 200, "the cases move tasks"


def test_an_idle_worker_no_task_can_go_to_yet_is_given_nothing() -> None:
    """A worker whose processors have not said hello (no link) is not a taker: asked back for it, a task would only
    be queued again. Fails when takers are not required a link with room (the plan then moves a task)."""
    donor, waiting = worker_with_link(0), worker_with_link(1, link=False)
    tasks = [TaskID(number.to_bytes(16, "big")) for number in range(3)]
    donor.assigned.update(tasks)
    order = {task_id: (float(number), number) for number, task_id in enumerate(tasks)}
    arguments = ([donor, waiting], lambda task_id: (), order.__getitem__, lambda task_id: False)
    assert balance_plan(*arguments) == {}
    taker = worker_with_link(2)
    assert balance_plan([donor, waiting, taker], *arguments[1:]) == {donor.peer: (tasks[2],)}
