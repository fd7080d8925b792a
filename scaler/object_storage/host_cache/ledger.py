"""What a host cache holds and the bytes it moved (pure): its report to the storage server, which the status feed
publishes (docs/architecture.md, "Bytes seen"). Rules:

L1. A fetch is under way from its begin (its source named: another host's cache by address, "" for the storage server)
    until it is whole or fails; one begun again (another source) starts over. Its bytes count once it is whole, as
    from its source's kind.
L2. A large object (traffic.LARGE_OBJECT_BYTES or more) fetched whole or uploaded is one of the cache's copies until
    its store no longer holds it; a report names the COPIES_REPORTED largest.
L3. A report is due when it differs from the last one sent (transfers' progress included, their ages not), or
    KEEPALIVE_SECONDS after it (the storage server forgets a cache it has not heard from: traffic.py T3).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from scaler.object_storage.traffic import LARGE_OBJECT_BYTES
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import HostReport, HostTraffic, Transfer

#: The copies a report names at most (L2).
COPIES_REPORTED = 64
#: A report that did not change is sent again after this (L3), well within the storage server's sweep.
KEEPALIVE_SECONDS = 10.0


@dataclass(slots=True)
class Fetching:
    """A fetch under way (L1)."""

    source: str  #: another host's cache, by address; "": the storage server
    total_bytes: int
    done_bytes: int
    started_at: float


@dataclass(slots=True)
class Ledger:
    #: the large objects fetched or uploaded, and their sizes, while the store may hold them (L2)
    copies: dict[bytes, int] = field(default_factory=dict)
    #: the fetches under way, by object (L1)
    fetching: dict[bytes, Fetching] = field(default_factory=dict)
    fetches: int = 0  #: objects fetched
    bytes_fetched: int = 0  #: bytes received, from the storage server and from other hosts' caches
    bytes_from_hosts: int = 0  #: of those, from other hosts' caches
    uploads: int = 0  #: objects stored upstream for the processors of this host
    bytes_uploaded: int = 0
    _last_report: HostReport | None = field(default=None, init=False, repr=False)  #: the last sent, ageless (L3)
    _last_report_at: float = field(default=0.0, init=False, repr=False)

    def begun(self, object_id: bytes, source: str, total_bytes: int, now: float) -> None:
        self.fetching[bytes(object_id)] = Fetching(source, total_bytes, 0, now)

    def progress(self, object_id: bytes, done_bytes: int) -> None:
        fetching = self.fetching.get(bytes(object_id))
        if fetching is not None:
            fetching.done_bytes = done_bytes

    def fetched(self, object_id: bytes, total_bytes: int, source: str = "") -> None:
        self.fetching.pop(bytes(object_id), None)
        self.fetches += 1
        self.bytes_fetched += total_bytes
        if source:
            self.bytes_from_hosts += total_bytes
        self._keep(object_id, total_bytes)

    def failed(self, object_id: bytes) -> None:
        self.fetching.pop(bytes(object_id), None)

    def uploaded(self, object_id: bytes, total_bytes: int) -> None:
        self.uploads += 1
        self.bytes_uploaded += total_bytes
        self._keep(object_id, total_bytes)

    def _keep(self, object_id: bytes, total_bytes: int) -> None:
        if total_bytes >= LARGE_OBJECT_BYTES:
            self.copies[bytes(object_id)] = total_bytes

    def report(self, counts: HostTraffic, holds: Callable[[bytes], bool], now: float) -> HostReport:
        """This cache's report: `counts` has what the cache's store and service know (its host, what it holds, the
        bytes it sent other hosts); `holds`: whether its store holds an object whole (L2: copies it no longer holds
        are forgotten)."""
        for object_id in [object_id for object_id in self.copies if not holds(object_id)]:
            del self.copies[object_id]
        largest = sorted(self.copies.items(), key=lambda item: (-item[1], item[0]))[:COPIES_REPORTED]
        transfers = tuple(
            Transfer(
                ObjectID(object_id), "", each.source, each.done_bytes, each.total_bytes, max(0.0, now - each.started_at)
            )
            for object_id, each in sorted(self.fetching.items())
        )
        counts = dataclasses.replace(
            counts,
            bytes_from_storage=self.bytes_fetched - self.bytes_from_hosts,
            bytes_from_hosts=self.bytes_from_hosts,
            bytes_uploaded=self.bytes_uploaded,
        )
        return HostReport(counts, tuple(ObjectID(object_id) for object_id, _ in largest), transfers)

    def report_due(self, report: HostReport, now: float) -> bool:
        """L3; a report found due is taken as sent."""
        ageless = _ageless(report)
        if ageless == self._last_report and now - self._last_report_at < KEEPALIVE_SECONDS:
            return False
        self._last_report, self._last_report_at = ageless, now
        return True


def _ageless(report: HostReport) -> HostReport:
    ageless = tuple(dataclasses.replace(each, seconds=0.0) for each in report.transfers)
    return dataclasses.replace(report, transfers=ageless)
