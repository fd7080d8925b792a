"""One proxy worker: `python -m scaler.worker_manager.offload.proxy_process '<WorkerConfig>' TYPE '<settings>'`.

The proxy registers with the scheduler as one worker with `slots` task slots and runs each task as a job of
the remote system its manager type's row names (`ManagerType.offload`), through `OffloadExecutor`. Its jobs are
named after its worker type (`<prefix>-<unit id>`), so the manager can find and cancel them if the proxy dies.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

from scaler.config.manager_types import MANAGER_TYPES, ManagerType, manager_type_of
from scaler.config.sections import WorkerConfig, WorkerManagerSettings, section_from_json
from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.worker_manager.offload.backend import JobOutcome, OffloadBackend, OffloadError, RemoteJob
from scaler.worker_manager.registry import offload_backend_factory

logger = logging.getLogger(__name__)


class RetryingBackend:
    """Stands in for a backend that could not be made when the proxy started: each submission tries to make it
    again (at most every RETRY_SECONDS) and, while that fails, the tasks fail with the reason. A proxy that exited
    instead would be started again and again by its manager while the tasks waited for it forever."""

    RETRY_SECONDS = 10.0

    def __init__(self, row: ManagerType, settings: WorkerManagerSettings, reason: str) -> None:
        assert row.offload is not None
        self.name = row.offload.system_name
        self._factory = offload_backend_factory(row)
        self._settings = settings
        self._reason = reason
        self._backend: OffloadBackend | None = None
        self._tried_at = time.monotonic()
        self._lock = threading.Lock()

    @property
    def batch_window_seconds(self) -> float:
        return self._backend.batch_window_seconds if self._backend is not None else 0.0

    @property
    def poll_interval_seconds(self) -> float:
        return self._backend.poll_interval_seconds if self._backend is not None else 1.0

    def submit(self, jobs: list[RemoteJob]) -> None:
        with self._lock:
            if self._backend is None and time.monotonic() - self._tried_at >= self.RETRY_SECONDS:
                self._tried_at = time.monotonic()
                try:
                    self._backend = self._factory(self._settings)
                    logger.info("%s is usable again", self.name)
                except OffloadError as error:
                    self._reason = str(error)
            backend = self._backend
        if backend is None:
            raise OffloadError(self._reason)
        backend.submit(jobs)

    def poll(self) -> list[JobOutcome]:
        return self._backend.poll() if self._backend is not None else []

    def cancel(self, key: str, reason: str) -> None:
        if self._backend is not None:
            self._backend.cancel(key, reason)

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()

    def cancel_orphans(self, key_prefix: str) -> int:
        return self._backend.cancel_orphans(key_prefix) if self._backend is not None else 0


def run_proxy(worker: WorkerConfig, settings: WorkerManagerSettings, slots: int) -> int:
    """Run one proxy of the offloading type `settings` are of until it stops; its exit code."""
    from scaler.io.sockets import SocketFactory
    from scaler.object_storage.connection import ObjectStorageConnection
    from scaler.protocol.ids import new_worker_id
    from scaler.security.find import find_keys
    from scaler.security.key_files import KeyFileError
    from scaler.worker.process import check_worker_config, run_agent
    from scaler.worker_manager.offload.executor import OffloadExecutor

    problem = check_worker_config(worker)
    if problem is not None:
        logger.error("%s", problem)
        return EXIT_CONFIGURATION
    try:
        security = find_keys("worker", worker.scheduler_address, worker).security
    except KeyFileError as error:
        logger.error("%s", error)
        return EXIT_CONFIGURATION
    row = manager_type_of(settings)
    backend: OffloadBackend
    try:
        backend = offload_backend_factory(row)(settings)
    except OffloadError as error:  # the manager checked at its start: this changed since (a bucket deleted ...)
        logger.error("%s; the tasks sent here fail with this error until it is fixed", error)
        backend = RetryingBackend(row, settings, str(error))
    storage_sockets = SocketFactory(1, security)

    def object_storage(address: str) -> ObjectStorageConnection:
        return ObjectStorageConnection(address, role="offload-proxy", sockets=storage_sockets)

    worker_id = new_worker_id(worker.worker_type)
    executor = OffloadExecutor(backend, object_storage, key_prefix=worker.worker_type)
    try:
        return run_agent(worker, worker_id, executor, slots, security)
    finally:
        storage_sockets.close()


def main() -> None:
    worker = section_from_json(WorkerConfig, sys.argv[1])
    settings = section_from_json(MANAGER_TYPES[sys.argv[2]].section, sys.argv[3])
    slots = int(sys.argv[4])
    from scaler.config.logging_setup import setup_logging

    setup_logging(worker, "worker")
    sys.exit(run_proxy(worker, settings, slots))


if __name__ == "__main__":
    main()
