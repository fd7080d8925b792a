"""A tick of an idle cluster looks at no processor link and no worker (issue 58: at 10,000 idle workers the
tick's pass over every link was 5 ms, 2% of a core at four ticks a second; then 1 ms, most of it balancing's pass over
every worker; now neither). What a tick does for a link
that holds tasks is tested with the rules themselves (test_link_sessions.py, test_scheduler_core.py)."""

from __future__ import annotations

from typing import Any

import pytest

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID, TaskID
from scaler.protocol.staging import STAGED_WAIT_SECONDS
from scaler.scheduler.core import balancing
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.events import Tick
from scaler.scheduler.core.processor_links import ProcessorLink
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler_rehearsal.testing.simulation import PYTHON, SimulatedCluster, task

#: A task timeout on the workers: a tick then looks at every link it watches (a link with no rule that could be due on
#: it, no task timeout among them, is passed over with a glance at its fields).
TIMEOUT = 3600.0


def links_asked(monkeypatch: pytest.MonkeyPatch) -> list[ProcessorLink]:
    """The links a tick asks whether they are stuck, in the order asked (the rule itself still answers)."""
    asked: list[ProcessorLink] = []
    stuck = ProcessorLink.stuck

    def counted(link: ProcessorLink, now: float) -> bool:
        asked.append(link)
        return stuck(link, now)

    monkeypatch.setattr(ProcessorLink, "stuck", counted)
    return asked


def test_a_tick_looks_only_at_links_that_hold_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """200 workers with a link each, one task running: a tick asks one link whether it is stuck. Fails with the pass
    over every link (200 asked)."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    client = sim.add_client()
    for number in range(200):
        sim.add_worker(f"w{number}", task_timeout_seconds=TIMEOUT)
    sim.submit(client, [task(client.peer, 1)])
    asked = links_asked(monkeypatch)
    sim.time.advance(0.25)
    sim.feed(Tick(sim.now))
    assert len(asked) == 1 and asked[0].tasks


def test_a_link_whose_tasks_ended_leaves_the_ticks_watch_and_comes_back_with_its_next_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The links a tick watches are those sent a task since it last found them holding none (`LinkSessions.holding`):
    one whose task ended is forgotten at the next tick, and watched again once it is sent another. Fails when a send
    does not enter the link (never watched: no link asked) or when the tick never forgets one (still watched idle)."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    client = sim.add_client()
    workers = [sim.add_worker(f"w{number}", task_timeout_seconds=TIMEOUT) for number in range(3)]
    asked = links_asked(monkeypatch)
    sim.submit(client, [task(client.peer, 1)])
    busy = next(worker for worker in workers if worker.held)
    sim.time.advance(0.25)
    sim.feed(Tick(sim.now))
    assert [link.peer for link in asked] == [sim.link_of(busy.held[0])]
    sim.finish(busy)
    sim.time.advance(0.25)
    sim.feed(Tick(sim.now))
    assert not sim.core.link_sessions.holding, "a link that holds nothing left the watch"
    asked.clear()
    sim.time.advance(0.25)
    sim.feed(Tick(sim.now))
    assert asked == []
    sim.submit(client, [task(client.peer, 2)])
    busy = next(worker for worker in workers if worker.held)
    sim.time.advance(0.25)
    sim.feed(Tick(sim.now))
    assert [link.peer for link in asked] == [sim.link_of(busy.held[0])]


def test_balancing_looks_at_no_worker_while_fewer_than_two_tasks_live(monkeypatch: pytest.MonkeyPatch) -> None:
    """A donor holds two tasks or more: with one task (or none) in the scheduler, a balancing period makes no plan and
    walks no worker (an idle cluster of 10,000 workers walked them all each second). With two, it plans again. Fails
    with the plan made whatever the live tasks (planned in every period)."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, load_balance_seconds=1.0))
    client = sim.add_client()
    for number in range(20):
        sim.add_worker(f"w{number}")
    planned: list[int] = []
    plan = balancing.balance_plan

    def counted(*arguments: Any) -> dict[PeerID, tuple[TaskID, ...]]:
        planned.append(1)
        return plan(*arguments)

    monkeypatch.setattr(balancing, "balance_plan", counted)
    for _ in range(3):
        sim.time.advance(1.0)
        sim.feed(Tick(sim.now))
    sim.submit(client, [task(client.peer, 1)])
    for _ in range(3):
        sim.time.advance(1.0)
        sim.feed(Tick(sim.now))
    assert planned == []
    sim.submit(client, [task(client.peer, 2)])
    sim.time.advance(1.0)
    sim.feed(Tick(sim.now))
    assert planned == [1]


def test_beats_before_any_link_could_be_long_skip_the_walk() -> None:
    """With no task timeout and nothing stopped, a walk knows the earliest beat rule 3 can be due (a task computing
    since T is long at T + STAGED_WAIT_SECONDS; one that starts later, later): the beats before it do not walk, so a
    link whose task ended stays in `holding` until then. Fails with every beat walking (forgotten at the next)."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    client = sim.add_client()
    worker = sim.add_worker("w")
    sim.submit(client, [task(client.peer, 1)])
    started = sim.now
    link = sim.link_of(worker.held[0])
    sim.advance(0.25)
    assert sim.core.link_sessions.walk_after == started + STAGED_WAIT_SECONDS
    sim.finish(worker)
    sim.advance(0.25)
    sim.advance(0.25)
    assert link in sim.core.link_sessions.holding, "not walked before the bound"
    sim.time.advance_to(started + STAGED_WAIT_SECONDS)
    sim.feed(Tick(sim.now))
    assert not sim.core.link_sessions.holding, "walked at the bound: the link holding nothing left the watch"


def test_a_task_staged_behind_one_that_started_after_the_walk_is_asked_back_on_the_beat_it_is_due() -> None:
    """Rule 3's timing under the skipped walks: the task computing when a walk came ends, the next takes the turn, and
    what is staged behind it is asked back on the first beat STAGED_WAIT_SECONDS after that turn began, not later."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    client = sim.add_client()
    worker = sim.add_worker("w", capacity=3)
    sim.core.workers[worker.peer].learn(0.0001)  # tiny so far: tasks are staged behind the one computing
    sim.submit(client, [task(client.peer, n) for n in (1, 2, 3)])
    link = sim.link_of(worker.held[0])
    sim.advance(0.25)
    sim.advance(0.25)
    sim.finish(worker)  # the second takes the turn now, half a second after the walk
    turn = sim.now
    returned: list[m.TaskReturn] = []
    while sim.now < turn + STAGED_WAIT_SECONDS:
        returned += [e.message for e in sim.advance(0.25) if isinstance(e, Send) and e.peer == link
                     and isinstance(e.message, m.TaskReturn)]  # fmt: skip
        assert not returned or sim.now >= turn + STAGED_WAIT_SECONDS, "not before it is due"
    assert [message.task_ids for message in returned] == [(worker.held[1],)]


def test_a_task_stopped_in_its_processor_has_its_link_watched_on_every_beat(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rule 4 (a stopped task that does not unwind gets its processor killed) is due from the stop, not from a turn: a
    walk that finds a stop leaves no bound, and every beat after it asks the link. Fails with the bound kept (asked
    once a second)."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    client = sim.add_client()
    worker = sim.add_worker("w", capacity=2)
    sim.submit(client, [task(client.peer, n) for n in (1, 2)])
    parent, child = worker.held
    link = sim.link_of(parent)
    sim.send(link, m.ProcessorBlocked(parent))  # the child computes beside its parked parent: a cancel stops it there
    worker.where.pop(child)  # it will not answer the cancel
    worker.held.remove(child)
    sim.cancel(client, [child])
    asked = links_asked(monkeypatch)
    for _ in range(8):
        sim.advance(0.25)
    assert len(asked) >= 7, "every beat from the walk that found the stop"
