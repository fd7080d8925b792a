"""How often the shell beats the core's clock and how soon it reads what came: the core decides, the shell obeys
(`SchedulerServer._tick_routine`, the router's `pause_after_burst`).

Rules:
1. A scheduler that holds a task, or whose workers' heartbeats together come at fewer than IDLE_FROM_HEARTBEATS a
   second (fewer than 50 workers at the default 2 s), is BUSY: a beat every quarter second, and every message read as
   it comes.
2. An idle scheduler of a bigger cluster (no task held, at least IDLE_FROM_HEARTBEATS heartbeats a second) is IDLE: a
   beat a second, and its socket left unread IDLE.read_pause_seconds after each burst of reads. What reaches it is
   heartbeats, each alone a wake-up of a process that slept, whose code and data had left the caches meanwhile (180 us
   of a core where one read after another costs 14 us; a beat's wake-up, 100 to 400 us on a 2-core virtual
   machine). Paused, the heartbeats that came meanwhile are read in one wake-up and their echoes leave
   together; a beat a second saves three wake-ups a second. Measured at 1,000 idle workers (50 heartbeats a second,
   `python -m scale.threads`, run in turn): a beat four times a second and 100 ms pauses, 1.27% and 1.20% of a core
   (12 wake-ups a second of the main thread); a beat a second and 200 ms pauses, 0.85% and 0.85% (7 wake-ups).
   A cluster's heartbeats come at HEARTBEATS_PER_SECOND a second from 100 workers at the default 2 s on (beyond, the
   workers are given longer periods: heartbeat_period.py), so 100 idle workers cost what 1,000 do only when paced
   alike (BUSY, 2.3% to 3% of a core; IDLE, 0.9%; docs/guide/scale.md). IDLE_FROM_HEARTBEATS, half of
   that rate, is met from 50 workers on; a workstation's few dozen workers keep every message read as it comes.
3. What IDLE costs: the first message after a quiet spell (a client's first task) waits up to
   IDLE.read_pause_seconds to be read; what is judged on a beat (a silence of at least the worker timeout, a
   client's timeout, an object's retention, a scaling target) is judged up to IDLE.tick_seconds late instead of a
   quarter second; once a task is held the next beat comes within IDLE.tick_seconds, and BUSY from there.
4. A beat is late (`events.Beats`: no silence is judged on it) when it comes more than LATE_BEAT_SECONDS after it was
   due, whatever the pace it was due at.
"""

from __future__ import annotations

from dataclasses import dataclass

from scaler.protocol.heartbeat_period import HEARTBEATS_PER_SECOND


@dataclass(frozen=True, slots=True)
class Pace:
    tick_seconds: float  #: from one beat of the core's clock to the next
    read_pause_seconds: float  #: the router left unread after each burst of reads (0: read as it comes)


BUSY = Pace(tick_seconds=0.25, read_pause_seconds=0.0)
IDLE = Pace(tick_seconds=1.0, read_pause_seconds=0.2)
#: How long after it was due a beat is late (rule 4): at the busy pace, a beat a second after the one before.
LATE_BEAT_SECONDS = 0.75
#: The heartbeats a second from which an idle scheduler reads after pauses (rules 1 and 2).
IDLE_FROM_HEARTBEATS = HEARTBEATS_PER_SECOND / 2


def pace(tasks_held: int, heartbeats_per_second: float) -> Pace:
    """Rules 1 and 2: `heartbeats_per_second`, what the workers' heartbeats together come at now."""
    return IDLE if tasks_held == 0 and heartbeats_per_second >= IDLE_FROM_HEARTBEATS else BUSY
