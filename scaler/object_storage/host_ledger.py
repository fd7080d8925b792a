"""Which host caches hold or are fetching which object, as the storage server knows them (pure): where a cache that
asks is sent (docs/architecture.md, "Host to host"). Rules:

S1. A cache that asks where to fetch an object is sent to the cache that asked for it last, and is from then on that
    object's latest holder: the hosts of a broadcast fetch it in a chain, each from the one before, which serves the
    pieces it has before it has them all; the storage server's link carries one copy. Never to itself, nor to a cache
    whose source leads back to it (a cache waits for the one it fetches from: no cycle of waits). With no such
    holder, it fetches from the storage server.
S2. A source that a cache could not fetch from is named to nobody again, until it asks for an object itself (it is
    alive and reachable from the storage server then).
S3. A deleted object's holders are forgotten; beyond MAX_OBJECTS objects, those asked about least recently are.
S4. A cache that stored an object here for its host's processors (a result it uploaded, cache rule C4) holds it too: it
    is the object's latest holder, fetching from nobody, so that a task on another host reads the result from the host
    that made it (S1) instead of from this server; the upload shows it alive (S2 no longer names it failed).
S5. A client that asks where an object is (a result of its own it reads) is told the cache that stored it here for its
    host (S4: it holds it whole, where a cache that fetches it may not have it yet) or, with none, its latest holder,
    either not named failed (S2); the client is recorded nowhere: it is neither a holder nor a fetcher, and what it
    could not reach is its own affair (a laptop off the workers' network reaches no host), not a failed source for the
    caches.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

#: Objects whose holders are remembered.
MAX_OBJECTS = 100_000


class HostLedger:
    def __init__(self, max_objects: int = MAX_OBJECTS) -> None:
        self._holders: OrderedDict[bytes, list[str]] = OrderedDict()  #: object -> caches, the latest last
        self._sources: dict[tuple[bytes, str], str] = {}  #: (object, cache) -> the source it was sent to
        self._failed: set[str] = set()  #: sources a cache could not fetch from (S2)
        self._stored_by: dict[bytes, str] = {}  #: object -> the cache that stored it here for its host (S4)
        self._max_objects = max_objects

    def source(self, object_id: bytes, asker: str, failed: str = "") -> str:
        """Where `asker` fetches the object from (S1, S2): another cache's address, or "" for the storage server."""
        if failed and failed != asker:
            self._failed.add(failed)
        self._failed.discard(asker)
        holders = self._holders.pop(object_id, [])
        usable = [
            holder for holder in holders if holder not in self._failed and not self._leads_to(object_id, holder, asker)
        ]
        source = usable[-1] if usable else ""
        self._holders[object_id] = [*(holder for holder in holders if holder != asker), asker]
        self._sources[(object_id, asker)] = source
        self._bound()
        return source

    def holder(self, object_id: bytes) -> str:
        """S5: where a client reads the object from: its latest holder not named failed, "" for none (this server).
        Changes nothing."""
        holders = self._holders.get(bytes(object_id), [])
        maker = self._stored_by.get(bytes(object_id), "")
        if maker in holders and maker not in self._failed:
            return maker
        usable = [holder for holder in holders if holder not in self._failed]
        return usable[-1] if usable else ""

    def uploaded(self, object_id: bytes, holder: str) -> None:
        """S4: `holder` stored the object here, and holds it."""
        object_id = bytes(object_id)
        holders = self._holders.pop(object_id, [])
        self._holders[object_id] = [*(each for each in holders if each != holder), holder]
        self._sources[(object_id, holder)] = ""
        self._stored_by[object_id] = holder
        self._failed.discard(holder)
        self._bound()

    def _bound(self) -> None:
        """S3: beyond MAX_OBJECTS objects, those asked about least recently are forgotten."""
        while len(self._holders) > self._max_objects:
            forgotten, caches = self._holders.popitem(last=False)
            self._stored_by.pop(forgotten, None)
            for cache in caches:
                self._sources.pop((forgotten, cache), None)

    def _leads_to(self, object_id: bytes, holder: str, asker: str) -> bool:
        """Whether `holder` is `asker` or fetches, through its sources, from `asker`."""
        seen: set[str] = set()
        while holder and holder not in seen:
            if holder == asker:
                return True
            seen.add(holder)
            holder = self._sources.get((object_id, holder), "")
        return False

    def holders(self, object_id: bytes) -> list[str]:
        """The caches that hold or fetch the object, the latest last (for placement and the status feed)."""
        return list(self._holders.get(object_id, []))

    def forget(self, object_ids: Iterable[bytes]) -> None:
        """S3: deleted objects."""
        for object_id in object_ids:
            self._stored_by.pop(bytes(object_id), None)
            for cache in self._holders.pop(bytes(object_id), []):
                self._sources.pop((bytes(object_id), cache), None)
