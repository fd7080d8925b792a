"""`scaler FILE`: start a whole stack (object storage, scheduler, worker managers) from one TOML file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from scaler.protocol.exit_codes import EXIT_CONFIGURATION
from scaler.version import __version__


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scaler",
        description="Start object storage, the scheduler and every [[worker_manager]] of a TOML file; "
        "Ctrl-C or SIGTERM stops them all.",
    )
    parser.add_argument("file", help="the TOML file ([object_storage_server], [scheduler], [[worker_manager]])")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    arguments = parser.parse_args(argv)
    from scaler.config.loader import ConfigError, load_launcher_file

    try:
        file = load_launcher_file(arguments.file)
        if file.security is not None:
            from scaler.cluster.stack_security import check_stack_keys

            check_stack_keys(file.security)
    except (ConfigError, ValueError) as error:
        print(f"scaler: error: {error}", file=sys.stderr)
        return EXIT_CONFIGURATION
    for notice in file.notices:
        print(f"scaler: {notice}", file=sys.stderr)
    from scaler.cluster.launcher import Launcher
    from scaler.config.logging_setup import setup_logging
    from scaler.config.sections import LoggingSettings

    logging_settings = file.scheduler or file.object_storage_server or LoggingSettings()
    setup_logging(logging_settings, "scaler")
    return Launcher(file).run()


if __name__ == "__main__":
    raise SystemExit(main())
