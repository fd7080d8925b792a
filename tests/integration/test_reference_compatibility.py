"""#13: code written for the reference system keeps working: the exception types it catches, and the module
paths it imports from; #73: the libraries of its family (parfun asks the reference's `Processor` inside a task,
pargraph takes a Client as its backend; parfun's own tests: tests/conformance/test_parfun_backend.py)."""

from __future__ import annotations

import concurrent.futures
import graphlib
import importlib
import time
from collections.abc import Iterator

import pytest

from scaler import Client
from tests.integration.conftest import running_cluster

#: its module fixtures are made once: its tests share one test process (make test: --dist loadgroup)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_reference_compatibility")]


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with running_cluster(1, protected=False) as cluster, Client(address=cluster.get_address()) as connected:
        yield connected


def two(a: int, b: int) -> int:
    return a + b


def keyword_only(a: int, *, scale: int = 1) -> int:
    return a * scale


def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_arguments_that_cannot_bind_raise_type_error_in_the_caller(client: Client) -> None:
    with pytest.raises(TypeError, match="cannot submit two: missing a required argument: 'b'"):
        client.submit(two, 1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'c'"):
        client.submit(two, 1, 2, c=3)
    with pytest.raises(TypeError, match="too many positional arguments"):
        client.map(two, [1], [2], [3])
    assert client.submit(keyword_only, 3, scale=2).result(timeout=30) == 6  # keyword-only arguments arrive
    assert client.submit(max, 1, 2).result(timeout=30) == 2  # builtins without a signature go as they are


def test_map_of_argument_tuples_says_starmap(client: Client) -> None:
    """issue 60: `map(two, [(1, 2), (3, 4)])` where starmap was meant said only "missing a required argument: 'b'";
    it says starmap now, and only when the item would fit as the arguments."""
    with pytest.raises(TypeError, match=r"missing a required argument: 'b' \(map passes each item as one argument; "
                       r"starmap\(two, items\) calls two\(\*item\)"):  # fmt: skip
        client.map(two, [(1, 2), (3, 4)])
    with pytest.raises(TypeError) as unfit:
        client.map(two, [(1, 2, 3)])
    assert "starmap" not in str(unfit.value)
    assert client.starmap(two, [(1, 2), (3, 4)]) == [3, 7]


def test_graph_errors_have_the_types_existing_code_catches(client: Client) -> None:
    with pytest.raises(graphlib.CycleError) as cycle:
        client.get({"a": (two, "b", 1), "b": (two, "a", 1)}, keys=["a"])
    assert isinstance(cycle.value, ValueError)
    with pytest.raises(KeyError, match="requested twice"):
        client.get({"a": 1}, keys=["a", "a"])
    with pytest.raises(KeyError, match="'missing'"):
        client.get({"a": 1}, keys=["missing"])


def test_profiling_info_of_an_unfinished_future_is_a_value_error(client: Client) -> None:
    future = client.submit(nap, 2.0)
    with pytest.raises(ValueError, match="not finished"):
        future.profiling_info()
    future.result(timeout=30)


def test_a_refused_shutdown_is_a_value_error() -> None:
    with running_cluster(1) as protected_cluster, Client(address=protected_cluster.get_address()) as protected:
        with pytest.raises(ValueError, match="protected"):
            protected.shutdown()


REFERENCE_IMPORTS = [
    ("scaler", ["Client", "ScalerFuture", "Serializer", "SchedulerClusterCombo", "__version__"]),
    ("scaler.client.client", ["Client"]),
    ("scaler.client.future", ["ScalerFuture"]),
    ("scaler.client.object_reference", ["ObjectReference"]),
    ("scaler.client.serializer.mixins", ["Serializer"]),
    ("scaler.client.serializer.default", ["DefaultSerializer"]),
    ("scaler.cluster.combo", ["SchedulerClusterCombo"]),
    (
        "scaler.utility.exceptions",
        [
            "WorkerDiedError", "ProcessorDiedError", "TaskNotFoundError", "NoWorkerError", "DisconnectedError",
            "ClientCancelledException", "ClientShutdownException", "ClientQuitException", "MissingObjects",
            "TaskExceptionNotSerializableError", "DeserializeObjectError", "ObjectStorageException",
        ],
    ),
    ("scaler.config.section.scheduler", ["PolicyConfig"]),
    ("scaler.worker.agent.processor.processor", ["Processor"]),
]  # fmt: skip


@pytest.mark.parametrize(("module", "names"), REFERENCE_IMPORTS, ids=[module for module, _ in REFERENCE_IMPORTS])
def test_the_reference_import_paths_work(module: str, names: list[str]) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in names if not hasattr(imported, name)]
    assert not missing, f"{module} lacks {missing}"


def test_the_reference_aliases_are_ours() -> None:
    from scaler.client.future import ScalerFuture
    from scaler.client.serializer.default import DefaultSerializer
    from scaler.errors import WorkerDiedError
    from scaler.utility.exceptions import WorkerDiedError as ReferenceWorkerDiedError

    assert ReferenceWorkerDiedError is WorkerDiedError
    assert issubclass(ScalerFuture, concurrent.futures.Future)
    serializer = DefaultSerializer()
    assert serializer.deserialize(serializer.serialize({"a": 1})) == {"a": 1}


def processor_seen() -> tuple[bool, str, str]:
    from scaler.worker.agent.processor.processor import Processor

    processor = Processor.get_current_processor()
    assert processor is not None
    return True, processor.scheduler_address(), processor.object_storage_address()


def test_the_reference_processor_names_the_tasks_scheduler_inside_a_task_and_is_none_outside(client: Client) -> None:
    """parfun's Scaler backend asks it whether it runs in a task, and sends its nested tasks there. Checked to fail
    with `get_current_processor` returning None (the task's assertion failed)."""
    from scaler.worker.agent.processor.processor import Processor

    assert Processor.get_current_processor() is None, "outside a task, as the reference"
    inside, scheduler, storage = client.submit(processor_seen).result(timeout=30)
    assert inside and scheduler == client.address and storage.startswith("tcp://")


def test_pargraph_computes_its_graphs_with_a_client_as_its_backend(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pargraph's GraphEngine submits each node with `backend.submit` and waits with `concurrent.futures.wait`. Its
    sorter is the standard library's: pargraph 0.9.6 takes one built on python-graphblas when that is installed (the
    test extra has it), which calls `numpy.in1d`, gone from numpy 2.4, whatever its backend."""
    from operator import add

    import pargraph.engine.engine
    from pargraph import GraphEngine, graph

    monkeypatch.setattr(pargraph.engine.engine, "TopologicalSorter", graphlib.TopologicalSorter)
    engine = GraphEngine(client)
    nodes = {"x": 1, "y": 2, "z": (add, "x", "y"), "w": (sum, ["x", "y", "z"]), "v": (add, (add, "x", "y"), "z")}
    assert engine.get(nodes, [["x", "y"], ["z", "w"], "v"]) == [[1, 2], [3, 6], 6]
    tree = {f"leaf{n}": 1 for n in range(16)}
    tree.update({f"n{n}": (add, f"leaf{2 * n}", f"leaf{2 * n + 1}") for n in range(8)})
    tree.update({f"m{n}": (add, f"n{2 * n}", f"n{2 * n + 1}") for n in range(4)})
    tree.update({"a": (add, "m0", "m1"), "b": (add, "m2", "m3"), "root": (add, "a", "b")})
    assert engine.get(tree, "root") == 16

    @graph
    def hypotenuse(a: float, b: float) -> float:
        return (a**2 + b**2) ** 0.5

    nodes, keys = hypotenuse.to_graph().to_dict(a=3, b=4)
    assert engine.get(nodes, keys) == [5.0]
