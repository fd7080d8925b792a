"""Streaming tasks on real clusters (Client.stream, docs/guide/actors_and_streams.md): a generator's values reach the
client in order as they are yielded, a slow reader holds the generator on its worker, a cancel closes the generator
there, an error mid-stream is raised where the values stop, large values go through object storage, a stream whose
worker dies runs again without repeating a value. The client's part alone is in tests/unit/test_task_streams.py."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
from pathlib import Path

import pytest

from scaler import AsyncClient, Client
from scaler.errors import RemoteTraceback
from tests.integration.conftest import DEADLINE_SECONDS, agent_of_processor, wait_for, wait_for_workers

pytestmark = pytest.mark.integration


# ---------------------------------------------------------------- task functions (run on workers)


def squares(n: int):  # type: ignore[no-untyped-def]
    for i in range(n):
        yield i * i


def counted(path: str, n: int):  # type: ignore[no-untyped-def]
    """Yields 0..n-1 as fast as it may, writing each index to `path` before yielding it, and "closed" when it is
    closed at a yield (GeneratorExit)."""
    import os

    with open(path, "a") as out:
        out.write(f"pid {os.getpid()}\n")
        out.flush()
        try:
            for i in range(n):
                out.write(f"{i}\n")
                out.flush()
                yield i
        except GeneratorExit:
            out.write("closed\n")
            out.flush()
            raise


def fails_after(n: int):  # type: ignore[no-untyped-def]
    yield from range(n)
    raise ValueError(f"failed after {n} values")


def megabytes(n: int):  # type: ignore[no-untyped-def]
    for i in range(n):
        yield bytes([i]) * (1 << 20)


def with_pid(n: int, path: str):  # type: ignore[no-untyped-def]
    """(index, processor pid) for 0..n-1; from value 3 on, each waits until `path` exists (the test's go-ahead)."""
    import os
    import time

    for i in range(n):
        while i >= 3 and not os.path.exists(path):
            time.sleep(0.01)
        yield i, os.getpid()


def pid() -> int:
    import os

    return os.getpid()


def produced(path: Path) -> list[str]:
    return path.read_text().split("\n")[1:-1] if path.exists() else []


# ---------------------------------------------------------------- tests


@pytest.mark.timeout(120)
def test_values_arrive_in_the_order_they_were_yielded(shared_cluster):
    with Client(shared_cluster.get_address()) as client:
        stream = client.stream_verbose(squares, (500,), {}, window=4)
        assert list(stream) == [i * i for i in range(500)]
        assert stream.result(timeout=DEADLINE_SECONDS) == 500


@pytest.mark.timeout(120)
def test_a_slow_reader_holds_the_generator_on_its_worker(shared_cluster, tmp_path):
    """After each value read, the generator runs up to the credit the reader gave (at least half a window ahead) and
    never further. Checked to fail with the credit check off (TaskThreads.wait_credit returning at once): the
    generator ran to the end of its 10,000 values before the first check."""
    path, window = tmp_path / "produced", 8
    with Client(shared_cluster.get_address()) as client:
        stream = client.stream_verbose(counted, (str(path), 10_000), {}, window=window)
        for read in range(1, 40):
            assert next(stream) == read - 1
            wait_for(lambda r=read: len(produced(path)) >= r + window // 2, "the generator to run up to its credit")
            assert len(produced(path)) <= read + window, "the generator ran ahead of its credit"
        stream.cancel()


@pytest.mark.timeout(120)
def test_cancel_closes_the_generator_in_its_processor(shared_cluster, tmp_path):
    """The cancel reaches the generator at its yield (GeneratorExit), and the processor lives on. Checked to fail with
    the agent killing the processor instead (its rule for a task computing alone): no "closed" is written."""
    path = tmp_path / "produced"
    with Client(shared_cluster.get_address()) as client:
        stream = client.stream_verbose(counted, (str(path), 10_000), {}, window=2)
        assert [next(stream), next(stream)] == [0, 1]
        assert stream.cancel(timeout=DEADLINE_SECONDS)
        wait_for(lambda: "closed" in produced(path), "the generator to be closed")
        processor = int(path.read_text().split("\n")[0].split()[1])
        assert processor in {client.submit(pid).result(timeout=DEADLINE_SECONDS) for _ in range(8)}
        with pytest.raises(concurrent.futures.CancelledError):
            next(stream)


@pytest.mark.timeout(120)
def test_an_error_mid_stream_is_raised_after_the_values_before_it_with_its_traceback(shared_cluster):
    with Client(shared_cluster.get_address()) as client:
        stream = client.stream(fails_after, 5)
        got = []
        with pytest.raises(ValueError, match="failed after 5 values") as raised:
            for value in stream:
                got.append(value)
        assert got == [0, 1, 2, 3, 4]
        assert isinstance(raised.value.__cause__, RemoteTraceback)
        assert "fails_after" in str(raised.value.__cause__)


@pytest.mark.timeout(120)
def test_large_values_travel_through_object_storage(shared_cluster):
    with Client(shared_cluster.get_address()) as client:
        values = list(client.stream_verbose(megabytes, (3,), {}, window=1))
        assert [(len(v), v[0]) for v in values] == [(1 << 20, 0), (1 << 20, 1), (1 << 20, 2)]


@pytest.mark.timeout(120)
def test_stream_map_streams_each_items_values_and_submit_and_map_give_lists(shared_cluster):
    with Client(shared_cluster.get_address()) as client:
        streams = client.stream_map(squares, [3, 1, 4])
        assert [list(stream) for stream in streams] == [[0, 1, 4], [0], [0, 1, 4, 9]]
        assert client.submit(squares, 4).result(timeout=DEADLINE_SECONDS) == [0, 1, 4, 9]
        assert client.map(squares, [2, 3]) == [[0, 1], [0, 1, 4]]


@pytest.mark.timeout(120)
def test_an_async_client_iterates_a_stream(shared_cluster):
    async def read() -> tuple[list[int], list[list[int]]]:
        async with AsyncClient(shared_cluster.get_address()) as client:
            one = [value async for value in client.stream(squares, 6)]
            many = []
            for stream in client.stream_map(squares, [2, 3]):
                many.append([value async for value in stream])
            return one, many

    assert asyncio.run(read()) == ([0, 1, 4, 9, 16, 25], [[0, 1], [0, 1, 4]])


@pytest.mark.timeout(180)
def test_a_stream_whose_worker_is_killed_runs_again_and_no_value_comes_twice(make_cluster, tmp_path):
    """The scheduler runs the stream again on the other worker; the values of index below what the reader had are
    skipped, and the new run is given the reader's credit. Checked to fail without that credit sent again to the new
    run (TaskStream.add_stream_item returning None): it stopped at its own window, before the values awaited."""
    cluster = make_cluster(2)
    wait_for_workers(cluster.monitor_address, 2)
    go = tmp_path / "go"
    with Client(cluster.get_address()) as client:
        stream = client.stream_verbose(with_pid, (12, str(go)), {}, window=2)
        first = [next(stream) for _ in range(3)]
        os.kill(agent_of_processor(first[0][1]), signal.SIGKILL)
        os.kill(first[0][1], signal.SIGKILL)
        go.touch()
        rest = list(stream)
    assert [index for index, _ in first + rest] == list(range(12))
    assert {pid for _, pid in rest} and first[0][1] not in {pid for _, pid in rest}
