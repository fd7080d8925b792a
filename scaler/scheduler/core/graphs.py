"""Bookkeeping of task graphs (DAGs): which nodes wait on which, and which results are still needed.

A graph's nodes are ordinary task records in the task table (state WAITING until their dependencies
succeed); this module only tracks the edges. Invariants of a live graph:
- `live` holds the nodes that have not ended; the graph is dropped when it is empty.
- `missing[n]` counts the dependencies of n that have not succeeded yet, for every live waiting n.
- `results[d]` is kept while some dependent of d has not ended (a re-dispatched dependent needs it
  again); then it is released, and its object deleted unless d is a target the client will fetch.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from scaler.protocol.ids import ClientID, GraphID, TaskID
from scaler.protocol.messages import GraphTask, PayloadKind, TaskInput, TaskResult
from scaler.scheduler.core.shrink_rule import ShrinkRule, rebuild


@dataclass(slots=True)
class GraphRecord:
    graph_id: GraphID
    client_id: ClientID
    targets: frozenset[TaskID]
    dependencies: dict[TaskID, tuple[TaskID, ...]]
    dependents: dict[TaskID, list[TaskID]]
    live: set[TaskID]
    missing: dict[TaskID, int]
    results: dict[TaskID, TaskInput] = field(default_factory=dict)
    uses_left: dict[TaskID, int] = field(default_factory=dict)
    canceled: bool = False


def graph_problem(graph: GraphTask) -> str | None:
    """Why a graph cannot run (duplicate node, unknown dependency or target, cycle), or None."""
    ids = [node.task_id for node in graph.nodes]
    known = set(ids)
    if len(known) != len(ids):
        return "the graph has two nodes with the same task id"
    for node in graph.nodes:
        for dependency in node.dependencies:
            if dependency not in known:
                return f"node {node.function_name or node.task_id.hex()} depends on a task that is not in the graph"
    for target in graph.targets:
        if target not in known:
            return f"target {target.hex()} is not a node of the graph"
    return None if _is_acyclic(graph) else "the graph has a cycle"


def _is_acyclic(graph: GraphTask) -> bool:
    """Kahn's algorithm: every node must come out in a topological order."""
    missing = {node.task_id: len(set(node.dependencies)) for node in graph.nodes}
    dependents: dict[TaskID, list[TaskID]] = {}
    for node in graph.nodes:
        for dependency in set(node.dependencies):
            dependents.setdefault(dependency, []).append(node.task_id)
    ready = deque(task_id for task_id, count in missing.items() if count == 0)
    ordered = 0
    while ready:
        current = ready.popleft()
        ordered += 1
        for dependent in dependents.get(current, ()):
            missing[dependent] -= 1
            if missing[dependent] == 0:
                ready.append(dependent)
    return ordered == len(graph.nodes)


def _each_once(dependencies: tuple[TaskID, ...]) -> tuple[TaskID, ...]:
    """A node's dependencies, each once: the submitted tuple itself when it names each once (the node's Task sent to a
    worker is made again with it: task_table.task_of)."""
    once = tuple(dict.fromkeys(dependencies))
    return dependencies if len(once) == len(dependencies) else once


class GraphRegistry:
    def __init__(self) -> None:
        self.graphs: dict[GraphID, GraphRecord] = {}
        self._shrink = ShrinkRule()  #: rebuilds `graphs` once far fewer are live than at its peak

    def __len__(self) -> int:
        return len(self.graphs)

    def get(self, graph_id: GraphID) -> GraphRecord | None:
        return self.graphs.get(graph_id)

    def register(self, graph: GraphTask) -> GraphRecord:
        dependencies = {node.task_id: _each_once(node.dependencies) for node in graph.nodes}
        dependents: dict[TaskID, list[TaskID]] = {}
        for node_id, needed in dependencies.items():
            for dependency in needed:
                dependents.setdefault(dependency, []).append(node_id)
        record = GraphRecord(
            graph_id=graph.graph_id,
            client_id=graph.client_id,
            targets=frozenset(graph.targets),
            dependencies=dependencies,
            dependents=dependents,
            live=set(dependencies),
            missing={node_id: len(needed) for node_id, needed in dependencies.items()},
        )
        self.graphs[graph.graph_id] = record
        return record

    def succeeded(self, graph: GraphRecord, node: TaskID, result: TaskResult) -> tuple[list[TaskID], list[TaskInput]]:
        """Record a node's success. Returns the dependents that became ready, and the result itself
        when no live node needs it (so the caller can release it at once)."""
        kind = PayloadKind.OBJECT_ID if result.payload_kind is PayloadKind.OBJECT_ID else PayloadKind.INLINE
        given = TaskInput(node, kind, result.payload)
        users = [user for user in graph.dependents.get(node, ()) if user in graph.live]
        if not users or graph.canceled:
            return [], [given]
        graph.results[node] = given
        graph.uses_left[node] = len(users)
        ready: list[TaskID] = []
        for user in users:
            if user in graph.missing:
                graph.missing[user] -= 1
                if graph.missing[user] == 0:
                    del graph.missing[user]
                    ready.append(user)
        return ready, []

    def inputs_of(self, graph: GraphRecord, node: TaskID) -> tuple[TaskInput, ...]:
        return tuple(graph.results[dependency] for dependency in graph.dependencies[node])

    def ended(self, graph: GraphRecord, node: TaskID) -> list[TaskInput]:
        """A node left the table (any outcome). Returns results nobody needs any more."""
        graph.live.discard(node)
        graph.missing.pop(node, None)
        released = []
        for dependency in graph.dependencies.get(node, ()):
            if dependency in graph.uses_left:
                graph.uses_left[dependency] -= 1
                if graph.uses_left[dependency] <= 0:
                    del graph.uses_left[dependency]
                    released.append(graph.results.pop(dependency))
        if not graph.live:
            released.extend(graph.results.values())
            graph.results.clear()
            graph.uses_left.clear()
            if self._shrink.due(len(self.graphs)):
                rebuild(self.graphs)
            del self.graphs[graph.graph_id]
        return released

    def downstream(self, graph: GraphRecord, node: TaskID) -> list[TaskID]:
        """Every live node that depends on `node`, directly or not, in breadth-first order."""
        seen: set[TaskID] = set()
        order: list[TaskID] = []
        pending = deque(graph.dependents.get(node, ()))
        while pending:
            current = pending.popleft()
            if current in seen:
                continue
            seen.add(current)
            if current in graph.live:
                order.append(current)
            pending.extend(graph.dependents.get(current, ()))
        return order
