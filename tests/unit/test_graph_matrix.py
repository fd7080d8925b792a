"""Graph preparation with python-graphblas (the `graphblas` extra) agrees with the pure-Python path."""

from __future__ import annotations

import graphlib
import operator
import random
from collections.abc import Hashable
from typing import Any

import pytest

from scaler.client import graph as graph_module
from scaler.client import graph_matrix

pytest.importorskip("graphblas", reason="the graphblas extra is not installed")


def random_dag(seed: int, size: int) -> dict[Hashable, Any]:
    rng = random.Random(seed)
    graph: dict[Hashable, Any] = {}
    for number in range(size):
        earlier = [f"n{other}" for other in rng.sample(range(number), k=min(number, rng.randrange(0, 4)))]
        graph[f"n{number}"] = (operator.add, *earlier) if earlier else number
    return graph


def assert_dependencies_first(graph: dict[Hashable, Any], order: list[Hashable]) -> None:
    position = {key: index for index, key in enumerate(order)}
    for key in order:
        for dependency in graph_module._dependencies(graph, key):
            assert position[dependency] < position[key], f"{dependency} comes after {key}"


@pytest.mark.parametrize("seed", range(10))
def test_the_matrix_path_culls_and_orders_like_the_python_path(seed: int) -> None:
    graph = random_dag(seed, 300)
    keys = [f"n{number}" for number in random.Random(seed).sample(range(300), k=3)]
    by_python = graph_module.needed_keys(graph, keys)
    by_matrix = graph_matrix.needed_keys_with_graphblas(graph, keys, graph_module._references)
    assert set(by_matrix) == set(by_python)
    assert_dependencies_first(graph, by_matrix)


def test_the_matrix_path_names_a_key_on_a_cycle() -> None:
    graph = {"a": (operator.add, "b", 1), "b": (operator.add, "c", 1), "c": (operator.add, "a", 1), "d": 1}
    with pytest.raises(graphlib.CycleError, match="cycle through key"):
        graph_matrix.needed_keys_with_graphblas(graph, ["a"], graph_module._references)


def test_large_graphs_take_the_matrix_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    original = graph_matrix.needed_keys_with_graphblas

    def counting(*args: Any) -> list[Hashable]:
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(graph_matrix, "MIN_NODES", 100)
    monkeypatch.setattr(graph_matrix, "needed_keys_with_graphblas", counting)
    graph = random_dag(1, 150)
    assert_dependencies_first(graph, graph_module.needed_keys(graph, ["n149"]))
    assert calls == [1]
    graph_module.needed_keys(random_dag(1, 50), ["n49"])
    assert calls == [1]  # a small graph stays in Python
