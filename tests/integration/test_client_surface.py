"""What a user of a mature client expects of scaler's own `Client` (issue 59): close, gather and scatter of nested
containers, wait_for_workers, the scheduler's view of its workers, run (once per worker), upload_file (a module
importable by name in tasks), and a graph's call nested in another call's arguments run as a node.

Checked to fail with each mechanism off: without `close` (AttributeError, as before), with upload_file's wrapper left
out of the task encoder (ModuleNotFoundError in the task), with run's marker check returning True every time (the
function ran twice on a worker: a count of 2), and with `with_nested_calls_lifted` returning the graph unchanged
(TypeError: the nested tuple reached `add` as a tuple).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator
from operator import add
from pathlib import Path

import pytest

from scaler import Client, SchedulerClusterCombo

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("test_client_surface"), pytest.mark.timeout(180)]


@pytest.fixture
def client(shared_cluster: SchedulerClusterCombo) -> Iterator[Client]:
    with Client(address=shared_cluster.get_address()) as opened:
        yield opened


def inc(x: int) -> int:
    return x + 1


def div(x: float, y: float) -> float:
    return x / y


def test_close_is_disconnect(shared_cluster: SchedulerClusterCombo) -> None:
    client = Client(address=shared_cluster.get_address())
    client.close()
    client.close()
    assert client.session.state == "disconnected"


def test_gather_keeps_the_nesting_and_skips_failures_when_asked(client: Client) -> None:
    one, two = client.submit(inc, 1), client.submit(inc, 2)
    assert client.gather({"a": [one, (two, 5)], "b": {two}}) == {"a": [2, (3, 5)], "b": {3}}
    assert client.gather(one) == 2
    failed = client.submit(div, 1, 0)
    with pytest.raises(ZeroDivisionError):
        client.gather([one, failed])
    assert client.gather([one, failed], errors="skip") == [2]
    with pytest.raises(ValueError, match="errors must be"):
        client.gather([one], errors="ignore")


def test_scatter_stores_each_item_and_tasks_receive_the_values(client: Client) -> None:
    listed = client.scatter([1, 2, 3])
    assert [client.submit(inc, reference).result() for reference in listed] == [2, 3, 4]
    named = client.scatter({"x": 10})
    assert client.submit(inc, named["x"]).result() == 11
    assert client.submit(inc, client.scatter(41, broadcast=True)).result() == 42


def test_wait_for_workers_and_the_view_of_them(client: Client) -> None:
    client.wait_for_workers(2, timeout=60)
    with pytest.raises(TimeoutError, match="of 5 workers"):
        client.wait_for_workers(5, timeout=0.5)
    view = client.cluster_view()
    assert len(view.workers) == 2
    assert all(worker.capacity >= 1 and worker.hostname for worker in view.workers)


def _count_here(folder: str) -> int:
    """Counts its calls on this worker in a file of that worker's."""
    path = Path(folder) / f"{os.getppid()}"
    count = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(count))
    return count


def test_run_calls_a_function_once_on_each_worker(client: Client, tmp_path: Path) -> None:
    results = client.run(_count_here, str(tmp_path))
    assert len(results) == 2 and set(results.values()) == {1}
    first = sorted(results)[0]
    assert client.run(pow, 2, 5, workers=[first]) == {first: 32}
    with pytest.raises(ValueError, match="no worker nobody"):
        client.run(pow, 2, 5, workers=["nobody"])
    assert set(client.run(div, 1, 0, on_error="return").values()) != set()


def _imports_uploaded() -> int:
    import surface_uploaded  # type: ignore[import-not-found]

    return int(surface_uploaded.VALUE)


def _imports_uploaded_package() -> str:
    import surface_package.inner  # type: ignore[import-not-found]

    return str(surface_package.inner.NAME)


def test_upload_file_makes_a_module_importable_by_name_in_tasks(client: Client, tmp_path: Path) -> None:
    module = tmp_path / "surface_uploaded.py"
    module.write_text("VALUE = 123\n")
    assert client.upload_file(module) == ["surface_uploaded"]
    assert client.submit(_imports_uploaded).result() == 123
    module.write_text("VALUE = 456\n")  # uploaded again: the new version is imported
    client.upload_file(module)
    assert client.submit(_imports_uploaded).result() == 456
    archive = tmp_path / "surface_package.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("surface_package/__init__.py", "")
        zipped.writestr("surface_package/inner.py", "NAME = 'inner'\n")
    assert client.upload_file(archive) == ["surface_package"]
    assert client.submit(_imports_uploaded_package).result() == "inner"
    broken = tmp_path / "surface_broken.py"
    broken.write_text("syntax-error!\n")
    with pytest.raises(SyntaxError):
        client.upload_file(broken)
    with pytest.raises(ValueError, match=r"takes a \.py"):
        client.upload_file(tmp_path / "notes.txt")


def test_a_call_nested_in_a_graph_call_runs_as_a_node(client: Client) -> None:
    """Dask's get protocol (its GetFunctionTestMixin.test_nested_tasks) through the graphs of client.get."""
    graph = {"x": 1, "y": (inc, "x"), "z": (add, (inc, "x"), "y")}
    assert client.get(graph, "z") == 4
    assert client.get({"a": (sum, [(inc, 1), (inc, 2)])}, ["a"]) == {"a": 5}
