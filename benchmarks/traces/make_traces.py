"""Writes the three task-arrival traces of docs/scaling.md (`scaler_simulate_policy`), deterministically.

Usage: `python benchmarks/traces/make_traces.py` (writes bursty.csv, diurnal.csv, steady.csv and small_bursts.csv
next to it).

- steady: 10 minutes of tasks arriving at 2 per second (Poisson), each 1-5 s: about 6 workers' worth.
- bursty: a trickle (one task every 2 s, 1-3 s each) for 10 minutes, and three bursts of 300 tasks of 5-15 s
  at 1, 4 and 7 minutes: a notebook user fanning out now and then.
- diurnal: a compressed day of 20 minutes whose arrival rate swings from 0.2 to 4 tasks per second and back,
  each task 2-10 s.
- small_bursts: the three bursts of `benchmarks/cost_tiers_real.py` (40 tasks of 2 s at 0 s, 40 of 2 s at 40 s,
  20 of 3 s at 80 s), to replay its comparison against `small_tiers.toml` (the same two tiers).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path

Row = tuple[float, float]


def poisson(rng: random.Random, rate_at: Callable[[float], float], end: float, peak: float) -> list[float]:
    """Arrival times of a Poisson process whose rate varies (thinning against the peak rate)."""
    times, at = [], 0.0
    while True:
        at += rng.expovariate(peak)
        if at >= end:
            return times
        if rng.random() < rate_at(at) / peak:
            times.append(at)


def steady(rng: random.Random) -> list[Row]:
    return [(at, rng.uniform(1.0, 5.0)) for at in poisson(rng, lambda _t: 2.0, 600.0, 2.0)]


def bursty(rng: random.Random) -> list[Row]:
    rows = [(at, rng.uniform(1.0, 3.0)) for at in poisson(rng, lambda _t: 0.5, 600.0, 0.5)]
    for start in (60.0, 240.0, 420.0):
        rows.extend((start + rng.uniform(0.0, 3.0), rng.uniform(5.0, 15.0)) for _ in range(300))
    return rows


def diurnal(rng: random.Random) -> list[Row]:
    def rate(at: float) -> float:
        return 0.2 + 3.8 * (1.0 - math.cos(2.0 * math.pi * at / 1200.0)) / 2.0

    return [(at, rng.uniform(2.0, 10.0)) for at in poisson(rng, rate, 1200.0, 4.0)]


def small_bursts(_rng: random.Random) -> list[Row]:
    return [(start, seconds) for start, tasks, seconds in ((0.0, 40, 2.0), (40.0, 40, 2.0), (80.0, 20, 3.0))
            for _ in range(tasks)]  # fmt: skip


def main() -> None:
    folder = Path(__file__).parent
    for seed, make in enumerate((bursty, diurnal, steady, small_bursts), start=7):
        rows = sorted(make(random.Random(seed)))
        lines = ["arrival_seconds,duration_seconds"] + [f"{at:.3f},{duration:.3f}" for at, duration in rows]
        (folder / f"{make.__name__}.csv").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
