"""The heartbeat period the scheduler gives its workers, and how long a silence is a death at that period: one home
for both sides (the scheduler decides, `scheduler_link.py` obeys, the scheduler's silence rule judges by it).

Rules:
1. A cluster of `n` workers is given the floor while `n / HEARTBEATS_PER_SECOND` seconds is not longer, else that
   rounded up to whole seconds: the floor is the configured period (2 s by default: a cluster of up to 100 workers
   behaves exactly as before), and beyond it the period grows so that all the workers together send at most
   HEARTBEATS_PER_SECOND heartbeats a second. In whole seconds, the period moves only when the worker count
   crosses a multiple of that rate. A worker is given that period when it is longer than the floor, else 0: "your
   own", so that a worker configured to beat faster than the floor still does in a small cluster (`given_period`).
2. HEARTBEATS_PER_SECOND = 50: a heartbeat costs the scheduler 100 to 250 µs of a core on a 2-core virtual machine,
   all in (the wake-up of its loop and of ZeroMQ's I/O thread, the reads and the echo's send, decoding it, a step of
   the core; the most when heartbeats are few, each waking a cold process), so that 100 a second are 2% of a core,
   twice the 1% per 1,000 workers an idle cluster may cost. Dask's
   scheduler bounds the same rate at 200 a second (n / 200 + 1 s beyond 200 workers, a worker dead after ten periods
   or its 5-minute TTL); a quarter of that here: 20 s at 1,000 workers, 100 s at 5,000, 200 s at 10,000. What it
   costs: a hung worker is found after three periods when those are longer than `worker_timeout_seconds` (rule 4):
   at 1,000 workers after 60 s, the default timeout, as with 2 s heartbeats; after 5 minutes at 5,000 and 10 at
   10,000. A worker whose process ends or whose connection closes is dropped at once, whatever the period.
3. A worker obeys the longer of its own setting and the period it was given last (its HelloReply, then each
   HeartbeatEcho; 0: its own): a user's setting stays a floor on both sides. A given period is obeyed up to
   LONGEST_PERIOD_SECONDS (30,000 workers' period): a scheduler's mistake cannot silence a worker for days.
4. A peer beating at a period longer than the floor is dead once silent for more than `max(timeout,
   MISSED_BEATS * period)`: the configured timeout, or three periods when those are longer (a worker told to beat
   every 51 s is not dead after 60 s); at the floor, after the configured timeout, as before. Both sides judge so:
   the scheduler a worker by the period it gave it, the worker its scheduler by the period it obeys. Silence is
   the slow path, for a hung or cut-off peer: a worker whose process ends is dropped when its connection closes.
"""

from __future__ import annotations

import math

#: The most heartbeats a second all the workers of a cluster send together, beyond the floor (rule 2).
HEARTBEATS_PER_SECOND = 50
#: Heartbeats in a row a silence must miss to be a death, when that is longer than the configured timeout (rule 4).
MISSED_BEATS = 3
#: The longest given period a worker obeys (rule 3).
LONGEST_PERIOD_SECONDS = 600.0


def heartbeat_period(workers: int, floor_seconds: float) -> float:
    """The period given to each of `workers` workers (rule 1)."""
    wanted = max(0, workers) / HEARTBEATS_PER_SECOND
    return floor_seconds if wanted <= floor_seconds else max(floor_seconds, float(math.ceil(wanted)))


def given_period(workers: int, floor_seconds: float) -> float:
    """What a worker of a cluster of `workers` is told (rule 1): the period when longer than the floor, else 0."""
    period = heartbeat_period(workers, floor_seconds)
    return period if period > floor_seconds else 0.0


def silence_timeout(period_seconds: float, timeout_seconds: float, floor_seconds: float) -> float:
    """How long a peer beating every `period_seconds` (the floor: its configured period) may be silent before it
    counts as dead (rule 4)."""
    if period_seconds <= floor_seconds:
        return timeout_seconds
    return max(timeout_seconds, MISSED_BEATS * period_seconds)


def obeyed_period(own_seconds: float, given_seconds: float) -> float:
    """The period a worker beats at: its own setting, or the one it was given when longer (rule 3); a given period
    that is not a positive finite number (an older scheduler's 0, a hostile one's NaN) is not obeyed."""
    if not (math.isfinite(given_seconds) and given_seconds > 0):
        return own_seconds
    return max(own_seconds, min(given_seconds, LONGEST_PERIOD_SECONDS))
