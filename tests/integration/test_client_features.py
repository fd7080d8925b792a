"""Client API, part two, end to end: graphs, nested tasks, objects, profiling, serializers, output,
capabilities. The seed examples (tests/integration/seed_examples/, copied verbatim from the user's
documents) run as scripts and must print what the documents say they print."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler import Client, SchedulerClusterCombo
from scaler.errors import MissingObjects, ScalerError
from tests.integration.conftest import monitor, running_cluster, wait_for

#: its module fixtures are made once: its tests share one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_client_features")]

SEEDS = Path(__file__).parent / "seed_examples"


def run_seed(name: str, timeout_seconds: float = 120) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(SEEDS / name)], capture_output=True, text=True, timeout=timeout_seconds, cwd=SEEDS
    )
    assert done.returncode == 0, f"{name} failed: {done.stderr[-3000:]}"
    # a local cluster is quiet unless something goes wrong: only the script's own lines
    logged = [line for line in done.stdout.splitlines() + done.stderr.splitlines() if line.startswith("[")]
    assert not logged, f"{name}: a clean run logged\n" + "\n".join(logged[:20])
    return done.stdout.splitlines()


# ---------------------------------------------------------------- the seed examples, as written


@pytest.mark.timeout(120)
def test_seed_send_object_prints_the_first_two_items() -> None:
    assert run_seed("send_object.py") == ["1", "2"]


@pytest.mark.timeout(120)
def test_seed_graph_prints_e_and_every_key_with_f_as_the_function() -> None:
    lines = run_seed("graphtask.py")
    assert lines[0] == "1"
    assert lines[1].startswith("{'a': 2, 'b': 2, 'c': 3, 'd': 4, 'e': 1, 'f': <function add at ")


@pytest.mark.timeout(120)
def test_seed_nested_fibonacci_on_one_worker_prints_21() -> None:
    assert run_seed("nested_client.py") == ["21"]


@pytest.mark.timeout(180)
def test_seed_graph_built_inside_a_task_on_ten_workers_prints_21() -> None:
    assert run_seed("graphtask_nested_client.py", timeout_seconds=180) == ["21"]


@pytest.mark.timeout(120)
def test_seed_clear_and_disconnect_example_runs() -> None:
    assert run_seed("disconnect_client.py") == []


# ---------------------------------------------------------------- functions used by tasks


def inc(i: int) -> int:
    return i + 1


def add(a: int, b: int) -> int:
    return a + b


def minus(a: int, b: int) -> int:
    return a - b


def fail(x: object) -> None:
    raise ValueError(f"failed on {x}")


def sleep_for(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def fibonacci(client: Client, n: int) -> int:
    if n <= 1:
        return n
    a = client.submit(fibonacci, client, n - 1)
    b = client.submit(fibonacci, client, n - 2)
    return int(a.result() + b.result())


def fibonacci_connections(client: Client, n: int) -> tuple[int, set[tuple[int, bytes]]]:
    """fibonacci(n), and the (processor pid, client id) of every task that ran for it."""
    seen = {(os.getpid(), bytes(client.identity))}
    if n <= 1:
        return n, seen
    a = client.submit(fibonacci_connections, client, n - 1)
    b = client.submit(fibonacci_connections, client, n - 2)
    (value_a, seen_a), (value_b, seen_b) = a.result(), b.result()
    return value_a + value_b, seen | seen_a | seen_b


def child_inside_task(x: int) -> int:
    with Client() as inner:
        return int(inner.submit(inc, x).result())


def echo(value: object) -> object:
    return value


def shout(text: str) -> str:
    print(f"out:{text}")
    print(f"err:{text}", file=sys.stderr)
    return text


def takes_profiling(x: int, profiling: bool = False) -> bool:
    return profiling


# ---------------------------------------------------------------- shared cluster


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with running_cluster(2) as cluster, Client(address=cluster.get_address()) as connected:
        yield connected


# ---------------------------------------------------------------- graphs


def test_graph_seed_from_the_readme_returns_e(client: Client) -> None:
    graph = {"a": 2, "b": 2, "c": (inc, "a"), "d": (add, "a", "b"), "e": (minus, "d", "c")}
    assert client.get(graph, keys=["e"]) == {"e": 1}


def test_graph_keys_inside_lists_are_replaced_and_other_values_pass_as_is(client: Client) -> None:
    graph = {"x": 1, "z": (inc, 5), "y": (sum, ["x", "z", 10]), "s": (echo, "not-a-key")}
    assert client.get(graph, keys=["y", "s"]) == {"y": 17, "s": "not-a-key"}


def test_graph_culls_keys_nobody_asked_for(client: Client) -> None:
    graph = {"a": 1, "never": (fail, "a"), "b": (inc, "a")}
    assert client.get(graph, keys=["b"]) == {"b": 2}


def test_a_graph_cycle_or_a_missing_key_raises_before_anything_runs(client: Client) -> None:
    with pytest.raises(ValueError, match="cycle through key"):
        client.get({"a": (inc, "b"), "b": (inc, "a")}, keys=["a"])
    with pytest.raises(KeyError, match="nope"):
        client.get({"a": 1}, keys=["nope"])


def test_a_failing_root_of_a_diamond_fails_every_requested_key(client: Client) -> None:
    graph = {"root": (fail, 0), "left": (inc, "root"), "right": (inc, "root"), "join": (add, "left", "right")}
    futures = client.get(graph, keys=["left", "right", "join"], block=False)
    for future in futures.values():
        with pytest.raises(ValueError, match="failed on 0"):
            future.result(timeout=30)


def test_a_node_using_the_same_dependency_twice(client: Client) -> None:
    assert client.get({"a": 3, "b": (inc, "a"), "c": (add, "b", "b")}, keys=["c"]) == {"c": 8}


@pytest.mark.timeout(120)
def test_one_key_gives_its_value_as_dask_s_get(client: Client) -> None:
    """Dask's `get(dsk, "total")`: one key, its value. A string key was iterated as its characters (KeyError 't')."""
    graph = {"start": 3, "total": (add, "start", 4), ("part", 0): (inc, "start")}
    assert client.get(graph, "total") == 7
    assert client.get(graph, ("part", 0)) == 4
    assert client.get(graph, "total", block=False).result(timeout=60) == 7
    assert client.get(graph, ["total"]) == {"total": 7}
    with pytest.raises(KeyError, match="missing"):
        client.get(graph, "missing")


def test_a_one_node_graph_in_a_tight_loop_always_completes(client: Client) -> None:
    for number in range(200):
        assert client.get({"x": (inc, number)}, keys=["x"]) == {"x": number + 1}


def touch_then_sleep(path: str, seconds: float) -> float:
    """Say it started (the file `path`), then take `seconds`."""
    import pathlib
    import time

    pathlib.Path(path).touch()
    time.sleep(seconds)
    return seconds


def test_cancelling_one_future_cancels_the_whole_graph_and_frees_the_workers(client: Client, tmp_path: Path) -> None:
    started_a, started_b = str(tmp_path / "a"), str(tmp_path / "b")
    graph = {"a": (touch_then_sleep, started_a, 30), "b": (touch_then_sleep, started_b, 30), "c": (add, "a", "b")}
    futures = client.get(graph, keys=["a", "c"], block=False)
    wait_for(lambda: os.path.exists(started_a) and os.path.exists(started_b), "a and b to run on the workers")
    assert futures["c"].cancel(timeout=30)
    concurrent.futures.wait(list(futures.values()), timeout=30)
    assert all(future.cancelled() for future in futures.values())
    assert client.submit(inc, 1).result(timeout=30) == 2, "the workers are free again"


def test_cancel_while_subtasks_finish_leaves_the_scheduler_healthy(client: Client) -> None:
    for _ in range(20):
        futures = client.get({"a": (inc, 1), "b": (inc, "a"), "c": (inc, "b")}, keys=["c"], block=False)
        futures["c"].cancel(timeout=30)
        assert futures["c"].done()
    assert client.get({"a": (inc, 1)}, keys=["a"]) == {"a": 2}


def test_a_binary_reduction_over_1024_leaves(client: Client) -> None:
    graph: dict[str, object] = {f"leaf{i}": (echo, i) for i in range(1024)}
    level = [f"leaf{i}" for i in range(1024)]
    while len(level) > 1:
        pairs = [(f"{level[i]}+", level[i], level[i + 1]) for i in range(0, len(level), 2)]
        for key, left, right in pairs:
            graph[key] = (add, left, right)
        level = [key for key, _, _ in pairs]
    assert client.get(graph, keys=level) == {level[0]: sum(range(1024))}


# ---------------------------------------------------------------- nested tasks


@pytest.mark.timeout(180)
def test_fibonacci_12_on_a_single_worker_does_not_deadlock() -> None:
    with running_cluster(1) as cluster, Client(address=cluster.get_address()) as single:
        assert single.submit(fibonacci, single, 12).result(timeout=170) == 144


def test_nested_tasks_in_one_processor_share_one_client_connection(client: Client) -> None:
    value, seen = client.submit(fibonacci_connections, client, 7).result(timeout=120)
    assert value == 13
    identities_by_processor: dict[int, set[bytes]] = {}
    for pid, identity in seen:
        identities_by_processor.setdefault(pid, set()).add(identity)
    assert all(len(identities) == 1 for identities in identities_by_processor.values()), identities_by_processor


def test_a_client_created_inside_a_task_finds_its_scheduler(client: Client) -> None:
    assert client.submit(child_inside_task, 41).result(timeout=60) == 42


def test_a_client_created_outside_a_task_without_address_is_refused() -> None:
    """In the reference's words too (its test_client_no_address_outside_worker looks for them)."""
    words = r"^No scheduler address provided, and not running inside a worker context .*needs the scheduler's address"
    with pytest.raises(ValueError, match=words):
        Client()


# ---------------------------------------------------------------- objects


def test_an_object_reference_is_the_object_everywhere_in_the_arguments(client: Client) -> None:
    reference = client.send_object([10, 20, 30], name="numbers")
    assert client.submit(echo, reference).result() == [10, 20, 30]
    assert client.submit(lambda *, data: data[1], data=reference).result() == 20
    assert client.submit(echo, [reference, (reference,), {"k": reference}]).result() == [
        [10, 20, 30],
        ([10, 20, 30],),
        {"k": [10, 20, 30]},
    ]


def test_identical_objects_are_stored_once(client: Client) -> None:
    first = client.send_object(b"x" * 200_000)
    second = client.send_object(b"x" * 200_000)
    assert first == second and first.object_id == second.object_id


def test_a_reference_made_stale_by_clear_fails_with_a_clear_error() -> None:
    with running_cluster(1) as cluster, Client(address=cluster.get_address()) as fresh:
        reference = fresh.send_object(list(range(10)))
        assert fresh.submit(echo, reference).result() == list(range(10))
        fresh.clear()
        with pytest.raises(MissingObjects, match="clear"):
            fresh.submit(echo, reference).result(timeout=30)
        assert fresh.submit(inc, 1).result(timeout=30) == 2, "the client still works after clear()"


def test_a_large_argument_and_result_go_through_object_storage(client: Client) -> None:
    blob = bytes(range(256)) * 4096  # 1 MiB
    assert client.submit(echo, blob).result(timeout=60) == blob


# ---------------------------------------------------------------- profiling


def test_profiling_reports_the_documented_fields_and_moves_with_the_work(client: Client) -> None:
    future = client.submit(sleep_for, 0.3, profiling=True)
    future.result()
    info = future.profiling_info()
    assert 250_000 < info.duration_us < 120_000_000  # at least the sleep; the upper bound only catches nonsense
    assert info.duration_s == pytest.approx(info.duration_us / 1e6)
    assert info.peak_memory == info.memory_peak >= 0
    assert info.cpu_time_s < info.duration_s


def test_a_function_with_its_own_profiling_parameter_still_receives_it(client: Client) -> None:
    future = client.submit(takes_profiling, 1, profiling=True)
    assert future.result() is True
    assert future.profiling_info().duration_s >= 0


def test_profiling_info_without_profiling_is_refused(client: Client) -> None:
    future = client.submit(inc, 1)
    future.result()
    with pytest.raises(ValueError, match="profiling=True"):
        future.profiling_info()


def test_a_profiling_client_profiles_every_task() -> None:
    with running_cluster(1) as cluster, Client(address=cluster.get_address(), profiling=True) as profiled:
        future = profiled.submit(sleep_for, 0.1)
        future.result()
        assert future.profiling_info().duration_s >= 0.09


# ---------------------------------------------------------------- serializer


@pytest.mark.timeout(120)
def test_the_documented_tagged_serializer_round_trips_dataframes_ints_and_the_rest() -> None:
    code = """
import pandas as pd
from custom_serializer import CustomSerializer
from scaler import Client, SchedulerClusterCombo

def total(frame):
    return frame.assign(y=frame["x"] * 2)

def add(a, b):
    return a + b

with SchedulerClusterCombo(n_workers=1, logging_level="WARNING") as cluster:
    with Client(address=cluster.get_address(), serializer=CustomSerializer()) as client:
        print(client.submit(add, 1, 2).result())
        print(client.submit(add, "a", "b").result())
        frame = client.submit(total, pd.DataFrame({"x": [1, 2, 3]})).result()
        print(list(frame["y"]))
"""
    # "All libraries used for serialization must be installed on workers": the workers import the
    # serializer's module too, so it is on their path.
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SEEDS), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=110, env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-3:] == ["3", "ab", "[2, 4, 6]"]


# ---------------------------------------------------------------- output


@pytest.mark.timeout(120)
def test_stream_output_shows_task_output_in_the_client_marked_by_task() -> None:
    code = """
from scaler import Client, SchedulerClusterCombo
import sys
def shout(text):
    print(f"out:{text}")
    print(f"err:{text}", file=sys.stderr)
    return text
with SchedulerClusterCombo(n_workers=1, logging_level="WARNING") as cluster:
    with Client(address=cluster.get_address(), stream_output=True) as client:
        client.submit(shout, "hello").result()  # its lines were printed before its result came
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr[-3000:]
    assert any(line.startswith("[task ") and line.endswith("] out:hello") for line in done.stdout.splitlines())
    assert any(line.startswith("[task ") and line.endswith("] err:hello") for line in done.stderr.splitlines())


# ---------------------------------------------------------------- capabilities


@pytest.mark.timeout(120)
def test_capability_tasks_run_only_on_capable_workers_and_wait_visibly_otherwise() -> None:
    settings = {"per_worker_capabilities": {"gpu": -1}, "policy_content": "allocate=capability; scaling=no"}
    with running_cluster(1, **settings) as cluster, Client(address=cluster.get_address()) as capable:
        assert capable.submit_verbose(inc, (1,), {}, capabilities={"gpu": 1}).result(timeout=30) == 2
        assert capable.map(inc, [1, 2], capabilities={"gpu": 1}) == [2, 3]
        waiting = capable.submit_verbose(inc, (1,), {}, capabilities={"tpu": 1})
        with monitor(cluster.monitor_address) as next_snapshot:
            snapshot = next_snapshot(lambda s: any(group.count for group in s.pending))
        (group,) = snapshot.pending
        assert group.capabilities == (("tpu", 1),) and "tpu" in group.reason
        assert not waiting.done()
        assert waiting.cancel(timeout=30)


def test_futures_work_with_wait_as_completed_callbacks_and_asyncio(client: Client) -> None:
    import asyncio

    futures = [client.submit(inc, i) for i in range(20)]
    done, _ = concurrent.futures.wait(futures, timeout=30)
    assert len(done) == 20
    assert sorted(f.result() for f in concurrent.futures.as_completed(futures)) == list(range(1, 21))
    seen: list[int] = []
    futures[0].add_done_callback(lambda f: seen.append(f.result()))
    assert seen == [1]

    async def await_one() -> int:
        return int(await client.submit(inc, 100))

    assert asyncio.run(await_one()) == 101


def test_a_graph_node_error_keeps_its_remote_traceback(client: Client) -> None:
    with pytest.raises(ValueError) as caught:
        client.get({"a": (fail, "boom")}, keys=["a"])
    assert "failed on boom" in str(caught.value.__cause__) and "Traceback" in str(caught.value.__cause__)
    assert isinstance(caught.value.__cause__, ScalerError.__mro__[1]) or caught.value.__cause__ is not None


def test_seed_cluster_combo_accepts_the_documented_arguments() -> None:
    cluster = SchedulerClusterCombo(n_workers=1, protected=False, event_loop="uvloop", logging_level="WARNING")
    try:
        with Client(address=cluster.get_address()) as short_lived:
            assert short_lived.submit(inc, 1).result(timeout=30) == 2
    finally:
        cluster.shutdown()


def test_a_large_object_sent_twice_is_stored_once(client: Client) -> None:
    big = bytes(range(256)) * (9 * 4096)  # 9 MiB: above the size where hashing runs beside the upload
    first = client.send_object(big)
    second = client.send_object(bytes(big))
    assert first == second
    assert client.submit(len, second).result(timeout=60) == len(big)


def kind_and_size(value: object) -> tuple[str, int]:
    return type(value).__name__, len(value)  # type: ignore[arg-type]


def test_large_bytes_objects_travel_raw_and_arrive_as_bytes(client: Client) -> None:
    blob = bytes(range(256)) * 8192  # 2 MiB: stored as a marker frame and the raw bytes
    assert client.submit(kind_and_size, client.send_object(blob)).result(timeout=60) == ("bytes", len(blob))
    assert client.submit(lambda b: b == blob, client.send_object(blob)).result(timeout=60) is True
    array = bytearray(blob)  # not bytes: pickled as usual
    assert client.submit(kind_and_size, client.send_object(array)).result(timeout=60) == ("bytearray", len(blob))


class Scale:
    """A callable whose state a user changes in place between submissions."""

    def __init__(self, factor: int) -> None:
        self.factor = factor

    def __call__(self, value: int) -> int:
        return value * self.factor


def test_a_callable_changed_in_place_is_sent_again_only_with_reserialize(client: Client) -> None:
    scale = Scale(2)
    assert client.submit(scale, 5).result(timeout=30) == 10
    scale.factor = 3
    assert client.submit(scale, 5).result(timeout=30) == 10  # serialized once per client, found by identity
    assert client.submit_verbose(scale, (5,), {}, reserialize=True).result(timeout=30) == 15
    scale.factor = 4
    assert client.map(scale, [1, 2], reserialize=True) == [4, 8]
    scale.factor = 5
    assert client.get({"x": 2, "y": (scale, "x")}, keys=["y"], reserialize=True) == {"y": 10}


def test_tls_security_config_is_refused_with_what_to_use_instead() -> None:
    with pytest.raises(ValueError, match="CURVE"):
        Client(address="tcp://127.0.0.1:1", security_config=object())
    with pytest.raises(ValueError, match="CURVE"):
        SchedulerClusterCombo(n_workers=1, security_config=object())


class CountedItems:
    """A sized, lazy sequence of ints that counts how many items the map has read."""

    def __init__(self, items: int) -> None:
        self.items, self.read = items, 0

    def __len__(self) -> int:
        return self.items

    def __iter__(self) -> Iterator[int]:
        for item in range(self.items):
            self.read += 1
            yield item


def fail_at_300(x: int) -> int:
    if x == 300:
        raise ValueError("300 is bad")
    return x


def test_a_big_map_reads_its_arguments_as_it_goes_and_a_failure_stops_it_early() -> None:
    items = CountedItems(2_000_000)
    with running_cluster(2) as cluster, Client(address=cluster.get_address()) as client:
        with pytest.raises(ValueError, match="300 is bad") as raised:
            client.map(fail_at_300, items)
        assert "scaler: map item 300 failed; its arguments: (300,)" in getattr(raised.value, "__notes__", [])
        assert items.read < 200_000, f"the map read {items.read:,} of 2,000,000 arguments before it failed"
        assert client.map(fail_at_300, range(250)) == list(range(250)), "the client goes on"


def test_a_big_map_over_a_generator_of_unknown_length_is_streamed_too() -> None:
    read = [0]

    def numbers() -> Iterator[int]:
        for item in range(2_000_000):
            read[0] += 1
            yield item

    with running_cluster(2) as cluster, Client(address=cluster.get_address()) as client:
        with pytest.raises(ValueError, match="300 is bad"):
            client.map(fail_at_300, numbers())
        assert read[0] < 400_000, f"the map read {read[0]:,} of 2,000,000 arguments before it failed"
        assert client.map(fail_at_300, (x for x in range(250))) == list(range(250)), "a short one is read whole"
        assert client.starmap(max, ((x, 5) for x in range(40_000)))[:7] == [5, 5, 5, 5, 5, 5, 6]
