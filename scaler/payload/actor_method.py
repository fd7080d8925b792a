"""What an actor's method call runs (`Client.actor`): the method's name, applied to the actor's instance.

A call to an actor travels as an ordinary task whose function is an `ActorMethodFunction` and whose `Task.actor_id`
names the actor: the processor that holds the actor's instance calls `ActorMethodFunction(instance, *args, **kwargs)`,
which is `instance.name(*args, **kwargs)` (an `async def` method is run to its end in an event loop of the call's
own). One object per (class, method) is made (`method_of`), so that the client stores each method once, like any
function.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any


class ActorMethodFunction:
    """Calls the named method of the instance it is given first."""

    def __init__(self, class_name: str, method: str) -> None:
        self.method = method
        self.__name__ = method
        self.__qualname__ = f"{class_name}.{method}"  #: how its tasks are named in the monitor and stories

    def __call__(self, instance: Any, *args: Any, **kwargs: Any) -> Any:
        result = getattr(instance, self.method)(*args, **kwargs)
        if inspect.iscoroutine(result):  # an `async def` method: run to its end here, in a loop of its own
            return asyncio.run(result)
        return result

    def __reduce__(self) -> tuple[Any, ...]:
        class_name = self.__qualname__.rpartition(".")[0]
        return (ActorMethodFunction, (class_name, self.method))

    def __repr__(self) -> str:
        return f"<actor method {self.__qualname__}>"


_methods: dict[tuple[str, str], ActorMethodFunction] = {}
_lock = threading.Lock()


def method_of(class_name: str, method: str) -> ActorMethodFunction:
    """The one `ActorMethodFunction` of this process for the class's method."""
    key = (class_name, method)
    found = _methods.get(key)
    if found is None:
        with _lock:
            found = _methods.setdefault(key, ActorMethodFunction(class_name, method))
    return found
