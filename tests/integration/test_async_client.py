"""`scaler.AsyncClient` on a real cluster: the awaitable API, results unpickled off the event loop's thread, one
connection shared by every coroutine, and use from inside a loop that is already running."""

from __future__ import annotations

import asyncio
import threading
import time

import psutil
import pytest

from scaler import AsyncClient, Client, SchedulerClusterCombo
from scaler.client.async_client import AsyncFuture

#: its module fixtures are made once: its tests share one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_async_client")]


def inc(x: int) -> int:
    return x + 1


def add(a: int, b: int) -> int:
    return a + b


def sleep_for(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


class UnpicklingThread:
    """A result that unpickles, in the client, as the ident of the thread that unpickled it."""

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return (threading.get_ident, ())


def unpickling_thread() -> UnpicklingThread:
    return UnpicklingThread()


def test_submit_map_get_send_object_and_as_completed(shared_cluster: SchedulerClusterCombo) -> None:
    async def main() -> None:
        async with AsyncClient(shared_cluster.get_address()) as client:
            assert await client.submit(inc, 1) == 2
            future = client.submit_future(add, 2, b=3)
            assert isinstance(future, AsyncFuture)
            assert await future == 5
            assert await client.map(inc, range(5)) == [1, 2, 3, 4, 5]
            assert await client.starmap(add, [(1, 2), (3, 4)]) == [3, 7]
            reference = await client.send_object(list(range(100)))
            assert await client.submit(sum, reference) == 4950
            graph = {"a": 1, "b": (inc, "a"), "c": (add, "a", "b")}
            assert await client.get(graph, ["c", "b"]) == {"c": 3, "b": 2}
            futures = [client.submit_future(sleep_for, seconds) for seconds in (0.8, 0.0)]  # one per worker
            order = [await finished async for finished in client.as_completed(futures)]
            assert order == [0.0, 0.8]

    asyncio.run(main())


def test_errors_reach_the_awaiting_coroutine(shared_cluster: SchedulerClusterCombo) -> None:
    async def main() -> None:
        async with AsyncClient(shared_cluster.get_address()) as client:
            with pytest.raises(ZeroDivisionError):
                await client.submit(divmod, 1, 0)
            future = client.submit_future(divmod, 1, 0)
            assert isinstance(await future.exception(), ZeroDivisionError)
            lock = threading.Lock()
            with pytest.raises(TypeError, match=r"argument 0 of type _thread\.lock"):
                client.submit_future(id, lock)
            with pytest.raises(TypeError, match=r"argument 0 of type _thread\.lock"):
                await client.submit(id, lock)
            with pytest.raises(TypeError, match=r"graph key 'a': cannot serialize argument 0 of type _thread\.lock"):
                await client.get({"a": (id, lock)}, ["a"])
            with pytest.raises(KeyError, match="nope"):
                await client.get({"a": 1}, ["nope"])
            with pytest.raises(asyncio.TimeoutError):
                async for _ in client.as_completed([client.submit_future(sleep_for, 60)], timeout=0.3):
                    pass

    asyncio.run(main())


def test_results_are_unpickled_off_the_loop_thread(shared_cluster: SchedulerClusterCombo) -> None:
    """The result unpickles as the ident of the thread that unpickled it. Checked by making AsyncFuture.result
    call ScalerFuture.result on the loop: this test then fails."""

    async def main() -> None:
        loop_thread = threading.get_ident()
        async with AsyncClient(shared_cluster.get_address()) as client:
            assert await client.submit(unpickling_thread) != loop_thread
            assert await client.submit_future(unpickling_thread) != loop_thread
            futures = [client.submit_future(unpickling_thread) for _ in range(3)]
            async for future in client.as_completed(futures):
                assert await future != loop_thread

    asyncio.run(main())


def test_the_loop_keeps_running_while_coroutines_wait_on_tasks(shared_cluster: SchedulerClusterCombo) -> None:
    """A ticker coroutine keeps ticking while 20 coroutines wait on tasks of one second."""

    async def main() -> int:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        async with AsyncClient(shared_cluster.get_address()) as client:
            ticking = asyncio.ensure_future(ticker())
            before = ticks
            results = await asyncio.gather(*(client.submit(sleep_for, 0.1) for _ in range(20)))
            during = ticks - before
            ticking.cancel()
            assert results == [0.1] * 20
            return during

    assert asyncio.run(main()) > 0


def test_many_coroutines_share_one_connection(shared_cluster: SchedulerClusterCombo) -> None:
    """100 coroutines submit at once over one TCP connection to the scheduler (counted on this process)."""
    port = int(shared_cluster.get_address().rsplit(":", 1)[1])

    def scheduler_connections() -> int:
        connections = psutil.Process().net_connections(kind="tcp")
        return sum(1 for c in connections if c.raddr and c.raddr.port == port and c.status == "ESTABLISHED")

    async def main() -> int:
        async with AsyncClient(shared_cluster.get_address()) as client:
            results = await asyncio.gather(*(client.submit(inc, n) for n in range(100)))
            assert results == [n + 1 for n in range(100)]
            return scheduler_connections()

    assert asyncio.run(main()) == 1


def test_it_works_inside_an_already_running_loop_next_to_a_thread_client(shared_cluster: SchedulerClusterCombo) -> None:
    """As in Jupyter or FastAPI: the loop was started by someone else, and the AsyncClient is made inside it."""
    loop = asyncio.new_event_loop()
    answers: list[int] = []

    async def handler() -> None:
        client = await AsyncClient(shared_cluster.get_address()).connect()
        try:
            answers.append(await client.submit(inc, 41))
        finally:
            await client.disconnect()

    try:
        loop.run_until_complete(handler())
        loop.run_until_complete(handler())
    finally:
        loop.close()
    assert answers == [42, 42]
    with Client(address=shared_cluster.get_address()) as thread_client:
        assert thread_client.submit(inc, 1).result() == 2


def test_using_it_before_connecting_says_how_to_connect() -> None:
    client = AsyncClient("tcp://127.0.0.1:1")
    with pytest.raises(RuntimeError, match="async with AsyncClient"):
        client.submit_future(inc, 1)
