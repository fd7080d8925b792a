# PYTHON_ARGCOMPLETE_OK
"""`scaler_worker_manager TYPE [options] SCHEDULER_ADDRESS`: start a worker manager of one type."""

from __future__ import annotations

from collections.abc import Sequence

from scaler.config.loader import load_worker_manager


def main(argv: Sequence[str] | None = None) -> int:
    settings = load_worker_manager(argv)  # -h and a refused setting exit here, before the managers' code is imported
    from scaler.config.logging_setup import setup_logging
    from scaler.worker_manager.registry import run_worker_manager, with_manager_id

    config = with_manager_id(settings)
    setup_logging(config, f"worker_manager[{config.worker_manager_id}]")
    return run_worker_manager(config)


if __name__ == "__main__":
    raise SystemExit(main())
