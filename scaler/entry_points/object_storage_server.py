"""`scaler_object_storage_server`: run the object storage server.

Placeholder command line (bind address, identity, logging level) until the shared config loader
takes over.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from scaler.config.sections import LOGGING_LEVELS, ObjectStorageServerConfig
from scaler.object_storage.server import run_object_storage_server


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scaler_object_storage_server", description="Run the scaler object storage server."
    )
    parser.add_argument("bind_address", help="address to listen on, e.g. tcp://127.0.0.1:8517")
    parser.add_argument("--identity", default="ObjectStorageServer", help="name used in logs")
    parser.add_argument("-ll", "--logging-level", default="INFO", choices=LOGGING_LEVELS, help="log level")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    config = ObjectStorageServerConfig(
        bind_address=arguments.bind_address,
        identity=arguments.identity,
        logging_level=arguments.logging_level,
    )
    return run_object_storage_server(config)


if __name__ == "__main__":
    raise SystemExit(main())
