"""`scaler_top`: the terminal shell around `top_screen`: subscribes to the monitor feed, redraws on each status,
sorts on the shortcut keys, quits on `q` or Ctrl-C with the terminal restored.

curses (the standard library) draws it: a top-like screen is one page of text redrawn in place with single-key
input, which curses does in a few lines and which every Unix terminal and tmux supports; the screen's content
is the pure `render` function, tested without a terminal.
"""

from __future__ import annotations

import collections
import curses
import signal
import sys
import time
from typing import Any

from scaler.io.sockets import TransportSecurity
from scaler.monitor.feed import FeedConnectionError, FeedReader, FeedVersionError
from scaler.monitor.top_screen import Sorting, render
from scaler.protocol import messages as m
from scaler.security.find import FoundKeys

#: How many scaling decisions the screen keeps.
DECISIONS_SHOWN = 5
#: How long the screen waits for feed messages between looks at the keyboard.
POLL_SECONDS = 0.1
#: What scaler_top says when started without a terminal (curses would fail with `cbreak() returned ERR`).
TERMINAL_NEEDED = (
    "scaler_top needs a terminal, and its input or output is not one (a pipe, a file, /dev/null); it has no "
    "non-interactive mode: without a terminal, read the same numbers at /metrics (scaler_gui, or the scheduler's "
    "--metrics-address) or from Python (scaler.monitor.feed.FeedReader)"
)


def has_terminal() -> bool:
    """Whether the screen can be drawn: standard input (the keys) and output (the screen) are a terminal."""
    return sys.stdin is not None and sys.stdout is not None and sys.stdin.isatty() and sys.stdout.isatty()


class TopState:
    """What the screen shows: the latest status, the latest decisions, the sort order (no I/O)."""

    def __init__(self) -> None:
        self.snapshot: m.StatusSnapshot | None = None
        self.decisions: collections.deque[m.ScalingDecision] = collections.deque(maxlen=DECISIONS_SHOWN)
        self.sorting = Sorting()
        self.last_status_at: float | None = None

    def on_message(self, message: object, now: float) -> None:
        if isinstance(message, m.StatusSnapshot):
            self.snapshot = message
            self.last_status_at = now
        elif isinstance(message, m.ScalingDecisions):
            self.decisions.extend(message.decisions)

    def silent_seconds(self, now: float, timeout_seconds: float) -> float | None:
        if self.last_status_at is None or now - self.last_status_at < timeout_seconds:
            return None
        return now - self.last_status_at


def run_top(address: str, timeout_seconds: float, security: TransportSecurity | FoundKeys | None = None) -> int:
    # Ctrl-C quits even when this process was started with SIGINT ignored (a non-interactive shell's `&`, nohup, a
    # test runner): Python then leaves SIGINT ignored instead of raising KeyboardInterrupt, and the screen would
    # run on until killed, leaving the terminal in curses' state
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    reader = FeedReader(address, security=security)
    try:
        return int(curses.wrapper(_loop, reader, address, timeout_seconds))
    except KeyboardInterrupt:
        return 0
    except FeedVersionError as error:
        print(f"scaler_top: {error}")
        return 1
    except FeedConnectionError as error:  # the wrong port, or keys refused for good: it cannot start (exit 2)
        print(f"scaler_top: error: {error}", file=sys.stderr)
        return 2
    finally:
        reader.close()
        signal.signal(signal.SIGINT, previous)


def _loop(screen: Any, reader: FeedReader, address: str, timeout_seconds: float) -> int:
    curses.curs_set(0)
    screen.nodelay(True)
    state = TopState()
    dirty = True
    while True:
        key = screen.getch()
        if key in (ord("q"), ord("Q")):
            return 0
        if 0 <= key < 256:
            sorting = state.sorting.press(chr(key))
            dirty = dirty or sorting != state.sorting
            state.sorting = sorting
        message = reader.receive(POLL_SECONDS)
        now = time.monotonic()
        if message is not None:
            state.on_message(message, now)
            dirty = True
        silent = state.silent_seconds(now, timeout_seconds)
        if dirty or silent is not None:
            _draw(screen, render(state.snapshot, list(state.decisions), state.sorting, address, silent))
            dirty = False


def _draw(screen: Any, lines: list[str]) -> None:
    height, width = screen.getmaxyx()
    screen.erase()
    for row, line in enumerate(lines[: height - 1]):
        try:
            screen.addstr(row, 0, line[: width - 1])
        except curses.error:  # the last cell of a small terminal
            pass
    screen.refresh()
