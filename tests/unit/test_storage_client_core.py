"""The object storage client's pure core (`scaler/object_storage/client_core.py`), fed by hand: one test per rule of
its header. The shells (blocking, pipelined, asyncio) only carry these outcomes out; their real-server tests are in
tests/integration/test_object_storage.py and test_pipelined_puts.py.

Checked to fail with each rule switched off: with `_send_again` sending no hello, the restart test finds no hello in
what is sent; with it always sending one, it finds two; with the `retried` check removed, the second helloRequired
is sent again instead of failing; with `on_tick` failing every request, the timeout test's second request fails too;
with `PutGate.submit` returning its items at once, the gate tests release before the acknowledgement; with rule 11's
`_in_parts` not called (a getInParts settled by its first answer), the tests of answers in parts find `Answered` where a
`Part` is expected; without `start_over`, the new header after a dropped connection is taken for a part.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from scaler.errors import IncompatiblePeerError, MissingObjects, ObjectStorageException
from scaler.object_storage.client_core import (
    Answered,
    Failed,
    Greeted,
    Notice,
    Part,
    PutFailed,
    Reconnect,
    Refused,
    Released,
    StorageClientCore,
    hello_operation,
    put_operation,
)
from scaler.protocol.ids import ObjectID
from scaler.protocol.storage_messages import (
    AdoptMany,
    AdoptOutcome,
    AdoptOutcomes,
    Exists,
    Get,
    GetInParts,
    Info,
    ObjectSize,
    StorageHello,
    StorageReply,
    StorageRequest,
    StorageStatus,
)

ADDRESS = "tcp://127.0.0.1:2346"


def new_core(timeout_seconds: float = 10.0) -> StorageClientCore[str]:
    return StorageClientCore(ADDRESS, hello_operation("client", "3.11", b"me"), timeout_seconds)


def sent(core: StorageClientCore[str]) -> list[StorageRequest]:
    return [request for request, _ in core.take_outgoing()]


def ok(request: StorageRequest, value: object = None) -> StorageReply:
    return StorageReply(request.request_id, StorageStatus.OK, "", value)  # type: ignore[arg-type]


def answer(request: StorageRequest, status: StorageStatus, reason: str = "") -> StorageReply:
    return StorageReply(request.request_id, status, reason)


def frames(*chunks: bytes) -> list[memoryview]:
    return [memoryview(chunk) for chunk in chunks]


def is_hello(request: StorageRequest) -> bool:
    return isinstance(request.operation, StorageHello)


# ---------------------------------------------------------------- rules 1, 2, 4


def test_a_hello_goes_first_and_requests_follow_it_without_waiting() -> None:
    core = new_core()
    first = core.request(Info(), now=0.0)
    second = core.request(Exists(ObjectID(b"x")), now=0.0)
    hello, info, exists = sent(core)
    assert is_hello(hello) and hello.operation == hello_operation("client", "3.11", b"me")
    assert [info.operation, exists.operation] == [Info(), Exists(ObjectID(b"x"))]
    assert core.on_reply(ok(hello), [], now=0.0) == [Greeted()] and core.is_greeted
    assert core.on_reply(ok(exists, True), [], now=0.0) == [Answered(second, ok(exists, True), [])]  # any order
    assert core.on_reply(ok(info, 3), frames(b"ab"), now=0.0) == [Answered(first, ok(info, 3), frames(b"ab"))]
    core.request(Info(), now=0.0)
    assert not any(is_hello(request) for request in sent(core))  # greeted once per connection


def test_an_answer_that_is_not_ok_fails_its_request_with_the_error_its_status_means() -> None:
    core = new_core()
    ticket = core.request(Get(ObjectID(b"gone")), now=0.0)
    hello, get = sent(core)
    core.on_reply(ok(hello), [], now=0.0)
    [failed] = core.on_reply(answer(get, StorageStatus.NOT_FOUND, "object 676f6e65 is not stored"), [], now=0.0)
    assert isinstance(failed, Failed) and failed.ticket == ticket and isinstance(failed.error, MissingObjects)
    assert str(failed.error) == f"object 676f6e65 is not in object storage at {ADDRESS}"


def test_a_refused_hello_fails_every_pending_request_and_every_later_one() -> None:
    core = new_core()
    tickets = [core.request(Info(), now=0.0) for _ in range(3)]
    hello, *_ = sent(core)
    outcomes = core.on_reply(answer(hello, StorageStatus.REFUSED, "protocol version 99"), [], now=0.0)
    assert [outcome.ticket for outcome in outcomes if isinstance(outcome, Failed)] == tickets
    assert all(isinstance(outcome.error, IncompatiblePeerError) for outcome in outcomes if isinstance(outcome, Failed))
    refused = outcomes[-1]
    assert isinstance(refused, Refused) and "refused the connection: protocol version 99" in str(refused.error)
    with pytest.raises(IncompatiblePeerError, match="protocol version 99"):
        core.request(Info(), now=0.0)


def test_an_answer_to_no_pending_request_is_dropped() -> None:
    core = new_core()
    core.request(Info(), now=0.0)
    hello, info = sent(core)
    assert core.on_reply(StorageReply(999, StorageStatus.OK), [], now=0.0) == []
    core.on_reply(ok(hello), [], now=0.0)
    assert len(core.on_reply(ok(info, 1), [], now=0.0)) == 1
    assert core.on_reply(ok(info, 1), [], now=0.0) == []  # the same answer twice: the second is stale


# ---------------------------------------------------------------- rule 3: a restarted server


def test_hello_required_greets_once_for_all_pipelined_requests_and_sends_each_again_under_a_new_id() -> None:
    core = new_core()
    tickets = [core.request(Exists(ObjectID(bytes([index]))), now=0.0) for index in range(3)]
    hello, *requests = sent(core)
    core.on_reply(ok(hello), [], now=0.0)
    notices = []
    for request in requests:  # the server restarted: each of them is answered helloRequired
        notices += core.on_reply(answer(request, StorageStatus.HELLO_REQUIRED), [], now=0.0)
    assert notices == [Notice(f"object storage at {ADDRESS} asks for a hello again; greeting it and retrying")]
    again = sent(core)
    assert is_hello(again[0]) and not any(is_hello(request) for request in again[1:])
    assert [request.operation for request in again[1:]] == [request.operation for request in requests]
    assert {request.request_id for request in again[1:]}.isdisjoint(request.request_id for request in requests)
    core.on_reply(ok(again[0]), [], now=0.0)
    outcomes = [core.on_reply(ok(request, True), [], now=0.0)[0] for request in again[1:]]
    assert [outcome.ticket for outcome in outcomes if isinstance(outcome, Answered)] == tickets


def test_a_second_hello_required_fails_the_request() -> None:
    core = new_core()
    ticket = core.request(Info(), now=0.0)
    _, info = sent(core)
    core.on_reply(answer(info, StorageStatus.HELLO_REQUIRED), [], now=0.0)
    hello, info_again = sent(core)
    assert is_hello(hello)
    [failed] = core.on_reply(answer(info_again, StorageStatus.HELLO_REQUIRED), [], now=0.0)
    assert isinstance(failed, Failed) and failed.ticket == ticket
    assert "answered helloRequired to a info request" in str(failed.error)
    assert sent(core) == []


def test_a_dropped_connection_sends_every_unanswered_request_again_behind_a_new_hello() -> None:
    """Rule 9: the server died with the requests unanswered; they go again, in order, with their deadlines."""
    core = new_core(timeout_seconds=10.0)
    tickets = [core.request(Exists(ObjectID(bytes([index]))), now=0.0) for index in range(2)]
    hello, *requests = sent(core)
    core.on_reply(ok(hello), [], now=0.0)
    [notice] = core.on_disconnected()
    assert isinstance(notice, Notice) and "sending 2 unanswered request(s) again" in notice.text
    assert not core.is_greeted
    hello_again, *again = sent(core)
    assert is_hello(hello_again) and [request.operation for request in again] == [r.operation for r in requests]
    assert core.on_reply(ok(requests[0], True), [], now=0.0) == []  # an answer from the old connection is stale
    assert core.next_deadline() == 10.0
    core.on_reply(ok(hello_again), [], now=0.0)
    outcomes = [core.on_reply(ok(request, True), [], now=0.0)[0] for request in again]
    assert [outcome.ticket for outcome in outcomes if isinstance(outcome, Answered)] == tickets


def test_a_dropped_connection_with_nothing_pending_greets_with_the_next_request() -> None:
    core = new_core()
    core.request(Info(), now=0.0)
    hello, info = sent(core)
    core.on_reply(ok(hello), [], now=0.0)
    core.on_reply(ok(info, None), [], now=0.0)
    assert core.on_disconnected() == [] and sent(core) == []
    core.request(Info(), now=1.0)
    assert [is_hello(request) for request in sent(core)] == [True, False]


# ---------------------------------------------------------------- rules 5-7: time, a broken connection, closing


def test_a_request_past_its_deadline_fails_alone_and_its_late_answer_is_dropped() -> None:
    core = new_core(timeout_seconds=10.0)
    slow = core.request(Get(ObjectID(b"big")), now=0.0, timeout_seconds=1.0)
    patient = core.request(Info(), now=0.0)
    _, get, info = sent(core)
    assert core.next_deadline() == 1.0
    assert core.on_tick(0.5) == []
    [failed] = core.on_tick(1.0)
    assert isinstance(failed, Failed) and failed.ticket == slow
    assert str(failed.error) == f"object storage at {ADDRESS} sent nothing for 1 s (stopped, frozen or cut off)"
    assert core.on_reply(ok(get), [], now=0.0) == []  # late
    assert core.next_deadline() == 10.0
    assert [outcome.ticket for outcome in core.on_reply(ok(info, 1), [], now=0.0) if isinstance(outcome, Answered)] == [
        patient
    ]


@pytest.mark.parametrize(
    ("event", "text"),
    [
        (lambda core: core.on_bad_reply("not capnp"), f"object storage at {ADDRESS} sent a bad reply: not capnp"),
        (
            lambda core: core.on_unreachable(),
            f"object storage at {ADDRESS} is not reachable: no connection within 10 s",
        ),
        (lambda core: core.on_send_failed("ETERM"), f"could not send to object storage at {ADDRESS}: ETERM"),
    ],
)
def test_an_unusable_connection_fails_every_request_and_the_next_one_greets_a_new_socket(event, text) -> None:  # type: ignore[no-untyped-def]
    core = new_core()
    tickets = [core.request(Info(), now=0.0) for _ in range(2)]
    hello, *_ = sent(core)
    core.on_reply(ok(hello), [], now=0.0)
    outcomes = event(core)
    assert [outcome.ticket for outcome in outcomes if isinstance(outcome, Failed)] == tickets
    assert all(str(outcome.error).startswith(text) for outcome in outcomes if isinstance(outcome, Failed))
    assert outcomes[-1] == Reconnect() and not core.is_greeted
    core.request(Info(), now=0.0)
    assert is_hello(sent(core)[0])


def test_a_closed_connection_fails_what_waits_and_refuses_what_comes() -> None:
    core = new_core()
    ticket = core.request(Info(), now=0.0)
    [failed] = core.on_closed()
    assert isinstance(failed, Failed) and failed.ticket == ticket and "was closed" in str(failed.error)
    with pytest.raises(ObjectStorageException, match="is closed"):
        core.request(Info(), now=0.0)


def test_the_send_deadline_is_the_connect_timeout_or_the_shorter_reply_timeout() -> None:
    assert new_core(timeout_seconds=60.0).send_deadline(100.0) == 110.0
    assert new_core(timeout_seconds=0.5).send_deadline(100.0) == 100.5


# ---------------------------------------------------------------- rule 8: the put gate


def gated_put(core: StorageClientCore[str], name: bytes, size: int = 100) -> int:
    payload: Sequence[memoryview] = frames(b"x" * size)
    return core.put_gated(ObjectID(name), payload, b"me", name.decode(), now=0.0)


def test_items_held_behind_gated_puts_leave_in_order_once_every_earlier_put_is_acknowledged() -> None:
    core = new_core()
    assert core.hold(["before any put"]) == ["before any put"]
    gated_put(core, b"a")
    assert core.hold(["needs a"]) == []
    gated_put(core, b"b", size=50)
    assert core.hold(["needs a and b"]) == [] and core.gated_bytes == 150
    hello, put_a, put_b = sent(core)
    assert put_a.operation == put_operation(b"a", frames(b"x" * 100), b"me", "a")
    core.on_reply(ok(hello), [], now=0.0)
    assert core.on_reply(ok(put_b), [], now=0.0) == []  # b alone does not release what waits on a
    assert core.on_reply(ok(put_a), [], now=0.0) == [Released(["needs a", "needs a and b"])]
    assert core.is_idle and core.gated_bytes == 0


def test_a_failed_gated_put_names_its_object_and_dooms_the_items_held_after_it() -> None:
    core = new_core()
    gated_put(core, b"a")
    core.hold(["needs a"])
    gated_put(core, b"b")
    core.hold(["needs b"])
    hello, put_a, put_b = sent(core)
    core.on_reply(ok(hello), [], now=0.0)
    [failed] = core.on_reply(answer(put_a, StorageStatus.FULL, "no room"), [], now=0.0)
    assert isinstance(failed, PutFailed) and failed.object_id == ObjectID(b"a")
    assert failed.doomed == ["needs a", "needs b"] and "no room" in str(failed.error)
    assert core.on_reply(ok(put_b), [], now=0.0) == [] and core.is_idle


def test_a_gated_put_past_its_deadline_fails_like_a_refused_one() -> None:
    core = new_core(timeout_seconds=5.0)
    gated_put(core, b"a")
    core.hold(["needs a"])
    [failed] = core.on_tick(5.0)
    assert (
        isinstance(failed, PutFailed) and failed.doomed == ["needs a"] and "sent nothing for 5 s" in str(failed.error)
    )


# ---------------------------------------------------------------- rule 10: gated adopts batched


def gated_adopt(core: StorageClientCore[str], name: bytes, size: int = 100) -> int:
    payload: Sequence[memoryview] = frames(b"x" * size)
    return core.put_gated(ObjectID(name), payload, b"me", name.decode(), now=0.0, adopt_file=f"{name.decode()}.put")


def test_gated_adopts_queued_together_go_as_one_request_settled_one_by_one() -> None:
    """Checked by hand with the mechanism off (MAX_ADOPTS_PER_BATCH = 1): three adopts are sent, not one adoptMany."""
    core = new_core()
    for name in (b"a", b"b", b"c"):
        gated_adopt(core, name)
        core.hold([f"needs {name.decode()}"])
    hello, batch = sent(core)
    assert isinstance(batch.operation, AdoptMany)
    assert [adopt.file_name for adopt in batch.operation.adopts] == ["a.put", "b.put", "c.put"]
    assert core.on_reply(ok(hello), [], now=0.0) == [Greeted()]
    outcomes = AdoptOutcomes(
        (AdoptOutcome(StorageStatus.OK), AdoptOutcome(StorageStatus.BAD_REQUEST, "b.put: torn"),
         AdoptOutcome(StorageStatus.OK))
    )  # fmt: skip
    released, failed = core.on_reply(ok(batch, outcomes), [], now=0.0)
    # a's item leaves; b's failure dooms what was held after b was issued (c's item too: it may have needed b)
    assert released == Released(["needs a"])
    assert isinstance(failed, PutFailed) and failed.object_id == ObjectID(b"b") and "torn" in str(failed.error)
    assert failed.doomed == ["needs b", "needs c"]
    assert core.is_idle and core.gated_bytes == 0


def test_an_adopt_many_that_is_refused_whole_fails_each_adopt() -> None:
    core = new_core()
    gated_adopt(core, b"a")
    gated_adopt(core, b"b")
    core.hold(["needs both"])
    hello, batch = sent(core)
    core.on_reply(ok(hello), [], now=0.0)
    failures = core.on_reply(answer(batch, StorageStatus.BAD_REQUEST, "no segment directory"), [], now=0.0)
    assert [failure.object_id for failure in failures if isinstance(failure, PutFailed)] == [b"a", b"b"]
    assert core.is_idle and core.gated_bytes == 0


def test_an_adopt_many_goes_again_whole_after_a_dropped_connection() -> None:
    core = new_core()
    gated_adopt(core, b"a")
    gated_adopt(core, b"b")
    core.hold(["needs both"])
    _, batch = sent(core)
    core.on_disconnected()
    hello, again = sent(core)
    assert is_hello(hello) and again.operation == batch.operation and again.request_id != batch.request_id
    core.on_reply(ok(hello), [], now=0.0)
    outcomes = AdoptOutcomes((AdoptOutcome(StorageStatus.OK), AdoptOutcome(StorageStatus.OK)))
    assert core.on_reply(ok(batch, outcomes), [], now=0.0) == []  # the first sending's answer is stale
    assert core.on_reply(ok(again, outcomes), [], now=0.0) == [Released(["needs both"])]


# ---------------------------------------------------------------- rule 11


def header(request: StorageRequest, sizes: tuple[int, ...], parts: int) -> StorageReply:
    return StorageReply(request.request_id, StorageStatus.OK, "", ObjectSize(sum(sizes)), sizes, parts)


def test_an_answer_in_parts_comes_as_its_header_then_each_part_and_is_answered_by_its_last() -> None:
    """Rule 11: the request stays pending until its last part; each part is handed on as it comes."""
    core = new_core()
    ticket = core.request(GetInParts(ObjectID(b"o")), now=0.0)
    hello, get = sent(core)
    core.on_reply(ok(hello), [], now=0.0)
    [first] = core.on_reply(header(get, (1, 5), 3), [], now=0.0)
    assert isinstance(first, Part) and first.ticket == ticket and first.reply.frame_bytes == (1, 5) and not first.frames
    part = ok(get)
    [one] = core.on_reply(part, frames(b"m"), now=0.0)
    [two] = core.on_reply(part, frames(b"abc"), now=0.0)
    assert isinstance(one, Part) and bytes(one.frames[0]) == b"m" and isinstance(two, Part)
    assert core.pending_count == 1
    last, answered = core.on_reply(part, frames(b"de"), now=0.0)
    assert isinstance(last, Part) and bytes(last.frames[0]) == b"de"
    assert isinstance(answered, Answered) and answered.ticket == ticket and answered.reply.parts == 3
    assert core.pending_count == 0
    assert core.on_reply(part, frames(b"x"), now=0.0) == []  # nothing more is expected: stale


def test_an_answer_in_parts_that_came_whole_is_answered_at_once_and_a_missing_object_fails() -> None:
    core = new_core()
    small = core.request(GetInParts(ObjectID(b"s")), now=0.0)
    missing = core.request(GetInParts(ObjectID(b"m")), now=0.0)
    hello, get_small, get_missing = sent(core)
    core.on_reply(ok(hello), [], now=0.0)
    [answered] = core.on_reply(ok(get_small, ObjectSize(3)), frames(b"abc"), now=0.0)
    assert isinstance(answered, Answered) and answered.ticket == small and bytes(answered.frames[0]) == b"abc"
    [failed] = core.on_reply(answer(get_missing, StorageStatus.NOT_FOUND), [], now=0.0)
    assert isinstance(failed, Failed) and failed.ticket == missing and isinstance(failed.error, MissingObjects)


def test_an_answer_in_parts_starts_over_when_its_request_goes_again_after_a_dropped_connection() -> None:
    """Rules 9 and 11: parts of the answer on the dropped connection are stale; the new answer's header comes."""
    core = new_core()
    ticket = core.request(GetInParts(ObjectID(b"o")), now=0.0)
    hello, get = sent(core)
    core.on_reply(ok(hello), [], now=0.0)
    core.on_reply(header(get, (4,), 2), [], now=0.0)
    core.on_reply(ok(get), frames(b"ab"), now=0.0)
    core.on_disconnected()
    hello_again, get_again = sent(core)
    assert core.on_reply(ok(get), frames(b"cd"), now=0.0) == []  # the rest of the old answer: stale
    core.on_reply(ok(hello_again), [], now=0.0)
    [first] = core.on_reply(header(get_again, (4,), 2), [], now=0.0)
    assert isinstance(first, Part) and first.reply.parts == 2
    core.on_reply(ok(get_again), frames(b"ab"), now=0.0)
    _, answered = core.on_reply(ok(get_again), frames(b"cd"), now=0.0)
    assert isinstance(answered, Answered) and answered.ticket == ticket


def test_an_abandoned_request_drops_what_comes_for_it_later() -> None:
    core = new_core()
    ticket = core.request(GetInParts(ObjectID(b"o")), now=0.0)
    hello, get = sent(core)
    core.on_reply(ok(hello), [], now=0.0)
    core.on_reply(header(get, (4,), 2), [], now=0.0)
    core.abandon(ticket)
    assert core.pending_count == 0 and core.next_deadline() is None
    assert core.on_reply(ok(get), frames(b"ab"), now=0.0) == []


def test_a_part_with_other_than_one_frame_makes_the_connection_unusable() -> None:
    core = new_core()
    ticket = core.request(GetInParts(ObjectID(b"o")), now=0.0)
    hello, get = sent(core)
    core.on_reply(ok(hello), [], now=0.0)
    core.on_reply(header(get, (4,), 2), [], now=0.0)
    failed, reconnect = core.on_reply(ok(get), frames(b"a", b"b"), now=0.0)
    assert isinstance(failed, Failed) and failed.ticket == ticket and "one expected" in str(failed.error)
    assert isinstance(reconnect, Reconnect)


# ---------------------------------------------------------------- rule 5: the timeout bounds the silence


def test_a_get_in_parts_that_keeps_moving_is_never_cut_and_one_that_stops_fails_after_the_silence_bound() -> None:
    """A 100-part answer over 90 s with a 1 s timeout: a part every 0.9 s keeps it going to its end; the same answer
    stalled after its 50th part fails 1 s after that part."""
    for stall_after in (None, 50):
        core = new_core(timeout_seconds=1.0)
        ticket = core.request(GetInParts(ObjectID(b"big")), now=0.0)
        hello, get = sent(core)
        core.on_reply(ok(hello), [], now=0.0)
        core.on_reply(header(get, (100,), 100), [], now=0.5)
        part = StorageReply(get.request_id, StorageStatus.OK)
        outcomes: list[object] = []
        for index in range(100):
            now = 0.5 + 0.9 * (index + 1)
            outcomes += core.on_tick(now - 0.01)  # just before the part: the silence was 0.89 s
            if index == stall_after:
                break
            outcomes += core.on_reply(part, frames(b"x"), now=now)
        if stall_after is None:
            assert [type(outcome) for outcome in outcomes][-2:] == [Part, Answered]
            assert not any(isinstance(outcome, Failed) for outcome in outcomes)
            continue
        last_heard = 0.5 + 0.9 * stall_after
        assert core.next_deadline() == last_heard + 1.0
        assert core.on_tick(last_heard + 0.99) == []
        [failed] = core.on_tick(last_heard + 1.0)
        assert isinstance(failed, Failed) and failed.ticket == ticket and "sent nothing for 1 s" in str(failed.error)


def test_a_request_behind_a_long_answer_waits_while_that_answer_moves() -> None:
    """The server answers in order: an exists sent behind a 100-part get is not cut while the get's parts come, however
    long that takes, and is cut once the connection goes silent."""
    core = new_core(timeout_seconds=1.0)
    core.request(GetInParts(ObjectID(b"big")), now=0.0)
    behind = core.request(Exists(ObjectID(b"small")), now=0.0)
    hello, get, _exists = sent(core)
    core.on_reply(ok(hello), [], now=0.1)
    core.on_reply(header(get, (30,), 30), [], now=0.2)
    part = StorageReply(get.request_id, StorageStatus.OK)
    for index in range(30):
        assert core.on_tick(0.2 + 0.9 * index + 0.89) == []
        core.on_reply(part, frames(b"x"), now=0.2 + 0.9 * (index + 1))
    last = 0.2 + 0.9 * 30
    assert core.on_tick(last + 0.5) == []
    [failed] = core.on_tick(last + 1.0)
    assert isinstance(failed, Failed) and failed.ticket == behind


def test_a_stale_answer_is_heard_too_and_a_request_sent_again_keeps_the_time_it_was_sent() -> None:
    """A late answer to a request that was cut shows the server alive (the next request's silence starts there); a
    request sent again after a dropped connection is bounded from its first sending, not from the new one."""
    core = new_core(timeout_seconds=1.0)
    core.request(Get(ObjectID(b"cut")), now=0.0)
    hello, get = sent(core)
    core.on_reply(ok(hello), [], now=0.0)
    [failed] = core.on_tick(1.0)
    assert isinstance(failed, Failed)
    waiting = core.request(Info(), now=1.5)
    sent(core)
    assert core.on_reply(ok(get), frames(b"late"), now=2.0) == []  # stale, but heard
    assert core.next_deadline() == 3.0
    core.on_disconnected()
    sent(core)
    assert core.next_deadline() == 3.0  # the time heard and sent are kept: no new second of grace
    [failed] = core.on_tick(3.0)
    assert isinstance(failed, Failed) and failed.ticket == waiting
