"""What the rehearsals' commands (`scaler_fake_cloud`, `scaler_fake_kubernetes`) share: the line that names a missing
extra, how they run until Ctrl-C or SIGTERM, and how they say they are stopping."""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any, TextIO


def say_extra_missing(command: str, extra: str, error: ImportError) -> None:
    """The one line a command prints on stderr when its extra is not installed."""
    print(f"{command} needs the {extra} extra: pip install 'scaler-compute[{extra}]' ({error})", file=sys.stderr)


def say(line: str, stream: TextIO | None = None) -> None:
    """Print `line` (on stdout unless told) when its reader is still there. `scaler_fake_cloud | tee cloud.log`
    stopped by the terminal's Ctrl-C has lost its reader (the Ctrl-C ended `tee` too): the stop must go on and stop
    what the command runs, so the stream then writes to /dev/null."""
    stream = sys.stdout if stream is None else stream
    try:
        print(line, file=stream, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


class StopSignals:
    """SIGINT and SIGTERM, once `install`ed, are noted (`received`, in order) instead of ending the process; `wait`
    returns after the first."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._stop = threading.Event()

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)

    def wait(self) -> None:
        while not self._stop.wait(0.5):  # a bounded wait: the signal handler runs between two of them at the latest
            pass

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.received.append(signum)
        self._stop.set()
