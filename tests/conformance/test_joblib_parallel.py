"""joblib's own `joblib/test/test_parallel.py` against the "scaler" backend, on one local cluster.

The tests are joblib's, imported from the installed joblib (its wheel ships them; joblib is BSD-3-Clause), unchanged:
this module only makes them items of this session. The backend is plugged in where the suite expects its backends:
`scaler` is registered before the suite is imported, so the lists the suite builds from joblib's registry
(`BACKENDS`, `ALL_VALID_BACKENDS`, `RETURN_GENERATOR_BACKENDS`) hold it, and the conftest adds "scaler" to every
other parametrization of a backend (`backend`, `parent_backend`, `child_backend`, `outer_backend`,
`inner_backend`: joblib's literal lists of its process and thread backends). Of the suite, the items with our backend
run; the others (joblib's own backends, and tests not parametrized by a backend) are deselected. Exclusions are
in exclusions.py.

"scaler" names, in this module, scaler's `ScalerBackend` connected to the module's cluster (the suite makes
backends as `Parallel(backend="scaler")` and `BACKENDS["scaler"]()`, with no address); inside a task, "scaler" is
the backend that `scaler.compat.joblib` registers in every processor.
"""

from __future__ import annotations

import gc
import os
import types
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from joblib import Parallel, delayed, parallel_backend, parallel_config, register_parallel_backend

import scaler.joblib  # noqa: F401  (the backend)
from scaler import SchedulerClusterCombo
from scaler.compat import joblib as compat_joblib
from tests.conformance.summary import measured
from tests.integration.conftest import running_cluster

#: the module's cluster, while it runs
_address: list[str] = []
SITE = Path(__file__).resolve().parent / "joblib_site"


class ScalerBackend(compat_joblib.ScalerBackend):  # type: ignore[misc]
    """scaler's backend whose default address is the module's cluster (read when the backend first connects); of the
    same name, since joblib's suite names a backend under test by its class's name."""

    @property  # type: ignore[override]
    def _address(self) -> str | None:
        return self.__dict__.get("_given_address") or (_address[0] if _address else None)

    @_address.setter
    def _address(self, value: str | None) -> None:
        self.__dict__["_given_address"] = value


register_parallel_backend("scaler", ScalerBackend)

from joblib.test.test_parallel import *  # noqa: E402, F403  (joblib's suite, after the registration)

#: one cluster for the module, its tests in one test process (make test: --dist loadgroup); joblib's suite does not
#: run with warnings as errors (the suite's own configuration, not an assertion)
pytestmark = [
    pytest.mark.integration,
    pytest.mark.xdist_group("conformance_joblib"),
    pytest.mark.filterwarnings("default"),
    pytest.mark.timeout(120),
]


@pytest.fixture(scope="module", autouse=True)
def _cluster() -> Iterator[SchedulerClusterCombo]:
    with measured("joblib"), running_cluster(2) as cluster:
        _address.append(cluster.get_address())
        try:
            yield cluster
        finally:
            _address.clear()


@pytest.fixture(autouse=True)
def _scripts_find_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """The interpreters joblib's tests start find "scaler" (joblib_site/sitecustomize.py); the cluster, started
    before, does not see this."""
    monkeypatch.setenv("SCALER_CONFORMANCE_ADDRESS", _address[0])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(SITE), os.environ.get("PYTHONPATH")])))


#: the generators of the module's Parallel calls (`Parallel._get_outputs`, wrapped while the module runs), while they
#: live
_outputs: weakref.WeakSet[types.GeneratorType] = weakref.WeakSet()  # type: ignore[type-arg]


@pytest.fixture(scope="module", autouse=True)
def _outputs_tracked() -> Iterator[None]:
    """Each generator a Parallel call makes is remembered (weakly) as it is made, for `_generators_closed_here`: cheaper
    than looking for them after each test among every object of the process (`gc.get_objects()`)."""
    get_outputs = Parallel._get_outputs

    def tracked(self: Parallel, *args: Any, **kwargs: Any) -> Any:
        generator = get_outputs(self, *args, **kwargs)
        _outputs.add(generator)
        return generator

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Parallel, "_get_outputs", tracked)
        yield
    _outputs.clear()


@pytest.fixture(autouse=True)
def _generators_closed_here() -> Iterator[None]:
    """What a test of joblib's leaves behind ends with it, in this thread, under this module's warnings filter: the
    generators of Parallel calls not consumed to the end are closed (each aborts its Parallel: its tasks are
    cancelled, and a client its backend opened disconnects), and the garbage they held is collected. Else a
    generator a failed test left (the traceback pytest keeps in `sys.last_traceback` holds it until the next test
    runs) is closed by the garbage collector later, in whatever thread it runs in during another module's test;
    joblib then warns that it was "gc'ed in an unexpected thread", and `filterwarnings = error` fails that unrelated
    test (CI, issue 38: test_backend_contract's ec2-spot test, after test_parallel_unordered_generator_returns_
    fastest_first failed). Checked by hand: a test here that fails with a generator unconsumed, then a test of
    another module that collects garbage in a thread: that test fails (PytestUnraisableExceptionWarning of joblib's
    warning) without this fixture, and passes with it."""
    yield
    unfinished = [generator for generator in list(_outputs) if generator.gi_frame is not None]
    for generator in unfinished:
        generator.close()
    if unfinished:  # what they held (their Parallel, its backend and client) too; a full collection costs ~0.1 s
        gc.collect()


def _recursive_parallel_naming_the_backend() -> list[object]:
    """joblib's `_recursive_parallel`, with the backend named in the call, as code written for a cluster names it."""
    return Parallel(n_jobs=2, backend="scaler")(delayed(_recursive_parallel_naming_the_backend)() for _ in range(2))


@pytest.mark.parametrize("context", [parallel_config, parallel_backend])
@pytest.mark.parametrize("backend", ["scaler"])
def test_thread_bomb_mitigation_with_the_backend_named_in_the_call(context: Any, backend: str) -> None:
    """joblib's `test_thread_bomb_mitigation` (above, among its own tests) with the recursive function naming the
    backend, `Parallel(n_jobs=2, backend="scaler")` (issue 77, item 11): naming it inside a task keeps the task's
    nesting level, so the recursion deeper than the first level runs in its task and ends in a RecursionError, as
    with the backend inherited. Checked to fail before: the recursion flooded the 2-worker cluster with tasks until
    the test's timeout (still running after 120 s)."""
    with context(backend, n_jobs=2), pytest.raises(BaseException) as raised:
        _recursive_parallel_naming_the_backend()
    assert isinstance(raised.value, RecursionError), raised.value
