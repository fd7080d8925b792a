"""Task functions shipped to the workers of every system.

This module must be importable by the worker processes of every system, so `main.py` puts this directory on
PYTHONPATH before any cluster starts; the functions are then pickled by reference, the way a user's own
module would be. Keep it free of imports from the systems under test, except lazily inside the nested tasks.
"""

import os
import time
from typing import Any


def inc(x: int) -> int:
    return x + 1


def add(x: int, y: int) -> int:
    return x + y


def size_of(obj: bytes) -> int:
    return len(obj)


def burn_cpu(seconds: float) -> float:
    """Busy loop until this process has used `seconds` of CPU time (not wall time)."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return seconds


def sleep_for(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def pid_after(seconds: float) -> int:
    """Used by the warm-up to tell workers apart: sleeps a little, returns the executing process id."""
    time.sleep(seconds)
    return os.getpid()


def import_modules(names: tuple[str, ...]) -> None:
    """Ray's `worker_process_setup_hook` for U4p: import the modules each worker process should start with."""
    import importlib

    for name in names:
        importlib.import_module(name)


def fibonacci(client: Any, n: int) -> int:
    """The seed's nested-task example for Scaler-style clients: the task receives the client and submits."""
    if n == 0:
        return 0
    if n == 1:
        return 1
    a = client.submit(fibonacci, client, n - 1)
    b = client.submit(fibonacci, client, n - 2)
    return int(a.result() + b.result())


def fibonacci_dask(n: int) -> int:
    """The same recursion the way dask documents it: `worker_client()` secedes from the worker's thread pool
    while the task waits for its children and rejoins on exit. `pure=False` so that, like Scaler, every call
    is a real task (dask would otherwise deduplicate the repeated fibonacci(k) calls by key)."""
    if n == 0:
        return 0
    if n == 1:
        return 1
    from distributed import worker_client

    with worker_client() as client:
        a = client.submit(fibonacci_dask, n - 1, pure=False)
        b = client.submit(fibonacci_dask, n - 2, pure=False)
        return int(a.result() + b.result())


def fibonacci_ray(n: int) -> int:
    """The same recursion on Ray's public API: the task submits its children as remote calls and `ray.get`s them
    (Ray lends the blocked task's CPU slot out while it waits)."""
    if n < 2:
        return n
    import ray

    remote = ray.remote(num_cpus=1)(fibonacci_ray)
    return int(sum(ray.get([remote.remote(n - 1), remote.remote(n - 2)])))


def zeros(size: int) -> bytes:
    """A result of `size` bytes (the laptop-link benchmark's download)."""
    return bytes(size)
