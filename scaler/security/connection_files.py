"""Connection files: how a local client, worker or tool finds the keys of the server it connects to, and the
CURVE keys a cloud `scaler FILE` stack makes for itself (docs/guide/security.md, docs/guide/bursting.md).

A server started without key settings uses the user's keys (`key_folder`, `find`) and registers a
connection file for each address it serves, the same way a cloud stack does.

A stack whose scheduler runs in the cloud (`hub = "cloud"`) secures every connection without the user handling a
key file: the launcher makes a server pair, a client pair and a workers pair once, in a folder only the user can
read (`~/.config/scaler/stacks/<stack>/`, mode 0700, kept so that a restarted launcher reaches the units it left
running), and, while the stack runs, a *connection file* per local address it serves
(`~/.config/scaler/connections/<host>_<port>.json`, mode 0600) naming the client pair, the workers' pair and the
server's public key.

`Client("tcp://127.0.0.1:8516")` and `scaler_top tcp://127.0.0.1:8518` given no key look there for their address,
so user code is the same for a local run and a burst. A connection file whose launcher is gone is ignored.

A file also says which service answers at its address (scheduler, object storage, monitor) and where the others
are, so a side pointed at the wrong port is told where to go; and, while a cloud stack's hub boots, that the stack
is starting (until when at most), so a side that connects meanwhile waits for it with the keys it will use.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path

from scaler.io.address import Address, AddressError, parse_address
from scaler.security.curve import CurveSecurity, curve_security
from scaler.security.key_files import KeyFileError
from scaler.security.key_folder import KeyFolder, config_home

#: What a connection file says answers at its address (a side pointed at the wrong one is told where to go).
SCHEDULER_SERVICE = "scheduler"
STORAGE_SERVICE = "object storage"
MONITOR_SERVICE = "monitor"


def _connection_file(address: str) -> Path:
    """The file of an address: named after its host and port (and a WebSocket path other than /), whatever its
    scheme (a port serves one thing)."""
    parsed = _network_address(address)
    if parsed is None:
        host_port = address.split("://", 1)[-1]
    else:
        host_port = f"{parsed.host}:{parsed.port}" + (parsed.path if parsed.path not in ("", "/") else "")
    host_port = host_port.replace("[", "").replace("]", "")
    return config_home() / "connections" / f"{host_port.replace(':', '_').replace('/', '_')}.json"


#: hosts a server binding on every interface is registered under, and local names a connecting side may use
WILDCARD_HOSTS = ("0.0.0.0", "*", "::")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def register_connection(
    services: Mapping[str, str],
    keys: KeyFolder | None,
    ship_local_modules: bool,
    known: Mapping[str, str] | None = None,
    starting_until: float | None = None,
) -> None:
    """Local clients and workers connecting to these addresses use the keys of `keys` (while this process lives):
    the record names the client pair, the workers' pair and the server's public key. `keys` None: an `--insecure`
    server, which local sides reach without keys. `services`: service -> the address this process serves it at;
    `known`: the addresses of its other services. `starting_until` (wall-clock seconds): the stack is still
    starting, at most until then (its hub booting): a side that connects meanwhile waits for it; registering again
    without it says the stack is up."""
    record: dict[str, object] = {"insecure": True}
    if keys is not None:
        record = {
            "client_secret_key": keys.path("client.key_secret"),
            "workers_secret_key": keys.path("workers.key_secret"),
            "server_public_key": keys.path("server.key"),
            "keys_folder": str(keys.folder),
        }
    record.update({"ship_local_modules": ship_local_modules, "pid": os.getpid(), "started": _started(os.getpid())})
    record["services"] = {**(known or {}), **services}
    if starting_until is not None:
        record.update({"starting": True, "starting_until": starting_until})
    for service, address in services.items():
        path = _connection_file(address)
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_text(json.dumps({**record, "service": service}))
        os.chmod(partial, 0o600)
        partial.replace(path)


def mirror_connection(address: str, of_address: str) -> bool:
    """Local sides connecting to `address` use the keys registered for `of_address` (while this process lives): a
    relay in front of a server (`scaler_link`) serves it at another address. False when nothing is registered there
    (the user's keys, or plain TCP, apply to both by themselves)."""
    record = discovered_connection(of_address)
    if record is None:
        return False
    record = {**record, "pid": os.getpid(), "started": _started(os.getpid())}
    path = _connection_file(address)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(record))
    os.chmod(partial, 0o600)
    partial.replace(path)
    return True


def unregister_connection(addresses: list[str]) -> None:
    """Remove this process's connection files of these addresses (one another process wrote since is kept)."""
    for address in addresses:
        path = _connection_file(address)
        try:
            if json.loads(path.read_text()).get("pid") == os.getpid():
                path.unlink()
        except (OSError, ValueError):
            pass


def discovered_connection(address: str, starting: bool = False) -> dict[str, object] | None:
    """The connection file of a live server or stack serving `address` from this machine: the address's own, or,
    for a local host (loopback, this machine's names and addresses), one of a bind on every interface. A stack
    still starting counts only with `starting`."""
    for candidate in _candidates(address):
        try:
            record = json.loads(_connection_file(candidate).read_text())
        except (OSError, ValueError):
            continue
        pid = record.get("pid")
        if not isinstance(pid, int) or _started(pid) != record.get("started"):  # gone (its pid maybe reused)
            continue
        if record.get("starting") and not starting:
            continue
        return dict(record, file=str(_connection_file(candidate)))
    return None


def connection_file(address: str, record: Mapping[str, object] | None = None) -> str:
    """The path of the connection file a record was read from (else the one of `address`), for messages."""
    path = (record or {}).get("file")
    return path if isinstance(path, str) else str(_connection_file(address))


def discovered_key_settings(
    address: str, role: str = "client", record: Mapping[str, object] | None = None
) -> dict[str, str] | None:
    """The key file settings (curve_secret_key, curve_server_key) a connecting side of `role` ("client" or
    "worker") uses for `address` (from `record`, else its live connection file); None when no live server or
    stack registered it, or it serves plain TCP."""
    if record is None:
        record = discovered_connection(address)
    if record is None or record.get("insecure"):
        return None
    secret = record.get("workers_secret_key" if role == "worker" else "client_secret_key")
    server = record.get("server_public_key")
    if not isinstance(secret, str) or not isinstance(server, str):
        raise KeyFileError(
            f"{connection_file(address, record)}: names no {role} keys (not a connection file of scaler)"
        )
    return {"curve_secret_key": secret, "curve_server_key": server}


def discovered_security(address: str, role: str = "client") -> CurveSecurity | None:
    """The keys of `discovered_key_settings` (None: no such server). Raises KeyFileError when the files the
    connection names are unusable (e.g. another user's)."""
    settings = discovered_key_settings(address, role)
    if settings is None:
        return None
    return curve_security(settings["curve_secret_key"], settings["curve_server_key"])


def is_local_address(address: str) -> bool:
    """Is `address` a network address (tcp, or a tunnel's tls, ws, wss) of this machine (loopback, a wildcard, one
    of its names or addresses)?"""
    parsed = _network_address(address)
    if parsed is None:
        return False
    host = parsed.host.strip("[]")
    return host in (*LOOPBACK_HOSTS, *WILDCARD_HOSTS) or host in _local_hosts()


def _network_address(address: str) -> Address | None:
    try:
        parsed = parse_address(address)
    except AddressError:
        return None
    return parsed if parsed.has_port else None


def _candidates(address: str) -> list[str]:
    parsed = _network_address(address)
    if parsed is None or not is_local_address(address):
        return [address]
    hosts = dict.fromkeys([parsed.host.strip("[]"), *LOOPBACK_HOSTS, *WILDCARD_HOSTS])
    return [str(Address(parsed.scheme, name, parsed.port, parsed.path)) for name in hosts]


def _local_hosts() -> set[str]:
    hosts = {*LOOPBACK_HOSTS, *WILDCARD_HOSTS, socket.gethostname()}
    try:
        import psutil

        for addresses in psutil.net_if_addrs().values():
            hosts.update(address.address.split("%")[0] for address in addresses)
    except (ImportError, OSError):  # a platform psutil does not serve: the names above only
        pass
    return hosts


def _started(pid: int) -> float | None:
    """When process `pid` started (None: no such process, or no psutil here): with the pid, what names a process
    for good."""
    try:
        import psutil
    except ImportError:
        return None
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None
