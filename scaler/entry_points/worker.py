# PYTHON_ARGCOMPLETE_OK
"""`scaler_worker [options] SCHEDULER_ADDRESS`: one worker process."""

from __future__ import annotations

from collections.abc import Sequence

from scaler.config.commands import WORKER
from scaler.config.loader import load_command


def main(argv: Sequence[str] | None = None) -> int:
    config, _ = load_command(WORKER, argv)
    from scaler.config.logging_setup import setup_logging
    from scaler.worker.process import run_worker

    setup_logging(config, "worker")
    return run_worker(config)


if __name__ == "__main__":
    raise SystemExit(main())
