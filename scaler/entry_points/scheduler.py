# PYTHON_ARGCOMPLETE_OK
"""`scaler_scheduler [options] BIND_ADDRESS`: run the scheduler (and, without -osa, its object storage)."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:  # the command itself, not a call from another program
        from scaler.scheduler.allocator import use_the_system_allocator

        # glibc's malloc: memory given back after a drain (allocator.py says why). The process executes itself again
        # here, so nothing else is imported before (what it imports before, it imports twice).
        use_the_system_allocator()
    from scaler.config.commands import SCHEDULER
    from scaler.config.loader import load_command

    config, _ = load_command(SCHEDULER, argv)
    from scaler.config.logging_setup import setup_logging
    from scaler.io.process_profiling import run_profiled
    from scaler.scheduler.process import run_scheduler

    setup_logging(config, "Scheduler")  # the seeds show "...: Scheduler: monitor address is ..."
    return run_profiled("scheduler", lambda: run_scheduler(config))  # SCALER_PROFILE_DIR: a cProfile at exit


if __name__ == "__main__":
    raise SystemExit(main())
