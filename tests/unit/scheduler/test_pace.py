"""How often the shell beats the core's clock and how soon it reads (`scheduler/core/pace.py`): an idle scheduler of
a cluster whose heartbeats come often beats once a second and reads after a pause; one that holds a task, or has few
workers, does neither; a beat is late by when it was due, at either pace."""

from __future__ import annotations

from scaler.scheduler.core.events import READS_BEHIND_SECONDS, Beats
from scaler.scheduler.core.pace import BUSY, IDLE, IDLE_FROM_HEARTBEATS, LATE_BEAT_SECONDS
from scaler.scheduler.core.scheduler_core import CoreSettings
from scaler_rehearsal.testing.simulation import PYTHON, SimulatedCluster, task


def test_an_idle_scheduler_of_a_big_cluster_beats_once_a_second_and_pauses_its_reads() -> None:
    """50 workers at the default 2 s (25 heartbeats a second, IDLE_FROM_HEARTBEATS): IDLE while no task is held; with
    a task, or with 49 workers, BUSY; IDLE again once the task is done, and with 1,000 workers (given 20 s: 50 a
    second). Fails with the pace told by a heartbeat period given (100 workers and fewer were BUSY idle, at 2.3% to
    3% of a core where IDLE costs 0.9%)."""
    sim = SimulatedCluster(CoreSettings("s", "o", PYTHON))
    client = sim.add_client()
    workers = [sim.add_worker(f"w{number}") for number in range(49)]
    assert sim.core.pace() == BUSY
    workers.append(sim.add_worker("w49"))
    assert IDLE_FROM_HEARTBEATS == 25 and sim.core.worker_sessions.heartbeats_per_second() == 25
    assert sim.core.pace() == IDLE
    assert IDLE.tick_seconds > BUSY.tick_seconds and IDLE.read_pause_seconds > BUSY.read_pause_seconds == 0
    sim.submit(client, [task(client.peer, 1)])
    assert sim.core.pace() == BUSY
    (holder,) = [worker for worker in workers if worker.held]
    sim.finish(holder)
    assert not sim.core.tasks.records
    assert sim.core.pace() == IDLE
    workers.extend(sim.add_worker(f"w{number}") for number in range(50, 1000))
    assert sim.core.worker_sessions.heartbeats_per_second() == 50 and sim.core.pace() == IDLE


def test_a_beat_is_late_by_when_it_was_due_at_either_pace() -> None:
    """A beat a second after the one before is on time when a second was slept (IDLE), late when a quarter was
    (BUSY): fails with lateness judged by one fixed gap (every idle beat late, no silence ever judged while idle, or
    a busy scheduler stalled for 1.5 s judging silence)."""
    for interval in (BUSY.tick_seconds, IDLE.tick_seconds):
        beats = Beats()
        assert beats.tick(0.0, 0.0, interval).on_time
        assert beats.tick(interval, 0.0, interval).on_time
        assert beats.tick(2 * interval + LATE_BEAT_SECONDS - 0.01, 0.0, interval).on_time
        assert not beats.tick(3 * interval + 2 * LATE_BEAT_SECONDS, 0.0, interval).on_time
    busy = Beats()
    busy.tick(0.0, 0.0)
    assert not busy.tick(IDLE.tick_seconds + 0.5, 0.0, BUSY.tick_seconds).on_time
    idle = Beats()
    idle.tick(0.0, 0.0)
    assert idle.tick(IDLE.tick_seconds + 0.5, 0.0, IDLE.tick_seconds).on_time


def test_beats_behind_on_the_reads_say_so_for_a_bounded_run() -> None:
    """A beat while the shell is behind on its reads says so (nothing is asked back on it: the answers may be
    unread), for READS_BEHIND_SECONDS in a row at most; a beat caught up starts the count again. Fails with the
    flag passed on unbounded (a scheduler that never catches up would never ask back from behind a long task)."""
    beats = Beats()
    interval = BUSY.tick_seconds
    times = [n * interval for n in range(int(READS_BEHIND_SECONDS / interval) + 3)]
    said = [beats.tick(now, 0.0, interval, reads_behind=True).reads_behind for now in times]
    assert said == [now - times[0] <= READS_BEHIND_SECONDS for now in times] and not said[-1]
    assert not beats.tick(times[-1] + interval, 0.0, interval).reads_behind
    assert beats.tick(times[-1] + 2 * interval, 0.0, interval, reads_behind=True).reads_behind
