"""The conformance tier: the peers' own test suites (CPython's executor tests, joblib's test_parallel.py, Dask's
GetFunctionTestMixin) run against our front ends, each suite on one local cluster. What is not run, and why, is in
exclusions.py; summary.py prints the counts per suite at the end of a run.

Ray's own tests of plain tasks are not here: Ray publishes no source distribution on PyPI and its wheels leave its
tests out, so they cannot be fetched the way this tier fetches the others (PyPI only); the Ray front end is checked by
the reference implementation's tests of it (tests/compat_reference/) and tests/integration/test_ray_compat.py."""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from tests.conformance.summary import ITEM_SUITES, current_item, measured


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    current_item[:] = [item]
    try:
        return (yield)
    finally:
        current_item.clear()


@pytest.fixture(scope="module")
def suite_address(request: pytest.FixtureRequest) -> Iterator[str]:
    """The address of a suite module's own cluster of two workers, its cost measured under the module's suite name
    (summary.ITEM_SUITES); a module starts it before its first test with `pytest.mark.usefixtures("suite_address")`."""
    from tests.integration.conftest import running_cluster

    with measured(ITEM_SUITES[request.node.nodeid]), running_cluster(2) as cluster:
        yield cluster.get_address()


# ---------------------------------------------------------------- joblib's suite with our backend plugged in

#: the arguments by which joblib's test_parallel.py names the backend under test
BACKEND_ARGUMENTS = frozenset({"backend", "parent_backend", "child_backend", "outer_backend", "inner_backend"})
OUR_BACKEND = "scaler"
JOBLIB_MODULE = "tests.conformance.test_joblib_parallel"


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Add "scaler" to each parametrization of one backend argument in joblib's suite (the values joblib lists are
    its own backends); a parametrization that pairs several arguments with their expected outcomes is left alone."""
    if metafunc.module.__name__ != JOBLIB_MODULE:
        return
    from _pytest.mark.structures import Mark

    markers = metafunc.definition.own_markers
    for index, mark in enumerate(markers):
        if mark.name != "parametrize" or len(mark.args) < 2:
            continue
        argnames = mark.args[0]
        names = [name.strip() for name in argnames.split(",")] if isinstance(argnames, str) else list(argnames)
        if len(names) != 1 or names[0] not in BACKEND_ARGUMENTS:
            continue
        values = list(mark.args[1])
        if OUR_BACKEND in values:
            continue
        kwargs = dict(mark.kwargs)
        if isinstance(kwargs.get("ids"), (list, tuple)):
            kwargs["ids"] = [*kwargs["ids"], OUR_BACKEND]
        markers[index] = Mark(mark.name, (argnames, [*values, OUR_BACKEND], *mark.args[2:]), kwargs, _ispytest=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """joblib's suite: its items with our backend run (the rest are deselected), the excluded ones skip saying why;
    every suite of the tier: excluded items skip with their reason."""
    from tests.conformance import exclusions

    kept: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        module = getattr(getattr(item, "module", None), "__name__", "")
        if module == JOBLIB_MODULE and not _runs_our_backend(item):
            deselected.append(item)
            continue
        kept.append(item)
        suite = SUITE_OF_MODULE.get(module)
        if suite is not None:
            reason = exclusions.reason_for(suite, item.name)
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=f"excluded: {reason}"))
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


SUITE_OF_MODULE = {
    JOBLIB_MODULE: "joblib",
    "tests.conformance.test_dask_get": "dask",
}


def _runs_our_backend(item: pytest.Item) -> bool:
    from scaler.compat.joblib import ScalerBackend

    params = getattr(getattr(item, "callspec", None), "params", {})
    return any(
        value == OUR_BACKEND or isinstance(value, ScalerBackend)
        for name, value in params.items()
        if name in BACKEND_ARGUMENTS
    )


def pytest_configure(config: pytest.Config) -> None:
    # joblib's suite uses markers of plugins this environment does not install
    config.addinivalue_line("markers", "thread_unsafe: joblib's suite (pytest-run-parallel's marker)")
    config.addinivalue_line("markers", "no_cover: joblib's suite (pytest-cov's marker)")
