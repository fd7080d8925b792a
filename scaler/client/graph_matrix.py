"""Graph preparation as sparse-matrix operations, with python-graphblas (the `graphblas` extra).

The graph's dependency edges become a boolean matrix D (D[i, j]: node i needs node j). Culling is a
breadth-first search from the requested keys (one vector-matrix product per level), and the topological
order comes level by level (Kahn's algorithm: a node is ready once all its dependencies are; one
matrix-vector product per level), which also finds cycles: nodes left over once no node is ready. The
Python work is one pass over the graph to list its edges; everything else runs in SuiteSparse:GraphBLAS.
Deep graphs (many levels) gain nothing from it and lose a lot (a product per level over the whole graph: a chain
of 200,000 calls would take many minutes), which is why `graph.needed_keys` uses it only for large graphs, only
where the extra is installed, and gives up for Python's order past `MAX_LEVELS` levels (docs/dependencies.md, the
`graphblas` extra).
"""

from __future__ import annotations

import graphlib
import importlib.util
from collections.abc import Callable, Hashable, Iterator
from typing import Any

#: Graphs with fewer nodes than this are prepared in plain Python.
MIN_NODES = 200_000
#: Graphs with more levels than this are prepared in plain Python: each level costs a product over the whole graph.
MAX_LEVELS = 64


class TooDeepError(Exception):
    """The graph has more than `MAX_LEVELS` levels of dependencies: order it in plain Python instead."""


def is_available() -> bool:
    return importlib.util.find_spec("graphblas") is not None


def needed_keys_with_graphblas(
    graph: dict[Hashable, Any],
    keys: list[Hashable],
    references: Callable[[dict[Hashable, Any], Any], list[Hashable]],
) -> list[Hashable]:
    """The requested keys and everything they depend on, dependencies first (as `graph.needed_keys`).
    `references(graph, argument)` lists the keys an argument other than a plain string names. Raises
    `TooDeepError` for a graph of more than `MAX_LEVELS` levels, before the work they would cost."""
    import graphblas as gb
    import numpy as np

    nodes = list(graph)
    index = dict(zip(nodes, range(len(nodes)), strict=True))
    rows, columns = _edges(graph, index, references)
    size = len(nodes)
    needs = gb.Matrix.from_coo(rows, columns, 1, nrows=size, ncols=size, dtype=gb.dtypes.INT64)
    reached = _reachable(gb, needs, [index[key] for key in keys], size)
    sub = needs[reached, reached].new()
    order = _levels(gb, np, sub, len(reached))
    if len(order) < len(reached):
        left = sorted(set(range(len(reached))) - set(order.tolist()))
        key = nodes[int(reached[left[0]])]
        raise graphlib.CycleError(f"the graph has a cycle through key {key!r}", [key])
    return [nodes[int(reached[position])] for position in order]


def _edges(
    graph: dict[Hashable, Any],
    index: dict[Hashable, int],
    references: Callable[[dict[Hashable, Any], Any], list[Hashable]],
) -> tuple[list[int], list[int]]:
    """(row, column) lists of the dependency edges. The one pass over the graph in Python: kept tight."""
    rows: list[int] = []
    columns: list[int] = []
    add_row, add_column, position_of = rows.append, columns.append, index.get
    for number, value in enumerate(graph.values()):
        if type(value) is not tuple or not value or not callable(value[0]):
            continue
        for argument in value[1:]:
            if type(argument) is str:
                position = position_of(argument)
                if position is not None:
                    add_row(number)
                    add_column(position)
            else:
                for key in references(graph, argument):
                    add_row(number)
                    add_column(index[key])
    return rows, columns


def _reachable(gb: Any, needs: Any, roots: list[int], size: int) -> Any:
    """Indices of the roots and every node they depend on, directly or not."""
    reached = gb.Vector.from_coo(roots, True, size=size, dtype=bool)
    frontier = reached.dup()
    for _ in _bounded_levels():
        if not frontier.nvals:
            break
        found = frontier.vxm(needs, gb.semiring.any_pair[bool]).new(mask=~reached.S)
        reached(found.S) << True
        frontier = found
    indices, _ = reached.to_coo()
    return indices


def _levels(gb: Any, np: Any, needs: Any, size: int) -> Any:
    """Node positions in dependency order, level by level (those left out are on a cycle)."""
    remaining = needs.reduce_rowwise(gb.monoid.plus).new()
    every = gb.Vector.from_coo(np.arange(size), True, size=size)
    ready = every.dup(mask=~remaining.S)
    levels = []
    for _ in _bounded_levels():
        if not ready.nvals:
            break
        positions, _ = ready.to_coo()
        levels.append(positions)
        freed = needs.mxv(ready, gb.semiring.plus_pair[gb.dtypes.INT64]).new()
        remaining(freed.S, accum=gb.binary.minus) << freed
        now_ready = remaining.select("==", 0).new(mask=freed.S)
        ready = now_ready.apply(gb.unary.one[bool]).new()
    return np.concatenate(levels) if levels else np.array([], dtype=np.int64)


def _bounded_levels() -> Iterator[int]:
    """Level numbers up to `MAX_LEVELS`, then `TooDeepError`."""
    yield from range(MAX_LEVELS + 1)
    raise TooDeepError(f"the graph has more than {MAX_LEVELS} levels of dependencies")
