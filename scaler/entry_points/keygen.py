# PYTHON_ARGCOMPLETE_OK
"""`scaler_keygen DIR NAME`: make a CURVE key pair, DIR/NAME.key (public) and DIR/NAME.key_secret (secret, 0600)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from scaler.config.completion import offer_completion
from scaler.version import __version__


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scaler_keygen",
        description=(
            "Make a CURVE key pair for scaler (docs/security.md): DIR/NAME.key is public (copy it into the servers' "
            "folder of authorised keys, or give it as --curve-server-key), DIR/NAME.key_secret is secret (mode "
            "0600; give it as --curve-secret-key to that one component only). A cluster has one 'server' pair "
            "(scheduler and object storage) and one pair per client, worker pool and manager."
        ),
    )
    parser.add_argument("directory", metavar="DIR")
    parser.add_argument("name", metavar="NAME", help="e.g. server, alice, workers")
    parser.add_argument("--version", action="version", version=f"scaler_keygen {__version__}")
    offer_completion(parser)
    arguments = parser.parse_args(argv)
    if not arguments.name or "/" in arguments.name or arguments.name.startswith("."):
        parser.error(f"NAME {arguments.name!r} must be a plain file name")
    secret_path = os.path.join(arguments.directory, f"{arguments.name}.key_secret")
    if os.path.exists(secret_path):
        print(f"scaler_keygen: {secret_path} exists; remove it first to make a new pair", file=sys.stderr)
        return 2
    from scaler.io.curve import make_key_pair

    try:
        public, secret = make_key_pair(arguments.directory, arguments.name)
    except OSError as error:
        print(f"scaler_keygen: cannot write into {arguments.directory}: {error}", file=sys.stderr)
        return 2
    print(f"public key: {public}\nsecret key: {secret}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
