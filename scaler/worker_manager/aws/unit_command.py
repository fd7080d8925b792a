"""The command a cloud unit runs: a pool of workers of one manager, connected straight to the scheduler."""

from __future__ import annotations

import shlex

from scaler.config.sections import section_to_json
from scaler.worker_manager.aws.unit_keys import without_key_paths
from scaler.worker_manager.backend import LaunchSpec

#: The module a unit runs (docs/worker_managers.md shows the container image that provides it).
POOL_MODULE = "scaler.worker_manager.baremetal_native.fixed_pool"


def pool_argv(spec: LaunchSpec, unit_id: str, workers: int, python: str = "python3") -> list[str]:
    """`python3 -m ...fixed_pool '<WorkerConfig>' N`: N workers whose ids carry the unit id."""
    # the manager's key file paths mean nothing on the unit: its workers read the keys' text (unit_keys.py)
    config = without_key_paths(spec.worker_config(unit_id))
    return [python, "-m", POOL_MODULE, section_to_json(config), str(workers)]


def pool_command(spec: LaunchSpec, unit_id: str, workers: int, python: str = "python3") -> str:
    """The same, as one line for `sh -c` (ECS's COMMAND, EC2's user data)."""
    return shlex.join(pool_argv(spec, unit_id, workers, python))
