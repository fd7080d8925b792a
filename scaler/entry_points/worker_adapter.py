# PYTHON_ARGCOMPLETE_OK
"""The 1.x commands `scaler_worker_adapter_native` and `scaler_worker_adapter_symphony` (sections
`[native_worker_adapter]`, `[symphony_worker_adapter]`): `scaler_worker_manager baremetal_native` and
`scaler_worker_manager symphony` under their old names."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from scaler.config.loader import load_worker_manager


def _run(type_name: str, prog: str, argv: Sequence[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["--version"]:
        from scaler.version import __version__

        print(f"{prog} {__version__}")
        return 0
    settings = load_worker_manager(arguments, prog=prog, type_name=type_name)  # -h and refusals exit here
    from scaler.config.logging_setup import setup_logging
    from scaler.worker_manager.registry import run_worker_manager, with_manager_id

    config = with_manager_id(settings)
    setup_logging(config, f"worker_manager[{config.worker_manager_id}]")
    return run_worker_manager(config)


def native(argv: Sequence[str] | None = None) -> int:
    return _run("baremetal_native", "scaler_worker_adapter_native", argv)


def symphony(argv: Sequence[str] | None = None) -> int:
    return _run("symphony", "scaler_worker_adapter_symphony", argv)
