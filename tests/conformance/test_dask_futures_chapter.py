"""The examples of Dask's "Futures" documentation chapter (docs/source/futures.rst of Dask's source, as shipped in its
source distribution) run against `scaler.compat.dask`, one test per example, in the order and under the section names
of the chapter. The chapter's fragments name things they leave undefined (`score`, `load`, a CSV file); each test
defines those in a few lines of its own and keeps the calls the chapter makes. A section about what scaler refuses
by name (coordination primitives, Dask actors) checks the refusal says what to use.

`Client()` with no address starts a local cluster, as the chapter's first example does; the other tests share one
client of the module's cluster.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.compat import dask as distributed
from scaler.compat.dask import Client, as_completed, fire_and_forget, get_client, rejoin, secede, wait

pd = pytest.importorskip("pandas")

#: one cluster for the module, its tests in one test process (make test: --dist loadgroup)
pytestmark = [
    pytest.mark.integration,
    pytest.mark.xdist_group("conformance_futures"),
    pytest.mark.timeout(120),
    pytest.mark.usefixtures("suite_address"),
]


@pytest.fixture
def client(suite_address: str) -> Iterator[Client]:
    with Client(suite_address) as opened:
        yield opened


def inc(x: int) -> int:
    return x + 1


def add(x: int, y: int) -> int:
    return x + y


def div(x: float, y: float) -> float:
    return x / y


# ---------------------------------------------------------------- Start Dask Client


def test_start_dask_client() -> None:
    with Client(n_workers=1) as local:  # "start local workers as processes"
        assert local.cluster is not None
        assert local.submit(inc, 1).result() == 2
    with pytest.warns(UserWarning, match="processes"), Client(processes=False, n_workers=1) as threads:
        assert threads.submit(inc, 2).result() == 3


# ---------------------------------------------------------------- Submit Tasks


def test_submit_tasks(client: Client) -> None:
    a = client.submit(inc, 10)
    b = client.submit(inc, 20)
    assert repr(a).startswith("<Future: ") and a.key in repr(a)
    assert a.result() == 11
    assert "finished" in repr(a) and "type: int" in repr(a)
    c = client.submit(add, a, b)  # futures as inputs: Dask handles the dependency
    assert c.result() == 32
    futures = client.map(inc, range(1000))
    assert client.gather(futures) == list(range(1, 1001))


# ---------------------------------------------------------------- Move Data


def test_move_data(client: Client, tmp_path: Path) -> None:
    futures = client.map(inc, range(10))
    assert client.gather(futures) == [future.result() for future in futures]
    path = tmp_path / "training-data.csv"
    pd.DataFrame({"x": range(100)}).to_csv(path, index=False)

    def my_function(frame: Any) -> int:
        return int(frame.x.sum())

    df = pd.read_csv(path)
    assert client.submit(my_function, df).result() == 4950
    remote_df = client.scatter(df)
    assert remote_df.status == "finished" and remote_df.type is pd.DataFrame
    assert client.submit(my_function, remote_df).result() == 4950
    scattered = client.scatter([1, 2, 3])
    assert [future.status for future in scattered] == ["finished"] * 3
    assert client.gather(scattered) == [1, 2, 3]


# ---------------------------------------------------------------- References, Cancellation, and Exceptions


def test_references_cancellation_and_exceptions(client: Client) -> None:
    future = client.submit(time.sleep, 5, pure=False)
    future.cancel()
    assert future.cancelled()
    other = client.submit(inc, 1)
    del other  # forgetting a future is allowed: nothing holds its key here any more
    a = client.submit(div, 1, 0)
    with pytest.raises(ZeroDivisionError):
        a.result()
    assert a.status == "error"
    b = client.submit(inc, a)  # futures that depend on an erred future err with the same exception
    assert isinstance(b.exception(), ZeroDivisionError) and b.status == "error"
    assert a.traceback() is not None


# ---------------------------------------------------------------- Waiting on Futures


def test_waiting_on_futures(client: Client) -> None:
    def score(x: int) -> int:
        return -((x - 7) ** 2)

    x_values = list(range(15))
    futures = client.map(score, x_values)
    wait(futures)
    best = -(10**9)
    for future in as_completed(futures):
        best = max(best, future.result())
    assert best == 0
    assert sorted(result for _, result in as_completed(futures, with_results=True)) == sorted(map(score, x_values))
    batched = [result for batch in as_completed(futures, with_results=True).batches() for _, result in batch]
    assert sorted(batched) == sorted(map(score, x_values))
    seq = as_completed(client.map(inc, range(3)))
    added = 0
    for future in seq:  # adding more futures into the loop while iterating
        if future.result() < 3 and added < 2:
            seq.add(client.submit(inc, 10 + added))
            added += 1
    assert added == 2


# ---------------------------------------------------------------- Fire and Forget


def test_fire_and_forget(suite_address: str, tmp_path: Path) -> None:
    def load(filename: str) -> str:
        return Path(filename).read_text()

    def process(text: str) -> str:
        return text.upper()

    def write(text: str, out_filename: str) -> None:
        Path(out_filename).write_text(text)

    filenames = []
    for number in range(3):
        path = tmp_path / f"in-{number}.txt"
        path.write_text(f"data {number}")
        filenames.append(str(path))
    with Client(suite_address) as client:

        def process_file(filename: str) -> None:
            out_filename = str(Path(filename).with_name("out-" + Path(filename).name))
            a = client.submit(load, filename)
            b = client.submit(process, a)
            c = client.submit(write, b, out_filename)
            fire_and_forget(c)  # here we lose the reference to c, which is now fine

        for filename in filenames:
            process_file(filename)
    assert [(tmp_path / f"out-in-{number}.txt").read_text() for number in range(3)] == [
        f"DATA {number}" for number in range(3)
    ]


# ---------------------------------------------------------------- Submit Tasks from Tasks


def test_submit_tasks_from_tasks(client: Client) -> None:
    def my_function(x: int) -> int:
        inner = get_client()
        a = inner.submit(inc, x)
        b = inner.submit(inc, x + 1)
        first, second = inner.gather([a, b])
        return int(first + second)

    assert client.submit(my_function, 1).result() == 5

    def f(n: int) -> int:
        inner = get_client()
        secede()  # nothing to do on scaler: a waiting task gives its place back by itself
        futures = inner.map(inc, range(n))
        results = inner.gather(futures)
        rejoin()
        return int(sum(results))

    assert client.submit(f, 10).result() == 55

    def with_compute(n: int) -> int:
        import dask.bag as db

        return int(db.from_sequence(range(n), npartitions=2).map(inc).sum().compute())

    assert client.submit(with_compute, 10).result() == 55


# ---------------------------------------------------------------- Coordination Primitives, Actors


@pytest.mark.parametrize("name", ["Queue", "Variable", "Lock", "Event", "Semaphore"])
def test_coordination_primitives_are_refused_naming_what_to_use(name: str) -> None:
    with pytest.raises(NotImplementedError, match=f"{name} is not supported by scaler.compat.dask: .*actor"):
        getattr(distributed, name)("stopping-criterion")


def test_actors_are_refused_naming_scalers(client: Client) -> None:
    class Counter:
        n = 0

        def increment(self) -> int:
            self.n += 1
            return self.n

    with pytest.raises(NotImplementedError, match=r"Client\.native\.actor"):
        client.submit(Counter, actor=True)
    handle = client.native.actor(Counter)  # what the refusal names
    assert handle.increment().result() == 1


# ---------------------------------------------------------------- Asynchronous Operation


def test_await_a_future(client: Client) -> None:
    future = client.submit(inc, 41)

    async def main() -> int:
        return int(await future)

    assert asyncio.run(main()) == 42
