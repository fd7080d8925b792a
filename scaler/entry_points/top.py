# PYTHON_ARGCOMPLETE_OK
"""`scaler_top [options] MONITOR_ADDRESS`: watch a scheduler in the terminal."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from scaler.config.loader import load_section
from scaler.config.sections import TopConfig


def main(argv: Sequence[str] | None = None) -> int:
    config = load_section(
        TopConfig,
        argv,
        prog="scaler_top",
        description=(
            "Watch a scheduler: its tasks, messages and workers, live. The scheduler logs its monitor address at "
            "start (its port + 2 by default). Sort keys are shown on screen; q or Ctrl-C quits."
        ),
        toml_sections=["top"],
    )
    from scaler.io.address import AddressError, parse_address

    try:
        parse_address(config.monitor_address)
    except AddressError as error:
        print(f"scaler_top: error: {error}", file=sys.stderr)
        return 2
    from scaler.monitor.top import run_top
    from scaler.security.find import find_keys
    from scaler.security.key_files import KeyFileError

    try:  # no key setting: those a local scheduler or stack registered for the address (docs/guide/security.md)
        keys = find_keys("client", config.monitor_address, config)
    except KeyFileError as error:
        print(f"scaler_top: error: {error}", file=sys.stderr)
        return 2
    return run_top(config.monitor_address, config.timeout, keys)


if __name__ == "__main__":
    raise SystemExit(main())
