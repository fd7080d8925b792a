"""Where a storage server's bytes go and where its objects live, as it knows them (pure): what its `info` answers in
`traffic`, which the scheduler's status publishes (docs/architecture.md, "Bytes seen"). A host cache keeps one too: its
bytes sent to other hosts' caches are its `bytes_sent_to_caches`. Rules:

T1. Payload bytes are counted as the shell sends and receives them; those sent to a host cache are counted apart.
T2. A read answered over a socket (not mapped) of an object of LARGE_OBJECT_BYTES or more is one whole copy of it sent.
    MAX_OBJECTS objects are remembered, the least recently sent forgotten first; a deleted one at once.
T3. A host cache's report replaces the one it sent before (a cache is its host's name and its address). A cache that
    sent none between two sweeps (the shell sweeps every SWEEP_SECONDS) is forgotten: its host is gone, or no worker
    of it is left.
T4. The view is bounded however many hosts report: HOST_ROWS rows (hosts with transfers under way first, then those
    that moved the most bytes), the others summed in one row; the OBJECT_ROWS largest objects of LARGE_OBJECT_BYTES or
    more that were sent, are held by a host cache or are on their way to one; the TRANSFER_ROWS transfers under way
    with the most bytes to go, with the number and the bytes to go of them all.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Iterable

from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import HostReport, HostTraffic, ObjectCopies, StorageTraffic, Transfer

#: From this size on an object is "large": its copies are counted and shown.
LARGE_OBJECT_BYTES = 1 << 20
#: Objects whose copies sent are remembered (T2).
MAX_OBJECTS = 4096
#: How often the shell sweeps the reports (T3): a cache silent for between one and two of these is forgotten.
SWEEP_SECONDS = 30.0
#: The bounds of the view (T4).
HOST_ROWS = 32
OBJECT_ROWS = 10
TRANSFER_ROWS = 16

#: What describes a stored object to the view: its size and name; None when it is not stored.
Describe = Callable[[bytes], tuple[int, str] | None]


class TrafficBook:
    def __init__(self, max_objects: int = MAX_OBJECTS) -> None:
        self.bytes_sent = 0  #: payload bytes sent to readers (T1)
        self.bytes_sent_to_caches = 0  #: of those, to host caches
        self.bytes_received = 0  #: payload bytes received (puts)
        self._copies_sent: OrderedDict[bytes, int] = OrderedDict()  #: object -> whole copies sent (T2)
        self._max_objects = max_objects
        self._reports: dict[tuple[str, str], HostReport] = {}  #: (host, address) -> its cache's latest report (T3)
        self._heard: set[tuple[str, str]] = set()  #: the caches that reported since the last sweep

    # ------------------------------------------------------------ counts

    def sent(self, payload_bytes: int, to_cache: bool) -> None:
        self.bytes_sent += payload_bytes
        if to_cache:
            self.bytes_sent_to_caches += payload_bytes

    def received(self, payload_bytes: int) -> None:
        self.bytes_received += payload_bytes

    def copy_sent(self, object_id: bytes, total_bytes: int) -> None:
        """T2: a read of the object answered over a socket."""
        if total_bytes < LARGE_OBJECT_BYTES:
            return
        key = bytes(object_id)
        self._copies_sent[key] = self._copies_sent.pop(key, 0) + 1
        while len(self._copies_sent) > self._max_objects:
            self._copies_sent.popitem(last=False)

    def copies_sent(self, object_id: bytes) -> int:
        return self._copies_sent.get(bytes(object_id), 0)

    def forget(self, object_ids: Iterable[bytes]) -> None:
        """T2: deleted objects."""
        for object_id in object_ids:
            self._copies_sent.pop(bytes(object_id), None)

    # ------------------------------------------------------------ the host caches' reports

    def reported(self, address: str, report: HostReport) -> None:
        """T3: a cache's report; `address` is where other hosts reach it (its hello's), "" for nowhere."""
        key = (report.counts.host, address)
        self._reports[key] = report
        self._heard.add(key)

    def sweep(self) -> None:
        """T3: forget the caches that sent no report since the previous sweep."""
        for key in [key for key in self._reports if key not in self._heard]:
            del self._reports[key]
        self._heard.clear()

    # ------------------------------------------------------------ the view

    def view(self, describe: Describe) -> StorageTraffic:
        """T4: the counts, and the host caches' reports aggregated within bounds. `describe`: a stored object's size and
        name (a look that does not count as a use)."""
        names = {address: host for host, address in self._reports if address}
        transfers = [
            Transfer(
                each.object_id,
                host,
                names.get(each.source, each.source),
                each.done_bytes,
                each.total_bytes,
                each.seconds,
            )
            for (host, _), report in self._reports.items()
            for each in report.transfers
        ]
        transfers.sort(key=lambda each: (-(each.total_bytes - each.done_bytes), each.to, each.object_id))
        hosts, others = self._host_rows()
        return StorageTraffic(
            bytes_sent=self.bytes_sent,
            bytes_sent_to_caches=self.bytes_sent_to_caches,
            bytes_received=self.bytes_received,
            host_count=len(self._reports),
            hosts=hosts,
            other_hosts=others,
            objects=self._objects(transfers, describe),
            transfers=tuple(transfers[:TRANSFER_ROWS]),
            transfer_count=len(transfers),
            transfer_bytes_left=sum(max(0, each.total_bytes - each.done_bytes) for each in transfers),
        )

    def _host_rows(self) -> tuple[tuple[HostTraffic, ...], HostTraffic]:
        rows = [
            dataclasses.replace(report.counts, host=host, address=address, transfers=len(report.transfers))
            for (host, address), report in self._reports.items()
        ]
        rows.sort(key=lambda row: (-(row.transfers > 0), -moved(row), row.host, row.address))
        return tuple(rows[:HOST_ROWS]), summed(rows[HOST_ROWS:])

    def _objects(self, transfers: list[Transfer], describe: Describe) -> tuple[ObjectCopies, ...]:
        holders: dict[bytes, int] = {}
        for report in self._reports.values():
            for object_id in report.copies:
                holders[object_id] = holders.get(object_id, 0) + 1
        fetching: dict[bytes, int] = {}
        for each in transfers:
            fetching[each.object_id] = fetching.get(each.object_id, 0) + 1
        found = []
        for object_id in {*self._copies_sent, *holders, *fetching}:
            described = describe(object_id)
            if described is None or described[0] < LARGE_OBJECT_BYTES:
                continue
            total_bytes, name = described
            copies = ObjectCopies(ObjectID(object_id), name, total_bytes, self._copies_sent.get(object_id, 0),
                                  holders.get(object_id, 0), fetching.get(object_id, 0))  # fmt: skip
            found.append(copies)
        found.sort(key=lambda copies: (-copies.total_bytes, copies.object_id))
        return tuple(found[:OBJECT_ROWS])


def moved(row: HostTraffic) -> int:
    """The bytes a host's cache moved, in and out."""
    return row.bytes_from_storage + row.bytes_from_hosts + row.bytes_to_hosts + row.bytes_uploaded


def summed(rows: Iterable[HostTraffic]) -> HostTraffic:
    """Rows added up into one (no host, no address)."""
    total = HostTraffic()
    for row in rows:
        total = HostTraffic(
            "",
            "",
            total.bytes_from_storage + row.bytes_from_storage,
            total.bytes_from_hosts + row.bytes_from_hosts,
            total.bytes_to_hosts + row.bytes_to_hosts,
            total.bytes_uploaded + row.bytes_uploaded,
            total.held_objects + row.held_objects,
            total.held_bytes + row.held_bytes,
            total.transfers + row.transfers,
        )
    return total
