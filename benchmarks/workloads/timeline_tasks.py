"""U2's tasks (day_tasks.py) noting when and where each ran, for benchmarks/u2_timeline.py: each returns
(its day_tasks result, the spans so far), a span being (kind, wall start, wall end, pid)."""

import os
import time
from typing import Any

import day_tasks

Span = tuple[str, float, float, int]


def importable_by_workers() -> None:
    """This folder on PYTHONPATH, so that the workers a local cluster starts import these tasks (and day_tasks) by
    name, as the client does."""
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])])


def noop() -> None:
    return None


def pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def make_partition(index: int, rows: int) -> tuple[Any, list[Span]]:
    began = time.time()
    made = day_tasks.make_partition(index, rows)
    return made, [("make", began, time.time(), os.getpid())]


def group_partition(made: tuple[Any, list[Span]]) -> tuple[Any, list[Span]]:
    began = time.time()
    grouped = day_tasks.group_partition(made[0])
    return grouped, [*made[1], ("group", began, time.time(), os.getpid())]


def combine_groups(*partials: tuple[Any, list[Span]]) -> tuple[Any, list[Span]]:
    began = time.time()
    total = day_tasks.combine_groups(*(partial[0] for partial in partials))
    spans = [span for partial in partials for span in partial[1]]
    return total, [*spans, ("combine", began, time.time(), os.getpid())]


class Traced:
    """A joblib call's function that appends (name, wall start, wall end, pid) to the file `path` when it runs
    (benchmarks/u4_timeline.py): joblib's results stay the function's own."""

    def __init__(self, function: Any, path: str) -> None:
        self.function = function
        self.path = path

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        began = time.time()
        try:
            return self.function(*args, **kwargs)
        finally:
            with open(self.path, "a") as out:
                out.write(f"{began} {time.time()} {os.getpid()}\n")


_GROUPED: dict[int, Any] = {}


def grouped_only(index: int) -> tuple[Any, list[Span]]:
    """A grouped partition as group_partition returns it, computed once per process (the combine's inputs, cheaply)."""
    if index not in _GROUPED:
        _GROUPED[index] = day_tasks.group_partition(day_tasks.make_partition(index, 20_000))
    return _GROUPED[index], []
