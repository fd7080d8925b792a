"""Waiting until a freshly started object storage server answers an info request."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence

from scaler.io.child_processes import describe_exit
from scaler.io.sockets import TransportSecurity
from scaler.object_storage.connection import ObjectStorageConnection


def wait_for_object_storage(
    address: str,
    timeout_seconds: float,
    children: Sequence[subprocess.Popen[bytes]] = (),
    security: TransportSecurity | None = None,
    between_tries: Callable[[], None] | None = None,
) -> None:
    """Block until the object storage server at `address` answers, or raise RuntimeError. `between_tries` is called
    before each try (at most 0.5 s apart): what it raises ends the wait (`StartSignals.raise_if_received`)."""
    deadline = time.monotonic() + timeout_seconds
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if between_tries is not None:
            between_tries()
        _check_alive(children, "the object storage server")
        connection = ObjectStorageConnection(address, role="readiness-probe", timeout_seconds=0.5, security=security)
        try:
            connection.info()
            return
        except Exception as error:
            last_error = error
        finally:
            connection.close()
    raise RuntimeError(
        f"the object storage server at {address} did not answer within {timeout_seconds:g} s: {last_error}"
    )


def _check_alive(children: Sequence[subprocess.Popen[bytes]], what: str) -> None:
    for child in children:
        if child.poll() is not None:
            raise RuntimeError(f"{what} (pid {child.pid}) exited during start-up: {describe_exit(child.returncode)}")
