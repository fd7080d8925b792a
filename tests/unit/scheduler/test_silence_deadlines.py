"""Silence deadlines (scheduler/core/silence.py): a tick judges the workers whose deadline passed, from a heap, and
finds exactly those a scan of every worker would find (issue 58); each peer by its own timeout, a worker's by the
heartbeat period it was given (scaler/protocol/heartbeat_period.py, rule 4)."""

from __future__ import annotations

import random

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID
from scaler.scheduler.core.effects import Send
from scaler.scheduler.core.events import Tick
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.scheduler.core.silence import SeenOf, SilenceDeadlines
from scaler_rehearsal.testing.simulation import PYTHON, SimulatedCluster, task


def peer(number: int) -> PeerID:
    return PeerID(b"Worker|T|%d" % number)


def seen(last_seen: dict[PeerID, float], timeout: float = 10.0) -> SeenOf:
    """Each peer's last message's time and the one timeout they share."""
    return lambda peer: None if peer not in last_seen else (last_seen[peer], timeout)


def test_a_peer_silent_past_its_deadline_is_found_on_the_first_tick_after_it() -> None:
    deadlines = SilenceDeadlines()
    last_seen = {peer(1): 0.0}
    deadlines.arm(peer(1), 0.0, 10.0)
    assert deadlines.silent(10.0, seen(last_seen)) == []  # exactly at the deadline: not yet (now - seen > timeout)
    assert deadlines.silent(10.25, seen(last_seen)) == [peer(1)]
    assert deadlines.silent(20.0, seen(last_seen)) == [] and len(deadlines) == 0, "reported once, its entry gone"


def test_a_peer_heard_from_gets_its_entry_back_at_its_new_deadline() -> None:
    deadlines = SilenceDeadlines()
    last_seen = {peer(1): 0.0}
    deadlines.arm(peer(1), 0.0, 10.0)
    last_seen[peer(1)] = 9.0  # a heartbeat: only its record changes
    assert deadlines.silent(10.5, seen(last_seen)) == [] and len(deadlines) == 1
    assert deadlines.silent(19.0, seen(last_seen)) == []
    assert deadlines.silent(19.25, seen(last_seen)) == [peer(1)]


def test_a_gone_peer_loses_its_entry_and_one_registered_again_keeps_one() -> None:
    deadlines = SilenceDeadlines()
    last_seen: dict[PeerID, float] = {}
    deadlines.arm(peer(1), 0.0, 10.0)
    deadlines.arm(peer(1), 5.0, 10.0)  # registered again before its entry came up: still one entry
    assert len(deadlines) == 1
    assert deadlines.silent(11.0, seen(last_seen)) == [] and len(deadlines) == 0  # gone: nothing reported
    deadlines.arm(peer(1), 11.0, 10.0)
    assert len(deadlines) == 1


def test_the_heap_finds_what_a_scan_of_every_peer_finds() -> None:
    """Random traffic of 200 peers over 300 ticks: each tick, the deadlines report exactly the peers a scan reports,
    and each silent peer is reported once."""
    chance = random.Random(58)
    timeout = 5.0
    deadlines = SilenceDeadlines()
    last_seen: dict[PeerID, float] = {}
    now = 0.0
    for number in range(200):
        last_seen[peer(number)] = now
        deadlines.arm(peer(number), now, timeout)
    for _ in range(300):
        now += 0.25
        for number in range(200):
            if peer(number) in last_seen and chance.random() < 0.04:  # some talk often, some fall silent
                last_seen[peer(number)] = now - chance.random() * 0.2
        scanned = sorted(p for p, seen in last_seen.items() if now - seen > timeout)
        found = deadlines.silent(now, seen(last_seen, timeout))
        assert sorted(found) == scanned
        for gone in found:
            del last_seen[gone]  # dropped, as the core does


def test_a_heartbeat_deadline_missed_exactly_once_is_still_a_death() -> None:
    """A worker that heartbeats on time and then misses one deadline (nothing more, not by a tick more than needed) is
    dropped on the first tick past it, its task queued again; one that heartbeats just in time is kept. Fails with
    the deadline entry not re-armed at the worker's new deadline (the talking worker dropped) or not armed at its
    registration (the silent one kept)."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, worker_timeout_seconds=3, heartbeat_interval_seconds=0.5))
    client = sim.add_client()
    quiet, talking = sim.add_worker("quiet"), sim.add_worker("talking")
    sim.submit(client, [task(client.peer, 1)])
    for _ in range(4):  # 2 s of heartbeats from both, every half second
        sim.time.advance(0.5)
        for worker in (quiet, talking):
            sim.send(worker.peer, m.Heartbeat(worker=m.WorkerStatus()))
        sim.feed(Tick(sim.now))
    last = sim.now
    while sim.now - last <= 3:  # `quiet` says nothing more; `talking` heartbeats each second
        sim.time.advance(0.25)
        if sim.now - last >= 1 and (sim.now - last) % 1 == 0:
            sim.send(talking.peer, m.Heartbeat(worker=m.WorkerStatus()))
        assert quiet.peer in sim.core.workers, "not dropped before its deadline"
        sim.feed(Tick(sim.now))
    assert quiet.peer not in sim.core.workers, "dropped on the first tick past its deadline"
    assert talking.peer in sim.core.workers
    assert sum(len(worker.assigned) for worker in sim.core.workers.values()) == 1, "its task went back and on"


def test_each_peer_is_judged_by_its_own_timeout_as_it_is_when_judged() -> None:
    """A peer whose timeout grew after its entry was made (a longer heartbeat period given) is judged by the new one:
    its entry goes back; another keeps the short one."""
    deadlines = SilenceDeadlines()
    last_seen = {peer(1): 0.0, peer(2): 0.0}
    timeouts = {peer(1): 10.0, peer(2): 10.0}
    for number in (1, 2):
        deadlines.arm(peer(number), 0.0, 10.0)
    timeouts[peer(1)] = 30.0  # given a longer period: three of them

    def seen_of(who: PeerID) -> tuple[float, float] | None:
        return last_seen[who], timeouts[who]

    assert deadlines.silent(10.25, seen_of) == [peer(2)]
    assert deadlines.silent(30.0, seen_of) == []
    assert deadlines.silent(30.25, seen_of) == [peer(1)]


def _silent_worker_dropped_at(settings: CoreSettings, others: int, step: float = 0.25) -> float:
    """When a worker registered after `others` workers, that heartbeats once and then stays silent, is dropped."""
    sim = SimulatedCluster(settings)
    for number in range(others):
        sim.add_worker(f"other{number}")
    quiet = sim.add_worker("quiet")
    sim.send(quiet.peer, m.Heartbeat(worker=m.WorkerStatus()))
    last = sim.now
    while quiet.peer in sim.core.workers:
        sim.advance(step)
    return sim.now - last


def test_a_worker_given_a_long_period_is_judged_by_three_of_them() -> None:
    """The 125th worker at a floor of 1 s is told to beat every 3 s: it is not dropped after the configured timeout of
    2 s, and is dropped on the first tick past three missed periods (9 s): a deadline missed exactly once is still a
    death. Alone, at the floor, it is dropped after the configured timeout, as before. Fails with the silence judged
    by the configured timeout alone (dropped at 2 s)."""
    settings = CoreSettings("s", "o", PYTHON, worker_timeout_seconds=2, heartbeat_interval_seconds=1)
    assert _silent_worker_dropped_at(settings, 124) == 9.25
    assert _silent_worker_dropped_at(settings, 0) == 2.25


def test_the_period_given_grows_with_the_workers_and_each_echo_gives_it_again() -> None:
    """125 workers at a floor of 1 s: the 125th is told 3 s in its HelloReply (at most 50 heartbeats a second), and
    an early worker, told 0 then (its own period: the cluster was small), is told 3 s in its next echo and judged by
    it from then on."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, worker_timeout_seconds=2, heartbeat_interval_seconds=1))
    first = sim.add_worker("w0")
    replies = [e.message for e in sim.effects_of(Send) if e.peer == first.peer and isinstance(e.message, m.HelloReply)]
    assert [reply.heartbeat_interval_seconds for reply in replies] == [0.0]
    for number in range(1, 125):
        worker = sim.add_worker(f"w{number}")
    last = next(
        e.message for e in sim.effects_of(Send) if e.peer == worker.peer and isinstance(e.message, m.HelloReply)
    )
    assert last.heartbeat_interval_seconds == 3.0
    sim.send(first.peer, m.Heartbeat(worker=m.WorkerStatus()))
    echo = sim.effects_of(Send)[-1].message
    assert isinstance(echo, m.HeartbeatEcho) and echo.heartbeat_interval_seconds == 3.0
    assert sim.core.workers[first.peer].heartbeat_period == 3.0
    assert sim.core.worker_sessions.timeout(sim.core.workers[first.peer]) == 9.0
