"""What a Slurm worker job runs: `python -m scaler.worker_manager.slurm.job_worker '<WorkerConfig as JSON>' LIMIT`.

The job script `exec`s it, so this process is the job's batch process and started when the job did. It completes
the worker's settings with what only the job knows, then runs the worker:

- its worker type `<prefix>-<job id>` (`$SLURM_JOB_ID`): the unit of its worker id, so that the manager maps the
  scheduler's drain list to jobs;
- its lifetime: LIMIT (the job's time limit in seconds; 0: none) less LEAVE_BEFORE_LIMIT_SECONDS. A worker counts
  its lifetime from its process's start, which is the job's (the script `exec`s it: the prologue's `module load`
  counts too), so it drains `lifetime_drain_seconds` before the limit and is gone before Slurm kills the job; the
  worker's own `lifetime_seconds`, when shorter, wins.
"""

from __future__ import annotations

import dataclasses
import os
import sys

#: The worker leaves this long before the job's time limit (Slurm signals a job at its limit, and its controller
#: looks for jobs past their limit every half minute or so).
LEAVE_BEFORE_LIMIT_SECONDS = 10.0


def lifetime_seconds(limit_seconds: float, configured: float) -> float:
    """The worker's lifetime in a job of this time limit (0: none): the limit less the margin, or `configured` (0:
    none) when shorter. 0: no lifetime."""
    left = max(1.0, limit_seconds - LEAVE_BEFORE_LIMIT_SECONDS) if limit_seconds > 0 else 0.0
    if configured > 0:
        return min(left, configured) if left else configured
    return left


def main() -> None:
    from scaler.config.logging_setup import setup_logging
    from scaler.config.sections import WorkerConfig, section_from_json
    from scaler.io.process_profiling import run_profiled
    from scaler.worker.process import run_worker
    from scaler.worker_manager.backend import worker_type_for_unit

    config = section_from_json(WorkerConfig, sys.argv[1])
    limit = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    job_id = os.environ.get("SLURM_JOB_ID", "")
    if job_id.isdigit():
        config = dataclasses.replace(config, worker_type=worker_type_for_unit(config.worker_type, job_id))
    config = dataclasses.replace(config, lifetime_seconds=lifetime_seconds(limit, config.lifetime_seconds))
    setup_logging(config, "worker")
    sys.exit(run_profiled("worker", lambda: run_worker(config)))


if __name__ == "__main__":
    main()
