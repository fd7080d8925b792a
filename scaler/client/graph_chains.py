"""Linear chains of a dict graph, run as one task each (as Dask's `fuse` of linear chains does).

A call X is run inside the task of its dependent Y when nothing else can use X's result and fusing changes neither
when X starts nor what Y's task reads from storage: X is not requested, Y is X's only dependent, X is Y's only
dependency among the calls, Y names X once, as a whole positional argument (not inside a list), and Y's other
arguments travel inside the task (client/graph.py checks this one as it encodes them: a fused task reads its
arguments when its first step starts, and a stored one might be deleted, by `client.clear()`, until Y's start).
Chains of any length form (X into Y into Z ...); the first call of a chain keeps its own dependencies. X's result
then goes straight into Y's call in the processor, instead of travelling as a task result (through the scheduler,
or through object storage when it is large) to a task of its own: U2's 250 "make a partition, group it" pairs are
250 tasks, not 500, and no partition is stored (U2 on docs/performance.md). A fused task is
known by its steps' names ("make > group"); a failing step fails it with that step's exception.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from scaler.payload.chain_call import ChainCall, ChainStep

#: Off: every call is a task of its own (the tests switch it off to show what fusing changes).
FUSE_CHAINS = True

#: The chains' runners, one per sequence of (function, arity, slot), so that a client serializes each once (its
#: function cache goes by identity). Cleared when it grows past this many.
_MAX_RUNNERS = 1_000
_runners: dict[tuple[tuple[int, int, int], ...], ChainCall] = {}

References = Callable[[dict[Hashable, Any], Any], list[Hashable]]


def fused_chains(
    graph: dict[Hashable, Any], calls: Sequence[Hashable], keys: Sequence[Hashable], references: References
) -> dict[Hashable, tuple[Hashable, ...]]:
    """The chains to fuse, by their last key: that key's chain, first to last (two keys or more). `calls`: the call
    keys to run, dependencies first; `references(graph, argument)`: the keys an argument names (client/graph.py)."""
    if not FUSE_CHAINS:
        return {}
    is_call = set(calls)
    requested = set(keys)
    only: dict[Hashable, Hashable] = {}  #: a call -> its one dependency among the calls, when it has one
    dependents: dict[Hashable, int] = {}
    for key in calls:
        found = _calls_named(graph, key, is_call, references)
        if len(found) > 1:
            found = list(dict.fromkeys(found))
        elif found:
            only[key] = found[0]
        for name in found:
            dependents[name] = dependents.get(name, 0) + 1
    into: dict[Hashable, Hashable] = {}
    for key, before in only.items():
        if before not in requested and dependents[before] == 1 and slot_of(graph, key, before, references) >= 0:
            into[before] = key
    return _chains(into)


def _calls_named(
    graph: dict[Hashable, Any], key: Hashable, is_call: set[Hashable], references: References
) -> list[Hashable]:
    """The call keys call `key` names (repeats kept), as `references` finds keys, inline for the common arguments:
    a million-node graph passes here once per node."""
    found: list[Hashable] = []
    for argument in graph[key][1:]:
        if isinstance(argument, list):
            found.extend(name for name in references(graph, argument) if name in is_call)
        elif not isinstance(argument, tuple):  # a tuple is never a key
            try:
                if argument in is_call:
                    found.append(argument)
            except TypeError:  # unhashable: not a key
                pass
    return found


def _chains(into: dict[Hashable, Hashable]) -> dict[Hashable, tuple[Hashable, ...]]:
    """The maximal chains of `into` (a call -> the call it runs in), by their last key."""
    fused_into = set(into.values())
    chains: dict[Hashable, tuple[Hashable, ...]] = {}
    for first in into:
        if first in fused_into:
            continue  # inside a chain that starts earlier
        chain = [first]
        while chain[-1] in into:
            chain.append(into[chain[-1]])
        chains[chain[-1]] = tuple(chain)
    return chains


def slot_of(graph: dict[Hashable, Any], key: Hashable, before: Hashable, references: References) -> int:
    """The position of the argument of call `key` that is the key `before`, when it names `before` exactly once and
    as a whole argument; else -1."""
    slot = -1
    for position, argument in enumerate(graph[key][1:]):
        named = references(graph, argument)
        if before not in named:
            continue
        if slot >= 0 or isinstance(argument, list) or named != [before]:
            return -1  # named twice, or inside a list
        slot = position
    return slot


def chain_runner(steps: Sequence[ChainStep]) -> ChainCall:
    """The runner of these steps (the same object for the same functions, arities and slots)."""
    key = tuple((id(step.function), step.arity, step.slot) for step in steps)
    runner = _runners.get(key)
    if runner is not None and all(old.function is new.function for old, new in zip(runner.steps, steps, strict=True)):
        return runner
    if len(_runners) >= _MAX_RUNNERS:
        _runners.clear()
    runner = _runners[key] = ChainCall(tuple(steps))
    return runner
