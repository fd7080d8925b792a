"""Running a worker manager type: the code its row of `scaler.config.manager_types.MANAGER_TYPES` names.

The command line, `scaler FILE` and the launcher's child processes all dispatch through `run_worker_manager`.
A row names its runner and offload backend as "module:function"; they are imported here, only when their type
runs, so a cloud SDK is never imported by a local stack (`tests/unit/test_manager_types.py` checks it).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import socket
from collections.abc import Callable
from typing import cast

from scaler.config.manager_types import ManagerType, manager_type_of, missing_extra
from scaler.config.sections import WorkerManagerSettings
from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.security.find import with_discovered_keys
from scaler.security.key_files import KeyFileError
from scaler.worker_manager.offload.backend import OffloadBackend

logger = logging.getLogger(__name__)

Runner = Callable[[WorkerManagerSettings], int]
BackendFactory = Callable[[WorkerManagerSettings], OffloadBackend]


def load_function(path: str) -> Callable[..., object]:
    """The function a "module:function" path names (its module imported now)."""
    module_name, _, function_name = path.partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    if not callable(function):
        raise TypeError(f"{path} is not a function")
    return cast(Callable[..., object], function)


def runner_of(row: ManagerType) -> Runner:
    return cast(Runner, load_function(row.runner))


def offload_backend_factory(row: ManagerType) -> BackendFactory:
    """How an offloading type makes its backend from its settings."""
    if row.offload is None:
        raise ValueError(f"worker manager type {row.name!r} does not offload tasks")
    return cast(BackendFactory, load_function(row.offload.backend))


def with_manager_id(config: WorkerManagerSettings) -> WorkerManagerSettings:
    """A manager started without --worker-manager-id is `<type>@<host name>` (stable across restarts,
    so it adopts its workers; a second one on the same host is refused as a duplicate, with a message)."""
    if config.worker_manager_id:
        return config
    return dataclasses.replace(config, worker_manager_id=f"{manager_type_of(config).name}@{socket.gethostname()}")


def run_worker_manager(config: WorkerManagerSettings) -> int:
    """Run the manager these settings describe; its exit code (2, saying so in one line, when the extra its type
    needs is not installed)."""
    problem = missing_extra(manager_type_of(config))
    if problem is not None:
        logger.error("%s", problem)
        return EXIT_CONFIGURATION
    config = with_manager_id(config)
    try:  # no key settings: the keys of a local server's connection file, for the manager and its workers
        config = with_discovered_keys(config, config.scheduler_address, "worker")
    except KeyFileError as error:
        logger.error("%s", error)
        return EXIT_CONFIGURATION
    return runner_of(manager_type_of(config))(config)
