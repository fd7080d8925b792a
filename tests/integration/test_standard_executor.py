"""`client.executor()` is a `concurrent.futures.Executor`, checked on a real cluster against the behaviours that
CPython's own executor tests check (`Lib/test/test_concurrent_futures/`: executor.py, test_shutdown.py, test_wait.py,
test_as_completed.py), each in a test of ours named after the behaviour.

Left out, and why:
- `max_workers` (test_max_workers_negative), thread and process names, `_threads`/`_processes` joining
  (test_threads_terminate, test_thread_names_*, test_processes_terminate): the cluster owns its workers; the
  executor starts none.
- initializer/initargs (test_init.py): workers are shared by every client of the cluster; a per-worker start-up
  is the worker's `--preload`, not an executor argument.
- Worker crashes and BrokenExecutor (test_deadlock.py): a lost worker's task is run again elsewhere and fails with
  WorkerDiedError past the retry budget (tests/integration/test_failures_*.py).
- Interpreter exit with work in flight: tests/integration/test_executor_exit.py (and CPython's own tests of it, in the
  conformance tier, tests/conformance/).
- Newer CPython (3.15) keeps a map's iterator going after a call raised (test_map_exception there); Python 3.10 to
  3.14 end the iterator at the first exception, and so does ours.
- Python 3.14's eager default (`buffersize=None` reads every input at the call): ours is lazy by default (a
  window of a few tasks per worker), the point of the issue.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import operator
import threading
import time
import weakref
from collections.abc import Iterator

import pytest

from scaler import Client
from scaler.client.executor import ScalerExecutor
from tests.integration.conftest import running_cluster, wait_for

#: its module fixtures are made once: its tests share one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_standard_executor")]


def mul(x: int, y: int) -> int:
    return x * y


def capture(*args: object, **kwargs: object) -> tuple[tuple[object, ...], dict[str, object]]:
    return args, kwargs


def sleep_for(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


class Dummy:
    pass


def make_dummy(_: int) -> Dummy:
    return Dummy()


class FalseyBoolError(Exception):
    def __bool__(self) -> bool:
        return False


class FalseyLenError(Exception):
    def __len__(self) -> int:
        return 0


def raiser(kind: type[Exception], message: str) -> None:
    raise kind(message)


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with running_cluster(2) as cluster, Client(address=cluster.get_address()) as connected:
        yield connected


@pytest.fixture
def executor(client: Client) -> Iterator[ScalerExecutor]:
    executor = client.executor()
    yield executor
    for future in list(executor._unfinished):  # a test's long call still running (shutdown would let it finish)
        future.cancel()
    executor.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------- submit and map (executor.py)


def test_it_is_a_standard_executor(executor: ScalerExecutor) -> None:
    assert isinstance(executor, concurrent.futures.Executor)


def test_submit(executor: ScalerExecutor) -> None:
    assert executor.submit(pow, 2, 8).result() == 256


def test_submit_keyword_arguments_even_named_fn_or_self(executor: ScalerExecutor) -> None:
    assert executor.submit(mul, 2, y=8).result() == 16
    assert executor.submit(capture, 1, self=2, fn=3).result() == ((1,), {"self": 2, "fn": 3})
    with pytest.raises(TypeError):
        executor.submit(fn=capture, arg=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        executor.submit(arg=1)  # type: ignore[call-arg]


def test_map_in_order_with_and_without_chunks(executor: ScalerExecutor) -> None:
    expected = list(map(pow, range(10), range(10)))
    assert list(executor.map(pow, range(10), range(10))) == expected
    assert list(executor.map(pow, range(10), range(10), chunksize=3)) == expected


def test_map_exception_ends_the_iterator(executor: ScalerExecutor) -> None:
    results = executor.map(divmod, [5, 5, 5, 5], [2, 3, 0, 5])
    assert next(results) == (2, 1)
    assert next(results) == (1, 2)
    with pytest.raises(ZeroDivisionError):
        next(results)
    with pytest.raises(StopIteration):
        next(results)


def test_map_timeout_raises_the_standard_timeout_error_and_cancels_the_rest(executor: ScalerExecutor) -> None:
    """The map's timeout counts from the call; the result not ready by then raises TimeoutError (the standard
    library's class) and the iterator ends, its calls still in flight cancelled."""
    results = executor.map(sleep_for, [0, 0, 60, 60], timeout=3)
    seen = []
    with pytest.raises(concurrent.futures.TimeoutError):
        for value in results:
            seen.append(value)
    assert seen in ([0, 0], [0], [])
    with pytest.raises(StopIteration):
        next(results)
    wait_for(lambda: not executor._unfinished, "the timed-out map's calls to be cancelled")


def test_a_timeout_error_raised_by_the_call_is_not_the_map_timeout(executor: ScalerExecutor) -> None:
    def timeout_on_one(x: int) -> int:
        if x == 1:
            raise TimeoutError("from the call")
        return x

    results = executor.map(timeout_on_one, [0, 1, 2], timeout=60)
    assert next(results) == 0
    with pytest.raises(TimeoutError, match="from the call"):
        next(results)


def test_map_close_cancels_what_it_submitted(executor: ScalerExecutor) -> None:
    results = executor.map(sleep_for, [0, 60, 60, 60])
    assert next(results) == 0
    results.close()
    with pytest.raises(StopIteration):
        next(results)
    wait_for(lambda: not executor._unfinished, "the closed map's calls to be cancelled")


def test_map_buffersize_is_validated(executor: ScalerExecutor) -> None:
    for wrong in ("foo", 2.0):
        with pytest.raises(TypeError, match="buffersize must be an integer or None"):
            executor.map(str, range(4), buffersize=wrong)  # type: ignore[arg-type]
    for wrong_value in (0, -1):
        with pytest.raises(ValueError, match="buffersize must be None or > 0"):
            executor.map(str, range(4), buffersize=wrong_value)
    with pytest.raises(ValueError, match="chunksize"):
        executor.map(str, range(4), chunksize=0)


def test_map_buffersize_on_one_and_several_iterables(executor: ScalerExecutor) -> None:
    for buffersize in (1, 2, 4, 8):
        assert list(executor.map(str, range(4), buffersize=buffersize)) == ["0", "1", "2", "3"]
        assert list(executor.map(operator.add, range(4), range(4), buffersize=buffersize)) == [0, 2, 4, 6]


def test_map_over_infinite_iterators_reads_them_lazily(executor: ScalerExecutor) -> None:
    """Without laziness (a list() of the input) this test never returns: checked by reading the whole input."""
    results = executor.map(str, itertools.count())
    assert [next(results) for _ in range(3)] == ["0", "1", "2"]
    results.close()
    both = executor.map(operator.add, itertools.count(), itertools.count(), buffersize=2, chunksize=3)
    assert [next(both) for _ in range(4)] == [0, 2, 4, 6]
    both.close()


def test_map_reads_only_its_buffer_before_iteration(executor: ScalerExecutor) -> None:
    numbers = iter(range(10))
    executor.map(str, numbers, buffersize=2)
    executor.shutdown(wait=True)
    assert next(numbers) == 2


def test_map_on_empty_input_or_no_iterable(executor: ScalerExecutor) -> None:
    assert next(executor.map(str, [], buffersize=2), None) is None
    assert next(executor.map(str), None) is None


def test_the_result_iterator_keeps_no_reference_to_results(executor: ScalerExecutor) -> None:
    for value in executor.map(make_dummy, range(5)):
        reference = weakref.ref(value)
        del value
        assert reference() is None


def test_falsey_exceptions_are_raised(executor: ScalerExecutor) -> None:
    with pytest.raises(FalseyBoolError, match="boolbool"):
        executor.submit(raiser, FalseyBoolError, "boolbool").result()
    with pytest.raises(FalseyLenError, match="lenlen"):
        executor.submit(raiser, FalseyLenError, "lenlen").result()


def test_an_unpicklable_argument_raises_at_the_call_naming_it(executor: ScalerExecutor) -> None:
    lock = threading.Lock()
    with pytest.raises(TypeError, match=r"argument 1 of type _thread\.lock"):
        executor.submit(capture, 1, lock)
    with pytest.raises(TypeError, match="keyword argument 'guard'"):
        executor.submit(capture, guard=lock)
    with pytest.raises(TypeError, match=r"argument 0 of type _thread\.lock"):
        executor.map(capture, [lock])


# ---------------------------------------------------------------- shutdown (test_shutdown.py)


def test_submit_or_map_after_shutdown_raise_runtime_error(executor: ScalerExecutor) -> None:
    executor.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        executor.submit(pow, 2, 5)
    with pytest.raises(RuntimeError, match="after shutdown"):
        executor.map(str, range(3))


def test_shutdown_waits_for_pending_futures(executor: ScalerExecutor) -> None:
    futures = [executor.submit(sleep_for, 0.02) for _ in range(30)]
    executor.shutdown()
    assert all(future.done() for future in futures)
    assert [future.result() for future in futures] == [0.02] * 30


def test_shutdown_with_cancel_futures_cancels_pending_ones_and_lets_the_rest_finish(executor: ScalerExecutor) -> None:
    futures = [executor.submit(sleep_for, 0.1) for _ in range(50)]
    executor.shutdown(cancel_futures=True)
    cancelled = [future for future in futures if future.cancelled()]
    others = [future for future in futures if not future.cancelled()]
    assert len(cancelled) > 20
    assert all(future.done() and future.exception() is None for future in others)


def test_shutdown_right_after_a_cancel_does_not_hang(executor: ScalerExecutor) -> None:
    executor.submit(int).result()
    executor.submit(sleep_for, 60).cancel()
    executor.shutdown(wait=True)


def test_shutdown_cancels_only_this_executors_futures_and_never_stops_the_cluster(client: Client) -> None:
    """Another executor's and the client's own futures go on; the client keeps submitting afterwards. Checked by
    making shutdown cancel every unfinished future of the client: this test then fails."""
    mine, theirs = client.executor(), client.executor()
    own = client.submit(sleep_for, 0.5)
    other = theirs.submit(sleep_for, 0.5)
    doomed = [mine.submit(sleep_for, 60) for _ in range(3)]
    mine.shutdown(wait=False, cancel_futures=True)
    assert own.result() == 0.5 and other.result() == 0.5
    for future in doomed:  # those a worker started run on after shutdown: stopped here
        future.cancel()
    assert all(future.cancelled() for future in doomed)
    with theirs as still_open:
        assert still_open.submit(pow, 3, 2).result() == 9
    assert client.submit(pow, 2, 3).result() == 8


def test_shutdown_without_wait_leaves_results_coming(executor: ScalerExecutor) -> None:
    results = executor.map(abs, range(-5, 5))
    executor.shutdown(wait=False)
    assert list(results) == [5, 4, 3, 2, 1, 0, 1, 2, 3, 4]


def test_context_manager_shuts_down_and_waits(client: Client) -> None:
    with client.executor() as executor:
        assert list(executor.map(abs, range(-5, 5))) == [5, 4, 3, 2, 1, 0, 1, 2, 3, 4]
        future = executor.submit(sleep_for, 0.2)
    assert future.done()
    with pytest.raises(RuntimeError):
        executor.submit(abs, 1)


def test_map_then_shutdown_race(executor: ScalerExecutor) -> None:
    executor.map(str, [2] * 3)
    executor.shutdown()


# ---------------------------------------------------------------- wait and as_completed (test_wait.py, ...)


def test_wait_first_completed_first_exception_and_all(executor: ScalerExecutor) -> None:
    failing = executor.submit(divmod, 1, 0)  # submitted first: never queued behind the slow call on its worker
    quick = executor.submit(sleep_for, 0)
    slow = executor.submit(sleep_for, 60)
    done, not_done = concurrent.futures.wait([slow, quick], return_when=concurrent.futures.FIRST_COMPLETED)
    assert done == {quick} and not_done == {slow}
    done, not_done = concurrent.futures.wait([slow, failing], return_when=concurrent.futures.FIRST_EXCEPTION)
    assert done == {failing} and not_done == {slow}
    done, not_done = concurrent.futures.wait([slow, quick], timeout=0.2)
    assert done == {quick} and not_done == {slow}
    slow.cancel()
    done, not_done = concurrent.futures.wait([slow, quick, failing])
    assert not not_done


def test_as_completed_yields_each_future_once_and_honours_its_timeout(executor: ScalerExecutor) -> None:
    quick = executor.submit(sleep_for, 0)
    assert list(concurrent.futures.as_completed([quick, quick])) == [quick]
    slow = executor.submit(sleep_for, 60)
    with pytest.raises(concurrent.futures.TimeoutError):
        for _ in concurrent.futures.as_completed([quick, slow], timeout=0.5):
            pass


# ---------------------------------------------------------------- asyncio


def test_loop_run_in_executor(executor: ScalerExecutor) -> None:
    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        return list(await asyncio.gather(*(loop.run_in_executor(executor, pow, 2, n) for n in range(5))))

    assert asyncio.run(main()) == [1, 2, 4, 8, 16]
