"""Where bytes live and move, as the storage server and its host caches count them (pure): traffic.py's rules T1-T4
(the storage server's book and its bounded view), the cache's ledger (host_cache/ledger.py, L1-L3), and the service
answering `hostReport` and `info` with them.

Checked with each mechanism off: `TrafficBook.copy_sent` counting nothing fails the copies tests (and the service's);
`_host_rows` unbounded (every row, no sum) fails the bounds test; `sweep` forgetting nothing fails the sweep test;
`Ledger.report_due` always True fails the pace test; `Ledger.fetched` ignoring the source fails the split test.
"""

from __future__ import annotations

import os

from scaler.object_storage.host_cache.ledger import COPIES_REPORTED, KEEPALIVE_SECONDS, Ledger
from scaler.object_storage.service import StorageService
from scaler.object_storage.traffic import HOST_ROWS, LARGE_OBJECT_BYTES, OBJECT_ROWS, TRANSFER_ROWS, TrafficBook
from scaler.protocol.codec import encode_storage_request
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    Get,
    HostReport,
    HostTraffic,
    Info,
    Put,
    StorageHello,
    StorageInfo,
    StorageOperation,
    StorageRequest,
    StorageStatus,
    StorageTraffic,
    Transfer,
)

MiB = 1 << 20
BIG, SMALL = ObjectID(b"b" * 32), ObjectID(b"s" * 32)


def _report(
    host: str, copies: tuple[bytes, ...] = (), transfers: tuple[Transfer, ...] = (), **counts: int
) -> HostReport:
    return HostReport(HostTraffic(host, **counts), tuple(ObjectID(c) for c in copies), transfers)


def _describe(sizes: dict[bytes, int]):  # type: ignore[no-untyped-def]
    return lambda object_id: (sizes[object_id], f"object {object_id[:1].decode()}") if object_id in sizes else None


# ---------------------------------------------------------------- the storage server's book (traffic.py)


def test_bytes_are_counted_with_those_to_host_caches_apart() -> None:
    book = TrafficBook()
    book.sent(100, to_cache=False)
    book.sent(40, to_cache=True)
    book.received(7)
    view = book.view(_describe({}))
    assert (view.bytes_sent, view.bytes_sent_to_caches, view.bytes_received) == (140, 40, 7)


def test_whole_copies_of_large_objects_are_counted_and_forgotten_when_deleted() -> None:
    book = TrafficBook(max_objects=2)
    for _ in range(3):
        book.copy_sent(BIG, 4 * MiB)
    book.copy_sent(SMALL, LARGE_OBJECT_BYTES - 1)
    assert (book.copies_sent(BIG), book.copies_sent(SMALL)) == (3, 0)
    view = book.view(_describe({BIG: 4 * MiB}))
    assert [(o.object_id, o.total_bytes, o.copies_sent, o.name) for o in view.objects] == [
        (BIG, 4 * MiB, 3, "object b")
    ]
    book.forget([BIG])
    assert book.copies_sent(BIG) == 0
    for index in range(3):  # beyond max_objects, the least recently sent go first
        book.copy_sent(bytes([index]) * 32, MiB)
    assert [book.copies_sent(bytes([index]) * 32) for index in range(3)] == [0, 1, 1]


def test_reports_give_each_hosts_row_the_copies_held_and_the_transfers_with_their_sources_named() -> None:
    book = TrafficBook()
    on_its_way = Transfer(BIG, "", "tcp://10.0.0.1:5000", MiB, 8 * MiB, 2.0)
    book.reported("tcp://10.0.0.1:5000", _report("host-a", (BIG,), bytes_from_storage=8 * MiB, bytes_to_hosts=MiB))
    book.reported("tcp://10.0.0.2:5000", _report("host-b", (), (on_its_way,), bytes_from_hosts=MiB))
    book.copy_sent(BIG, 8 * MiB)
    view = book.view(_describe({BIG: 8 * MiB}))
    assert view.host_count == 2
    assert [(row.host, row.address, row.transfers) for row in view.hosts] == [
        ("host-b", "tcp://10.0.0.2:5000", 1),  # a host with a transfer under way first
        ("host-a", "tcp://10.0.0.1:5000", 0),
    ]
    assert view.transfers == (Transfer(BIG, "host-b", "host-a", MiB, 8 * MiB, 2.0),)
    assert (view.transfer_count, view.transfer_bytes_left) == (1, 7 * MiB)
    (copies,) = view.objects
    assert (copies.copies_sent, copies.hosts, copies.fetching) == (1, 1, 1)


def test_a_cache_that_stops_reporting_is_forgotten_between_two_sweeps() -> None:
    book = TrafficBook()
    book.reported("a", _report("host-a"))
    book.reported("b", _report("host-b"))
    book.sweep()  # both reported since the start
    book.reported("a", _report("host-a", bytes_uploaded=5))
    book.sweep()
    assert [(row.host, row.bytes_uploaded) for row in book.view(_describe({})).hosts] == [("host-a", 5)]


def test_the_view_is_bounded_however_many_hosts_report() -> None:
    book = TrafficBook()
    hosts = 3 * HOST_ROWS
    for index in range(hosts):
        transfers = tuple(
            Transfer(ObjectID(bytes([n]) * 32), "", "", 0, (index + 1) * MiB, 1.0) for n in range(2)
        ) if index % 10 == 0 else ()  # fmt: skip
        copies = tuple(bytes([n]) * 32 for n in range(OBJECT_ROWS + 5))
        book.reported(f"tcp://h{index}:1", _report(f"h{index:03}", copies, transfers, bytes_from_storage=index))
    sizes = {bytes([n]) * 32: (n + 1) * MiB for n in range(OBJECT_ROWS + 5)}
    view = book.view(_describe(sizes))
    assert view.host_count == hosts and len(view.hosts) == HOST_ROWS
    shown = {row.host for row in view.hosts}
    assert {f"h{index:03}" for index in range(0, hosts, 10)} <= shown  # those with transfers first
    assert view.other_hosts.bytes_from_storage == sum(range(hosts)) - sum(row.bytes_from_storage for row in view.hosts)
    assert len(view.transfers) == TRANSFER_ROWS and view.transfer_count == 2 * len(range(0, hosts, 10))
    assert view.transfers[0].total_bytes == max(index + 1 for index in range(0, hosts, 10)) * MiB
    assert [o.total_bytes for o in view.objects] == [(n + 1) * MiB for n in reversed(range(5, OBJECT_ROWS + 5))]
    assert all(o.hosts == hosts for o in view.objects)


# ---------------------------------------------------------------- a host cache's ledger (host_cache/ledger.py)


def _held(*object_ids: bytes):  # type: ignore[no-untyped-def]
    return lambda object_id: object_id in object_ids


def test_the_ledger_splits_the_bytes_by_source_and_reports_the_transfers_under_way() -> None:
    ledger = Ledger()
    ledger.begun(BIG, "tcp://10.0.0.1:5000", 8 * MiB, now=10.0)
    ledger.progress(BIG, 4 * MiB)
    report = ledger.report(HostTraffic("host-b"), _held(), now=12.5)
    assert report.transfers == (Transfer(BIG, "", "tcp://10.0.0.1:5000", 4 * MiB, 8 * MiB, 2.5),)
    ledger.fetched(BIG, 8 * MiB, "tcp://10.0.0.1:5000")
    ledger.fetched(SMALL, 2 * MiB)
    ledger.uploaded(ObjectID(b"r" * 32), 3 * MiB)
    report = ledger.report(HostTraffic("host-b", bytes_to_hosts=5), _held(BIG, SMALL), now=13.0)
    counts = report.counts
    assert (counts.bytes_from_storage, counts.bytes_from_hosts, counts.bytes_uploaded) == (2 * MiB, 8 * MiB, 3 * MiB)
    assert (report.transfers, report.copies, counts.bytes_to_hosts) == ((), (BIG, SMALL), 5)  # the result was evicted


def test_a_failed_fetch_is_no_longer_under_way_and_the_copies_reported_are_bounded() -> None:
    ledger = Ledger()
    ledger.begun(BIG, "", 8 * MiB, now=0.0)
    ledger.failed(BIG)
    for index in range(COPIES_REPORTED + 10):
        ledger.fetched(index.to_bytes(32, "big"), MiB + index)
    report = ledger.report(HostTraffic("h"), lambda _: True, now=1.0)
    assert report.transfers == () and len(report.copies) == COPIES_REPORTED
    assert report.copies[0] == (COPIES_REPORTED + 9).to_bytes(32, "big")  # the largest first


def test_a_report_is_due_when_it_changed_or_once_in_a_while() -> None:
    ledger = Ledger()
    ledger.begun(BIG, "", 8 * MiB, now=0.0)
    assert ledger.report_due(ledger.report(HostTraffic("h"), _held(), 1.0), 1.0)
    assert not ledger.report_due(ledger.report(HostTraffic("h"), _held(), 2.0), 2.0)  # only the transfer's age moved
    ledger.progress(BIG, MiB)
    assert ledger.report_due(ledger.report(HostTraffic("h"), _held(), 3.0), 3.0)
    assert not ledger.report_due(ledger.report(HostTraffic("h"), _held(), 4.0), 4.0)
    later = 3.0 + KEEPALIVE_SECONDS
    assert ledger.report_due(ledger.report(HostTraffic("h"), _held(), later), later)


# ---------------------------------------------------------------- the storage service


class Service:
    def __init__(self) -> None:
        self.service = StorageService()
        self.request_id = 0

    def call(
        self, peer: bytes, operation: StorageOperation, frames: list[bytes] | None = None
    ) -> tuple[StorageStatus, object]:
        self.request_id += 1
        request = encode_storage_request(StorageRequest(self.request_id, operation))
        answer = self.service.handle(peer, request, frames or [])
        assert answer is not None
        return answer.reply.status, answer.reply.value


def test_the_service_counts_copies_sent_and_answers_info_with_the_caches_reports() -> None:
    served = Service()
    cache, client = b"cache-a", b"client-1"
    served.call(cache, StorageHello(PROTOCOL_VERSION, "3.11.0", "cache", cache_address="tcp://10.0.0.1:5000"))
    served.call(client, StorageHello(PROTOCOL_VERSION, "3.11.0", "client", b"Client|1"))
    payload = os.urandom(2 * MiB)
    assert (
        served.call(client, Put(BIG, b"Client|1", len(payload), "argument of bytes"), [payload])[0] is StorageStatus.OK
    )
    for _ in range(2):
        status, _ = served.call(cache, Get(BIG))
        assert status is StorageStatus.OK
    refused, _ = served.call(client, HostReport(HostTraffic("laptop")))
    assert refused is StorageStatus.BAD_REQUEST  # only a host cache reports
    assert served.call(cache, _report("host-a", (BIG,), bytes_from_storage=4 * MiB))[0] is StorageStatus.OK
    status, info = served.call(client, Info())
    assert status is StorageStatus.OK and isinstance(info, StorageInfo)
    traffic = info.traffic
    assert isinstance(traffic, StorageTraffic)
    assert [(row.host, row.address, row.bytes_from_storage) for row in traffic.hosts] == [
        ("host-a", "tcp://10.0.0.1:5000", 4 * MiB)
    ]
    (copies,) = traffic.objects
    assert (copies.object_id, copies.name, copies.total_bytes, copies.copies_sent, copies.hosts) == (
        BIG, "argument of bytes", 2 * MiB, 2, 1
    )  # fmt: skip
