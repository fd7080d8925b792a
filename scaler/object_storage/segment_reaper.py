"""The segment directory's reaper: a small process that removes the directory when its server dies, even by SIGKILL.

A server that stops removes its segment directory itself (server.serve). One that is killed cannot, and its files
are memory (/dev/shm) that nothing else frees. So the server starts this process next to it (`start_reaper`), in a
session of its own (a kill of the server's process group spares it), with the read end of a pipe whose write end only
the server holds. The pipe's end of file says that the server is gone, however it went. The reaper then gives a
successor at the same address `RESTART_GRACE_SECONDS` to take the directory over (a scheduler starts its storage
again within a second or so, and the new server adopts the objects its predecessor left: they survive the crash); a
successor shows by writing its pid into the lock file. Past the grace, the reaper takes the directory's lock without
waiting: held, a successor has it and the reaper leaves it; free, it renames the directory aside (a successor
starting now makes a fresh one) and removes it. Objects nobody adopted are gone with their server, as they always
were; with a spill directory they are on disk, and a server started again later reads them from there.

The reaper imports nothing but the standard library, so it is started as a bare interpreter running this file,
`python -I -S .../segment_reaper.py DIRECTORY SERVER_PID`: isolated (`-I`: no PYTHON* variables, and not this file's
folder on its path) and without `site` (`-S`: no site-packages, no `.pth` files, such as an editable install's finder,
to run), and without the `scaler` package that `-m` would import first. It costs one small idle process per server.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import sys
import time

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"  #: segment_directory.LOCK_FILE (not imported: the reaper stays a standard-library process)
#: Set to "0" to start no reaper (a server killed then leaves its directory for the next server at its address, or
#: for the sweep of stale directories); for tests that show what the reaper does.
ENVIRONMENT_SWITCH = "SCALER_SEGMENT_REAPER"
#: How long a dead server's directory is left for a successor at the same address to adopt.
RESTART_GRACE_SECONDS = 5.0
_POLL_SECONDS = 0.1


class Reaper:
    """The server's side: the pipe's write end (closed when the server stops, or by the kernel when it dies)."""

    def __init__(self, process: subprocess.Popen[bytes], write_end: int) -> None:
        self.process = process
        self._write_end: int | None = write_end

    def release(self, timeout: float = 5.0) -> None:
        """The server stopped and removed its directory itself: end the reaper (at once, rather than by the pipe's
        end of file, which a process forked from the server's would delay), and wait for it."""
        if self._write_end is not None:
            os.close(self._write_end)
            self._write_end = None
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            logger.warning("the segment directory's reaper (pid %d) did not exit; it is left running", self.process.pid)


def start_reaper(directory: str) -> Reaper | None:
    """Start the reaper of `directory`; None (logged) when it cannot be started or is switched off."""
    if os.environ.get(ENVIRONMENT_SWITCH, "1") == "0":
        logger.info("no reaper for %s (%s=0): a killed server leaves it behind", directory, ENVIRONMENT_SWITCH)
        return None
    read_end, write_end = os.pipe()
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__), directory, str(os.getpid())],
            stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            close_fds=True,
        )  # fmt: skip
    except OSError as error:
        os.close(write_end)
        logger.warning("could not start the reaper of %s (%s): a killed server leaves it behind", directory, error)
        return None
    finally:
        os.close(read_end)
    return Reaper(process, write_end)


def taken_over(directory: str, server_pid: int) -> bool:
    """Whether another server than `server_pid` has written its pid into the directory's lock file (or the directory is
    gone)."""
    try:
        with open(os.path.join(directory, LOCK_FILE), "rb") as file:
            written = file.read(32).strip()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return bool(written) and written != str(server_pid).encode()


def reap(directory: str, server_pid: int = 0, grace_seconds: float = 0.0) -> bool:
    """Remove `directory` unless a server takes it over within `grace_seconds` or holds its lock; returns whether it
    was removed."""
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        if taken_over(directory, server_pid):
            return False
        time.sleep(_POLL_SECONDS)
    try:
        descriptor = os.open(os.path.join(directory, LOCK_FILE), os.O_RDWR)
    except OSError:
        return False  # gone already: the server removed it as it stopped
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a successor at the same address has adopted it
        aside = f"{directory}.reaped-{os.getpid()}"
        try:
            os.rename(directory, aside)
        except OSError:
            return False
    finally:
        os.close(descriptor)
    shutil.rmtree(aside, ignore_errors=True)
    return True


def main() -> None:
    directory, server_pid = sys.argv[1], int(sys.argv[2])
    while True:  # wait for the end of file: the server is gone
        try:
            if not os.read(0, 4096):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    reap(directory, server_pid, RESTART_GRACE_SECONDS)


if __name__ == "__main__":
    main()
