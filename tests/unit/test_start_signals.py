"""A stop signal while a process starts is recorded and acted on where the start-up waits (scaler/io/start_signals.py):
a KeyboardInterrupt raised inside a finaliser during the wait for object storage used to be printed and lost, and the
scheduler went on to serve, deaf to the Ctrl-C it had been given."""

from __future__ import annotations

import os
import signal
import time

import pytest

from scaler.io.address import free_tcp_address
from scaler.io.start_signals import StartSignals, StopRequested
from scaler.object_storage.readiness import wait_for_object_storage

pytestmark = pytest.mark.timeout(30)


def test_a_stop_signal_while_starting_is_recorded_and_raised_where_the_start_waits() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with StartSignals() as signals:
        signals.raise_if_received()  # nothing yet
        os.kill(os.getpid(), signal.SIGTERM)
        assert signals.received == "SIGTERM"
        with pytest.raises(StopRequested, match="received SIGTERM while starting"):
            signals.raise_if_received()
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_signal_the_process_ignores_stays_ignored() -> None:
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with StartSignals() as signals:
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGTERM)
            assert signals.received is None
    finally:
        signal.signal(signal.SIGTERM, before)


def test_the_wait_for_object_storage_ends_at_the_first_try_after_a_stop_signal() -> None:
    nobody = free_tcp_address()
    with StartSignals() as signals:
        started = time.monotonic()
        tries = 0

        def between_tries() -> None:
            nonlocal tries
            tries += 1
            if tries == 2:
                os.kill(os.getpid(), signal.SIGTERM)
            signals.raise_if_received()

        with pytest.raises(StopRequested):
            wait_for_object_storage(nobody, 20.0, between_tries=between_tries)
    assert tries == 2  # the wait ended at the signal, long before its 20 s
    assert time.monotonic() - started < 20.0
