"""A pipe that wakes a thread waiting in `select`: written at most once until the waiting side drains it."""

from __future__ import annotations

import os


class WakePipe:
    """`wake()` makes `read_fd` readable (once until `drain()`); `woken` says whether it is. The caller keeps both
    sides under its own lock."""

    def __init__(self) -> None:
        self.read_fd, self._write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.woken = False

    def wake(self) -> None:
        if not self.woken:
            self.woken = True
            os.write(self._write_fd, b"w")

    def drain(self) -> None:
        if self.woken:
            self.woken = False
            try:
                os.read(self.read_fd, 4096)
            except BlockingIOError:
                pass

    def close(self) -> None:
        os.close(self.read_fd)
        os.close(self._write_fd)
