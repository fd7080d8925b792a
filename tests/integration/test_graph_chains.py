"""Linear chains of a dict graph run as one task each on a real cluster (scaler/client/graph_chains.py): the
scheduler sees one task per chain, known by its steps' names, and the results and errors are the unfused ones.

`test_a_chain_is_one_task_known_by_its_steps` fails with `graph_chains.FUSE_CHAINS = False` (checked by hand: the
monitor then counts "big" and "length" tasks apart, and no "big > length"); it sets the flag in this process, where
the client encodes graphs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from scaler import Client
from scaler.client import graph_chains
from scaler.protocol import messages as m
from tests.integration.conftest import monitor, running_cluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def big(index: int) -> bytes:
    """Over the inline limit: unfused, it would be stored in object storage on its way to `length`."""
    return bytes([index]) * 200_000


def length(data: bytes, plus: int) -> int:
    return len(data) + plus + data[0]


def fail_on(value: int) -> int:
    raise ValueError(f"step failed on {value}")


def add(*values: int) -> int:
    return sum(values)


@pytest.fixture(scope="module")
def cluster_client() -> Iterator[tuple[str, Client]]:
    with running_cluster(2) as cluster, Client(address=cluster.get_address()) as client:
        yield cluster.monitor_address, client


def succeeded_by_function(snapshot: m.StatusSnapshot) -> dict[str, int]:
    return {summary.name: summary.counts.succeeded for summary in snapshot.functions}


def test_a_chain_is_one_task_known_by_its_steps(cluster_client: tuple[str, Client]) -> None:
    monitor_address, client = cluster_client
    assert graph_chains.FUSE_CHAINS
    graph: dict[str, object] = {"plus": 1}
    for index in range(8):
        graph[f"big-{index}"] = (big, index)
        graph[f"length-{index}"] = (length, f"big-{index}", "plus")
    graph["total"] = (add, *(f"length-{index}" for index in range(8)))
    assert client.get(graph, keys=["total"]) == {"total": sum(200_000 + 1 + index for index in range(8))}
    with monitor(monitor_address) as next_snapshot:
        snapshot = next_snapshot(lambda s: succeeded_by_function(s).get("add", 0) >= 1)
    counts = succeeded_by_function(snapshot)
    assert counts.get("big > length") == 8
    assert "big" not in counts and "length" not in counts


def test_a_failing_first_step_fails_the_requested_key_with_its_own_error(cluster_client: tuple[str, Client]) -> None:
    _, client = cluster_client
    graph = {"x": (fail_on, 7), "y": (add, "x", 1), "z": (add, "y", 2)}
    future = client.get(graph, keys=["z"], block=False)["z"]
    with pytest.raises(ValueError, match="step failed on 7"):
        future.result(timeout=60)


def test_a_requested_middle_key_splits_the_chain(cluster_client: tuple[str, Client]) -> None:
    _, client = cluster_client
    graph = {"a": (add, 1, 2), "b": (add, "a", 10), "c": (add, "b", 100), "d": (add, "c", 1000)}
    assert client.get(graph, keys=["b", "d"]) == {"b": 13, "d": 1113}
