"""Each phase of a test bounded on its own, and nothing armed while pytest reports (a pytest plugin, loaded by
`-p tests.phase_timeouts` in pyproject.toml).

A test's timeout (its `timeout` marker, else pyproject's `timeout`) bounds each of its phases: pytest-timeout bounds
the body (`timeout_func_only = true`, signal method), this plugin bounds setup and teardown the same way. A phase
that overruns gets SIGALRM: its code is interrupted by a failure that names the phase and carries every thread's
stack, and pytest goes on as after any failure: a body's overrun fails the test and its teardown still runs (bounded
anew); a teardown's overrun is an error of that test, and its remaining finalizers still run, each interrupted in turn
if it too hangs (the alarm re-arms itself every `REARM_SECONDS`). Timers are armed only around the phases' own hooks,
never while pytest makes or writes a report: pytest-timeout's default (one timer over setup, body, teardown and
their reports) once fired while pytest was writing a failure report, an INTERNALERROR that ended the whole run.

A hang that no signal can interrupt (a C call holding the GIL) is ended by a backstop: faulthandler dumps every
thread's stack and exits the test process once the three phases' bounds and `BACKSTOP_SLACK_SECONDS` have passed;
pytest-xdist reports the test as crashed and replaces the worker, and the run goes on (tests/run_reaper.py removes
what the dead worker started).
"""

from __future__ import annotations

import contextlib
import faulthandler
import signal
import sys
import threading
import traceback
from collections.abc import Generator, Iterator
from types import FrameType

import pytest

#: Once a phase has overrun, every further stuck step of it (the next finalizer) is interrupted after this long.
REARM_SECONDS = 30.0
#: How many of a thread's innermost frames a phase's overrun shows.
STACK_DEPTH = 8
#: The backstop's margin over the three phases' bounds.
BACKSTOP_SLACK_SECONDS = 120.0


def timeout_of(item: pytest.Item) -> float:
    """The test's timeout in seconds (0: none): its `timeout` marker, else what pytest-timeout read from `--timeout`,
    PYTEST_TIMEOUT or pyproject's `timeout`."""
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        value = marker.kwargs.get("timeout", marker.args[0] if marker.args else None)
        if value is not None:
            return float(value)
    configured = getattr(item.config, "_env_timeout", None)
    return float(configured) if configured else 0.0


def thread_stacks(interrupted: FrameType | None) -> str:
    """The innermost `STACK_DEPTH` frames of every thread (the main thread's where the alarm interrupted it)."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    frames = dict(sys._current_frames())
    main = threading.main_thread().ident
    if interrupted is not None and main is not None:
        frames[main] = interrupted
    return "\n".join(
        f"--- thread {names.get(ident, ident)}:\n{''.join(traceback.format_stack(frame, STACK_DEPTH)).rstrip()}"
        for ident, frame in frames.items()
    )


@contextlib.contextmanager
def bounded(phase: str, seconds: float) -> Iterator[None]:
    """Interrupt the phase with a failure after `seconds`, and every `REARM_SECONDS` after that until it ends."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(_signum: int, frame: FrameType | None) -> None:
        signal.setitimer(signal.ITIMER_REAL, min(seconds, REARM_SECONDS))
        pytest.fail(f"the test's {phase} did not finish within {seconds:g} s (the test's timeout bounds each phase); "
                    f"where every thread was:\n{thread_stacks(frame)}", pytrace=False)  # fmt: skip

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with bounded("setup", timeout_of(item)):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    with bounded("teardown", timeout_of(item)):
        return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, object]:
    """The backstop, over the whole protocol: a stack dump and the process's exit."""
    seconds = timeout_of(item)
    armed = False
    if seconds > 0:
        with contextlib.suppress(AttributeError, ValueError, OSError):
            faulthandler.dump_traceback_later(3 * seconds + BACKSTOP_SLACK_SECONDS, exit=True, file=sys.__stderr__)
            armed = True
    try:
        return (yield)
    finally:
        if armed:
            faulthandler.cancel_dump_traceback_later()
