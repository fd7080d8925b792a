"""A process's loop closed while a signal comes (scaler/io/event_loop.py `close_loop`): a second Ctrl-C reaches every
process of the terminal's group while they stop, and a loop closes its self-pipe before it gives the signals back.

The window is made here deterministically: the signal is sent right after the loop closed its self-pipe. A loop
closed as asyncio closes it writes the signal to the closed pipe ("Exception ignored when trying to write to the signal
wakeup fd", a traceback on the user's terminal); one closed by `close_loop` does not. The first half is the check with
the mechanism off."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import pytest

from scaler.io.event_loop import close_loop


def closed_with_a_signal_in_its_window(close: Callable[[asyncio.AbstractEventLoop], None]) -> list[str]:
    """What Python reported as ignored (`sys.unraisablehook`: "Exception ignored when trying to write to the signal
    wakeup fd" and its traceback, on a terminal) while `close` closed
    a loop that had taken a signal over, the signal coming right after the loop closed its self-pipe."""
    loop = asyncio.new_event_loop()
    heard: list[int] = []
    loop.add_signal_handler(signal.SIGUSR1, heard.append, 1)
    close_self_pipe = loop._close_self_pipe  # type: ignore[attr-defined]

    def then_a_signal() -> None:
        close_self_pipe()
        os.kill(os.getpid(), signal.SIGUSR1)

    loop._close_self_pipe = then_a_signal  # type: ignore[attr-defined]
    ignored: list[str] = []

    def unraisable(report: Any) -> None:
        ignored.append(repr(report.exc_value))

    hook, sys.unraisablehook = sys.unraisablehook, unraisable
    try:
        close(loop)
    finally:
        sys.unraisablehook = hook
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    return ignored


@pytest.mark.timeout(30)
def test_a_signal_while_the_loop_closes_does_not_write_to_its_closed_pipe() -> None:
    ignored = closed_with_a_signal_in_its_window(lambda loop: loop.close())
    assert ignored == ["OSError(9, 'Bad file descriptor')"], ignored  # the window is real: the write to the closed pipe
    assert closed_with_a_signal_in_its_window(close_loop) == []
