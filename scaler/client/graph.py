"""Dict graphs for `Client.get`: cull, validate, and encode as one GraphTask the scheduler runs (the client
sends it and makes the futures).

A graph maps keys to values. A tuple whose first element is callable is a call: `(fn, arg, ...)`;
an argument that is a key of the graph stands for that key's value (also inside lists), and a call nested in
the arguments runs as a node of its own (`with_nested_calls_lifted`), as in Dask's graphs; anything else is
passed as it is. Every other value, bare functions included, is data.

Only the keys the requested ones need are sent. Data is sent inside the arguments of the calls that
use it; calls become graph nodes whose results flow from node to node inside the cluster, and only
the requested results come back to the client. A linear chain of calls is one node (graph_chains.py).
"""

from __future__ import annotations

import graphlib
import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from scaler.client import graph_chains, graph_matrix
from scaler.payload.chain_call import ChainStep
from scaler.payload.references import NodeResult
from scaler.payload.task_encoder import TaskEncoder
from scaler.protocol import messages as m
from scaler.protocol.ids import ClientID, TaskID, new_graph_id, new_task_id

T = TypeVar("T")
#: A chain's step before it is one: (function, how many arguments of its own, where the previous result goes)
Step = tuple[Any, int, int]


def is_call(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) > 0 and callable(value[0])


def with_nested_calls_lifted(graph: dict[Hashable, Any]) -> dict[Hashable, Any]:
    """The graph with each call nested in another call's arguments (also inside lists), `(add, (inc, "x"), "y")`,
    made a key of its own that the outer call names, as Dask's get runs it; the graph itself when it has none."""
    nested = [key for key, value in graph.items() if is_call(value) and any(_holds_call(a) for a in value[1:])]
    if not nested:
        return graph
    lifted = dict(graph)
    names = itertools.count()

    def lift(argument: Any) -> Any:
        if is_call(argument):
            name = f"\x00nested:{next(names)}"
            while name in lifted:
                name = f"\x00nested:{next(names)}"
            lifted[name] = (argument[0], *(lift(inner) for inner in argument[1:]))
            return name
        if isinstance(argument, list):
            return [lift(item) for item in argument]
        return argument

    for key in nested:
        function, *arguments = graph[key]
        lifted[key] = (function, *(lift(argument) for argument in arguments))
    return lifted


def _holds_call(argument: Any) -> bool:
    if is_call(argument):
        return True
    return isinstance(argument, list) and any(_holds_call(item) for item in argument)


def _references(graph: dict[Hashable, Any], argument: Any) -> list[Hashable]:
    """Keys an argument names, looking inside lists."""
    if isinstance(argument, list):
        return [key for item in argument for key in _references(graph, item)]
    if isinstance(argument, Hashable) and not isinstance(argument, tuple) and argument in graph:
        return [argument]
    return []


def needed_keys(graph: dict[Hashable, Any], keys: list[Hashable]) -> list[Hashable]:
    """The requested keys and everything they depend on, dependencies first. Raises KeyError for a
    requested key that is not in the graph or requested twice, and graphlib.CycleError (a ValueError) for a
    cycle, naming the key."""
    seen_keys: set[Hashable] = set()
    for key in keys:
        if key not in graph:
            raise KeyError(f"key {key!r} is not in the graph")
        if key in seen_keys:
            raise KeyError(f"key {key!r} is requested twice")
        seen_keys.add(key)
    if len(graph) >= graph_matrix.MIN_NODES and graph_matrix.is_available():
        try:
            return graph_matrix.needed_keys_with_graphblas(graph, keys, _references)
        except graph_matrix.TooDeepError:
            pass  # a deep graph (a long chain): the order below takes linear time where the matrices would not
    order: list[Hashable] = []
    state: dict[Hashable, str] = {}  # "visiting" or "done"
    for root in keys:
        stack: list[tuple[Hashable, list[Hashable]]] = [(root, _dependencies(graph, root))]
        if state.get(root) == "done":
            continue
        state[root] = "visiting"
        while stack:
            key, pending = stack[-1]
            if not pending:
                stack.pop()
                state[key] = "done"
                order.append(key)
                continue
            dependency = pending.pop()
            seen = state.get(dependency)
            if seen == "visiting":
                cycle = [item for item, _ in stack[[item for item, _ in stack].index(dependency) :]] + [dependency]
                raise graphlib.CycleError(f"the graph has a cycle through key {dependency!r}", cycle)
            if seen is None:
                state[dependency] = "visiting"
                stack.append((dependency, _dependencies(graph, dependency)))
    return order


def _dependencies(graph: dict[Hashable, Any], key: Hashable) -> list[Hashable]:
    value = graph[key]
    if type(value) is not tuple or not value or not callable(value[0]):
        return []
    dependencies: list[Hashable] = []
    for argument in value[1:]:
        if type(argument) is str:  # the common case, checked first: graphs of a million nodes pass here
            if argument in graph:
                dependencies.append(argument)
        else:
            dependencies.extend(_references(graph, argument))
    return dependencies


@dataclass(frozen=True)
class EncodedGraph:
    """A graph ready to send: the GraphTask of its calls (None when the requested keys need no call), and which
    task each call became."""

    message: m.GraphTask | None
    node_ids: dict[Hashable, TaskID]


def encode_graph(
    graph: dict[Hashable, Any],
    keys: list[Hashable],
    encoder: TaskEncoder,
    client_id: ClientID,
    *,
    profiling: bool,
    stream_output: bool,
    priority: int,
    capabilities: m.Capabilities,
    reserialize: bool = False,
) -> EncodedGraph:
    """Cull `graph` to what `keys` need and encode its calls as one GraphTask (functions and data through
    `encoder`, as a submission's are; every node with the given settings)."""
    order = needed_keys(graph, list(keys))
    graph_id = new_graph_id()
    calls = [key for key in order if is_call(graph[key])]
    chains = graph_chains.fused_chains(graph, calls, list(keys), _references)
    inside = {key for chain in chains.values() for key in chain[:-1]}  # run in the task of their chain's last key
    node_ids: dict[Hashable, TaskID] = {key: new_task_id() for key in calls}
    nodes: list[m.Task] = []

    def add(key: Hashable, arguments: list[m.Argument], dependencies: list[TaskID], steps: list[Step]) -> None:
        runner = graph_chains.chain_runner([ChainStep(*step) for step in steps]) if len(steps) > 1 else steps[0][0]
        nodes.append(
            encoder.task(
                node_ids[key],
                _named(key, encoder.function, runner, refresh=reserialize),
                tuple(arguments),
                profiling=profiling,
                stream_output=stream_output,
                priority=priority,
                capabilities=capabilities,
                graph_id=graph_id,
                dependencies=tuple(dict.fromkeys(dependencies)),
            )
        )
        inside.discard(key)  # a task of its own after all (the chain was cut after it)

    for key in calls:
        if key in inside:
            continue
        chain = chains.get(key) or (key,)
        function, arguments, dependencies = _encode_call(graph, node_ids, chain[0], -1, encoder)
        steps: list[Step] = [(function, len(arguments), -1)]
        for before, step_key in itertools.pairwise(chain) if len(chain) > 1 else ():
            slot = graph_chains.slot_of(graph, step_key, before, _references)
            function, own, used = _encode_call(graph, node_ids, step_key, slot, encoder)
            if any(argument.kind is not m.ArgumentKind.INLINE for argument in own):  # stored: cut the chain here
                add(before, arguments, dependencies, steps)
                own.insert(slot, m.Argument(m.ArgumentKind.TASK_RESULT, node_ids[before]))
                arguments, dependencies, steps = own, [node_ids[before], *used], [(function, len(own), -1)]
                continue
            arguments.extend(own)
            dependencies.extend(used)
            steps.append((function, len(own), slot))
        add(chain[-1], arguments, dependencies, steps)
    for key in inside:
        del node_ids[key]
    if not nodes:
        return EncodedGraph(None, node_ids)
    targets = tuple(node_ids[key] for key in dict.fromkeys(keys) if key in node_ids)
    return EncodedGraph(m.GraphTask(graph_id, client_id, tuple(nodes), targets), node_ids)


def _encode_call(
    graph: dict[Hashable, Any], node_ids: dict[Hashable, TaskID], key: Hashable, slot: int, encoder: TaskEncoder
) -> tuple[Any, list[m.Argument], list[TaskID]]:
    """A call's function, its arguments encoded but the one at `slot` (the previous step's result, when the call is a
    chain's step after the first; -1: none), and the results it names."""
    function, *arguments = graph[key]
    encoded: list[m.Argument] = []
    dependencies: list[TaskID] = []
    for position, argument in enumerate(arguments):
        if position == slot:
            continue
        resolved, used = _resolve(graph, node_ids, argument)
        dependencies.extend(used)
        if isinstance(resolved, NodeResult):
            encoded.append(m.Argument(m.ArgumentKind.TASK_RESULT, resolved.task_id))
        else:
            encoded.append(_named(key, encoder.argument, resolved, "", position))
    return function, encoded, dependencies


def _named(key: Hashable, encode: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`encode(*args, **kwargs)`; its TypeError (what cannot be serialized) also names the graph's key."""
    try:
        return encode(*args, **kwargs)
    except TypeError as error:
        raise TypeError(f"graph key {key!r}: {error}") from error


def _resolve(graph: dict[Hashable, Any], node_ids: dict[Hashable, TaskID], argument: Any) -> tuple[Any, list[TaskID]]:
    """The argument with graph keys replaced: data by its value, calls by a NodeResult placeholder."""
    if isinstance(argument, list):
        items, used = [], []
        for item in argument:
            resolved, item_used = _resolve(graph, node_ids, item)
            items.append(resolved)
            used.extend(item_used)
        return items, used
    if isinstance(argument, Hashable) and not isinstance(argument, tuple) and argument in graph:
        if argument in node_ids:
            return NodeResult(node_ids[argument]), [node_ids[argument]]
        return graph[argument], []
    return argument, []
