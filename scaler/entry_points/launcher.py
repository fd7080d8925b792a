"""`scaler FILE`: start a whole stack (object storage, scheduler, worker managers) from one TOML file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

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
    parser.add_argument(
        "--down", action="store_true",
        help="start nothing: list and terminate what the file's cloud worker managers left in the cloud",
    )  # fmt: skip
    parser.add_argument("--hub", choices=("local", "cloud"), help="[scaler] hub: where the scheduler runs")
    parser.add_argument("--idle-shutdown-seconds", type=float, help="[scaler] idle_shutdown_seconds")
    parser.add_argument("--no-client-shutdown-seconds", type=float, help="[scaler] no_client_shutdown_seconds")
    arguments = parser.parse_args(argv)
    from scaler.config.loader import ConfigError, load_launcher_file
    from scaler.worker_manager.registry import unavailable_type_problem

    try:
        file = _with_flags(load_launcher_file(arguments.file), arguments)
        for manager in file.worker_managers:  # refused before anything starts
            problem = unavailable_type_problem(manager)
            if problem is not None:
                raise ConfigError(f"{arguments.file}: {problem}")
        if file.security is not None:
            from scaler.cluster.stack_security import check_stack_keys

            check_stack_keys(file.security)
        from scaler.cluster.cloud_stack import cloud_stack_problem

        problem = cloud_stack_problem(file)
        if problem is not None:
            raise ConfigError(f"{arguments.file}: {problem}")
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
    if arguments.down:
        from scaler.cluster.stack_down import take_down

        return take_down(file)
    return Launcher(file, path=arguments.file).run()


def _with_flags(file: Any, arguments: argparse.Namespace) -> Any:
    """The file's [scaler] section with the flags given on the command line applied."""
    import dataclasses

    changes = {
        name: value
        for name in ("hub", "idle_shutdown_seconds", "no_client_shutdown_seconds")
        if (value := getattr(arguments, name)) is not None
    }
    for name in ("idle_shutdown_seconds", "no_client_shutdown_seconds"):
        if changes.get(name, 0) < 0:
            from scaler.config.loader import ConfigError

            raise ConfigError(f"--{name.replace('_', '-')} {changes[name]:g}: must be 0 (never) or more")
    if not changes:
        return file
    return dataclasses.replace(file, launcher=dataclasses.replace(file.launcher, **changes))


if __name__ == "__main__":
    raise SystemExit(main())
