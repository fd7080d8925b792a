# PYTHON_ARGCOMPLETE_OK
"""`scaler_scheduler [options] BIND_ADDRESS`: run the scheduler (and, without -osa, its object storage)."""

from __future__ import annotations

from collections.abc import Sequence

from scaler.config.loader import load_section
from scaler.config.sections import SchedulerConfig


def main(argv: Sequence[str] | None = None) -> int:
    config = load_section(
        SchedulerConfig,
        argv,
        prog="scaler_scheduler",
        description="Run the scheduler: clients, workers and worker managers connect to its address.",
        toml_sections=["scheduler"],
    )
    from scaler.config.logging_setup import setup_logging
    from scaler.scheduler.process import run_scheduler

    setup_logging(config, "Scheduler")  # the seeds show "...: Scheduler: monitor address is ..."
    return run_scheduler(config)


if __name__ == "__main__":
    raise SystemExit(main())
