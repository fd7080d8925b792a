"""One component of a stack secured with the test CURVE security (`tests/curve_security.py`), started the way
issue 11's commands will start them: the component's process function with a `TransportSecurity`.

    python -m tests.integration.secured_component storage|scheduler|worker KEYS_DIR ADDRESS [STORAGE_ADDRESS]

KEYS_DIR holds `server`, `worker` and `client` certificates; servers authorise every public key in it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from scaler.config.logging_setup import setup_logging
from scaler.config.sections import ObjectStorageServerConfig, SchedulerConfig, WorkerConfig
from scaler.object_storage.server import run_object_storage_server
from scaler.scheduler.process import run_scheduler
from scaler.worker.process import run_worker
from tests.curve_security import CurveForTheSeam, authorized_keys, curve_keys


def main(role: str, keys_dir: Path, address: str, storage_address: str = "") -> int:
    server_public, _ = curve_keys(keys_dir, "server")
    if role == "storage":
        security = CurveForTheSeam(curve_keys(keys_dir, "server"), server_public, authorized_keys(keys_dir))
        return run_object_storage_server(ObjectStorageServerConfig(bind_address=address), security)
    if role == "scheduler":
        config = SchedulerConfig(bind_address=address, object_storage_address=storage_address, logging_level="INFO")
        setup_logging(config, "scheduler")
        security = CurveForTheSeam(curve_keys(keys_dir, "server"), server_public, authorized_keys(keys_dir))
        return run_scheduler(config, security)
    if role == "worker":
        worker_config = WorkerConfig(scheduler_address=address, heartbeat_interval_seconds=0.5, logging_level="INFO")
        setup_logging(worker_config, "worker")
        return run_worker(worker_config, security=CurveForTheSeam(curve_keys(keys_dir, "worker"), server_public))
    raise SystemExit(f"unknown role {role!r}: storage, scheduler or worker")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], Path(sys.argv[2]), *sys.argv[3:]))
