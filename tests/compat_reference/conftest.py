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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The reference's quicksort example sorts lists of up to 8,000,000 numbers in pure Python, sequentially and
    as nested tasks: minutes on a busy two-core machine, past the suite's default timeout."""
    for item in items:
        if item.name == "test_ray_example_nested_quicksort":
            item.add_marker(pytest.mark.timeout(600))
