# PYTHON_ARGCOMPLETE_OK
"""`scaler_object_storage_server [options] BIND_ADDRESS`: run the object storage server."""

from __future__ import annotations

from collections.abc import Sequence

from scaler.config.loader import load_section
from scaler.config.sections import ObjectStorageServerConfig


def main(argv: Sequence[str] | None = None) -> int:
    config = load_section(
        ObjectStorageServerConfig,
        argv,
        prog="scaler_object_storage_server",
        description="Run the object storage server: it holds task inputs and results.",
        toml_sections=["object_storage_server"],
    )
    from scaler.object_storage.server import run_object_storage_server

    return run_object_storage_server(config)


if __name__ == "__main__":
    raise SystemExit(main())
