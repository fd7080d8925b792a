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
    from scaler.io.curve import KeyFileError
    from scaler.io.default_security import connecting_security
    from scaler.monitor.top import run_top

    try:  # no key setting: those a local scheduler or stack registered for the address (docs/guide/security.md)
        security = connecting_security(config, config.monitor_address, "client")
    except KeyFileError as error:
        print(f"scaler_top: error: {error}", file=sys.stderr)
        return 2
    return run_top(config.monitor_address, config.timeout, security)


if __name__ == "__main__":
    raise SystemExit(main())
