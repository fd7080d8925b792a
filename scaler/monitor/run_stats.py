"""Bounded aggregates for the run report (pure: no I/O, no clock, no randomness).

- `LogHistogram`: durations in logarithmic buckets, so percentiles of any number of tasks cost a few hundred
  counters; a percentile is within half a bucket (`RELATIVE_ERROR`) of the exact one, min and max are exact.
- `StrideSample`: a uniform, deterministic sample of a stream of unknown length: it keeps every `stride`-th item
  and doubles the stride whenever it holds more than its capacity, so the kept items cover the whole run.
- `lay_out_lanes`: the task bars of one worker placed in as few lanes as possible, none overlapping in a lane
  (a worker with several processors runs several tasks at once).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

#: Each bucket spans this ratio: 2 ** (1/16), about 4.4 %.
BUCKET_RATIO = 2 ** (1 / 16)
#: A percentile read from the histogram is within this ratio of the exact one (half a bucket, geometrically).
RELATIVE_ERROR = BUCKET_RATIO**0.5 - 1
#: Durations below this (1 µs) share the lowest bucket.
SMALLEST_SECONDS = 1e-6


class LogHistogram:
    """Counts of non-negative values in logarithmic buckets, with the exact count, sum, min and max."""

    def __init__(self) -> None:
        self._buckets: dict[int, int] = {}
        self.count = 0
        self.total = 0.0
        self.minimum = math.inf
        self.maximum = 0.0

    def add(self, value: float) -> None:
        value = max(0.0, value)
        index = math.floor(math.log(max(value, SMALLEST_SECONDS), BUCKET_RATIO))
        self._buckets[index] = self._buckets.get(index, 0) + 1
        self.count += 1
        self.total += value
        self.minimum = min(self.minimum, value)
        self.maximum = max(self.maximum, value)

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def percentile(self, fraction: float) -> float:
        """The nearest-rank percentile (`fraction` in [0, 1]); 0 when empty."""
        if not self.count:
            return 0.0
        if fraction <= 0:
            return self.minimum
        if fraction >= 1:
            return self.maximum
        rank = max(1, math.ceil(fraction * self.count))
        seen = 0
        for index in sorted(self._buckets):
            seen += self._buckets[index]
            if seen >= rank:
                middle: float = BUCKET_RATIO ** (index + 0.5)
                return min(self.maximum, max(self.minimum, middle))
        return self.maximum  # not reached: the buckets hold `count` values


class StrideSample(Generic[T]):
    """Every `stride`-th item offered, at most `capacity` of them; `dropped` says how many were left out."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a sample holds at least one item, not {capacity}")
        self.capacity = capacity
        self.stride = 1
        self.offered = 0
        self._kept: list[tuple[int, T]] = []

    def offer(self, item: T) -> None:
        if self.offered % self.stride == 0:
            self._kept.append((self.offered, item))
            if len(self._kept) > self.capacity:
                self.stride *= 2
                self._kept = [(number, kept) for number, kept in self._kept if number % self.stride == 0]
        self.offered += 1

    @property
    def items(self) -> list[T]:
        return [item for _number, item in self._kept]

    @property
    def dropped(self) -> int:
        return self.offered - len(self._kept)


@dataclass(frozen=True, slots=True)
class Bar:
    """One task's run on one worker, in seconds since the epoch."""

    worker: str
    function_name: str
    start: float
    end: float
    failed: bool = False


@dataclass(frozen=True, slots=True)
class PlacedBar:
    bar: Bar
    row: int  #: 0-based row of the whole timeline: the worker's first row plus the lane


@dataclass(frozen=True, slots=True)
class Timeline:
    placed: tuple[PlacedBar, ...]
    rows: tuple[str, ...]  #: the label of each row: a worker's name on its first lane, "" on the others
    start: float
    end: float


def lay_out_lanes(bars: Sequence[Bar]) -> list[int]:
    """The lane of each bar (same order): a bar goes in the lowest lane whose last bar ended by its start."""
    lane_ends: list[float] = []
    lanes = [0] * len(bars)
    for position in sorted(range(len(bars)), key=lambda i: (bars[i].start, bars[i].end)):
        bar = bars[position]
        for lane, end in enumerate(lane_ends):
            if end <= bar.start:
                lanes[position], lane_ends[lane] = lane, bar.end
                break
        else:
            lanes[position] = len(lane_ends)
            lane_ends.append(bar.end)
    return lanes


def timeline(bars: Iterable[Bar]) -> Timeline:
    """Bars grouped by worker (workers sorted by name), each worker's bars in lanes, one row per lane."""
    by_worker: dict[str, list[Bar]] = {}
    for bar in bars:
        by_worker.setdefault(bar.worker, []).append(bar)
    placed: list[PlacedBar] = []
    rows: list[str] = []
    for worker in sorted(by_worker):
        own = by_worker[worker]
        lanes = lay_out_lanes(own)
        first_row = len(rows)
        rows.extend([worker] + [""] * max(lanes))
        placed.extend(PlacedBar(bar, first_row + lane) for bar, lane in zip(own, lanes, strict=True))
    start = min((p.bar.start for p in placed), default=0.0)
    end = max((p.bar.end for p in placed), default=0.0)
    return Timeline(tuple(placed), tuple(rows), start, end)
