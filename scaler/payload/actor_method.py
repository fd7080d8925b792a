"""What an actor's method call runs (`Client.actor`): the method's name, applied to the actor's instance.

A call to an actor travels as an ordinary task whose function is an `ActorMethodFunction` and whose `Task.actor_id`
names the actor: the processor that holds the actor's instance calls `ActorMethodFunction(instance, *args, **kwargs)`,
which is `instance.name(*args, **kwargs)`. One object per (class, method) is made (`method_of`), so that the client
stores each method once, like any function.

An instance of a class with `async def` methods (an async actor, as Ray names it) has an event loop of its own, in a
thread of its own, made at its first call: its coroutines run there, each to its end, so that the asyncio objects it
keeps (an `asyncio.Event` made in `__init__`, a lock) work across calls, and calls that run at once
(`max_concurrency` > 1) take turns at their `await`s, as in Ray. Its plain methods run in the call's thread (Ray runs
them in the loop too), which then wakes the loop, so that an `asyncio.Event` such a method set reaches the coroutines
waiting on it. `close_event_loop_of` ends the loop with the actor.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import weakref
from collections.abc import Coroutine
from typing import Any


class ActorMethodFunction:
    """Calls the named method of the instance it is given first."""

    def __init__(self, class_name: str, method: str) -> None:
        self.method = method
        self.__name__ = method
        self.__qualname__ = f"{class_name}.{method}"  #: how its tasks are named in the monitor and stories

    def __call__(self, instance: Any, *args: Any, **kwargs: Any) -> Any:
        result = getattr(instance, self.method)(*args, **kwargs)
        if not has_async_methods(type(instance)):
            if inspect.iscoroutine(result):  # a coroutine from a plain method: run to its end in a loop of its own
                return asyncio.run(result)
            return result
        loop = _event_loop_of(instance)
        if inspect.iscoroutine(result):
            return loop.run(result)
        loop.wake()  # a plain method ran in this thread: what it set (an asyncio.Event) reaches the waiting coroutines
        return result

    def __reduce__(self) -> tuple[Any, ...]:
        class_name = self.__qualname__.rpartition(".")[0]
        return (ActorMethodFunction, (class_name, self.method))

    def __repr__(self) -> str:
        return f"<actor method {self.__qualname__}>"


_methods: dict[tuple[str, str], ActorMethodFunction] = {}
_lock = threading.Lock()


def has_async_methods(cls: type) -> bool:
    """Whether the class has an `async def` method (its instances are async actors)."""
    found = _async_classes.get(cls)
    if found is None:
        found = _async_classes[cls] = any(inspect.iscoroutinefunction(value) for _, value in inspect.getmembers(cls))
    return found


#: whether each class met has an `async def` method (weakly: classes defined in tasks come and go)
_async_classes: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


class _InstanceLoop:
    """An async actor's event loop, running in a thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="scaler-actor-loop", daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def wake(self) -> None:
        """Have the loop look at its ready callbacks: those an asyncio object scheduled from another thread."""
        self.loop.call_soon_threadsafe(_nothing)

    def close(self) -> None:
        def stop() -> None:
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self.loop.stop()

        self.loop.call_soon_threadsafe(stop)
        self.thread.join(timeout=5.0)
        if not self.thread.is_alive():
            self.loop.close()


def _nothing() -> None:
    pass


#: the event loops of the async actors of this process, by the id of their instance
_loops: dict[int, _InstanceLoop] = {}


def _event_loop_of(instance: Any) -> _InstanceLoop:
    with _lock:
        loop = _loops.get(id(instance))
        if loop is None:
            loop = _loops[id(instance)] = _InstanceLoop()
        return loop


def close_event_loop_of(instance: Any) -> None:
    """End the event loop of an async actor's instance (its coroutines still waiting are cancelled); nothing for
    another instance."""
    with _lock:
        loop = _loops.pop(id(instance), None)
    if loop is not None:
        loop.close()


def method_of(class_name: str, method: str) -> ActorMethodFunction:
    """The one `ActorMethodFunction` of this process for the class's method."""
    key = (class_name, method)
    found = _methods.get(key)
    if found is None:
        with _lock:
            found = _methods.setdefault(key, ActorMethodFunction(class_name, method))
    return found
