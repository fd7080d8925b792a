"""What a host cache holds and the bytes it moved (pure): the one place that placement by locality and the status feed
read from (docs/architecture.md, "One copy per host: host caches")."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Ledger:
    #: the objects this cache fetched (its store says which of them it still holds)
    fetched_objects: set[bytes] = field(default_factory=set)
    fetches: int = 0  #: objects fetched from upstream
    bytes_fetched: int = 0  #: bytes received from upstream
    uploads: int = 0  #: objects stored upstream for the processors of this host
    bytes_uploaded: int = 0

    def fetched(self, object_id: bytes, total_bytes: int) -> None:
        self.fetched_objects.add(bytes(object_id))
        self.fetches += 1
        self.bytes_fetched += total_bytes

    def uploaded(self, object_id: bytes, total_bytes: int) -> None:
        self.uploads += 1
        self.bytes_uploaded += total_bytes
