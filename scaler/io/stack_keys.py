"""CURVE keys a `scaler FILE` stack makes for itself, and how local clients find them (docs/guide/bursting.md).

A stack whose scheduler runs in the cloud (`hub = "cloud"`) secures every connection without the user handling a
key file: the launcher makes a server pair, a client pair and a workers pair once, in a folder only the user can
read (`~/.config/scaler/stacks/<stack>/`, mode 0700, kept so that a restarted launcher reaches the units it left
running), and, while the stack runs, a *connection file* per local address it serves
(`~/.config/scaler/connections/<host>_<port>.json`, mode 0600) naming the client pair and the server's public key.

`Client("tcp://127.0.0.1:8516")` and `scaler_top tcp://127.0.0.1:8518` given no key look there for their address,
so user code is the same for a local run and a burst. A connection file whose launcher is gone is ignored.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from scaler.io.curve import CurveSecurity, KeyFileError, curve_security, make_key_pair


def config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "scaler"


@dataclass(frozen=True)
class StackKeys:
    """The key pairs of one stack, in its private folder."""

    folder: Path

    @classmethod
    def ensure(cls, name: str) -> StackKeys:
        """The stack's keys, made the first time (server, client and workers pairs; the client authorised as a
        client, the workers' pair as managers, which also covers the workers they start)."""
        folder = config_home() / "stacks" / name
        if not (folder / "server.key_secret").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            os.chmod(folder, 0o700)
            for pair in ("server", "client", "workers"):
                make_key_pair(str(folder), pair)
            (folder / "authorized" / "managers").mkdir(parents=True, exist_ok=True)
            (folder / "authorized" / "client.key").write_bytes((folder / "client.key").read_bytes())
            (folder / "authorized" / "managers" / "workers.key").write_bytes((folder / "workers.key").read_bytes())
        os.chmod(folder, 0o700)
        return cls(folder)

    def path(self, name: str) -> str:
        return str(self.folder / name)

    def authorized_texts(self) -> dict[str, str]:
        """The authorised folder as {relative path: public key file text} (what a cloud scheduler is given)."""
        root = self.folder / "authorized"
        return {str(path.relative_to(root)): path.read_text() for path in sorted(root.rglob("*.key"))}


def _connection_file(address: str) -> Path:
    host_port = address.split("://", 1)[-1].replace("[", "").replace("]", "")
    return config_home() / "connections" / f"{host_port.replace(':', '_').replace('/', '_')}.json"


def register_connection(addresses: list[str], keys: StackKeys, ship_local_modules: bool) -> None:
    """Local clients connecting to these addresses use the stack's client keys (while this process lives)."""
    record = {
        "client_secret_key": keys.path("client.key_secret"),
        "server_public_key": keys.path("server.key"),
        "ship_local_modules": ship_local_modules,
        "pid": os.getpid(),
        "started": _started(os.getpid()),
    }
    for address in addresses:
        path = _connection_file(address)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(record))
        os.chmod(partial, 0o600)
        partial.replace(path)


def unregister_connection(addresses: list[str]) -> None:
    for address in addresses:
        try:
            _connection_file(address).unlink()
        except FileNotFoundError:
            pass


def discovered_connection(address: str) -> dict[str, object] | None:
    """The connection file of a stack serving `address` from this machine, if its launcher still runs."""
    try:
        record = json.loads(_connection_file(address).read_text())
    except (OSError, ValueError):
        return None
    pid = record.get("pid")
    if not isinstance(pid, int) or _started(pid) != record.get("started"):  # gone (its pid maybe reused)
        return None
    return dict(record)


def discovered_security(address: str) -> CurveSecurity | None:
    """The client keys of the stack serving `address` (None: no such stack). Raises KeyFileError when the files
    the connection names are unusable."""
    record = discovered_connection(address)
    if record is None:
        return None
    secret, server = record.get("client_secret_key"), record.get("server_public_key")
    if not isinstance(secret, str) or not isinstance(server, str):
        raise KeyFileError(f"{_connection_file(address)}: not a connection file of a scaler stack")
    return curve_security(secret, server)


def _started(pid: int) -> float | None:
    """When process `pid` started (None: no such process): with the pid, what names a process for good."""
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None
