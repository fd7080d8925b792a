"""A chain of graph nodes run as one task (scaler/client/graph_chains.py decides which): each step's result goes
straight into the next step's call, in the processor, instead of travelling as a task result (through the scheduler,
or through object storage when it is large) to a task of its own.

Lives in scaler.payload because processors unpickle it (by reference to this module) as a task's function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ChainStep:
    function: Callable[..., Any]
    #: how many of the task's positional arguments are this step's own (taken in order, after the previous steps')
    arity: int
    #: where the previous step's result goes among this step's arguments (the first step has none: -1)
    slot: int


#: Steps named one by one in a chain's name; a longer chain is named by its first ones, its last and its length.
MAX_NAMED_STEPS = 8


class ChainCall:
    """Calls its steps one after another: step i+1 gets step i's result at its `slot`, and its own arguments from
    the task's, in order. Known (in the monitor, stories, the scheduler's run times) as "first > second > last", or
    for a chain of more than MAX_NAMED_STEPS as "first > second > third > ... > last (N calls)": every task and
    stored function carries the name, so it stays short whatever the chain's length (a graph of 10,000 increments in
    a row is one chain)."""

    def __init__(self, steps: tuple[ChainStep, ...]) -> None:
        if len(steps) < 2 or steps[0].slot != -1 or any(step.slot < 0 or step.slot > step.arity for step in steps[1:]):
            raise ValueError(f"not a chain of graph nodes: {steps!r}")
        self.steps = steps
        self.__name__ = self.__qualname__ = chain_name(steps)

    def __call__(self, *args: Any) -> Any:
        first = self.steps[0]
        result = first.function(*args[: first.arity])
        position = first.arity
        for step in self.steps[1:]:
            own = list(args[position : position + step.arity])
            position += step.arity
            own.insert(step.slot, result)
            result = step.function(*own)
        return result

    def __repr__(self) -> str:
        return f"ChainCall({self.__qualname__})"


def chain_name(steps: tuple[ChainStep, ...]) -> str:
    if len(steps) <= MAX_NAMED_STEPS:
        return " > ".join(_name_of(step.function) for step in steps)
    named = [_name_of(step.function) for step in steps[:3]]
    return f"{' > '.join(named)} > ... > {_name_of(steps[-1].function)} ({len(steps):,} calls)"


def _name_of(function: Any) -> str:
    while isinstance(function, functools.partial):
        function = function.func
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    return str(name) if name else type(function).__qualname__
