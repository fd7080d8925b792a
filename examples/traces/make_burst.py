"""Writes burst.csv, the example trace of `scaler_simulate_policy` (docs/scaling.md), deterministically.

Usage: `python examples/traces/make_burst.py > examples/traces/burst.csv`.

Four minutes of a service: a trickle of short `score` tasks (50-200 ms) all along, one `train` task (30 s)
early on, then a burst of 250 `score` tasks at t = 60 s and a burst of 24 `train` tasks (20-40 s) at t = 150 s.
"""

from __future__ import annotations

import random


def rows(rng: random.Random) -> list[tuple[float, float, str, str]]:
    tasks: list[tuple[float, float, str, str]] = []
    at = rng.expovariate(0.5)
    while at < 240.0:
        tasks.append((at, rng.uniform(0.05, 0.2), "", "score"))
        at += rng.expovariate(0.5)
    tasks.append((10.0, 30.0, "", "train"))
    tasks.extend((60.0 + rng.uniform(0.0, 2.0), rng.uniform(0.05, 0.2), "", "score") for _ in range(250))
    tasks.extend((150.0 + rng.uniform(0.0, 1.0), rng.uniform(20.0, 40.0), "", "train") for _ in range(24))
    return sorted(tasks)


def main() -> None:
    print("arrival_seconds,duration_seconds,capabilities,function_name")
    for at, duration, capabilities, function_name in rows(random.Random(17)):
        print(f"{at:.3f},{duration:.3f},{capabilities},{function_name}")


if __name__ == "__main__":
    main()
