"""An actor in its processor: one instance of a class that lives between calls, its method calls run on it.

An actor's start task (`Task.actor` set; its function is the class) builds the instance, says so (ActorReady, on the
processor's link, where the scheduler then sends the actor's calls), then holds its processor's computing turn while
the actor lives: its thread serves the actor's calls (tasks with `Task.actor_id` set), which the processor's task line
hands it in the order they came (`ActorHost.wait_call`), one at a time, or up to `ActorSpec.max_concurrency` at once
on a pool of threads. Each call's result goes out on the link as it ends (`ActorHost.answer`). An ActorStop ends the
actor once the calls before it are served: the start task succeeds (its value is None). A stopped start task (its
client left, or it was killed) has TaskAbandoned raised at its wait for a call, or in its thread while a call runs;
the calls not served are answered by the scheduler, which knows the actor ended.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any, Protocol

from scaler.payload.actor_method import close_event_loop_of
from scaler.protocol import messages as m


class ActorHost(Protocol):
    """What an actor needs from its processor (`processor.threads.TaskThreads`)."""

    def wait_call(self) -> m.Task | None:
        """The actor's next call; None once it is asked to stop; raise TaskAbandoned when it was stopped."""
        ...

    def send(self, message: m.Message) -> None:
        """Send ActorReady on the processor's link."""
        ...

    def answer(self, result: m.TaskResult) -> None:
        """A call's result, on the processor's link."""
        ...


#: Runs one call on the instance: its TaskResult.
RunCall = Callable[[m.Task, Any], m.TaskResult]


def serve_actor(task: m.Task, instance: Any, host: ActorHost, run_call: RunCall) -> None:
    """Announce the actor and serve its calls until it is asked to stop (raises TaskAbandoned when stopped)."""
    assert task.actor is not None
    try:
        _serve(task, instance, host, run_call)
    finally:
        close_event_loop_of(instance)  # an async actor's loop ends with it


def _serve(task: m.Task, instance: Any, host: ActorHost, run_call: RunCall) -> None:
    assert task.actor is not None
    host.send(m.ActorReady(task.task_id))
    concurrency = max(1, task.actor.max_concurrency)
    if concurrency == 1:
        while (call := host.wait_call()) is not None:
            host.answer(run_call(call, instance))
        return
    pool = concurrent.futures.ThreadPoolExecutor(concurrency, thread_name_prefix="scaler-actor")
    stopped = True
    try:
        while (call := host.wait_call()) is not None:
            pool.submit(_serve_one, host, run_call, call, instance)
        stopped = False
    finally:
        pool.shutdown(wait=not stopped, cancel_futures=stopped)  # asked to stop: the calls before the stop end first


def _serve_one(host: ActorHost, run_call: RunCall, call: m.Task, instance: Any) -> None:
    host.answer(run_call(call, instance))
