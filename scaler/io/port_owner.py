"""Is a TCP address free to bind, and if not, who holds it: for errors that name the port and its owner."""

from __future__ import annotations

import errno
import socket

import psutil

from scaler.io.address import AddressError, parse_address


def port_owner(port: int) -> str:
    """' (pid N: command line)' for the local process listening on `port`, or '' when it cannot be told."""
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return ""
    for connection in connections:
        if connection.status == psutil.CONN_LISTEN and connection.laddr and connection.laddr.port == port:
            if connection.pid is None:
                return ""
            try:
                command = " ".join(" ".join(psutil.Process(connection.pid).cmdline()).split())[:160]
            except psutil.Error:
                command = "?"
            return f" (pid {connection.pid}: {command})"
    return ""


def address_in_use_problem(address: str) -> str | None:
    """Why `address` (tcp://host:port, or a tunnel's tls://, ws://, wss://) cannot be bound because its port is
    taken, or None. Other addresses (ipc, inproc, port 0) and other errors are left to the bind itself."""
    try:
        parsed = parse_address(address)
    except AddressError:
        return None
    host, port = parsed.host, parsed.port
    if not parsed.has_port or not port:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as ZeroMQ binds: TIME_WAIT is no owner
        try:
            probe.bind(("" if host in ("*", "0.0.0.0") else host.strip("[]"), port))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                return None
            return f"{address}: port {port} is already in use{port_owner(port)}"
    return None
