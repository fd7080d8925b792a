"""Where a host's cache of an upstream storage server is found, how a worker agent starts one and uses it, and when the
cache leaves (docs/architecture.md, "One copy per host: host caches").

A cache's home is `<shared memory>/scaler-cache-<uid>-<digest of the upstream address and the workers' public key>/`
(the temporary directory where /dev/shm is missing), holding:

- `lock`: the cache holds it exclusively (`flock`) for its whole life: one cache per host, user and upstream; the
  kernel lets it go when the cache's process ends, however it ends;
- `address`: where the cache listens, written (renamed into place) once it does; read only while `lock` is held;
- `users`: every agent that uses the cache holds it shared while it lives; a cache that finds it free
  LEAVE_AFTER_SECONDS in a row stops (the host's workers are gone) and removes the home while it holds `users`
  exclusively (an agent that took its shared lock on a file removed meanwhile starts over: `use_host_cache`);
- `cache.log`: the cache's log (it outlives the agent that started it, so it writes to no agent's output).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from scaler.io.address import AddressError, parse_address
from scaler.security.curve import SECRET_KEY_TEXT_VARIABLE, SERVER_KEY_TEXT_VARIABLE, CurveSecurity, key_texts

logger = logging.getLogger(__name__)

PREFIX = "scaler-cache-"
LOCK_FILE = "lock"
ADDRESS_FILE = "address"
USERS_FILE = "users"
LOG_FILE = "cache.log"
#: A cache whose `users` no agent holds for this long stops.
LEAVE_AFTER_SECONDS = 5.0
#: How long an agent waits for a cache it started (or saw starting) to say where it listens.
START_SECONDS = 60.0
#: How often the `address` file and the `users` lock are looked at.
POLL_SECONDS = 0.05


_KEY_VARIABLES = (SECRET_KEY_TEXT_VARIABLE, SERVER_KEY_TEXT_VARIABLE)


class HostCacheError(Exception):
    """The host's cache could not be found nor started (the message says why)."""


def cache_home(upstream_address: str, public_key: bytes = b"", parent: str | None = None) -> str:
    """The home of this host's cache of `upstream_address` for the workers of this CURVE public key (module
    docstring)."""
    if parent is None:
        parent = "/dev/shm" if os.access("/dev/shm", os.W_OK | os.X_OK) else tempfile.gettempdir()
    digest = hashlib.sha256(upstream_address.encode() + b"\n" + public_key).hexdigest()[:16]
    return os.path.join(parent, f"{PREFIX}{os.getuid()}-{digest}")


def outward_host(upstream_address: str) -> str:
    """The address of this host on the route to the upstream server (no packet is sent: a UDP socket's route), where
    the cache listens, so that processes of other hosts may reach it too; 127.0.0.1 for a loopback or ipc upstream."""
    try:
        parsed = parse_address(upstream_address)
    except AddressError:
        return "127.0.0.1"
    host = getattr(parsed, "host", "") or ""
    if parsed.scheme != "tcp" or not host or host.startswith("127.") or host == "localhost":
        return "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, 9))
            return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"


@dataclass
class HostCacheUse:
    """An agent's use of its host's cache: the cache's address, and the `users` lock held while the agent lives."""

    address: str
    home: str
    _users: int

    def is_alive(self) -> bool:
        """The cache still serves at its address (its lock held, its address the one this use has)."""
        return is_locked(os.path.join(self.home, LOCK_FILE)) and read_address(self.home) == self.address

    def release(self) -> None:
        if self._users >= 0:
            os.close(self._users)
            self._users = -1


def use_host_cache(
    upstream_address: str,
    settings: dict[str, object],
    security: CurveSecurity | None = None,
    parent: str | None = None,
) -> HostCacheUse:
    """The host's cache of `upstream_address`, started when none runs (`settings`: the cache process's, as JSON
    values: `max_memory`, `storage_timeout_seconds`, `logging_level`; `security`: the workers' keys, which the
    cache serves with and connects upstream with). Raises HostCacheError."""
    home = cache_home(upstream_address, security.public if security is not None else b"", parent)
    users = _users_lock(home)
    try:
        address = _address_when_running(home)
        if address is None:
            _start(home, upstream_address, settings, security)
            address = _wait_for_address(home)
        return HostCacheUse(address, home, users)
    except BaseException:
        os.close(users)
        raise


def _users_lock(home: str) -> int:
    """A shared lock on the home's `users`, on a file that is still the home's (a cache that stopped removes its home
    while it holds the lock exclusively: a lock taken on the removed file is given up and taken again)."""
    for _ in range(3):
        try:
            os.makedirs(home, mode=0o700, exist_ok=True)
            users = os.open(os.path.join(home, USERS_FILE), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as error:
            raise HostCacheError(f"the host cache's directory {home} cannot be used: {error}") from None
        fcntl.flock(users, fcntl.LOCK_SH)
        if os.fstat(users).st_nlink > 0:
            return users
        os.close(users)
    raise HostCacheError(f"the host cache's directory {home} keeps being removed")


def remove_home_if_unused(home: str) -> bool:
    """Remove the home of a cache that stops, unless an agent uses it (it then starts a new cache)."""
    try:
        users = os.open(os.path.join(home, USERS_FILE), os.O_RDWR)
    except FileNotFoundError:
        shutil.rmtree(home, ignore_errors=True)
        return True
    try:
        fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    else:
        shutil.rmtree(home, ignore_errors=True)
        return True
    finally:
        os.close(users)


def _address_when_running(home: str) -> str | None:
    """The running cache's address; None when no cache holds the lock (a file left by a dead one is not read), or
    while one that holds it has not said where it listens yet (`_wait_for_address` waits for that)."""
    if not is_locked(os.path.join(home, LOCK_FILE)):
        return None
    return read_address(home)


def read_address(home: str) -> str | None:
    try:
        with open(os.path.join(home, ADDRESS_FILE)) as file:
            return file.read().strip() or None
    except OSError:
        return None


def is_locked(path: str) -> bool:
    """Whether a process holds a lock on the file, shared or not (it exists and `flock` cannot take it exclusive)."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(descriptor)
    return False


def _start(home: str, upstream_address: str, settings: dict[str, object], security: CurveSecurity | None) -> None:
    """Start a cache process in a session of its own (it outlives the agent that started it; its log is its home's).
    The keys go in its environment (readable by this user only), not on its command line."""
    arguments = json.dumps({**settings, "upstream_address": upstream_address, "home": home})
    environment = {key: value for key, value in os.environ.items() if key not in _KEY_VARIABLES}
    if security is not None:
        environment.update(key_texts(security))
    with open(os.path.join(home, LOG_FILE), "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "scaler.object_storage.host_cache", arguments], env=environment,
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
        )  # fmt: skip


def _wait_for_address(home: str) -> str:
    """The address a cache started (by this agent or another at the same moment) writes; HostCacheError when none
    comes within START_SECONDS (the cache's log says why)."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if is_locked(os.path.join(home, LOCK_FILE)) and (address := read_address(home)) is not None:
            return address
        time.sleep(POLL_SECONDS)
    raise HostCacheError(f"the host cache did not start within {START_SECONDS:g} s: see {os.path.join(home, LOG_FILE)}")


def take_lock(home: str) -> int | None:
    """The cache's own lock on its home (its descriptor, held until the process ends); None when another cache holds
    it. The address file a dead cache left is removed."""
    descriptor = os.open(os.path.join(home, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    try:
        os.unlink(os.path.join(home, ADDRESS_FILE))
    except FileNotFoundError:
        pass
    return descriptor


def write_address(home: str, address: str) -> None:
    temporary = os.path.join(home, f"{ADDRESS_FILE}.{os.getpid()}")
    with open(temporary, "w") as file:
        file.write(address)
    os.replace(temporary, os.path.join(home, ADDRESS_FILE))


def remove_address(home: str) -> None:
    try:
        os.unlink(os.path.join(home, ADDRESS_FILE))
    except FileNotFoundError:
        pass


def users_gone(home: str) -> bool:
    """No agent holds `users` (the lock is taken and let go at once, so an agent that comes waits a moment only)."""
    return not is_locked(os.path.join(home, USERS_FILE))
