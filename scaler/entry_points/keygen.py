# PYTHON_ARGCOMPLETE_OK
"""`scaler_keygen DIR NAME`: make a CURVE key pair, DIR/NAME.key (public) and DIR/NAME.key_secret (secret, 0600).
`scaler_keygen export DIR [--role worker|client]`: copy the user's keys (the ones servers started without key
settings use) that another machine needs into DIR, and print the flags it uses."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from scaler.config.completion import offer_completion
from scaler.version import __version__


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["export"]:
        return export(arguments[1:])
    parser = argparse.ArgumentParser(  # flags only as written in full (as SettingsParser)
        allow_abbrev=False,
        prog="scaler_keygen",
        description=(
            "Make a CURVE key pair for scaler (`scaler --docs security`): DIR/NAME.key is public (copy it into the "
            "servers' folder of authorised keys, or give it as --curve-server-key), DIR/NAME.key_secret is secret "
            "(mode 0600; give it as --curve-secret-key to that one component only). A cluster has one 'server' pair "
            "(scheduler and object storage) and one pair per client, worker pool and manager. "
            "`scaler_keygen export DIR` copies the user's default keys for another machine instead."
        ),
    )
    parser.add_argument("directory", metavar="DIR")
    parser.add_argument("name", metavar="NAME", help="e.g. server, alice, workers")
    parser.add_argument("--version", action="version", version=f"scaler_keygen {__version__}")
    offer_completion(parser)
    parsed = parser.parse_args(arguments)
    if not parsed.name or "/" in parsed.name or parsed.name.startswith("."):
        parser.error(f"NAME {parsed.name!r} must be a plain file name")
    secret_path = os.path.join(parsed.directory, f"{parsed.name}.key_secret")
    if os.path.exists(secret_path):
        print(f"scaler_keygen: {secret_path} exists; remove it first to make a new pair", file=sys.stderr)
        return 2
    from scaler.security.key_files import make_key_pair

    try:
        public, secret = make_key_pair(parsed.directory, parsed.name)
    except OSError as error:
        print(f"scaler_keygen: cannot write into {parsed.directory}: {error}", file=sys.stderr)
        return 2
    print(f"public key: {public}\nsecret key: {secret}")
    return 0


def export(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(  # flags only as written in full (as SettingsParser)
        allow_abbrev=False,
        prog="scaler_keygen export",
        description=(
            "Copy what another machine needs to reach this user's servers (started without key settings, so "
            "secured with the keys in ~/.config/scaler/keys) into DIR: the servers' public key and the pair of "
            "ROLE (worker: for workers and worker managers; client: for clients, scaler_top and the dashboard). "
            "Move DIR to the other machine over a channel you trust; the secret file lets it in."
        ),
    )
    parser.add_argument("directory", metavar="DIR")
    parser.add_argument("--role", choices=("worker", "client"), default="worker", help="default: worker")
    parsed = parser.parse_args(argv)
    from scaler.security.key_files import KeyFileError
    from scaler.security.key_folder import user_keys

    try:
        secret, server = user_keys().export(Path(parsed.directory).absolute(), parsed.role)
    except (OSError, KeyFileError) as error:
        print(f"scaler_keygen export: {error}", file=sys.stderr)
        return 2
    flags = f"--curve-secret-key {secret} --curve-server-key {server}"
    print(f"wrote {server} (public) and {secret} (secret, mode 0600)")
    if parsed.role == "worker":
        print(f"on the other machine: scaler_cluster tcp://THIS_HOST:PORT {flags}")
        print("(the same two flags for scaler_worker and scaler_worker_manager)")
    else:
        print(f"on the other machine: Client('tcp://THIS_HOST:PORT', curve_secret_key='{secret}', "
              f"curve_server_key='{server}'); scaler_top tcp://THIS_HOST:MONITOR_PORT {flags}")  # fmt: skip
    print("the servers must listen on an address the other machine reaches (e.g. scaler_scheduler tcp://0.0.0.0:PORT)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
