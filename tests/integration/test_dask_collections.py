"""Dask collections on our scheduler: `dask.compute(..., scheduler=client.get)` and `collection.compute(scheduler=
client.get)` for dask.array, dask.dataframe, dask.bag and dask.delayed, with the graphs the installed Dask makes
(task-spec nodes) and the older tuples; one graph per compute; intermediate results never reach the client."""

from __future__ import annotations

import graphlib
import threading
import types
from collections.abc import Iterator
from typing import Any

import dask
import dask.array as da
import dask.bag as db
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from dask._task_spec import Task, TaskRef
from dask.highlevelgraph import HighLevelGraph

from scaler import Client
from scaler.protocol import messages as m
from tests.integration.conftest import running_cluster

#: its module fixtures are made once: its tests share one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_dask_collections")]


def inc(x: int) -> int:
    return x + 1


def add(a: int, b: int) -> int:
    return a + b


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with running_cluster(2) as cluster, Client(address=cluster.get_address()) as connected:
        yield connected


class Spy:
    """Counts what the client sends (graphs, plain tasks) and the results it receives."""

    def __init__(self, client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
        self.graphs = self.tasks = self.results = 0
        agent = client.session._agent  # what leaves for the scheduler, and what comes back
        submit_graph, submit, on_messages = agent.submit_graph, agent.submit, agent._core.on_messages

        def count_graph(*args: Any) -> None:
            self.graphs += 1
            submit_graph(*args)

        def count_tasks(tasks: list[Any]) -> None:
            self.tasks += len(tasks)
            submit(tasks)

        def count_results(messages: Any, now: float) -> Any:
            messages = list(messages)
            self.results += sum(isinstance(message, m.TaskResult) for message in messages)
            return on_messages(messages, now)

        monkeypatch.setattr(agent, "submit_graph", count_graph)
        monkeypatch.setattr(agent, "submit", count_tasks)
        monkeypatch.setattr(agent._core, "on_messages", count_results)


def test_dask_array_in_one_graph_with_intermediates_kept_in_the_cluster(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sixteen 2 MB chunks, a map and a reduction: one graph is sent, and one result (the sum) comes back. Checked
    by computing through Dask's node-by-node path instead (`scheduler=client.executor()`, Dask's get_async over
    Executor.submit): 32 tasks went and 32 results came back, and this test failed."""
    x = da.ones((4000, 1000), chunks=(250, 1000))
    y = (x * 2 + 1).sum()
    spy = Spy(client, monkeypatch)
    assert y.compute(scheduler=client.get) == 3 * 4000 * 1000
    assert (spy.graphs, spy.tasks, spy.results) == (1, 0, 1)


def test_dask_compute_of_several_collections_and_scheduler_equals_client(client: Client) -> None:
    x = da.arange(100, chunks=10)
    total, mean = dask.compute(x.sum(), x.mean(), scheduler=client.get)
    assert (total, mean) == (4950, 49.5)
    assert dask.compute(x.max(), scheduler=client) == (99,)
    square = da.from_array(np.arange(100).reshape(10, 10), chunks=5)
    local = np.arange(100).reshape(10, 10)
    np.testing.assert_array_equal((square @ square.T).compute(scheduler=client.get), local @ local.T)


def test_dask_dataframe(client: Client) -> None:
    frame = pd.DataFrame({"key": [i % 3 for i in range(300)], "value": range(300)})
    lazy = dd.from_pandas(frame, npartitions=5)
    result = lazy.groupby("key").value.sum().compute(scheduler=client.get)
    pd.testing.assert_series_equal(result.sort_index(), frame.groupby("key").value.sum())
    assert len(lazy[lazy.value > 100].compute(scheduler=client.get)) == 199


def test_dask_bag(client: Client) -> None:
    bag = db.from_sequence(range(20), npartitions=4)
    assert bag.map(inc).filter(lambda v: v % 2 == 0).sum().compute(scheduler=client.get) == 110
    assert sorted(bag.map(lambda v: v % 4).distinct().compute(scheduler=client.get)) == [0, 1, 2, 3]


def test_dask_delayed_with_nested_outputs(client: Client) -> None:
    a = dask.delayed(inc)(1)
    b = dask.delayed(add)(a, 10)
    assert dask.compute(a, [b, {"x": a}], scheduler=client.get) == (2, [12, {"x": 2}])
    assert b.compute(scheduler=client.get) == 12


def test_task_spec_and_legacy_graphs_called_as_dask_calls_a_scheduler(client: Client) -> None:
    spec = {"a": Task("a", inc, 1), ("b", 0): Task(("b", 0), add, TaskRef("a"), 5)}
    assert client.get(spec, [("b", 0), ["a"]]) == (7, (2,))
    assert client.get(spec, "a") == 2
    legacy = {"x": 1, ("y", 1): (inc, "x"), "z": (add, ("y", 1), "x"), "w": ["x", 3]}
    assert client.get(types.MappingProxyType(legacy), ["z", "w"]) == (3, [1, 3])
    layered = HighLevelGraph.from_collections("z", legacy, dependencies=[])
    assert client.get(layered, [["z"]]) == ((3,),)


def test_a_cycle_or_a_missing_key_raises_our_gets_errors(client: Client) -> None:
    cycle = {"a": Task("a", inc, TaskRef("b")), "b": Task("b", inc, TaskRef("a"))}
    with pytest.raises(graphlib.CycleError, match="cycle through key"):
        client.get(cycle, ["a"])
    with pytest.raises(KeyError, match="nope"):
        client.get({"a": Task("a", inc, 1)}, ["nope"])
    with pytest.raises(KeyError, match="'missing'"):
        client.get({"a": Task("a", inc, TaskRef("missing"))}, ["a"])
    # our own graphs: the same errors
    with pytest.raises(graphlib.CycleError):
        client.get({"a": (inc, "b"), "b": (inc, "a")}, keys=["a"])
    with pytest.raises(KeyError):
        client.get({"a": 1}, keys=["nope"])


def test_dask_options_are_refused_for_our_own_graphs(client: Client) -> None:
    with pytest.raises(TypeError, match="num_workers"):
        client.get({"a": (inc, 1)}, ["a"], num_workers=2)


def test_an_unpicklable_argument_raises_at_the_call_naming_the_task(client: Client) -> None:
    lock = threading.Lock()
    with pytest.raises(TypeError, match=r"cannot serialize the Dask task 'guarded-.*lock"):
        dask.delayed(id)(lock, dask_key_name="guarded-1").compute(scheduler=client.get)


def test_a_failing_task_raises_its_error(client: Client) -> None:
    with pytest.raises(ZeroDivisionError):
        dask.delayed(lambda: 1 / 0)().compute(scheduler=client.get)
