# PYTHON_ARGCOMPLETE_OK
"""`scaler_cluster [options] SCHEDULER_ADDRESS`: a fixed pool of local workers (section [cluster])."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from scaler.config.commands import CLUSTER
from scaler.config.loader import load_command
from scaler.config.sections import ClusterConfig, WorkerConfig


def worker_config_of(cluster: ClusterConfig) -> WorkerConfig:
    shared = {field.name for field in dataclasses.fields(WorkerConfig)}
    return WorkerConfig(**{name: value for name, value in dataclasses.asdict(cluster).items() if name in shared})


def main(argv: Sequence[str] | None = None) -> int:
    config, _ = load_command(CLUSTER, argv)
    from scaler.config.logging_setup import setup_logging
    from scaler.worker_manager.baremetal_native.fixed_pool import run_worker_pool

    setup_logging(config, "cluster")
    return run_worker_pool(worker_config_of(config), config.num_of_workers)


if __name__ == "__main__":
    raise SystemExit(main())
