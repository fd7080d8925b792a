# PYTHON_ARGCOMPLETE_OK
"""`scaler_top [options] MONITOR_ADDRESS`: watch a scheduler in the terminal."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from scaler.config.commands import TOP
from scaler.config.loader import load_command


def main(argv: Sequence[str] | None = None) -> int:
    config, _ = load_command(TOP, argv)
    from scaler.io.address import AddressError, is_socket_file, monitor_address_to_read, parse_address
    from scaler.monitor.top import TERMINAL_NEEDED, has_terminal, run_top

    try:
        address, why = monitor_address_to_read(config.monitor_address, is_socket_file)
        parse_address(address)
    except AddressError as error:
        print(f"scaler_top: error: {error}", file=sys.stderr)
        return 2
    if not has_terminal():
        print(f"scaler_top: error: {TERMINAL_NEEDED}", file=sys.stderr)
        return 2
    if why:  # before the screen takes the terminal; it is there again once scaler_top quits
        print(f"scaler_top: {why}", file=sys.stderr)
    from scaler.io.tunnel.tls import TlsFileError
    from scaler.security.find import find_keys
    from scaler.security.key_files import KeyFileError
    from scaler.security.tls_settings import trust_settings

    try:  # no key setting: those a local scheduler or stack registered for the address (docs/guide/security.md)
        keys = find_keys("client", address, config)
        trust_settings(config)
    except (KeyFileError, TlsFileError) as error:
        print(f"scaler_top: error: {error}", file=sys.stderr)
        return 2
    return run_top(address, config.timeout, keys)


if __name__ == "__main__":
    raise SystemExit(main())
