# PYTHON_ARGCOMPLETE_OK
"""`scaler_top [options] MONITOR_ADDRESS`: watch a scheduler in the terminal."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from scaler.config.commands import TOP
from scaler.config.loader import load_command


def main(argv: Sequence[str] | None = None) -> int:
    config, _ = load_command(TOP, argv)
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
