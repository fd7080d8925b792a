"""Task-arrival traces for the scaling simulator: pure generators, randomness passed in.

A trace is a tuple of `TaskArrival`s sorted by arrival time. Generators take a `RandomSource` (a
seeded `random.Random` satisfies it), so the same seed always gives the same trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from scaler.protocol.messages import Capabilities


class RandomSource(Protocol):
    """The part of `random.Random` the generators use."""

    def expovariate(self, lambd: float, /) -> float: ...

    def uniform(self, a: float, b: float, /) -> float: ...


@dataclass(frozen=True, slots=True)
class TaskArrival:
    arrival_seconds: float
    duration_seconds: float  #: how long the task runs once a worker has it
    capabilities: Capabilities = ()
    function_name: str = "f"  #: what the scheduler learns run times by


Trace = tuple[TaskArrival, ...]


def steady_trace(
    rng: RandomSource,
    rate_per_second: float,
    duration_seconds: float,
    task_seconds: float,
    capabilities: Capabilities = (),
) -> Trace:
    """Poisson arrivals at `rate_per_second` for `duration_seconds`; every task runs `task_seconds`."""
    arrivals: list[TaskArrival] = []
    at = rng.expovariate(rate_per_second)
    while at < duration_seconds:
        arrivals.append(TaskArrival(at, task_seconds, capabilities))
        at += rng.expovariate(rate_per_second)
    return tuple(arrivals)


def bursty_trace(
    rng: RandomSource,
    burst_size: int,
    period_seconds: float,
    bursts: int,
    task_seconds: float,
    spread_seconds: float = 1.0,
    capabilities: Capabilities = (),
) -> Trace:
    """`bursts` bursts of `burst_size` tasks, one every `period_seconds`, idle in between.

    Within a burst, tasks arrive uniformly over `spread_seconds`; each runs between 0.5 and 1.5 times
    `task_seconds`.
    """
    arrivals = [
        TaskArrival(
            burst * period_seconds + rng.uniform(0.0, spread_seconds),
            task_seconds * rng.uniform(0.5, 1.5),
            capabilities,
        )
        for burst in range(bursts)
        for _task in range(burst_size)
    ]
    return tuple(sorted(arrivals, key=lambda arrival: arrival.arrival_seconds))


def one_shot_trace(count: int = 100, task_seconds: float = 0.1, capabilities: Capabilities = ()) -> Trace:
    """`count` tasks of `task_seconds` all arriving at t = 0."""
    return tuple(TaskArrival(0.0, task_seconds, capabilities) for _task in range(count))


def merge_traces(*traces: Trace) -> Trace:
    arrivals = (arrival for trace in traces for arrival in trace)
    return tuple(sorted(arrivals, key=lambda arrival: arrival.arrival_seconds))
