"""A host cache's large upload yields to the reads other hosts make of this host (host_cache/upload_yield.py, and the
shell's measure, `upstream.queued_to_peers`): it goes at once when nothing waits to leave for other hosts, waits while
something does, and never longer than the bound; the measure sees the bytes a connection served on the cache's port
has not sent yet, and only that port's.

Checked with the mechanism off (`wait_seconds` returning 0 at once): the waiting tests fail; with `queued_to_peers`
returning 0, the measure's test fails."""

from __future__ import annotations

import socket
import time

import pytest

from scaler.object_storage.host_cache.upload_yield import MAX_YIELD_SECONDS, POLL_SECONDS, wait_seconds
from scaler.object_storage.host_cache.upstream import queued_to_peers


def test_an_upload_goes_at_once_when_nothing_waits_to_leave_for_other_hosts() -> None:
    assert wait_seconds(0, 0.0) == 0.0
    assert wait_seconds(0, 1.0) == 0.0


def test_an_upload_waits_while_bytes_wait_to_leave_for_other_hosts_and_looks_again() -> None:
    assert wait_seconds(1, 0.0) == POLL_SECONDS
    assert wait_seconds(10 << 20, 1.0) == POLL_SECONDS


def test_an_upload_waits_at_most_the_bound_in_all_however_long_the_reads_go_on() -> None:
    waited = 0.0
    polls = 0
    while (seconds := wait_seconds(1, waited)) > 0:
        waited += seconds
        polls += 1
    assert waited == pytest.approx(MAX_YIELD_SECONDS) and polls >= MAX_YIELD_SECONDS / POLL_SECONDS - 1


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
