"""What the conformance tier prints at the end of a run: per suite, the peer's tests that passed, those excluded (with
the reason, exclusions.py) and those that failed, and the suite's wall and CPU time.

CPython's suite runs in an interpreter of its own, so its test records its counts; joblib's and Dask's tests are
items of this session, counted from their reports (an excluded one is skipped with "excluded: <reason>"). Each
suite's module records its cost (wall and CPU of the test process and of the processes it waited for: its cluster's,
the runner's) on the report of its last test's teardown. Records travel in the reports' user properties, which
pytest-xdist carries to the controller; `write_summary` is called from tests/conftest.py's pytest_terminal_summary.
"""

from __future__ import annotations

import contextlib
import json
import resource
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import pytest

PROPERTY = "conformance"
#: The pytest modules of the suites whose tests are items of this session.
ITEM_SUITES = {
    "tests/conformance/test_joblib_parallel.py": "joblib",
    "tests/conformance/test_dask_get.py": "dask",
    "tests/conformance/test_dask_distributed_client.py": "distributed",
    "tests/conformance/test_dask_futures_chapter.py": "dask futures",
}
EXCLUDED_PREFIX = "excluded: "


@dataclass
class SuiteCounts:
    passed: int = 0
    excluded: int = 0  #: skipped by the tier, with the reason in exclusions.py
    failed: int = 0
    skipped: int = 0  #: skipped by the peer's suite itself (a missing optional helper, ...)


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def record(node: pytest.Item, suite: str, counts: SuiteCounts | None, wall: float, cpu: float) -> None:
    node.user_properties.append(
        (PROPERTY, json.dumps({"suite": suite, "counts": asdict(counts) if counts else None, "wall": wall, "cpu": cpu}))
    )


#: the item running now (the module fixtures' finalizers record their suite's cost on it)
current_item: list[pytest.Item] = []


@contextlib.contextmanager
def measured(suite: str) -> Iterator[None]:
    """For a suite module's fixture: record the wall and CPU time from here to its finalizer."""
    wall, cpu = time.monotonic(), cpu_seconds()
    yield
    if current_item:
        record(current_item[-1], suite, None, time.monotonic() - wall, cpu_seconds() - cpu)


def write_summary(terminalreporter: Any) -> None:
    counts: dict[str, SuiteCounts] = {}
    cost: dict[str, list[float]] = {}
    seen: set[tuple[str, str]] = set()
    seen_records: set[tuple[str, str]] = set()
    for reports in terminalreporter.stats.values():
        for report in reports:
            when = getattr(report, "when", None)
            nodeid = getattr(report, "nodeid", "")
            if (nodeid, when) in seen or when is None:
                continue
            seen.add((nodeid, when))
            _add_records(report, nodeid, seen_records, counts, cost)
            suite = ITEM_SUITES.get(nodeid.split("::")[0])
            if suite is not None:
                _count_item(report, when, counts.setdefault(suite, SuiteCounts()))
    if not counts:
        return
    terminalreporter.section("conformance tier: the peers' own tests")
    for suite in ("stdlib", "joblib", "dask", "distributed", "dask futures", "parfun"):
        if suite in counts:
            found = counts[suite]
            wall, cpu = cost.get(suite, [0.0, 0.0])
            terminalreporter.write_line(
                f"{suite}: {found.passed} passed, {found.excluded} excluded, {found.failed} failed"
                + (f", {found.skipped} skipped by the suite itself" if found.skipped else "")
                + f" ({wall:.0f} s wall, {cpu:.0f} s CPU)"
            )


def _add_records(
    report: Any, nodeid: str, seen_records: set[tuple[str, str]], counts: dict[str, SuiteCounts],
    cost: dict[str, list[float]],
) -> None:  # fmt: skip
    """The counts and costs a report carries in its user properties (`record`)."""
    for name, value in getattr(report, "user_properties", ()):
        if name != PROPERTY or (nodeid, value) in seen_records:
            continue
        seen_records.add((nodeid, value))  # a teardown's report carries the call's properties again
        loaded = json.loads(value)
        suite = loaded["suite"]
        spent = cost.setdefault(suite, [0.0, 0.0])
        spent[0] += loaded["wall"]
        spent[1] += loaded["cpu"]
        if loaded["counts"] is not None:
            total = counts.setdefault(suite, SuiteCounts())
            for key, number in loaded["counts"].items():
                setattr(total, key, getattr(total, key) + number)


def _count_item(report: Any, when: str, total: SuiteCounts) -> None:
    """One report of an item of joblib's or Dask's suite."""
    if report.skipped and when in ("setup", "call"):
        if _skip_reason(report).startswith(EXCLUDED_PREFIX):
            total.excluded += 1
        else:
            total.skipped += 1
    elif report.failed:
        total.failed += 1
    elif report.passed and when == "call":
        total.passed += 1


def _skip_reason(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        text = str(longrepr[2])
        return text.removeprefix("Skipped: ")
    return str(longrepr)
