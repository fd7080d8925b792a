"""Preparation time of a 1,000,000-node graph (a reduction tree over 500,000 leaves): culling, cycle check and
dependency order, as `client.get` does before it submits anything.

    python benchmarks/graph_prep.py [--leaves 500000] [--repeat 3]

Measures ours with the pure-Python path, ours with the `graphblas` extra (python-graphblas), and Dask's own
preparation of the same graph (`dask.optimization.cull` then `dask.order.order`) in benchmarks/.venvs/dask when
that venv exists (`python benchmarks/run.py --systems dask` builds it).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

BUILD = """
import operator
def build(leaves):
    graph = {}
    level = []
    for i in range(leaves):
        graph[f"x-{i}"] = (abs, i)
        level.append(f"x-{i}")
    j = 0
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level), 2):
            pair = level[i:i + 2]
            key = f"s-{j}"
            j += 1
            graph[key] = (operator.add, *pair) if len(pair) == 2 else (abs, pair[0])
            nxt.append(key)
        level = nxt
    return graph, level[0]
"""

DASK = (
    BUILD
    + """
import sys, time
from dask.optimization import cull
from dask.order import order
graph, root = build(int(sys.argv[1]))
start = time.perf_counter()
culled, _ = cull(graph, [root])
order(culled)
print(time.perf_counter() - start)
"""
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    namespace: dict[str, object] = {}
    exec(BUILD, namespace)
    graph, root = namespace["build"](args.leaves)  # type: ignore[operator]
    print(f"graph of {len(graph):,} nodes")

    from scaler.client import graph as graph_module
    from scaler.client import graph_matrix

    timings: dict[str, list[float]] = {"ours, pure Python": [], "ours, graphblas extra": [], "dask": []}
    dask_python = Path(__file__).resolve().parent / ".venvs" / "dask" / "bin" / "python"
    for _ in range(args.repeat):
        start = time.perf_counter()
        _python(graph, root)
        timings["ours, pure Python"].append(time.perf_counter() - start)
        if graph_matrix.is_available():
            start = time.perf_counter()
            graph_matrix.needed_keys_with_graphblas(graph, [root], graph_module._references)
            timings["ours, graphblas extra"].append(time.perf_counter() - start)
        if dask_python.exists():
            run = subprocess.run([str(dask_python), "-c", DASK, str(args.leaves)], capture_output=True, text=True)
            timings["dask"].append(float(run.stdout.strip()))
    for name, values in timings.items():
        if values:
            print(f"{name:24} median {statistics.median(values):.2f} s  ({', '.join(f'{v:.2f}' for v in values)})")
        else:
            print(f"{name:24} not measured (not installed)")
    return 0


def _python(graph: dict[object, object], root: object) -> object:
    """The pure-Python path, even for a graph large enough for the graphblas one."""
    from scaler.client import graph_matrix

    minimum = graph_matrix.MIN_NODES
    graph_matrix.MIN_NODES = sys.maxsize
    try:
        from scaler.client import graph as graph_module

        return graph_module.needed_keys(graph, [root])  # type: ignore[arg-type]
    finally:
        graph_matrix.MIN_NODES = minimum


if __name__ == "__main__":
    raise SystemExit(main())
