"""#13: code written for the reference system keeps working: the exception types it catches, and the module
paths it imports from."""

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
