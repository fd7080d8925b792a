"""The reference implementation's own tests and examples of its Ray compatibility layer, run unchanged against
ours (finos/opengris-scaler, Apache-2.0; each copied file says where it comes from).

They `import ray` before `scaler.compat.ray`. Where Ray is installed that is Ray, which our module patches; where it
is not (this test environment: Ray is large and not a dependency of ours), importing `scaler.compat.ray` here first
makes `import ray` give our module, which is what a user without Ray gets too. To run them against Ray patched
(Ray 2.60 in the front ends' benchmark venv, same Python), put Ray's packages after ours on the path:
`PYTHONPATH=.venv/lib/python3.11/site-packages:benchmarks/.venvs/ray/lib/python3.11/site-packages
.venv/bin/python -m pytest tests/compat_reference` (all pass, the three examples that need the network skipped).
Their tests leave their clusters to `SchedulerClusterCombo.__del__` and `ray.shutdown()`; the fixture below checks
that no process outlives a test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psutil
import pytest

import scaler.compat.ray  # noqa: F401  (before the test modules: `import ray` then resolves)
from tests.integration.conftest import LEFTOVER_GRACE_SECONDS, is_alive, wait_for


@pytest.fixture(autouse=True)
def _no_process_left_behind() -> Iterator[None]:
    # what other tests of this test process started and keep (joblib's loky and multiprocessing resource trackers
    # live as long as the process) is not this test's
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    yield
    import gc

    gc.collect()  # the reference's tests drop their clusters and rely on __del__
    children = [child for child in psutil.Process().children(recursive=True) if child.pid not in before]
    wait_for(
        lambda: not any(is_alive(child) for child in children),
        f"the test's processes to end: {[child.pid for child in children if is_alive(child)]}",
        LEFTOVER_GRACE_SECONDS,
    )


#: The most numbers the reference's quicksort example sorts here (it asks for 200,000, 4,000,000 and 8,000,000).
QUICKSORT_MOST_NUMBERS = 1_000_000


@pytest.fixture(autouse=True)
def _quicksort_of_a_million(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference's quicksort example sorts lists of 4 and 8 million numbers in pure Python, sequentially and as
    nested tasks (105 s of a whole run on two cores). Cut to a million, it takes the same path: above its threshold of
    200,000 numbers a task splits its list and waits on two nested tasks, three levels deep (seven tasks blocked in
    `ray.get`, eight leaves), its lists still stored objects of megabytes; the 200,000 case still sorts in one task.
    The test itself is unchanged: this caps the length of the lists it draws (`numpy.random.randint`)."""
    if request.node.name != "test_ray_example_nested_quicksort":
        return
    import numpy.random

    draw = numpy.random.randint

    def capped(*args: Any, size: Any = None, **kwargs: Any) -> Any:
        if isinstance(size, int):
            size = min(size, QUICKSORT_MOST_NUMBERS)
        return draw(*args, size=size, **kwargs)

    monkeypatch.setattr(numpy.random, "randint", capped)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The quicksort example, even cut to a million numbers, sorts them sequentially and as nested tasks: a busy
    two-core machine may take it past the suite's default timeout."""
    for item in items:
        if item.name == "test_ray_example_nested_quicksort":
            item.add_marker(pytest.mark.timeout(600))
