"""Dask graphs on our scheduler: `dask.compute(*collections, scheduler=client.get)` runs a Dask graph as ONE graph.

Dask calls its scheduler as `get(dsk, keys, **options)`: `dsk` is a mapping of keys to task-spec nodes (`Task`,
`Alias`, `DataNode`, ... of `dask._task_spec`), the older tuples `(function, *args)`, or (Dask 2025 and later) an
expression whose `__dask_graph__()` is that mapping; `keys` is a key or a nested list of keys, and the answer has the
same nesting (lists become tuples, as Dask's own schedulers return it). `retries=N` (Dask's distributed option) runs a
task that raised again, in the same process, up to N more times; the options of Dask's local schedulers
(`num_workers`, `pool`, ...) mean nothing here and are ignored.

The conversion (Dask's `convert_legacy_graph` turns tuples into task-spec nodes first):
- a `DataNode` becomes data of our graph (sent inside the arguments of the calls that use it, stored once when
  large);
- a `Task` becomes a call `(_run_task, task, dependency keys, *dependencies)`: the worker calls the node with its
  dependencies' values, exactly as Dask's own executors do (`node(values)`), so nested task-spec arguments and every
  Dask version's node types run as Dask runs them;
- an `Alias` becomes a call returning its target's value.
Keys are renamed (ours must be strings: a tuple in our graph is a call), and names in errors are Dask's. Results
flow from node to node inside the cluster (large ones through object storage); only the requested keys come back.
A requested or depended-on key missing from the graph raises KeyError and a cycle graphlib.CycleError, as our `get`
does for its own graphs.
"""

from __future__ import annotations

import graphlib
import sys
from collections.abc import Callable, Hashable, Mapping
from typing import Any

#: Our names of Dask's keys: a prefix no Dask key begins with.
NAME_PREFIX = "\x00dask:"


def is_dask_call(graph: Any) -> bool:
    """A graph that Dask handed over (Dask imported, and the graph is not a plain dict of ours)."""
    spec = sys.modules.get("dask._task_spec")
    if spec is None:
        return False
    if not isinstance(graph, dict):
        return isinstance(graph, Mapping) or hasattr(graph, "__dask_graph__")
    node_type = spec.GraphNode
    return any(isinstance(value, node_type) for value in graph.values())


def compute(get: Callable[..., dict[Any, Any]], graph: Any, keys: Any, **options: Any) -> Any:
    """Run the Dask graph through our `get` (a Client's) as one graph; the values in the nesting of `keys`."""
    wanted = list(dict.fromkeys(flatten_keys(keys)))
    values = _run(get, graph, wanted, options)
    return _pack(keys, values)


def dask_get(get: Callable[..., dict[Any, Any]], graph: Any, keys: Any) -> Any:
    """`Client.dask_get`: `compute` for code that calls a Dask-style `get` without Dask's own graph types having led
    here, so Dask may be missing (ImportError naming the extra)."""
    try:
        import dask  # noqa: F401
    except ImportError:
        raise ImportError("client.dask_get needs dask: pip install 'scaler-compute[dask]'") from None
    return compute(get, graph, keys)


def submit(get: Callable[..., dict[Any, Any]], graph: Any, keys: list[Any], **options: Any) -> dict[Any, Any]:
    """Start the Dask graph through our `get` as one graph, without waiting: a future per key of `keys` (a flat
    list), by Dask key."""
    return _run(get, graph, list(dict.fromkeys(keys)), {**options, "block": False})


def flatten_keys(keys: Any) -> list[Any]:
    """The keys in a nested list of keys, in order (Dask's `__dask_keys__()` nesting)."""
    return _flatten(keys)


def _run(get: Callable[..., dict[Any, Any]], graph: Any, wanted: list[Any], options: dict[str, Any]) -> dict[Any, Any]:
    """The graph converted and run through `get` with `options`: what `get` answers for each wanted key, by Dask key."""
    from dask._task_spec import Alias, DataNode, convert_legacy_graph

    if not isinstance(graph, Mapping):
        graph = graph.__dask_graph__()
    nodes = convert_legacy_graph(dict(graph))
    names = {key: f"{NAME_PREFIX}{index}" for index, key in enumerate(nodes)}
    for key in wanted:
        if key not in names:
            raise KeyError(f"key {key!r} is not in the graph")
    retries = options.pop("retries", None) or 0
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be a whole number >= 0, not {retries!r}")
    ours: dict[Hashable, Any] = {}
    for key, node in nodes.items():
        name = names[key]
        if isinstance(node, DataNode):
            ours[name] = _as_data(node.value, names)
        elif isinstance(node, Alias):
            ours[name] = (_value_of, _name(names, node.target, key))
        else:
            dependencies = tuple(node.dependencies)
            names_of_dependencies = (_name(names, d, key) for d in dependencies)
            if retries:
                ours[name] = (_run_task_again, retries, _Constant(node), dependencies, *names_of_dependencies)
            else:
                ours[name] = (_run_task, _Constant(node), dependencies, *names_of_dependencies)
    try:
        results = get(ours, [names[key] for key in wanted], **options)
    except TypeError as error:
        raise _name_unpicklable(nodes) or error from error
    except graphlib.CycleError as error:
        by_name = {name: key for key, name in names.items()}
        cycle = [by_name.get(name, name) for name in (error.args[1] if len(error.args) > 1 else [])]
        raise graphlib.CycleError(f"the graph has a cycle through key {cycle[0] if cycle else '?'!r}", cycle) from None
    return {key: results[names[key]] for key in wanted}


def _name_unpicklable(nodes: dict[Any, Any]) -> TypeError | None:
    """A graph that could not be serialized: the error names the Dask key whose node cannot be."""
    import cloudpickle

    for key, node in nodes.items():
        try:
            cloudpickle.dumps(node)
        except Exception as error:
            return TypeError(f"cannot serialize the Dask task {key!r} ({str(node)[:200]}): {error}")
    return None


def _name(names: dict[Any, str], key: Any, needed_by: Any) -> str:
    name = names.get(key)
    if name is None:
        raise KeyError(f"key {key!r} (needed by {needed_by!r}) is not in the graph")
    return name


def _as_data(value: Any, names: dict[Any, str]) -> Any:
    """A value our graph would not take for data (a tuple starting with a callable, one of our keys, a list that
    may hold one) travels inside a call returning it. A front end's future in the graph (a collection persisted by
    `scaler.compat.dask`) is replaced by what a task receives for it (`__scaler_argument__`, which waits for it)."""
    resolve = getattr(type(value), "__scaler_argument__", None)
    if resolve is not None:
        value = resolve(value)
    if isinstance(value, (tuple, list)) or (isinstance(value, str) and value.startswith(NAME_PREFIX)):
        return (_constant, _Constant(value))
    return value


class _Constant:
    """A value passed through our graph as it is (never read as a call or a key; unhashable, so our graph never
    hashes it to look it up among its keys: hashing a Dask Task tokenizes it)."""

    __slots__ = ("value",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, value: Any) -> None:
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Constant, (self.value,))


def _constant(constant: _Constant) -> Any:
    return constant.value


def _value_of(value: Any) -> Any:
    return value


def _run_task(node: _Constant, dependencies: tuple[Any, ...], *values: Any) -> Any:
    """Runs on a worker: the Dask node, given its dependencies' values by key."""
    return node.value(dict(zip(dependencies, values, strict=True)))


def _run_task_again(retries: int, node: _Constant, dependencies: tuple[Any, ...], *values: Any) -> Any:
    """`_run_task`, run again in the same process up to `retries` more times when it raises (`compute(retries=N)`,
    as Dask's distributed scheduler runs a failed task again)."""
    for attempt in range(retries + 1):
        try:
            return _run_task(node, dependencies, *values)
        except Exception:
            if attempt == retries:
                raise
    raise AssertionError("unreachable")


def _flatten(keys: Any) -> list[Any]:
    if isinstance(keys, list):
        return [key for item in keys for key in _flatten(item)]
    return [keys]


def _pack(keys: Any, values: dict[Any, Any]) -> Any:
    if isinstance(keys, list):
        return tuple(_pack(item, values) for item in keys)
    return values[keys]
