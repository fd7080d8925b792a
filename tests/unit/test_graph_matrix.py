"""Graph preparation with python-graphblas (the `graphblas` extra) agrees with the pure-Python path."""

from __future__ import annotations

import graphlib
import operator
import random
from collections.abc import Hashable, Iterator
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


def chain(size: int) -> dict[Hashable, Any]:
    """n0 <- n1 <- ... : as many levels as calls."""
    graph: dict[Hashable, Any] = {"n0": 0}
    for number in range(1, size):
        graph[f"n{number}"] = (operator.add, f"n{number - 1}", 1)
    return graph


def test_the_matrix_path_gives_up_on_a_graph_deeper_than_max_levels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graph_matrix, "MAX_LEVELS", 10)
    assert len(graph_matrix.needed_keys_with_graphblas(chain(10), ["n9"], graph_module._references)) == 10
    with pytest.raises(graph_matrix.TooDeepError, match="more than 10 levels"):
        graph_matrix.needed_keys_with_graphblas(chain(11), ["n10"], graph_module._references)
    # deep by its longest path only: the root needs every call directly, so the search from it is one level deep
    shallow_search = {**chain(11), "root": (max, *[f"n{number}" for number in range(11)])}
    with pytest.raises(graph_matrix.TooDeepError):
        graph_matrix.needed_keys_with_graphblas(shallow_search, ["root"], graph_module._references)


def test_a_large_deep_graph_is_ordered_in_python_once_the_matrix_path_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    # a chain costs the matrix path one product per level (20,000 levels took 11 s there, 0.02 s in Python): it
    # stops at MAX_LEVELS, and the order comes from Python
    monkeypatch.setattr(graph_matrix, "MIN_NODES", 100)
    levels: list[int] = []
    bounded = graph_matrix._bounded_levels

    def counted() -> Iterator[int]:
        for level in bounded():
            levels.append(level)
            yield level

    monkeypatch.setattr(graph_matrix, "_bounded_levels", counted)
    order = graph_module.needed_keys(chain(2_000), ["n1999"])
    assert order == [f"n{number}" for number in range(2_000)]
    assert len(levels) == graph_matrix.MAX_LEVELS + 1  # the first search's levels, then it gave up
