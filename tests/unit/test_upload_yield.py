"""A host cache's large upload yields to the reads other hosts make of this host (host_cache/upload_yield.py, and the
shell's measure, `upstream.queued_to_peers`): it goes at once when nothing waits to leave for other hosts, waits while
something does, asking the storage server now and then whether a reader waits for it there (then it goes) or it was
deleted (then it is skipped), and never longer than the bound; the measure sees the bytes a connection served on the
cache's port has not sent yet.

A fresh held result settles before its upload goes (Y7): it waits though nothing waits to leave yet, until reads
begin (then it waits for them) or the settle ends, and goes at once when a reader waits for it at the storage server.

Checked with the mechanism off (`UploadYield.step` returning GO at once): the waiting, asking and skipping tests fail;
with `settled` always true, the settling test fails;
with `queued_to_peers` returning 0, the measure's test fails."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest

from scaler.object_storage.host_cache.upload_yield import (
    ASK_SECONDS,
    MAX_YIELD_SECONDS,
    POLL_SECONDS,
    SETTLE_SECONDS,
    Step,
    UploadYield,
)
from scaler.object_storage.host_cache.upstream import queued_to_peers


def test_an_upload_goes_at_once_when_nothing_waits_to_leave_for_other_hosts() -> None:
    assert UploadYield(held=False).step(0) == (Step.GO, 0.0)
    plan = UploadYield(held=True)
    assert plan.step(0) == (Step.ASK, 0.0)  # Y5: a held one asks first whether it is still wanted at all
    plan.answered(False)
    assert plan.step(0) == (Step.GO, 0.0)


def test_an_upload_waits_while_bytes_wait_to_leave_for_other_hosts_asking_what_is_wanted_now_and_then() -> None:
    plan = UploadYield(held=True)
    assert plan.step(10 << 20) == (Step.ASK, 0.0)  # Y5: at once when it begins to wait
    plan.answered(False)
    steps = []
    while (step := plan.step(1))[0] is Step.WAIT:
        steps.append(step)
        plan.slept(step[1])
    assert step[0] is Step.ASK and ASK_SECONDS <= plan.waited < ASK_SECONDS + 2 * POLL_SECONDS  # Y5: again
    assert {seconds for _, seconds in steps} == {POLL_SECONDS}
    assert plan.step(0) == (Step.GO, 0.0)  # Y1: the reads ended


def test_an_upload_a_reader_waits_for_at_the_storage_server_goes_though_other_hosts_read() -> None:
    plan = UploadYield(held=True)
    assert plan.step(1)[0] is Step.ASK
    plan.answered(True)
    assert plan.step(1) == (Step.GO, 0.0)


def test_an_upload_of_an_object_deleted_meanwhile_is_skipped() -> None:
    plan = UploadYield(held=True)
    assert plan.step(1)[0] is Step.ASK
    plan.answered(None)
    assert plan.step(0) == (Step.SKIP, 0.0)


def test_once_its_turn_is_granted_an_upload_waits_again_for_reads_begun_meanwhile_and_goes_even_if_deleted() -> None:
    plan = UploadYield(held=True)
    assert plan.step(0)[0] is Step.ASK
    plan.answered(False)
    assert plan.step(0)[0] is Step.GO  # then it asks its turn, and waits for it at the storage server
    plan.granted()
    assert plan.step(1) == (Step.WAIT, POLL_SECONDS)  # other hosts' reads began meanwhile
    plan.answered(None)  # deleted meanwhile: its put ends the turn (unused, it would hold others back)
    assert plan.step(1) == (Step.GO, 0.0)


def test_an_upload_waits_at_most_the_bound_in_all_however_long_the_reads_go_on() -> None:
    plan = UploadYield(held=False)  # not held upstream: never asks
    while (step := plan.step(1))[0] is Step.WAIT:
        plan.slept(step[1])
    assert step == (Step.GO, 0.0) and plan.waited == pytest.approx(MAX_YIELD_SECONDS)
    unanswered = UploadYield(held=True)
    assert unanswered.step(1)[0] is Step.ASK
    unanswered.unanswered()
    assert unanswered.step(1)[0] is Step.WAIT  # an upstream that does not say is asked no more


@pytest.mark.timeout(30)
def test_the_measure_sees_what_a_connection_served_on_the_port_has_not_sent_yet() -> None:
    """A real connection on loopback whose reader does not read: what its server wrote waits in the kernel's send
    queue, counted for the served port and not for another; once the reader read it all, nothing is."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    reader = socket.create_connection(("127.0.0.1", port))
    served, _ = listener.accept()
    try:
        served.setblocking(False)
        sent = 0
        try:
            while True:
                sent += served.send(b"x" * 65536)
        except BlockingIOError:
            pass
        assert queued_to_peers(port) > 0
        assert queued_to_peers(reader.getsockname()[1]) == 0  # the reader's side is no connection served on a port
        received = 0
        while received < sent:
            received += len(reader.recv(1 << 20))
        while queued_to_peers(port) > 0:  # the last acknowledgements (bounded by the test's timeout)
            time.sleep(0.01)
        assert queued_to_peers(0) == 0
    finally:
        served.close()
        reader.close()
        listener.close()


def settle_then_go(plan: UploadYield, queued_at: Callable[[float], int]) -> float:
    """Step the plan until it goes, answering its asks 'not wanted' and sleeping its waits: when it went."""
    while (step := plan.step(queued_at(plan.waited)))[0] is not Step.GO:
        assert step[0] is not Step.SKIP
        if step[0] is Step.ASK:
            plan.answered(False)
        else:
            assert 0 < step[1] <= POLL_SECONDS
            plan.slept(step[1])
    return plan.waited


def test_a_fresh_held_result_settles_before_its_upload_goes_then_yields_to_reads_begun_meanwhile() -> None:
    # nothing waits to leave, yet it waits (Y7), asking now and then
    assert settle_then_go(UploadYield(held=True, settle=SETTLE_SECONDS), lambda _: 0) == pytest.approx(SETTLE_SECONDS)
    # reads begin while it settles and go on past it: it waits for them (Y1)
    went = settle_then_go(UploadYield(held=True, settle=SETTLE_SECONDS), lambda at: int(0.5 <= at < 2.0))
    assert went == pytest.approx(2.0)
    # not held (its put waits for it): no settle
    assert settle_then_go(UploadYield(held=False, settle=0.0), lambda _: 0) == 0.0


def test_a_settling_upload_a_reader_waits_for_at_the_storage_server_goes_at_once() -> None:
    plan = UploadYield(held=True, settle=SETTLE_SECONDS)
    assert plan.step(0)[0] is Step.ASK
    plan.answered(True)
    assert plan.step(0) == (Step.GO, 0.0)
