"""Which host caches hold or are fetching which object, as the storage server knows them (pure): where a cache that
asks is sent (docs/architecture.md, "Host to host"). Rules:

S1. A cache that asks where to fetch an object is sent to the cache that asked for it last (not itself), and is from
    then on that object's latest holder: the hosts of a broadcast fetch it in a chain, each from the one before,
    which serves the pieces it has before it has them all; the storage server's link carries one copy. With no other
    holder, it fetches from the storage server.
S2. A source that a cache could not fetch from is named to nobody again, until it asks for an object itself (it is
    alive and reachable from the storage server then).
S3. A deleted object's holders are forgotten; beyond MAX_OBJECTS objects, those asked about least recently are.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

#: Objects whose holders are remembered.
MAX_OBJECTS = 100_000


class HostLedger:
    def __init__(self, max_objects: int = MAX_OBJECTS) -> None:
        self._holders: OrderedDict[bytes, list[str]] = OrderedDict()  #: object -> caches, the latest last
        self._failed: set[str] = set()  #: sources a cache could not fetch from (S2)
        self._max_objects = max_objects

    def source(self, object_id: bytes, asker: str, failed: str = "") -> str:
        """Where `asker` fetches the object from (S1, S2): another cache's address, or "" for the storage server."""
        if failed and failed != asker:
            self._failed.add(failed)
        self._failed.discard(asker)
        holders = self._holders.pop(object_id, [])
        usable = [holder for holder in holders if holder != asker and holder not in self._failed]
        source = usable[-1] if usable else ""
        self._holders[object_id] = [*(holder for holder in holders if holder != asker), asker]
        while len(self._holders) > self._max_objects:
            self._holders.popitem(last=False)
        return source

    def holders(self, object_id: bytes) -> list[str]:
        """The caches that hold or fetch the object, the latest last (for placement and the status feed)."""
        return list(self._holders.get(object_id, []))

    def forget(self, object_ids: Iterable[bytes]) -> None:
        """S3: deleted objects."""
        for object_id in object_ids:
            self._holders.pop(bytes(object_id), None)
