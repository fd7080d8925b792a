"""`python -m scaler.worker_manager.process TYPE '<settings as JSON>'`: how `scaler FILE` starts a worker
manager without paying for the command line's config loader."""

from __future__ import annotations

import sys

from scaler.config.logging_setup import setup_logging
from scaler.config.sections import WORKER_MANAGER_SECTIONS, section_from_json


def main() -> None:
    type_name, encoded = sys.argv[1], sys.argv[2]
    from scaler.worker_manager.registry import run_worker_manager, with_manager_id

    config = with_manager_id(section_from_json(WORKER_MANAGER_SECTIONS[type_name], encoded))
    setup_logging(config, f"worker_manager[{config.worker_manager_id}]")

    sys.exit(run_worker_manager(config))


if __name__ == "__main__":
    main()
