"""A stand-in for Ray's own `ray` package in tests/compat_reference/test_ray_inside_tasks.py: a module of its own named
`ray` whose API says Ray has not been started, as Ray's does in a process where nobody called `ray.init()`. What the
test needs of Ray is only that: a task's function names `ray`, which the processor imports by that name (cloudpickle
pickles a module by reference), and it must be scaler.compat.ray's API there too. Ray itself (about 400 MB) is not
installed in the suite; the test was also run by hand against Ray 2.60 put after this environment on the path."""

from __future__ import annotations

from typing import Any

from ray import exceptions, util  # noqa: F401  (attributes of the package, as Ray's are)

NOT_STARTED = "Ray has not been started yet. You can start Ray with 'ray.init()'."


def _not_started(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError(NOT_STARTED)


remote = get = put = wait = cancel = kill = get_actor = method = _not_started
init = shutdown = cluster_resources = available_resources = nodes = get_gpu_ids = _not_started
get_runtime_context = _not_started


def is_initialized() -> bool:
    return False
