"""Longest tests first (a pytest plugin, loaded by `-p tests.ordering` in pyproject.toml): the suite runs in four
processes (`make test`), and a two-minute test that starts last keeps the run going alone at its end. With
`--dist loadgroup` (the Makefile) pytest-xdist gives each process the next test from the front of this order as it
frees up (a process holds at most three), so the longest start first, spread over the processes, and the short ones
fill the gaps. A module marked `xdist_group` (one whose module fixtures are costly: a fresh virtual environment, a
cloud) runs whole in one process, placed by the total of its tests (`--no-loadscope-reorder` keeps this order;
xdist's own puts the groups with the most tests first); xdist then names its tests `id@group`.

How long a test takes comes from `tests/durations.json` (seconds by test id: the tests over a few seconds in a whole
run; the others keep their order after them). Refresh it from a run with durations:
    .venv/bin/python -m pytest -n 3 --durations=0 | .venv/bin/python -m tests.ordering
or add the tests of a few files to it (a targeted run under the same load: a whole run shares 2 cores among 4
processes, so a test measured alone on an idle machine looks shorter than it will be):
    .venv/bin/python -m pytest -n 2 --durations=0 tests/conformance | .venv/bin/python -m tests.ordering --merge
A run's timeline (SCALER_TEST_TIMELINE, below) gives them too, also of a run that was stopped before pytest's report:
each test's time is from the end of the test before it in its process to its own end (its process's first test,
whose start the timeline does not show, keeps its recorded time):
    .venv/bin/python -m tests.ordering --merge --timeline FILE
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
#: Tests shorter than this are left where collection put them.
RECORDED_FROM_SECONDS = 3.0
_LINE = re.compile(r"^\s*([\d.]+)s (?:call|setup|teardown)\s+(\S+)")


def recorded() -> dict[str, float]:
    try:
        loaded = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    return {str(key): float(value) for key, value in loaded.items()} if isinstance(loaded, dict) else {}


def longest_first(items: list[pytest.Item], durations: dict[str, float]) -> list[pytest.Item]:
    """A stable sort, longest first, that keeps together the tests of a module that share its fixtures: pytest tears a
    module's fixtures down (a cluster, most often) whenever the next test of its process is another module's, and
    starts them again when the module's tests come back, so such a module split around other tests starts its cluster
    once per return. Units by decreasing total of their recorded tests, ties in collected order: an xdist group (its
    modules run in one process one after the other, in collected order), a module whose tests use a module- or
    class-scoped fixture (its tests longest first), or a test alone."""
    seconds = {item.nodeid: durations.get(ungrouped_id(item.nodeid), 0.0) for item in items}
    totals: dict[str, float] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        for unit in (unit_of(item), module_of(item)):
            first.setdefault(unit, index)
        totals[unit_of(item)] = totals.get(unit_of(item), 0.0) + seconds[item.nodeid]

    def key(item: pytest.Item) -> tuple[float, int, int, float]:
        unit = unit_of(item)
        inside = 0.0 if group_of(item) is not None else -seconds[item.nodeid]
        return (-totals[unit], first[unit], first[module_of(item)], inside)

    return sorted(items, key=key)


def unit_of(item: pytest.Item) -> str:
    """What runs together: the item's xdist group, its module when it shares the module's fixtures, else itself."""
    group = group_of(item)
    if group is not None:
        return f"group {group}"
    return module_of(item) if shares_module_fixtures(item) else item.nodeid


def shares_module_fixtures(item: pytest.Item) -> bool:
    """Whether the test uses a fixture that lives as long as its module or class (pytest's fixture info of it)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(defs and defs[-1].scope in ("module", "class") for defs in info.name2fixturedefs.values())


def module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def group_of(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return None if mark is None else str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def ungrouped_id(nodeid: str) -> str:
    """The id without the `@group` xdist adds under --dist loadgroup."""
    return nodeid.rsplit("@", 1)[0] if "@" in nodeid.rpartition("::")[2].rpartition("]")[2] else nodeid


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = longest_first(items, recorded())


@pytest.hookimpl
def pytest_runtest_logfinish(nodeid: str) -> None:
    """With SCALER_TEST_TIMELINE=FILE, each test process appends `process end-time test-id` when a test ends (to see
    what a whole run's last minutes ran: `sort -k2 FILE | tail`)."""
    timeline = os.environ.get("SCALER_TEST_TIMELINE")
    if timeline:
        with open(timeline, "a") as file:
            file.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} {time.time():.1f} {nodeid}\n")


def parse_durations(lines: list[str]) -> dict[str, float]:
    """Seconds per test id (setup, call and teardown added) from pytest's `--durations=0` report."""
    totals: dict[str, float] = {}
    for line in lines:
        found = _LINE.match(line)
        if found is not None:
            name = ungrouped_id(found.group(2))
            totals[name] = totals.get(name, 0.0) + float(found.group(1))
    return totals


def timeline_durations(lines: list[str]) -> dict[str, float]:
    """Seconds per test id from a run's timeline (`process end-time test-id` lines): from the end of the test before
    it in its process (the first test of a process has none: left out)."""
    ends: dict[str, list[tuple[float, str]]] = {}
    for line in lines:
        parts = line.split(maxsplit=2)
        if len(parts) == 3:
            ends.setdefault(parts[0], []).append((float(parts[1]), parts[2].strip()))
    if len(ends) > 1:
        ends.pop("main", None)  # with pytest-xdist, the controller's lines repeat its processes' ones
    totals: dict[str, float] = {}
    for process_ends in ends.values():
        process_ends.sort()
        for (before, _), (end, name) in itertools.pairwise(process_ends):
            totals[ungrouped_id(name)] = end - before
    return totals


def to_record(measured: dict[str, float], previous: dict[str, float], merge: bool) -> dict[str, float]:
    """What durations.json keeps: the measured tests (over the previous ones with `merge`), longest first, of at least
    RECORDED_FROM_SECONDS (a merged test now under it is dropped)."""
    merged = {**previous, **measured} if merge else measured
    return {key: round(value, 1) for key, value in sorted(merged.items(), key=lambda kv: -kv[1])
            if value >= RECORDED_FROM_SECONDS}  # fmt: skip


def main() -> None:
    """Write the durations of pytest's report on standard input, or of a timeline (`--timeline FILE`); `--merge`:
    over those recorded, keeping the others."""
    arguments = sys.argv[1:]
    merge = "--merge" in arguments
    timeline = arguments[arguments.index("--timeline") + 1] if "--timeline" in arguments[:-1] else None
    if len(arguments) != merge + 2 * (timeline is not None):
        raise SystemExit("usage: python -m tests.ordering [--merge] [--timeline FILE] (else pytest's --durations=0 "
                         "report on standard input)")  # fmt: skip
    if timeline is not None:
        totals = timeline_durations(Path(timeline).read_text().splitlines())
    else:
        totals = parse_durations(sys.stdin.read().splitlines())
    if not totals:
        raise SystemExit("no durations: run pytest with --durations=0 (or SCALER_TEST_TIMELINE=FILE)")
    kept = to_record(totals, recorded(), merge)
    DURATIONS.write_text(json.dumps(kept, indent=0) + "\n")
    added = f" ({len(totals)} measured now)" if merge else ""
    print(f"{DURATIONS}: {len(kept)} tests of {RECORDED_FROM_SECONDS:g} s or more{added}")


if __name__ == "__main__":
    main()
