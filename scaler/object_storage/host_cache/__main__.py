"""`python -m scaler.object_storage.host_cache '<settings as JSON>'`: a host cache, as a worker agent starts it
(place.py). It takes its home's lock (or leaves at once: another cache serves this host), serves the object storage
protocol in the cache role at an address of this host chosen by the kernel, writes that address into its home, and
stops when no agent of the host uses it any more (or on SIGINT/SIGTERM), removing its directories as a storage server
does."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
from typing import Any

from scaler.config.sections import ObjectStorageServerConfig
from scaler.io.event_loop import run
from scaler.io.sockets import SocketFactory
from scaler.object_storage.host_cache import place
from scaler.object_storage.host_cache.keys import CacheSecurity, UpstreamKeys
from scaler.object_storage.server import ObjectStorageBindError, UpstreamSettings, serve
from scaler.object_storage.spill_files import SpillDirectoryError
from scaler.protocol.exit_codes import EXIT_CONFIGURATION, ExitCode
from scaler.security.curve import security_from_environment
from scaler.security.key_files import KeyFileError

logger = logging.getLogger("scaler.object_storage.host_cache")

#: How many times a port the kernel chose is tried (another process may take it between the choice and the bind).
BIND_ATTEMPTS = 5


def upstream_host(address: str) -> str:
    """The host part of a tcp:// address; "" for any other."""
    scheme, _, rest = address.partition("://")
    return rest.rpartition(":")[0] if scheme == "tcp" else ""


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


async def _leave_when_unused(home: str, stop: asyncio.Event) -> None:
    """Set `stop` once no agent has held the home's `users` lock for LEAVE_AFTER_SECONDS in a row."""
    unused_since: float | None = None
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        await asyncio.sleep(place.POLL_SECONDS * 10)
        if not place.users_gone(home):
            unused_since = None
        elif unused_since is None:
            unused_since = loop.time()
        elif loop.time() - unused_since >= place.LEAVE_AFTER_SECONDS:
            logger.info("no worker of this host uses the cache any more: stopping")
            stop.set()


async def _serve(settings: dict[str, Any], home: str) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    upstream_address = str(settings["upstream_address"])
    host = place.outward_host(upstream_address)
    spill = os.path.join(tempfile.gettempdir(), f"{os.path.basename(home)}-{socket.gethostname()}-spill")
    workers = security_from_environment(os.environ)  # the workers' keys: served with, and used upstream
    timeout = float(settings.get("storage_timeout_seconds", 60.0))
    # a cache bound on loopback for an upstream elsewhere (reached through a tunnel) is no source for other hosts
    peers = host != "127.0.0.1" or place.outward_host(upstream_address) == upstream_host(upstream_address)
    # the ZAP handler asks the upstream about clients' keys; the service lets a client claim only the ids bound there
    security = None if workers is None else CacheSecurity(workers, UpstreamKeys(upstream_address, workers))
    upstream = UpstreamSettings(
        upstream_address, security=workers, timeout_seconds=timeout, peers=peers,
        client_owners=security.owners_of if security is not None else None,
    )  # fmt: skip
    shutil.rmtree(spill, ignore_errors=True)  # copies a killed predecessor left: the upstream holds the objects
    watcher = asyncio.ensure_future(_leave_when_unused(home, stop))
    try:
        for attempt in range(BIND_ATTEMPTS):
            config = ObjectStorageServerConfig(
                bind_address=f"tcp://{host}:{_free_port(host)}",
                identity="HostCache",
                max_memory=settings.get("max_memory"),
                spill_directory=spill,
            )
            try:
                sockets = SocketFactory(security=security)
                await serve(config, ready=lambda endpoint: place.write_address(home, endpoint), stop=stop,
                            sockets=sockets, upstream=upstream)  # fmt: skip
                return
            except ObjectStorageBindError as error:
                if attempt == BIND_ATTEMPTS - 1:
                    raise
                logger.info("%s: trying another port", error)
    finally:
        place.remove_address(home)
        shutil.rmtree(spill, ignore_errors=True)
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)


def main() -> None:
    if not sys.argv[1:] or not sys.argv[1].startswith("{"):
        sys.exit("usage: python -m scaler.object_storage.host_cache '<settings as JSON>' (a worker agent starts it)")
    settings = json.loads(sys.argv[1])
    logging.basicConfig(
        level=str(settings.get("logging_level", "INFO")), format="[%(asctime)s] %(process)d %(levelname)s %(message)s"
    )
    home = str(settings["home"])
    lock = place.take_lock(home)
    if lock is None:
        logger.info("another host cache serves %s: leaving", home)
        sys.exit(ExitCode.OK)
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        run(_serve(settings, home))
    except (ObjectStorageBindError, SpillDirectoryError, KeyFileError) as error:
        logger.error("host cache: %s", error)
        sys.exit(EXIT_CONFIGURATION)
    finally:
        place.remove_home_if_unused(home)  # under its lock: no other cache starts in it meanwhile
        os.close(lock)
    sys.exit(ExitCode.OK)


if __name__ == "__main__":
    main()
