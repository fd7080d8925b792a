"""Where a worker's processors reach object storage (rule 7 of the agent's core): the storage server itself when this
host sees its segment directory (its processors map its objects), else this host's cache of it (host_cache/place.py),
found or started here, so that the processors of the host hold one copy of each object. A cache that cannot be had
is said once in the log, and the processors then read from the storage server, as they did before caches."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from scaler.errors import ScalerError
from scaler.io.sockets import TransportSecurity
from scaler.object_storage.connection import ObjectStorageConnection
from scaler.object_storage.host_cache.place import HostCacheError, HostCacheUse, outward_host, use_host_cache
from scaler.security.curve import CurveSecurity

logger = logging.getLogger(__name__)

#: How long the probe of the storage server's hello waits.
PROBE_SECONDS = 30.0


@dataclass
class StorageRoute:
    """The address the processors use, the CURVE key of the server there ("" : the servers'), and the use of the host's
    cache that the worker holds while it lives (None: no cache)."""

    address: str
    server_key: str = ""
    cache: HostCacheUse | None = None


def probe_on_this_host(storage_address: str) -> bool:
    """A server without a segment directory is on this host when it listens on a loopback or ipc address."""
    return outward_host(storage_address) == "127.0.0.1"


def route_storage(
    storage_address: str, security: TransportSecurity | None, cache_settings: dict[str, object]
) -> StorageRoute:
    """The route for processors of this host to the storage at `storage_address` (module docstring). Blocking."""
    if security is not None and not isinstance(security, CurveSecurity):
        return StorageRoute(storage_address)  # a transport this module cannot serve a cache with
    try:
        with ObjectStorageConnection(
            storage_address, role="worker", timeout_seconds=PROBE_SECONDS, security=security
        ) as probe:
            directory = probe.segment_directory()
            if probe.maps_objects() or (directory is None and probe_on_this_host(storage_address)):
                return StorageRoute(storage_address)  # the storage's host: its objects are mapped from its directory
    except ScalerError as error:
        logger.warning("object storage at %s did not answer a probe (%s): processors read from it directly",
                       storage_address, error)  # fmt: skip
        return StorageRoute(storage_address)
    try:
        use = use_host_cache(storage_address, cache_settings, security)
    except HostCacheError as error:
        logger.warning("%s: this host's processors read from the storage server at %s, each its own copy",
                       error, storage_address)  # fmt: skip
        return StorageRoute(storage_address)
    logger.info("this host's processors read objects through the host cache at %s (its log: %s/cache.log)",
                use.address, use.home)  # fmt: skip
    return StorageRoute(use.address, security.public.decode() if security is not None else "", use)
