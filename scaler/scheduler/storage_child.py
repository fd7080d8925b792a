"""The object storage server a scheduler starts for itself (no `--object-storage-address`), kept alive.

When the child dies the scheduler notices at once (its pidfd; elsewhere within WATCH_SECONDS), says so, and starts
it again at the same address, with the same settings. Without a spill directory the objects it held are gone (tasks
that need them fail with an error saying so); with one, the restarted server finds every object whose put it had
answered, and the tasks that need them run. Restarts back off (0, 1, 3, then 4 s); after `MAX_RESTARTS`
failed or short-lived restarts in a row the scheduler stops with exit code 1 and the reason, rather than
serve a cluster whose every large input or result would fail. A server that exits while the scheduler stops (the
Ctrl-C of a terminal reaches both) is not a death: it is neither reported nor restarted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable

from scaler.config.sections import ObjectStorageServerConfig, SchedulerConfig, section_to_json
from scaler.io.child_processes import describe_exit, start_python_child, stop_children
from scaler.io.sockets import TransportSecurity
from scaler.object_storage.readiness import wait_for_object_storage

logger = logging.getLogger(__name__)

START_TIMEOUT_SECONDS = 15.0
WATCH_SECONDS = 0.2
MAX_RESTARTS = 5
MAX_DELAY_SECONDS = 4.0
#: A restarted server that lives this long resets the count of restarts in a row.
HEALTHY_SECONDS = 30.0
#: How the server exits when asked to stop (exit code 0 after SIGINT or SIGTERM, or killed by one of them): after
#: such an exit the watch waits this long for the same signal to stop the scheduler before it counts a death.
STOP_EXITS = frozenset({0, -signal.SIGINT, -signal.SIGTERM})
SIGNAL_GRACE_SECONDS = 1.0


def storage_settings_of(scheduler: SchedulerConfig, address: str) -> ObjectStorageServerConfig:
    """The settings of the object storage server started for `scheduler` at `address` (by the scheduler itself,
    or by `scaler FILE` for a file that implies one): its budget, spill directory, logging, keys and certificate
    (the same as the scheduler's, or none)."""
    return ObjectStorageServerConfig(
        bind_address=address,
        max_memory=scheduler.object_storage_max_memory,
        spill_directory=scheduler.object_storage_spill_directory,
        logging_paths=scheduler.logging_paths,
        logging_level=scheduler.logging_level,
        logging_config_file=scheduler.logging_config_file,
        logging_format=scheduler.logging_format,
        curve_secret_key=scheduler.curve_secret_key,
        curve_authorized_keys=scheduler.curve_authorized_keys,
        insecure=scheduler.insecure,
        tls_cert=scheduler.tls_cert,
        tls_key=scheduler.tls_key,
        tls_ca=scheduler.tls_ca,
    )


class StorageChild:
    def __init__(self, config: ObjectStorageServerConfig, security: TransportSecurity | None = None) -> None:
        self.config = config
        self._security = security  #: the scheduler's, for the readiness probes
        self.address = config.bind_address
        self._child: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0
        self.restarts_in_a_row = 0

    def start(self, between_tries: Callable[[], None] | None = None) -> None:
        """Start the server and wait until it answers (RuntimeError when it does not; what `between_tries` raises
        ends the wait, as in `wait_for_object_storage`)."""
        self._child = start_python_child(["scaler.object_storage.server", section_to_json(self.config)])
        self._started_at = time.monotonic()
        wait_for_object_storage(self.address, START_TIMEOUT_SECONDS, [self._child], self._security, between_tries)

    async def watch(self, give_up: Callable[[str], None], stopping: Callable[[], bool]) -> None:
        """Restart the server whenever it dies; call `give_up(reason)` when restarts keep failing. Returns once
        `stopping()` (the scheduler is shutting down): a server that exits then is not a death, whether the
        scheduler stops it or it got the scheduler's signal itself (Ctrl-C in a terminal reaches the whole
        process group, and the server may exit before the scheduler has handled it)."""
        loop = asyncio.get_running_loop()
        while True:
            child = self._child
            if child is None:
                await asyncio.sleep(WATCH_SECONDS)
            else:
                await _exit_of(child)
            if stopping():
                return
            if child is None or child.poll() is None:
                continue
            if child.returncode in STOP_EXITS:  # the signal that stopped it may be the scheduler's too
                await asyncio.sleep(SIGNAL_GRACE_SECONDS)
                if stopping():
                    return
            lived = time.monotonic() - self._started_at
            self.restarts_in_a_row = 1 if lived >= HEALTHY_SECONDS else self.restarts_in_a_row + 1
            if self.restarts_in_a_row > MAX_RESTARTS:
                give_up(
                    f"the object storage server at {self.address} died {MAX_RESTARTS + 1} times in a row "
                    f"(last: {describe_exit(child.returncode)}); stopping the scheduler"
                )
                return
            delay = min(MAX_DELAY_SECONDS, 2.0 ** (self.restarts_in_a_row - 1) - 1.0)  # 0, 1, 3, 4, 4 ... seconds
            kept = (
                f"it finds its objects in its spill directory {self.config.spill_directory}"
                if self.config.spill_directory is not None
                else "it finds the objects it held in shared memory (64 KiB and more) in its segment directory; the "
                "smaller ones are lost: tasks that need them fail with an error that says so"
            )
            logger.error(
                "the object storage server at %s (pid %d) died: %s; restarting it in %g s (%s)",
                self.address, child.pid, describe_exit(child.returncode), delay, kept,
            )  # fmt: skip
            await asyncio.sleep(delay)
            if stopping():
                return
            try:
                self._child = start_python_child(["scaler.object_storage.server", section_to_json(self.config)])
                self._started_at = time.monotonic()
                restarted = self._child
                await loop.run_in_executor(
                    None, wait_for_object_storage, self.address, START_TIMEOUT_SECONDS, [restarted], self._security
                )
                logger.warning("object storage server restarted at %s (pid %d)", self.address, restarted.pid)
            except RuntimeError as error:
                logger.error("restarting the object storage server failed: %s", error)

    def stop(self) -> None:
        if self._child is not None:
            stop_children([self._child])


async def _exit_of(child: subprocess.Popen[bytes]) -> None:
    """Returns once the child has exited: through its pidfd (Linux 5.3 and later), readable when it exits, so that the
    scheduler's loop is not woken meanwhile (five times a second, a sizeable part of an idle scheduler's work); else
    by asking every WATCH_SECONDS."""
    fd = None
    if isinstance(child, subprocess.Popen) and hasattr(os, "pidfd_open"):
        try:
            fd = os.pidfd_open(child.pid)
        except OSError:  # reaped already (its returncode is set), or pidfds refused
            fd = None
    if fd is None:
        while child.poll() is None:  # noqa: ASYNC110 (a process's exit sets no event to wait for)
            await asyncio.sleep(WATCH_SECONDS)
        return
    loop = asyncio.get_running_loop()
    exited = loop.create_future()

    def readable() -> None:
        if not exited.done():
            exited.set_result(None)

    try:
        loop.add_reader(fd, readable)
        try:
            await exited
        finally:
            loop.remove_reader(fd)
    finally:
        os.close(fd)
