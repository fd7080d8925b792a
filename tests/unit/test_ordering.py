"""The suite's own scheduling (tests/ordering.py): longest first, read through the `@group` xdist adds."""

from __future__ import annotations

from typing import Any

import pytest

from tests.ordering import longest_first, parse_durations, timeline_durations, to_record, ungrouped_id


class Scoped:
    def __init__(self, scope: str) -> None:
        self.scope = scope


class FixtureInfo:
    def __init__(self, scope: str) -> None:
        self.name2fixturedefs = {"tmp_path": (Scoped("function"),), "fixture": (Scoped(scope),)}


class Collected:
    """What `longest_first` reads of a collected test: its id, its xdist group and its fixtures' scopes."""

    def __init__(self, nodeid: str, group: str | None = None, scope: str = "module") -> None:
        self.nodeid = nodeid
        self._group = pytest.mark.xdist_group(group).mark if group is not None else None
        self._fixtureinfo = FixtureInfo(scope)

    def get_closest_marker(self, name: str) -> Any:
        return self._group if name == "xdist_group" else None


def test_a_grouped_test_is_known_by_its_id_without_the_group() -> None:
    assert ungrouped_id("tests/a.py::t[ecs]@test_a") == "tests/a.py::t[ecs]"
    assert ungrouped_id("tests/a.py::t@test_a") == "tests/a.py::t"
    assert ungrouped_id("tests/a.py::t[user@host]") == "tests/a.py::t[user@host]", "an @ inside a parameter stays"
    lines = ["1.50s call     tests/a.py::t[ecs]@test_a", "2.00s setup    tests/a.py::t[ecs]@test_a"]
    assert parse_durations(lines) == {"tests/a.py::t[ecs]": 3.5}


def test_a_timeline_gives_each_test_the_time_since_the_one_before_in_its_process() -> None:
    lines = [
        "gw0 100.0 tests/a.py::first@g",
        "main 100.0 tests/a.py::first@g",
        "gw1 101.0 tests/b.py::alone",
        "gw0 112.5 tests/a.py::second@g",
        "gw0 104.0 tests/a.py::between",
    ]
    assert timeline_durations(lines) == {"tests/a.py::between": 4.0, "tests/a.py::second": 8.5}
    assert timeline_durations(["main 1.0 tests/a.py::t", "main 3.0 tests/a.py::u"]) == {"tests/a.py::u": 2.0}


def test_a_merge_keeps_the_tests_not_measured_and_drops_short_ones() -> None:
    previous = {"tests/a.py::old": 10.0, "tests/a.py::again": 20.0, "tests/a.py::shorter": 5.0}
    measured = {"tests/a.py::again": 30.04, "tests/a.py::new": 4.0, "tests/a.py::shorter": 1.0}
    assert to_record(measured, previous, merge=True) == {"tests/a.py::again": 30.0, "tests/a.py::old": 10.0,
                                                         "tests/a.py::new": 4.0}  # fmt: skip
    assert list(to_record(measured, previous, merge=True)) == [
        "tests/a.py::again",
        "tests/a.py::old",
        "tests/a.py::new",
    ]
    assert to_record(measured, previous, merge=False) == {"tests/a.py::again": 30.0, "tests/a.py::new": 4.0}


def test_a_modules_tests_stay_together_longest_module_first() -> None:
    """A module split around other tests would start its module fixtures again at each return; a module without such
    fixtures gains nothing from staying together, and its tests keep their own places."""
    items = [
        Collected("tests/a.py::short"), Collected("tests/a.py::long"), Collected("tests/b.py::middle"),
        Collected("tests/b.py::tiny"), Collected("tests/g1.py::one", "g"), Collected("tests/c.py::unknown"),
        Collected("tests/g2.py::two", "g"), Collected("tests/g1.py::three", "g"),
        Collected("tests/d.py::free", scope="session"), Collected("tests/d.py::longest", scope="function"),
    ]  # fmt: skip
    durations = {"tests/a.py::short": 1.0, "tests/a.py::long": 50.0, "tests/b.py::middle": 30.0,
                 "tests/b.py::tiny": 40.0, "tests/g1.py::one": 20.0, "tests/g2.py::two": 20.0,
                 "tests/d.py::free": 45.0, "tests/d.py::longest": 60.0}  # fmt: skip
    ordered = [item.nodeid for item in longest_first(items, durations)]  # type: ignore[arg-type]
    assert ordered == [
        "tests/b.py::tiny", "tests/b.py::middle",  # 70 s in all
        "tests/d.py::longest",  # no fixture of its module's: each test is a unit of its own
        "tests/a.py::long", "tests/a.py::short",  # 51 s
        "tests/d.py::free",
        "tests/g1.py::one", "tests/g1.py::three", "tests/g2.py::two",  # the group: 40 s, its modules together
        "tests/c.py::unknown",
    ]  # fmt: skip
