"""`scaler_worker_manager symphony`: one proxy worker whose `-mtc` slots are Symphony tasks in flight."""

from __future__ import annotations

from scaler.config.sections import SymphonyWorkerManagerConfig, WorkerManagerSettings
from scaler.worker_manager.offload.proxy_units import run_offload_manager

#: slots of the proxy when -mtc is -1 (no limit)
UNLIMITED_SLOTS = 1000


def run(config: WorkerManagerSettings) -> int:
    assert isinstance(config, SymphonyWorkerManagerConfig)
    # One proxy holds every task in flight: -mtc caps the tasks in the Symphony session, not the proxies.
    slots = config.max_task_concurrency if config.max_task_concurrency > 0 else UNLIMITED_SLOTS
    return run_offload_manager(config, slots)
