"""The suite's own scheduling (tests/ordering.py): longest first, read through the `@group` xdist adds."""

from __future__ import annotations

from tests.ordering import parse_durations, ungrouped_id


def test_a_grouped_test_is_known_by_its_id_without_the_group() -> None:
    assert ungrouped_id("tests/a.py::t[ecs]@test_a") == "tests/a.py::t[ecs]"
    assert ungrouped_id("tests/a.py::t@test_a") == "tests/a.py::t"
    assert ungrouped_id("tests/a.py::t[user@host]") == "tests/a.py::t[user@host]", "an @ inside a parameter stays"
    lines = ["1.50s call     tests/a.py::t[ecs]@test_a", "2.00s setup    tests/a.py::t[ecs]@test_a"]
    assert parse_durations(lines) == {"tests/a.py::t[ecs]": 3.5}
