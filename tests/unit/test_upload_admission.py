"""Turns for the host caches' large uploads (object_storage/upload_admission.py), with made-up times and sizes: one at a
time at first, first come first served; the window widens while one more upload at once raises the aggregate arrival
rate (a storage host whose link is fatter than the hosts', up to as many as upload), and narrows back when it does
not (its link is the limit, shared evenly or not), not tried again for a while; an ask is granted within the bound
however full the window, a turn not used lapses, a peer whose connection ended frees its turn; and the storage
service around it: a host cache's turn is answered once granted, its put ends it, and only a host cache asks.

Checked with the mechanism off (`UploadAdmission._grant` granting every waiter at once): the FIFO, window, bound,
end, withdrawal and service tests fail; with `_sampled` doing nothing, the widening, narrowing and trying-again tests
fail."""

from __future__ import annotations

import pytest

from scaler.object_storage.client_core import TurnsUnknown, status_error
from scaler.object_storage.service import StorageAnswer, StorageService
from scaler.object_storage.store import ObjectStore
from scaler.object_storage.upload_admission import (
    MAX_WAIT_SECONDS,
    REPROBE_UPLOADS,
    Grant,
    UploadAdmission,
)
from scaler.protocol.codec import encode_storage_request
from scaler.protocol.ids import ObjectID
from scaler.protocol.messages import PROTOCOL_VERSION
from scaler.protocol.storage_messages import (
    Put,
    StorageHello,
    StorageOperation,
    StorageReply,
    StorageRequest,
    StorageStatus,
)

pytestmark = pytest.mark.timeout(30)

MB = 1_000_000
#: A link of 12.5 MB/s (100 Mbit/s): 10 MB go up in 0.8 s alone.
LINK = 12.5 * MB


def _peer(index: int) -> bytes:
    return f"cache-{index}".encode()


def _object(index: int) -> bytes:
    return f"object-{index}".encode()


def test_one_at_a_time_first_come_first_served() -> None:
    admission = UploadAdmission()
    assert admission.ask(_peer(1), 11, _object(1), 10 * MB, 0.0) == [Grant(_peer(1), 11)]
    for index in (2, 3, 4):
        assert admission.ask(_peer(index), 10 + index, _object(index), 10 * MB, 0.01 * index) == []
    assert (admission.held, admission.waiting) == (1, 3)
    assert admission.done(_peer(9), _object(1), 0.5) == [], "another peer's put ends nothing"
    assert admission.done(_peer(1), _object(1), 0.8) == [Grant(_peer(2), 12), Grant(_peer(3), 13)], (
        "the first that asked go next (two at once: nothing is known of two yet)"
    )


def _uploads_on(link: str, uploads: int, rounds: int = 1) -> UploadAdmission:
    """`rounds` of `uploads` of 10 MB asked for by as many hosts at once, each put when granted and stored when its
    bytes have come: on a shared link of LINK (`shared`: the uploads in flight share it evenly) or each on a link of its
    own (`own`: the storage host's link is not the limit). Simulated in steps of 1 ms, bytes arriving as links allow."""
    admission = UploadAdmission()
    now, step = 0.0, 0.001
    for _ in range(rounds):
        asked = [_peer(index) for index in range(uploads)]
        left: dict[bytes, float] = {}
        for index, peer in enumerate(asked):
            for grant in admission.ask(peer, index, _object(index), 10 * MB, now):
                left[grant.peer] = 10 * MB
        while left:
            now += step
            for peer in list(left):
                left[peer] -= step * (LINK / len(left) if link == "shared" else LINK)
            for peer in [peer for peer, bytes_left in left.items() if bytes_left <= 0]:
                del left[peer]
                for grant in admission.done(peer, _object(asked.index(peer)), now):
                    left[grant.peer] = 10 * MB
    return admission


def test_the_window_stays_at_one_when_the_storage_hosts_link_is_the_limit() -> None:
    admission = _uploads_on("shared", 8)
    assert admission.window == 1, admission.rates
    assert admission.rates[1] == pytest.approx(LINK) and admission.rates[2] == pytest.approx(LINK, rel=0.05)
    changes = [(before, after) for _, before, after, _ in admission.changes]
    assert changes == [(1, 2), (2, 1)], "two at once tried once, then one at a time"


def test_the_window_widens_when_uploads_side_by_side_arrive_faster() -> None:
    admission = _uploads_on("own", 16, rounds=3)
    assert admission.window > 8, "up to the hosts uploading at once, not a few"
    assert admission.rates[2] == pytest.approx(2 * LINK, rel=0.05) and admission.rates[8] > 7 * LINK


def test_uploads_sharing_the_link_unfairly_do_not_widen_the_window() -> None:
    """A shaper need not share a link evenly: of two uploads granted together, one may be stored well before the other.
    Its own rate is the link's, far above half of it: the pair's, weighed by each one's time, is not."""
    admission = UploadAdmission()
    admission.ask(_peer(1), 1, _object(1), 10 * MB, 0.0)
    admission.ask(_peer(2), 2, _object(2), 10 * MB, 0.0)
    admission.ask(_peer(3), 3, _object(3), 10 * MB, 0.0)
    admission.done(_peer(1), _object(1), 0.8)
    assert admission.window == 2
    admission.done(_peer(2), _object(2), 1.6)  # 10 MB in 0.8 s of the pair's 1.6: the link's whole rate meanwhile
    admission.done(_peer(3), _object(3), 2.4)
    assert admission.window == 1, admission.rates


def test_a_window_that_brought_too_little_is_tried_again_after_many_uploads() -> None:
    admission = UploadAdmission()
    now = 0.0

    def one_alone() -> None:
        nonlocal now
        admission.ask(_peer(1), 1, _object(1), 10 * MB, now)
        now += 0.8
        admission.done(_peer(1), _object(1), now)

    admission.window, admission.rates = 2, {1: LINK}
    admission.ask(_peer(1), 1, _object(1), 10 * MB, now)
    admission.ask(_peer(2), 2, _object(2), 10 * MB, now)
    now += 1.6
    admission.done(_peer(1), _object(1), now)
    admission.done(_peer(2), _object(2), now)
    assert admission.window == 1, "two at once were no faster"
    for _ in range(REPROBE_UPLOADS - 2):
        one_alone()
        assert admission.window == 1, "not tried again yet"
    one_alone()
    one_alone()
    assert admission.window == 2, "tried again"


def test_an_ask_is_granted_within_the_bound_however_full_the_window() -> None:
    admission = UploadAdmission()
    admission.rates = {1: LINK / 100}  # the holder's lease: 4 times its 80 s at that rate
    admission.ask(_peer(1), 1, _object(1), 10 * MB, 0.0)
    admission.ask(_peer(2), 2, _object(2), 10 * MB, 1.0)
    assert admission.tick(MAX_WAIT_SECONDS) == [], "the holder is within its lease, the waiter within the bound"
    assert admission.tick(1.0 + MAX_WAIT_SECONDS) == [Grant(_peer(2), 2)]
    assert admission.held == 2


def test_a_turn_not_used_lapses_and_its_slot_goes_to_the_next() -> None:
    admission = UploadAdmission()
    admission.rates = {1: LINK}
    admission.ask(_peer(1), 1, _object(1), 10 * MB, 0.0)  # a lease of MAX_WAIT_SECONDS: 0.8 s at the learnt rate
    admission.tick(MAX_WAIT_SECONDS)
    assert admission.held == 0
    assert admission.ask(_peer(2), 2, _object(2), 10 * MB, MAX_WAIT_SECONDS + 1) == [Grant(_peer(2), 2)]
    assert admission.done(_peer(1), _object(1), MAX_WAIT_SECONDS + 2) == [], "its late put ends it, taking nothing"
    assert admission.held == 1 and admission.rates == {1: LINK}, "and gives no sample"


def test_a_peer_whose_connection_ended_frees_its_turn_and_its_ask() -> None:
    admission = UploadAdmission()
    admission.ask(_peer(1), 1, _object(1), 10 * MB, 0.0)
    admission.ask(_peer(2), 2, _object(2), 10 * MB, 0.1)
    admission.ask(_peer(3), 3, _object(3), 10 * MB, 0.2)
    assert admission.ended([_peer(2)], 0.3) == [], "a waiter gone: nothing to grant"
    assert admission.ended([_peer(1)], 0.4) == [Grant(_peer(3), 3)], "the holder gone: the next waiter"
    assert (admission.held, admission.waiting) == (1, 0)


def test_an_ask_given_up_is_withdrawn_by_its_put_and_a_new_ask_replaces_the_old() -> None:
    admission = UploadAdmission()
    admission.ask(_peer(1), 1, _object(1), 10 * MB, 0.0)
    admission.ask(_peer(2), 2, _object(2), 10 * MB, 0.1)
    assert admission.done(_peer(2), _object(2), 0.5) == [] and admission.waiting == 0, "it put without its turn"
    admission.ask(_peer(2), 3, _object(3), 10 * MB, 0.6)
    admission.ask(_peer(2), 4, _object(4), 10 * MB, 0.7)
    assert admission.waiting == 1, "one turn per peer: its latest ask"
    assert admission.done(_peer(1), _object(1), 0.8) == [Grant(_peer(2), 4)]


def _call(service: StorageService, peer: bytes, operation: StorageOperation, now: float = 0.0, frames: int = 0) -> (
    StorageAnswer | None
):  # fmt: skip
    payload = [b"x" * 1000] * frames
    return service.handle(peer, encode_storage_request(StorageRequest(1, operation)), payload, now=now)


def test_the_service_answers_a_caches_turn_once_granted_and_its_put_ends_it() -> None:
    service = StorageService(ObjectStore(1 << 30))
    for peer, role in ((b"cache-a", "cache"), (b"cache-b", "cache"), (b"worker", "worker")):
        _call(service, peer, StorageHello(PROTOCOL_VERSION, "3.11.0", role, cache_address=f"tcp://{role}:1"))
    first, second = ObjectID(b"1" * 32), ObjectID(b"2" * 32)
    assert _call(service, b"cache-a", Put(first, b"", 2000, "", (), True), 0.0) is None
    assert [(reply.peer, reply.answer.reply.status) for reply in service.take_outgoing()] == [
        (b"cache-a", StorageStatus.OK)
    ]
    assert _call(service, b"cache-b", Put(second, b"", 2000, "", (), True), 0.1) is None
    assert service.take_outgoing() == [], "the second waits for the first's put"
    stored = _call(service, b"cache-a", Put(first, b"", 2000, ""), 0.9, frames=2)
    assert stored is not None and stored.reply.status is StorageStatus.OK
    assert [reply.peer for reply in service.take_outgoing()] == [b"cache-b"]
    refused = _call(service, b"worker", Put(second, b"", 2000, "", (), True))
    assert refused is not None and refused.reply.status is StorageStatus.BAD_REQUEST, "only a host cache asks"


def test_a_server_that_gives_no_turns_is_told_apart() -> None:
    """An older server answers a turn's put badRequest (no payload): the cache's connection raises TurnsUnknown, and
    the cache uploads without asking from then on (host_cache/upstream.py)."""
    turn = Put(ObjectID(b"1" * 32), b"", 2000, "", (), True)
    reply = StorageReply(1, StorageStatus.BAD_REQUEST, "put of object 31...: header says 2000 bytes")
    assert isinstance(status_error(reply, "tcp://storage:1", turn), TurnsUnknown)
    plain = Put(ObjectID(b"1" * 32), b"", 2000, "")
    assert not isinstance(status_error(reply, "tcp://storage:1", plain), TurnsUnknown)


def test_a_turn_a_reader_waits_for_goes_ahead() -> None:
    """A6: a reader waits at the server for a result its host holds (held_results.py): that result's ask, waiting or
    still to come, is granted next. Checked with `ahead` doing nothing: this fails."""
    admission = UploadAdmission()
    admission.ask(_peer(1), 11, _object(1), 10 * MB, 0.0)
    admission.ask(_peer(2), 12, _object(2), 10 * MB, 0.1)
    admission.ask(_peer(3), 13, _object(3), 10 * MB, 0.2)
    admission.ahead(_object(3))
    assert admission.done(_peer(1), _object(1), 0.8)[0] == Grant(_peer(3), 13), "granted before the earlier ask"
    admission.ask(_peer(4), 14, _object(4), 10 * MB, 0.85)
    admission.ahead(_object(5))
    admission.ask(_peer(5), 15, _object(5), 10 * MB, 0.9)
    assert admission.done(_peer(3), _object(3), 1.6)[0] == Grant(_peer(5), 15), "its ask came later, and goes first"
