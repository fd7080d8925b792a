# PYTHON_ARGCOMPLETE_OK
"""`scaler_object_storage_server [options] BIND_ADDRESS`: run the object storage server."""

from __future__ import annotations

from collections.abc import Sequence

from scaler.config.commands import OBJECT_STORAGE_SERVER
from scaler.config.loader import load_command


def main(argv: Sequence[str] | None = None) -> int:
    config, _ = load_command(OBJECT_STORAGE_SERVER, argv)
    from scaler.object_storage.server import run_object_storage_server

    return run_object_storage_server(config)


if __name__ == "__main__":
    raise SystemExit(main())
