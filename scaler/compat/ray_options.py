"""Ray's `@ray.remote` / `.options()` options that scaler does not act on: those that only tune Ray's own machinery or
placement are accepted with a warning, once per option in a process; those that would change what the code computes
or sees are refused by name, with the reason and what to use instead. And Ray's bound on the size of a remote function
or actor class (`checked_size`).
"""

from __future__ import annotations

import os
import pickle
import warnings
from collections.abc import Iterable
from typing import Any

import cloudpickle

#: Ray's bound on a pickled remote function or actor class (its FUNCTION_SIZE_ERROR_THRESHOLD, which the variable of
#: that name changes, as in Ray): past it the definition surely captured a large object.
FUNCTION_SIZE_ERROR_THRESHOLD = 100_000_000

#: Options that tune Ray's scheduler, object store or bookkeeping: a result does not depend on them, and scaler has no
#: use for them (its scheduler places tasks by capability, its object storage is not reserved per task).
TUNING = {
    "memory": "scaler does not reserve memory per task (a worker's memory limit is its own)",
    "object_store_memory": "scaler's object storage is not reserved per task",
    "accelerator_type": "scaler places tasks by capability: give the workers with that accelerator a capability and "
    "ask for it with resources={...}",
    "_labels": "labels only annotate Ray's dashboard",
    "label_selector": "scaler places tasks by capability (resources={...}), not by node labels",
    "scheduling_strategy": "scaler's scheduler places tasks itself (capabilities choose which workers may take one)",
    "enable_task_events": "scaler records every task's history anyway (a future's story)",
    "_metadata": "metadata only annotates Ray's own records",
    "_generator_backpressure_num_objects": "scaler returns a generator's values once its task has ended",
    "max_pending_calls": "scaler does not bound an actor's pending calls",
    "placement_group_capture_child_tasks": "scaler has no placement groups (see placement_group)",
}

#: Options that would change what the code computes or sees: refused, with why and what to use.
REFUSED = {
    "runtime_env": "it changes the environment the code runs in (packages, files, variables); on scaler the workers' "
    "environment is set where they start (--preload, --preimport, or a worker manager's packages)",
    "placement_group": "scaler has no placement groups (no gang reservation of workers for a set of tasks)",
    "placement_group_bundle_index": "scaler has no placement groups",
    "concurrency_groups": "scaler's actors run their calls in one group (max_concurrency threads)",
    "_node_launch_hint": "scaler's worker managers decide which workers to start from the queued tasks",
}

_warned: set[str] = set()


def checked(options: Iterable[str], supported: frozenset[str], what: str) -> None:
    """Warn once for each tuning option, and raise NotImplementedError for a refused or unknown one."""
    for option in sorted(options):
        if option in supported:
            continue
        if option in REFUSED:
            raise NotImplementedError(f"{what} option {option} is refused by scaler.compat.ray: {REFUSED[option]}")
        if option in TUNING:
            if option not in _warned:
                _warned.add(option)
                warnings.warn(
                    f"{what} option {option} is accepted and not used by scaler.compat.ray: {TUNING[option]}",
                    UserWarning,
                    stacklevel=4,
                )
            continue
        known = ", ".join(sorted(supported | TUNING.keys()))
        raise NotImplementedError(f"{what} option {option} is not supported by scaler.compat.ray (supported: {known})")


def checked_size(definition: Any, what: str) -> None:
    """ValueError naming the size when `definition` pickles to more than Ray's threshold (`what`: "The remote
    function m.f", "The actor A"), as Ray refuses it."""
    threshold = int(os.environ.get("FUNCTION_SIZE_ERROR_THRESHOLD", FUNCTION_SIZE_ERROR_THRESHOLD))
    size = len(cloudpickle.dumps(definition, protocol=pickle.HIGHEST_PROTOCOL))
    if size > threshold:
        raise ValueError(
            f"{what} is too large ({size // 2**20} MiB > FUNCTION_SIZE_ERROR_THRESHOLD={threshold // 2**20} MiB). "
            "Check that its definition is not implicitly capturing a large array or other object in scope. Tip: use "
            "ray.put() to put large objects in the object store and pass the reference."
        )
