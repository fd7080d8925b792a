"""Silence deadlines (scheduler/core/silence.py): a tick judges the workers whose deadline passed, from a heap, and
finds exactly those a scan of every worker would find (issue 58)."""

from __future__ import annotations

import random

from scaler.protocol import messages as m
from scaler.protocol.ids import PeerID
from scaler.scheduler.core.events import Tick
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler.scheduler.core.silence import SilenceDeadlines
from scaler.testing.simulation import PYTHON, SimulatedCluster, task


def peer(number: int) -> PeerID:
    return PeerID(b"Worker|T|%d" % number)


def test_a_peer_silent_past_its_deadline_is_found_on_the_first_tick_after_it() -> None:
    deadlines = SilenceDeadlines(10.0)
    last_seen = {peer(1): 0.0}
    deadlines.arm(peer(1), 0.0)
    assert deadlines.silent(10.0, last_seen.get) == []  # exactly at the deadline: not yet (now - seen > timeout)
    assert deadlines.silent(10.25, last_seen.get) == [peer(1)]
    assert deadlines.silent(20.0, last_seen.get) == [] and len(deadlines) == 0, "reported once, its entry gone"


def test_a_peer_heard_from_gets_its_entry_back_at_its_new_deadline() -> None:
    deadlines = SilenceDeadlines(10.0)
    last_seen = {peer(1): 0.0}
    deadlines.arm(peer(1), 0.0)
    last_seen[peer(1)] = 9.0  # a heartbeat: only its record changes
    assert deadlines.silent(10.5, last_seen.get) == [] and len(deadlines) == 1
    assert deadlines.silent(19.0, last_seen.get) == []
    assert deadlines.silent(19.25, last_seen.get) == [peer(1)]


def test_a_gone_peer_loses_its_entry_and_one_registered_again_keeps_one() -> None:
    deadlines = SilenceDeadlines(10.0)
    last_seen: dict[PeerID, float] = {}
    deadlines.arm(peer(1), 0.0)
    deadlines.arm(peer(1), 5.0)  # registered again before its entry came up: still one entry
    assert len(deadlines) == 1
    assert deadlines.silent(11.0, last_seen.get) == [] and len(deadlines) == 0  # gone: nothing reported
    deadlines.arm(peer(1), 11.0)
    assert len(deadlines) == 1


def test_the_heap_finds_what_a_scan_of_every_peer_finds() -> None:
    """Random traffic of 200 peers over 300 ticks: each tick, the deadlines report exactly the peers a scan reports,
    and each silent peer is reported once."""
    chance = random.Random(58)
    timeout = 5.0
    deadlines = SilenceDeadlines(timeout)
    last_seen: dict[PeerID, float] = {}
    now = 0.0
    for number in range(200):
        last_seen[peer(number)] = now
        deadlines.arm(peer(number), now)
    for _ in range(300):
        now += 0.25
        for number in range(200):
            if peer(number) in last_seen and chance.random() < 0.04:  # some talk often, some fall silent
                last_seen[peer(number)] = now - chance.random() * 0.2
        scanned = sorted(p for p, seen in last_seen.items() if now - seen > timeout)
        found = deadlines.silent(now, last_seen.get)
        assert sorted(found) == scanned
        for gone in found:
            del last_seen[gone]  # dropped, as the core does


def test_a_heartbeat_deadline_missed_exactly_once_is_still_a_death() -> None:
    """A worker that heartbeats on time and then misses one deadline (nothing more, not by a tick more than needed) is
    dropped on the first tick past it, its task queued again; one that heartbeats just in time is kept. Fails with
    the deadline entry not re-armed at the worker's new deadline (the talking worker dropped) or not armed at its
    registration (the silent one kept)."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON, worker_timeout_seconds=3))
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
