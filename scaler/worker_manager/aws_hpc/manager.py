"""`scaler_worker_manager aws_hpc`: proxy workers of `--max-concurrent-jobs` slots each, as many as the
scheduler's target needs (`-mtc` caps the jobs in flight over all proxies)."""

from __future__ import annotations

from scaler.config.sections import AWSHPCWorkerManagerConfig, WorkerManagerSettings
from scaler.worker_manager.offload.proxy_units import run_offload_manager


def run(config: WorkerManagerSettings) -> int:
    assert isinstance(config, AWSHPCWorkerManagerConfig)
    return run_offload_manager(config, config.max_concurrent_jobs)
