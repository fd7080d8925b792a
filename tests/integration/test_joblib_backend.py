"""joblib's "scaler" backend on a real cluster: Parallel under parallel_config (with an address or an open Client),
worker processes only, scikit-learn's GridSearchCV, errors as joblib reports them, and a large argument stored once.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import joblib
import numpy as np
import psutil
import pytest
from joblib import Parallel, delayed
from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV
from sklearn.svm import SVC

import scaler.joblib  # noqa: F401  (registers the backend)
from scaler import Client, SchedulerClusterCombo
from scaler.compat.joblib import ScalerBackend
from scaler.object_storage.connection import ObjectStorageConnection

#: its module fixtures are made once: its tests share one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_joblib_backend")]


def element(array: np.ndarray, index: int) -> int:
    return int(array[index])


def fail_on(x: int, bad: int) -> int:
    if x == bad:
        raise ValueError(f"bad item {x}")
    return x


def capture(*args: object, **kwargs: object) -> int:
    return len(args) + len(kwargs)


def nested_sum(n: int) -> int:
    return sum(Parallel(n_jobs=-1)(delayed(abs)(-i) for i in range(n)))


@pytest.fixture(scope="module")
def client(shared_cluster: SchedulerClusterCombo) -> Iterator[Client]:
    with Client(address=shared_cluster.get_address()) as connected:
        yield connected


def cluster_pids(cluster: SchedulerClusterCombo) -> set[int]:
    pids = set()
    for popen in cluster.processes():
        process = psutil.Process(popen.pid)
        pids |= {process.pid, *(child.pid for child in process.children(recursive=True))}
    return pids


def test_parallel_with_an_address_runs_in_worker_processes_only(shared_cluster: SchedulerClusterCombo) -> None:
    with joblib.parallel_config(backend="scaler", address=shared_cluster.get_address()):
        pids = Parallel(n_jobs=-1)(delayed(os.getpid)() for _ in range(50))
    assert len(pids) == 50
    assert os.getpid() not in pids
    assert set(pids) <= cluster_pids(shared_cluster)


def test_a_cluster_still_starting_gets_the_calls_too() -> None:
    """Its workers not registered yet, the cluster reports none: the calls still go to it, not to the caller.
    Checked with MIN_JOBS = 1 (n_jobs=-1 then meant the workers counted, 1 job): joblib ran every call in this
    process, and this test failed."""
    with SchedulerClusterCombo(n_workers=1) as fresh, Client(address=fresh.get_address()) as client:
        with joblib.parallel_config(backend="scaler", client=client):
            pids = Parallel(n_jobs=-1)(delayed(os.getpid)() for _ in range(20))
        assert os.getpid() not in pids


def test_parallel_with_an_open_client_and_results_in_order(client: Client) -> None:
    with joblib.parallel_config(backend="scaler", client=client):
        assert Parallel(n_jobs=-1)(delayed(pow)(i, 2) for i in range(200)) == [i * i for i in range(200)]
        assert list(Parallel(n_jobs=2, return_as="generator_unordered")(delayed(abs)(-i) for i in range(5))) != []
    assert client.submit(abs, -1).result() == 1  # the backend leaves an open client open


def test_grid_search_finds_the_same_parameters_as_the_default_backend(client: Client) -> None:
    features, labels = load_iris(return_X_y=True)
    grid = {"C": [0.1, 1.0, 10.0], "gamma": [0.01, 0.1, 1.0]}
    default = GridSearchCV(SVC(), grid, cv=3, n_jobs=2).fit(features, labels)
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True)  # the default backend's worker processes
    with joblib.parallel_config(backend="scaler", client=client):
        ours = GridSearchCV(SVC(), grid, cv=3, n_jobs=-1).fit(features, labels)
    assert ours.best_params_ == default.best_params_
    assert ours.best_score_ == default.best_score_


def test_an_error_reaches_the_caller_as_joblib_reports_it(client: Client) -> None:
    with joblib.parallel_config(backend="scaler", client=client), pytest.raises(ValueError, match="bad item 7"):
        Parallel(n_jobs=-1)(delayed(fail_on)(i, 7) for i in range(100))
    with joblib.parallel_config(backend="scaler", client=client):  # the backend is usable again
        assert Parallel(n_jobs=-1)(delayed(fail_on)(i, -1) for i in range(3)) == [0, 1, 2]


def test_a_large_argument_reused_by_many_calls_is_stored_once(client: Client) -> None:
    """A 4 MB array read by 300 calls (in batches of different contents): object storage grows by one copy of it.
    Checked by switching the references off (REFERENCE_FROM_BYTES = 1 << 62): storage then grew by one copy per
    batch, and this test failed."""
    big = np.arange(500_000, dtype=np.int64)
    session = client.session
    with ObjectStorageConnection(session.storage_address, "client", security=session.security,
                                 owner_id=session.identity) as storage:  # fmt: skip
        before = storage.info()
        with joblib.parallel_config(backend="scaler", client=client):
            values = Parallel(n_jobs=-1, batch_size=10)(delayed(element)(big, i) for i in range(300))
        after = storage.info()
    assert values == list(range(300))
    assert after.total_bytes - before.total_bytes < 1.5 * big.nbytes


def test_nested_parallel_inside_a_task_runs_on_the_cluster(client: Client) -> None:
    with joblib.parallel_config(backend="scaler", client=client):
        assert Parallel(n_jobs=-1)(delayed(nested_sum)(n) for n in (3, 4)) == [3, 6]


def test_bad_settings_and_arguments_are_refused(client: Client) -> None:
    with pytest.raises(ValueError, match="needs a cluster"):
        with joblib.parallel_config(backend="scaler"):
            Parallel(n_jobs=2)(delayed(abs)(-1) for _ in range(2))
    with pytest.raises(ValueError, match="not both"):
        ScalerBackend(address="tcp://127.0.0.1:1", client=client)
    lock = threading.Lock()
    refused = pytest.raises(
        TypeError, match=r"cannot serialize keyword argument 'guard' of capture\(\.\.\.\), of type lock"
    )
    with joblib.parallel_config(backend="scaler", client=client), refused:
        Parallel(n_jobs=2)(delayed(capture)(1, guard=lock) for _ in range(2))


#: a task's module that never imports scaler.joblib (cloudpickle sends its functions by value: the module is not
#: importable on the worker)
WITHOUT_IMPORT = """
from joblib import Parallel, delayed, parallel_config

def nested_by_name(n):
    with parallel_config(backend="scaler"):
        return sum(Parallel(n_jobs=2)(delayed(abs)(-i) for i in range(n)))
"""


def test_a_task_names_the_backend_without_importing_it(client: Client) -> None:
    """Checked by switching the mechanism off: without `joblib_name.install()` in run_processor, the task fails with
    joblib's "Invalid backend: scaler"."""
    namespace: dict[str, object] = {"__name__": "a_module_of_the_task"}
    exec(WITHOUT_IMPORT, namespace)
    assert client.submit(namespace["nested_by_name"], 4).result(timeout=60) == 6


def interrupt() -> None:
    raise KeyboardInterrupt("raised by the call")


def test_a_keyboard_interrupt_raised_by_a_call_comes_back_as_itself(client: Client) -> None:
    """Checked by switching the mechanism off: with TaskExecutor catching Exception only, the processor dies and the
    caller gets ProcessorDiedError."""
    with joblib.parallel_config(backend="scaler", client=client), pytest.raises(KeyboardInterrupt, match="raised by"):
        Parallel(n_jobs=2)(delayed(interrupt)() for _ in range(2))


def test_nesting_deeper_than_one_level_runs_inside_the_task(client: Client) -> None:
    """Level 1 runs on the cluster, deeper levels one call after another in their task (joblib's own bound), so a
    runaway recursion ends in RecursionError rather than flooding the cluster with tasks.

    Checked by switching the mechanism off: with get_nested_backend always returning a ScalerBackend, the backend
    seen at level 2 is ScalerBackend, not SequentialBackend."""
    with joblib.parallel_config(backend="scaler", client=client):
        assert Parallel(n_jobs=2)(delayed(nested_backend_names)() for _ in range(1)) == [
            ["ScalerBackend", "SequentialBackend"]
        ]


def nested_backend_names() -> list[str]:
    from joblib.parallel import get_active_backend

    level_one = type(get_active_backend()[0]).__name__
    inner = Parallel(n_jobs=2)(delayed(_active_backend_name)() for _ in range(1))
    return [level_one, inner[0]]


def _active_backend_name() -> str:
    from joblib.parallel import get_active_backend

    return type(get_active_backend()[0]).__name__


def test_auto_batching_starts_afresh_at_each_call(client: Client) -> None:
    """Checked by switching the mechanism off: without reset_batch_stats() in terminate, the second call starts from
    the batch size the first one learned."""
    backend = ScalerBackend(client=client)
    with joblib.parallel_config(backend=backend):
        Parallel(n_jobs=2)(delayed(abs)(-i) for i in range(2000))
    assert backend._effective_batch_size == backend._DEFAULT_EFFECTIVE_BATCH_SIZE
    assert backend._smoothed_batch_duration == backend._DEFAULT_SMOOTHED_BATCH_DURATION


def test_a_pool_set_up_argument_is_refused_naming_preload(client: Client) -> None:
    """joblib's `initializer`/`initargs` set up a pool's processes; the cluster's are shared and started once.

    Checked by switching the mechanism off: without the check in ScalerBackend.configure, the call runs and the
    initializer is silently never called."""
    with pytest.raises(ValueError, match=r"does not take initargs, initializer.*--preload"):
        with joblib.parallel_config(backend="scaler", client=client, initializer=print, initargs=("set up",)):
            Parallel(n_jobs=2)(delayed(abs)(-1) for _ in range(2))
